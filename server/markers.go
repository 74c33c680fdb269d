package server

import (
	"context"
	"log/slog"

	"svc/store"
)

// markerQueue bounds the activity markers waiting for a write.
const markerQueue = 1024

// markers group-commits activity markers (objective_open, objective_close):
// every marker waiting when a write starts goes into that one transaction,
// so concurrent objective changes share the activity store's fsync instead
// of queueing for one each.
type markers struct {
	store store.ActivityStore
	log   *slog.Logger
	queue chan *pendingMarker
	stop  chan struct{} // closed when run returns
}

type pendingMarker struct {
	ev   store.ActivityEvent
	done chan error
}

func newMarkers(st store.ActivityStore, log *slog.Logger) *markers {
	return &markers{store: st, log: log, queue: make(chan *pendingMarker, markerQueue), stop: make(chan struct{})}
}

// write stores evs and returns once they are durable, or with why not.
func (m *markers) write(ctx context.Context, evs ...store.ActivityEvent) error {
	pending := make([]*pendingMarker, len(evs))
	for i, ev := range evs {
		pending[i] = &pendingMarker{ev: ev, done: make(chan error, 1)}
		select {
		case m.queue <- pending[i]:
		case <-m.stop:
			return errShuttingDown
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, p := range pending {
		select {
		case err := <-p.done:
			if err != nil {
				return err
			}
		case <-m.stop:
			select {
			case err := <-p.done:
				if err != nil {
					return err
				}
			default:
				return errShuttingDown
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// run writes markers until ctx ends, then refuses what is queued.
func (m *markers) run(ctx context.Context) {
	defer func() {
		close(m.stop)
		for {
			select {
			case p := <-m.queue:
				p.done <- errShuttingDown
			default:
				return
			}
		}
	}()
	batch := make([]*pendingMarker, 0, maxBatch)
	evs := make([]store.ActivityEvent, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-m.queue:
			batch = append(batch[:0], p)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case p := <-m.queue:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		evs = evs[:0]
		for _, p := range batch {
			evs = append(evs, p.ev)
		}
		_, err := m.store.AppendActivity(context.WithoutCancel(ctx), evs)
		if err != nil {
			m.log.ErrorContext(ctx, "activity marker write failed", "markers", len(evs), "err", err)
		}
		for _, p := range batch {
			p.done <- err
		}
	}
}
