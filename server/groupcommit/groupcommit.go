package groupcommit

import (
	"context"
	"errors"
)

// ErrStopped answers an item submitted after the loop stopped, or one it
// never took.
var ErrStopped = errors.New("group commit stopped")

// Queue is the queue of one group-commit loop.
type Queue[T any] struct {
	queue    chan T
	stop     chan struct{} // closed when Run stops taking batches
	drained  chan struct{} // closed once Run has refused what was queued
	maxBatch int
}

// New returns a queue that holds up to size waiting items and hands Run's
// commit batches of at most maxBatch.
func New[T any](size, maxBatch int) *Queue[T] {
	return &Queue[T]{queue: make(chan T, size), stop: make(chan struct{}), drained: make(chan struct{}), maxBatch: max(maxBatch, 1)}
}

// Len is how many items wait for the next batch.
func (q *Queue[T]) Len() int { return len(q.queue) }

// Run hands batches to commit until ctx ends, then hands what is still
// queued to refuse. commit gets a context that ctx's end does not cancel: a
// batch it took is finished. Run must be called once.
func (q *Queue[T]) Run(ctx context.Context, commit func(ctx context.Context, batch []T), refuse func(T)) {
	defer func() {
		close(q.stop)
		defer close(q.drained)
		for {
			select {
			case x := <-q.queue:
				refuse(x)
			default:
				return
			}
		}
	}()
	batch := make([]T, 0, q.maxBatch)
	for {
		// Once ctx has ended no new batch starts, even with items waiting.
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case x := <-q.queue:
			batch = append(batch[:0], x)
		}
	fill:
		for len(batch) < q.maxBatch {
			select {
			case x := <-q.queue:
				batch = append(batch, x)
			default:
				break fill
			}
		}
		commit(context.WithoutCancel(ctx), batch)
		// The next batch reuses the array: what this one held (bodies of
		// up to 64 KiB each) must not stay reachable until a batch as
		// large overwrites it.
		clear(batch)
	}
}

// Submit queues x and returns the answer commit or refuse sends on done;
// failed makes the answer for an item that never reached the queue
// (ErrStopped, or ctx's error). Once queued, x is answered soon whatever the
// caller does, so Submit waits for it even if ctx ends: what follows a
// commit must not be skipped, and results the committer writes must not be
// read while it may still write.
func Submit[T, R any](ctx context.Context, q *Queue[T], x T, done <-chan R, failed func(error) R) R {
	select {
	case <-q.stop:
		return failed(ErrStopped)
	default:
	}
	select {
	case q.queue <- x:
	case <-q.stop:
		return failed(ErrStopped)
	case <-ctx.Done():
		return failed(ctx.Err())
	}
	select {
	case r := <-done:
		return r
	case <-q.drained:
		// Run answered everything it took or refused before drained
		// closed, so an answer, if any, is already here; an item queued
		// after the drain is never taken.
		select {
		case r := <-done:
			return r
		default:
			return failed(ErrStopped)
		}
	}
}
