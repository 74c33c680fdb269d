package server

import (
	"context"
	"log/slog"

	"svc/server/groupcommit"
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
	queue *groupcommit.Queue[*pendingMarkers]
}

type pendingMarkers struct {
	evs  []store.ActivityEvent
	done chan error
}

func newMarkers(st store.ActivityStore, log *slog.Logger) *markers {
	return &markers{store: st, log: log, queue: groupcommit.New[*pendingMarkers](markerQueue, maxBatch)}
}

// write stores evs and returns once they are durable, or with why not.
func (m *markers) write(ctx context.Context, evs ...store.ActivityEvent) error {
	p := &pendingMarkers{evs: evs, done: make(chan error, 1)}
	return groupcommit.Submit(ctx, m.queue, p, p.done, stopped)
}

// run writes markers until ctx ends, then refuses what is queued.
func (m *markers) run(ctx context.Context) {
	var evs []store.ActivityEvent
	m.queue.Run(ctx, func(ctx context.Context, batch []*pendingMarkers) {
		evs = evs[:0]
		for _, p := range batch {
			evs = append(evs, p.evs...)
		}
		_, err := m.store.AppendActivity(ctx, evs)
		if err != nil {
			m.log.ErrorContext(ctx, "activity marker write failed", "markers", len(evs), "err", err)
		}
		for _, p := range batch {
			p.done <- err
		}
	}, func(p *pendingMarkers) { p.done <- errShuttingDown })
}
