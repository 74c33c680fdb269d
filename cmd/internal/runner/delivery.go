package runner

// The runner's side of the delivery contract (docs/RUNNER.md): the broker
// keeps the member's position and turn; the runner reads them at start and
// tells the broker, in order, when a turn starts (before the agent gets
// it) and when it ended (with the position that passes its message).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"svc/cmd/internal/client"
	apiv1 "svc/gen/svc/v1"
)

// Retry of an acknowledgement the broker did not take: from minAckRetry,
// doubling, capped. Later acknowledgements wait behind it, so the broker
// sees them in order.
const (
	minAckRetry = 500 * time.Millisecond
	maxAckRetry = 10 * time.Second
)

// acker sends the loop's changes of the delivery state to the broker, one
// at a time and in order, from its own goroutine: a turn start waits for
// every acknowledgement handed over before it, so the broker never sees a
// turn start before the previous turn's end. Acknowledgements that queue
// up while one is under way are merged into one update.
type acker struct {
	update func(ctx context.Context, req *apiv1.UpdateDeliveryRequest) error
	me     string
	logf   func(format string, args ...any)

	mu      sync.Mutex
	queue   []ackItem
	busy    bool          // an item is being sent
	wake    chan struct{} // a new item, capacity 1
	drained chan struct{} // closed and replaced when the queue empties
}

// ackItem is an acknowledgement, or (start set) a turn start whose
// outcome the caller waits for on done.
type ackItem struct {
	ack
	start bool
	id    string // the started turn's message, "" for none
	ctx   context.Context
	done  chan error
}

func newAcker(me string, update func(context.Context, *apiv1.UpdateDeliveryRequest) error, logf func(string, ...any)) *acker {
	return &acker{update: update, me: me, logf: logf, wake: make(chan struct{}, 1), drained: make(chan struct{})}
}

func (a *acker) push(it ackItem) {
	a.mu.Lock()
	a.queue = append(a.queue, it)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// add hands over an acknowledgement; it never blocks.
func (a *acker) add(x ack) { a.push(ackItem{ack: x}) }

// startTurn tells the broker a turn of message id starts, after every
// acknowledgement before it, and returns once the broker took it (or
// refused, or ctx ended).
func (a *acker) startTurn(ctx context.Context, id string) error {
	done := make(chan error, 1)
	a.push(ackItem{start: true, id: id, ctx: ctx, done: done})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next takes the head of the queue, merging the acknowledgements that
// follow it (a turn start is never merged: it orders what is around it).
func (a *acker) next() (ackItem, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) == 0 {
		a.busy = false
		close(a.drained)
		a.drained = make(chan struct{})
		return ackItem{}, false
	}
	it := a.queue[0]
	n := 1
	for !it.start && n < len(a.queue) && !a.queue[n].start {
		if p := a.queue[n].position; p != "" {
			it.position = p // positions are handed over in order
		}
		it.ended = it.ended || a.queue[n].ended
		n++
	}
	a.queue = a.queue[n:]
	a.busy = true
	return it, true
}

// run sends until ctx ends.
func (a *acker) run(ctx context.Context) {
	for {
		it, ok := a.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-a.wake:
				continue
			}
		}
		if it.start {
			it.done <- a.sendStart(it)
			continue
		}
		a.sendAck(ctx, it.ack)
	}
}

func (a *acker) sendStart(it ackItem) error {
	if err := it.ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(it.ctx, callTimeout)
	defer cancel()
	return a.update(ctx, &apiv1.UpdateDeliveryRequest{Name: a.me, Turn: apiv1.TurnPhase_TURN_PHASE_STARTED, TurnMessageId: it.id})
}

// sendAck sends x until the broker takes it: an acknowledgement that is
// lost only means its message is delivered once more after a restart, but
// a later one must not overtake it. One the broker refuses for good (it
// never should) is logged and dropped.
func (a *acker) sendAck(ctx context.Context, x ack) {
	req := &apiv1.UpdateDeliveryRequest{Name: a.me, Position: x.position}
	if x.ended {
		req.Turn = apiv1.TurnPhase_TURN_PHASE_ENDED
	}
	wait := minAckRetry
	for failing := false; ; failing = true {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.update(cctx, req)
		cancel()
		if err == nil {
			if failing {
				a.logf("svc runner: the broker took the delivery state again")
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		switch client.Code(err) {
		case "bad_request", "forbidden", "not_found", "unauthenticated":
			a.logf("svc runner: delivery state not recorded (position %q): %v", x.position, err)
			return
		}
		if !failing {
			a.logf("svc runner: delivery state not recorded yet (%v); retrying", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, maxAckRetry)
	}
}

// flush waits (bounded by ctx) until everything handed over was sent.
func (a *acker) flush(ctx context.Context) {
	for {
		a.mu.Lock()
		empty := len(a.queue) == 0 && !a.busy
		drained := a.drained
		a.mu.Unlock()
		if empty {
			return
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return
		}
	}
}

// attachDelivery records the runner's attach on the broker and returns the
// member's delivery state. A broker with no position for the member, while
// a state file of an earlier runner (which kept the position locally)
// holds one, is given that position once; the file is then removed: the
// broker's position is the authority.
func attachDelivery(ctx context.Context, b apiv1.BrokerClient, me, statePath string, logf func(string, ...any)) (*apiv1.DeliveryState, error) {
	res, err := b.UpdateDelivery(ctx, &apiv1.UpdateDeliveryRequest{Name: me})
	if err != nil {
		return nil, err
	}
	st := res.GetDelivery()
	if statePath == "" {
		return st, nil
	}
	legacy, lerr := LoadLastID(statePath)
	switch {
	case lerr != nil:
		logf("svc runner: the state file of an earlier runner is unreadable and is removed: %v", lerr)
	case legacy == "":
		return st, nil
	case st.Position != nil:
		// The broker already holds a position: the file is stale.
	default:
		res, err := b.UpdateDelivery(ctx, &apiv1.UpdateDeliveryRequest{Name: me, Position: legacy})
		switch {
		case err == nil:
			st = res.GetDelivery()
			logf("svc runner: resuming after message %s, the position an earlier runner kept in %s", legacy, statePath)
		case client.Code(err) == "bad_request":
			// Not a message this broker holds (its store was reset).
			logf("svc runner: the position %s an earlier runner kept is unknown to the broker; ignored", legacy)
		default:
			return nil, err // try again at the next start; the file stays
		}
	}
	if err := os.Remove(statePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		logf("svc runner: removing the state file of an earlier runner: %v", err)
	}
	return st, nil
}

// startState is where the loop starts from the broker's delivery state:
// after the position (or, for a runner that never acknowledged anything,
// after the backlog's start), delivering again the message of a turn that
// was in progress, with a note on what the backlog's bound left out.
func startState(st *apiv1.DeliveryState) loopState {
	ls := loopState{position: st.GetPosition()}
	if st.Position == nil {
		ls.position = st.GetBacklogAfter()
		if n := st.GetBacklogOmitted(); n > 0 {
			ls.note = BacklogNote(int(n))
		}
	}
	if st.GetTurnActive() {
		ls.redeliver = st.GetTurnMessageId()
	}
	return ls
}

// maxRebriefPages bounds the history pages read per objective to find
// its lifecycle messages among those the replay will deliver.
const maxRebriefPages = 4

// replayedEvents are the lifecycle messages (objective_event: assigned,
// blocked, reassigned, …) of the objectives on plate that the replay will
// deliver: those after the position the stream resumes from, by message
// id, with the objective each is about. The re-brief at attach states
// every open objective as it is now, so these are skipped (acknowledged
// without a turn): an objective assigned while the runner was down gives
// one turn, not its announcement and the re-brief. Read before the plate
// the re-brief shows, so that plate reflects every one of them. A thread
// that cannot be read covers nothing: its messages are turns, never lost.
func replayedEvents(ctx context.Context, b apiv1.BrokerClient, after string, plate []*apiv1.Objective) map[string]string {
	if after == "" {
		return nil // the stream starts live: nothing is replayed
	}
	out := map[string]string{}
	for _, o := range plate {
		before := ""
		for range maxRebriefPages {
			res, err := b.History(ctx, &apiv1.HistoryRequest{Thread: "obj:" + o.GetId(), Limit: ptrInt32(500), BeforeId: before})
			if err != nil {
				break
			}
			msgs := res.GetMessages()
			older := false
			for _, m := range msgs { // newest first
				if !idAfter(m.GetId(), after) {
					older = true
					break
				}
				if dataString(m, "kind") == "objective_event" {
					out[m.GetId()] = o.GetId()
				}
			}
			if older || len(msgs) < 500 {
				break
			}
			before = msgs[len(msgs)-1].GetId()
		}
	}
	return out
}

// coveredBy keeps the events whose objective is on plate: the re-brief
// states those.
func coveredBy(events map[string]string, plate []*apiv1.Objective) map[string]bool {
	open := map[string]bool{}
	for _, o := range plate {
		open[o.GetId()] = true
	}
	out := map[string]bool{}
	for id, obj := range events {
		if open[obj] {
			out[id] = true
		}
	}
	return out
}

// idAfter compares message ids: decimals, zero-padded to 16 digits by the
// broker, so the longer one is larger and equal lengths compare as text.
func idAfter(id, after string) bool {
	id, after = strings.TrimLeft(id, "0"), strings.TrimLeft(after, "0")
	if len(id) != len(after) {
		return len(id) > len(after)
	}
	return id > after
}

func ptrInt32(v int32) *int32 { return &v }

// stallEvent is the activity row of a turn that has shown nothing for a
// long time: a tool_action of the runner itself, so it shows in the
// member's activity where people look.
func stallEvent(id string, started time.Time, quiet time.Duration) activityEvent {
	data := map[string]any{
		"tool": "svc runner", "phase": "stalled", "source": "runner",
		"turnStartedAt": started.UnixMilli(), "quietMs": quiet.Milliseconds(),
	}
	what := "the context re-brief"
	if id != "" {
		data["message"] = id
		what = "message " + id
	}
	data["result"] = fmt.Sprintf("the turn of %s has shown nothing for %s", what, quiet)
	return activityEvent{Kind: "tool_action", TS: float64(time.Now().UnixMilli()), Data: data}
}
