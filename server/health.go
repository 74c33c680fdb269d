package server

import (
	"errors"
	"fmt"
	"time"

	"svc/store"
)

// Health statuses of GET /healthz (docs/DECISIONS.md: Storage).
const (
	healthOK       = "ok"
	healthDegraded = "degraded"
)

// storageProblems lists what the stores report failing now, one line
// each, for GET /healthz. /healthz is public, so a line names the store,
// what fails, since when and the kind of failure, never the driver's
// text or a path: those are in the broker's log.
func (c *core) storageProblems() []string {
	var out []string
	add := func(name string, v any) {
		h, ok := v.(store.HealthReporter)
		if !ok {
			return
		}
		for _, err := range flatten(h.Health()) {
			out = append(out, name+": "+describeFailing(err))
		}
	}
	add("main store", c.store)
	if c.activity != nil {
		add("activity store", c.activity)
	}
	if c.blobs != nil {
		add("files", c.blobs)
	}
	return out
}

// flatten returns the errors errors.Join put together, or err alone.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// describeFailing renders one failure of a store for /healthz.
func describeFailing(err error) string {
	var fe *store.FailingError
	if !errors.As(err, &fe) {
		return "failing (see the broker's log)"
	}
	since := fe.Since.UTC().Format(time.RFC3339)
	switch {
	case errors.Is(fe.Err, store.ErrDamaged):
		return fmt.Sprintf("data damaged since %s (stop the broker and run svc check)", since)
	case errors.Is(fe.Err, store.ErrStorageFull):
		return fmt.Sprintf("%s failing since %s (disk full)", fe.What, since)
	case errors.Is(fe.Err, store.ErrInUse):
		return fmt.Sprintf("%s lost since %s (another broker or a maintenance command holds the database: writes are refused; stop one of them)", fe.What, since)
	case errors.Is(fe.Err, store.ErrUnavailable):
		return fmt.Sprintf("%s failing since %s (database unreachable)", fe.What, since)
	}
	return fmt.Sprintf("%s failing since %s (disk error)", fe.What, since)
}
