package activity

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/groupcommit"
	"svc/server/hub"
	"svc/store"
)

// Activity write batching: the writer takes every batch waiting when it
// starts a transaction, up to activityMaxBatch (an upload is up to 500
// rows, so this bounds one transaction near 32,000 rows); activityQueue
// bounds what may wait.
const (
	activityMaxBatch = 64
	activityQueue    = 1024
)

// writer group-commits writes to the activity store (uploaded rows,
// objective markers, telemetry rows with their correlation state,
// inference records): every batch waiting when a write starts goes into
// that one transaction, so concurrent writers share one fsync. Committed
// rows go to the live activity streams of their member, in commit order.
// It shares no lock and no connection with chat's committer.
type writer struct {
	store store.ActivityStore
	hub   *hub.Hub
	log   *slog.Logger
	queue *groupcommit.Queue[*pendingActivity]
	// observe, when set, times each commit.
	observe func(n int, start time.Time)
	// owner, when set, names the member id of a row or record written
	// under a name without one; render, when set, renders a row for the
	// live streams (activityRowToProto otherwise).
	owner  func(name string) string
	render func(store.ActivityEvent) *apiv1.ActivityRow
	// fan, when set (several brokers, Service.FanOut), takes each
	// committed batch instead of the hub: it sends it to the other
	// brokers and hands deliver every broker's rows in commit order.
	fan func(rows []store.ActivityEvent)
}

type pendingActivity struct {
	b    store.ActivityBatch
	done chan activityResult
}

// activityResult is the answer to one batch: its rows with their ids set,
// or why they are not stored.
type activityResult struct {
	rows []store.ActivityEvent
	err  error
}

func newWriter(st store.ActivityStore, h *hub.Hub, log *slog.Logger) *writer {
	return &writer{store: st, hub: h, log: log, queue: groupcommit.New[*pendingActivity](activityQueue, activityMaxBatch)}
}

// write stores b and returns its rows once they are durable, or why not.
// Rows and records without a member id get their name's (owner), read here
// in the caller's goroutine: the committer never waits on the team.
func (w *writer) write(ctx context.Context, b store.ActivityBatch) ([]store.ActivityEvent, error) {
	if w.owner != nil {
		b.Events = slices.Clone(b.Events)
		for i := range b.Events {
			if b.Events[i].MemberUID == "" {
				b.Events[i].MemberUID = w.owner(b.Events[i].Member)
			}
		}
		b.GenAI = slices.Clone(b.GenAI)
		for i := range b.GenAI {
			if b.GenAI[i].MemberUID == "" {
				b.GenAI[i].MemberUID = w.owner(b.GenAI[i].Member)
			}
		}
	}
	p := &pendingActivity{b: b, done: make(chan activityResult, 1)}
	r := groupcommit.Submit(ctx, w.queue, p, p.done, func(err error) activityResult { return activityResult{err: stopped(err)} })
	return r.rows, r.err
}

// run writes batches until ctx ends, then refuses what is queued.
func (w *writer) run(ctx context.Context) {
	w.queue.Run(ctx, w.commit, func(p *pendingActivity) { p.done <- activityResult{err: ErrShuttingDown} })
}

// commit writes the batches in one transaction. When that fails and there
// was more than one, each is tried alone, so one batch the store refuses
// does not fail the others.
func (w *writer) commit(ctx context.Context, batch []*pendingActivity) {
	if len(batch) > 1 {
		var all store.ActivityBatch
		for _, p := range batch {
			all.Events = append(all.Events, p.b.Events...)
			all.States = append(all.States, p.b.States...)
			all.GenAI = append(all.GenAI, p.b.GenAI...)
		}
		start := time.Now()
		rows, err := w.store.CommitActivity(ctx, all)
		w.timed(len(batch), start)
		if err == nil {
			w.publish(rows)
			for _, p := range batch {
				n := len(p.b.Events)
				p.done <- activityResult{rows: rows[:n:n]}
				rows = rows[n:]
			}
			return
		}
		w.log.WarnContext(ctx, "activity batch write failed; writing each alone", "batches", len(batch), "err", err)
	}
	for _, p := range batch {
		start := time.Now()
		rows, err := w.store.CommitActivity(ctx, p.b)
		w.timed(1, start)
		if err != nil {
			w.log.ErrorContext(ctx, "activity write failed", "rows", len(p.b.Events), "err", err)
		} else {
			w.publish(rows)
		}
		p.done <- activityResult{rows: rows, err: err}
	}
}

// timed counts one store commit of n batches that started at start.
func (w *writer) timed(n int, start time.Time) {
	if w.observe != nil {
		w.observe(n, start)
	}
}

// publish hands one transaction's committed rows to the live streams of
// their members, through the fan-out when there is one.
func (w *writer) publish(rows []store.ActivityEvent) {
	if w.fan != nil {
		w.fan(rows)
		return
	}
	w.deliver(rows)
}

// deliver hands committed rows to this broker's live streams of their
// members. A row is rendered only when its member has a live stream: a
// stream opened later replays it from the store, which holds it already.
func (w *writer) deliver(rows []store.ActivityEvent) {
	for _, r := range rows {
		if w.hub.Connected(r.Member) == 0 {
			continue
		}
		row := activityRowToProto
		if w.render != nil {
			row = w.render
		}
		w.hub.Publish(hub.NewEvent(r.ID, row(r)), false, "", []string{r.Member})
	}
}

// activityRowToProto converts a stored row. Data is a JSON object the
// broker wrote itself; one that does not parse is shown empty rather than
// failing the read.
func activityRowToProto(r store.ActivityEvent) *apiv1.ActivityRow {
	row := &apiv1.ActivityRow{
		Id: float64(r.ID), Member: r.Member, Kind: r.Kind, Ts: float64(r.TS.UnixMilli()), Data: &structpb.Struct{},
	}
	if r.ObjectiveID != "" {
		row.ObjectiveId = &r.ObjectiveID
	}
	if err := protojson.Unmarshal(r.Data, row.Data); err != nil {
		row.Data = &structpb.Struct{}
	}
	return row
}

// stopped maps the group-commit loop's ErrStopped to ErrShuttingDown.
func stopped(err error) error {
	if errors.Is(err, groupcommit.ErrStopped) {
		return ErrShuttingDown
	}
	return err
}
