package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestFailingHoldsThroughSmallSuccesses: a run of failures ends with a
// success only once FailureHold has passed since its last failure, so a
// full disk that takes a small write between refused ones stays reported.
func TestFailingHoldsThroughSmallSuccesses(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	start := clock.now()
	f := &Failing{What: "writes", Now: clock.now}
	full := errors.New("full")

	require.Nil(t, f.Err())
	require.Nil(t, f.Succeed(), "nothing to end")
	require.True(t, f.Fail(full), "a run begins")
	clock.add(time.Second)
	require.False(t, f.Fail(full), "the run goes on")

	steps := []struct {
		name    string
		advance time.Duration
		succeed bool
		fail    bool
		failing bool
		ended   bool
	}{
		{name: "a success within the hold", advance: time.Second, succeed: true, failing: true},
		{name: "the hold passes after that success", advance: FailureHold, failing: false},
		{name: "a failure again", fail: true, failing: true},
		{name: "a success past the hold ends the run", advance: FailureHold, succeed: true, failing: false, ended: true},
		{name: "no run, a success", succeed: true, failing: false},
	}
	for _, s := range steps {
		clock.add(s.advance)
		if s.fail {
			f.Fail(full)
		}
		if s.succeed {
			ended := f.Succeed()
			require.Equal(t, s.ended, ended != nil, s.name)
			if ended != nil {
				require.Equal(t, start, ended.Since, "the run began at its first failure")
				require.ErrorIs(t, ended, full)
			}
		}
		require.Equal(t, s.failing, f.Err() != nil, s.name)
	}
	// Without a success the hold never ends a run.
	f.Fail(full)
	clock.add(time.Hour)
	require.NotNil(t, f.Err())
	require.Contains(t, f.Err().Error(), "writes failing since")
}

// TestFailingConcurrent: failures and successes from many goroutines
// keep one run and race nothing.
func TestFailingConcurrent(t *testing.T) {
	f := &Failing{What: "writes"}
	var began sync.WaitGroup
	n := 0
	var mu sync.Mutex
	for range 8 {
		began.Go(func() {
			for range 100 {
				if f.Fail(errors.New("x")) {
					mu.Lock()
					n++
					mu.Unlock()
				}
				f.Succeed()
			}
		})
	}
	began.Wait()
	require.Equal(t, 1, n, "one run: no success ends it within the hold")
	require.NotNil(t, f.Err())
}
