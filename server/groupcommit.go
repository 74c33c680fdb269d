package server

import "context"

// committer is the queue of a group-commit loop: one goroutine takes every
// item waiting when it starts a batch (up to maxBatch) and commits them
// together, so concurrent writers share one fsync.
type committer[T any] struct {
	queue chan T
	stop  chan struct{} // closed when run returns
}

func newCommitter[T any](size int) committer[T] {
	return committer[T]{queue: make(chan T, size), stop: make(chan struct{})}
}

// run hands batches to commit until ctx ends, then refuses what is still
// queued. commit gets a context that ctx's end does not cancel: a batch it
// took is finished.
func (c committer[T]) run(ctx context.Context, commit func(ctx context.Context, batch []T), refuse func(T)) {
	defer func() {
		close(c.stop)
		for {
			select {
			case x := <-c.queue:
				refuse(x)
			default:
				return
			}
		}
	}()
	batch := make([]T, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case x := <-c.queue:
			batch = append(batch[:0], x)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case x := <-c.queue:
				batch = append(batch, x)
			default:
				break fill
			}
		}
		commit(context.WithoutCancel(ctx), batch)
	}
}

// submit queues x and returns the answer commit or refuse sends on done.
// Once queued, x is answered soon whatever the caller does, so submit waits
// for it even if ctx ends: what follows a commit must not be skipped, and
// results the committer writes must not be read while it may still write.
func submit[T, R any](ctx context.Context, c committer[T], x T, done <-chan R, failed func(error) R) R {
	select {
	case <-c.stop:
		return failed(errShuttingDown)
	default:
	}
	select {
	case c.queue <- x:
	case <-c.stop:
		return failed(errShuttingDown)
	case <-ctx.Done():
		return failed(ctx.Err())
	}
	select {
	case r := <-done:
		return r
	case <-c.stop:
		// run answers everything it took before it stops, so an answer, if
		// any, is already here.
		select {
		case r := <-done:
			return r
		default:
			return failed(errShuttingDown)
		}
	}
}
