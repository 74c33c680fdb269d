package store

import (
	"sync/atomic"
	"time"
)

// FailureHold is how long after its last failure a kind of failure stays
// reported although something succeeded since. A full disk takes small
// writes between refused large ones (a page freed here, a WAL page reused
// there); reporting ok at the first small success would make /healthz
// flap while the disk is still full.
const FailureHold = 10 * time.Second

// Failing tracks one kind of failure of a store (its writes, its WAL
// checkpoints, damage) for Health: a failure starts or continues a run; a
// success ends the run once FailureHold has passed since its last failure.
// Its methods are safe for concurrent use; a success while nothing fails
// is one atomic load.
type Failing struct {
	// What names what fails, as FailingError.What.
	What string
	// Hold is FailureHold unless set; Now is time.Now unless set.
	Hold time.Duration
	Now  func() time.Time

	run atomic.Pointer[failingRun]
}

// failingRun is one run of failures; a failure replaces it with a copy.
type failingRun struct {
	err       error
	since     time.Time // the first failure of the run
	last      time.Time // the latest failure
	succeeded atomic.Bool
}

func (f *Failing) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Failing) hold() time.Duration {
	if f.Hold > 0 {
		return f.Hold
	}
	return FailureHold
}

// Fail records a failure and reports whether it begins a run.
func (f *Failing) Fail(err error) (began bool) {
	now := f.now()
	for {
		old := f.run.Load()
		next := &failingRun{err: err, since: now, last: now}
		if old != nil {
			next.since = old.since
		}
		if f.run.CompareAndSwap(old, next) {
			return old == nil
		}
	}
}

// Succeed records a success. It returns the run it ends, or nil: a run
// ends once FailureHold has passed since its last failure.
func (f *Failing) Succeed() (ended *FailingError) {
	old := f.run.Load()
	if old == nil {
		return nil
	}
	if f.now().Sub(old.last) < f.hold() {
		old.succeeded.Store(true)
		return nil
	}
	if !f.run.CompareAndSwap(old, nil) {
		return nil
	}
	return &FailingError{What: f.What, Since: old.since, Err: old.err}
}

// Err returns the run of failures going on now, or nil. A run whose last
// failure is FailureHold old and that saw a success since is over, even
// before the next success says so.
func (f *Failing) Err() *FailingError {
	old := f.run.Load()
	if old == nil || (old.succeeded.Load() && f.now().Sub(old.last) >= f.hold()) {
		return nil
	}
	return &FailingError{What: f.What, Since: old.since, Err: old.err}
}
