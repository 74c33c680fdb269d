package runner

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"svc/cmd/internal/relay"
	apiv1 "svc/gen/svc/v1"
)

// Timings of the loop.
const (
	// plateDebounce: the open plate is refetched at most once per 150 ms
	// after obj: events (spec: Events).
	plateDebounce = 150 * time.Millisecond
	// turnStartWait: after a delivery the runner waits for the agent to
	// report the turn's start before it delivers the next message; an
	// agent that reports no hooks at all gets the next one after this.
	turnStartWait = 30 * time.Second
	// Retry of a failed delivery: at the next idle, and also after this
	// backoff, so an agent that stays idle still gets the message.
	minRetry = 500 * time.Millisecond
	maxRetry = 10 * time.Second
	// seenIDs is how many recent message ids are remembered to drop a
	// message a reconnect replays twice.
	seenIDs = 4096
)

// registryKinds are the data.kind values of registry events: relayed to the
// agent's toolbox, never delivered as turns.
var registryKinds = map[string]bool{"tool_source": true, "secret": true, "notification_endpoint": true}

// hookReq is one batch of agent events; done (if not nil) is closed once
// the loop applied them, which is when the hook command may return.
type hookReq struct {
	events []Event
	done   chan struct{}
}

// loopDeps are the loop's ways out; every one is called from the loop's
// goroutine (deliver and fetchPlate from goroutines it starts).
type loopDeps struct {
	// deliver starts a turn in the agent.
	deliver func(ctx context.Context, t Turn) error
	// report hands the reporter a new activity state (nil: no capture).
	report func(ActivityState)
	// upload queues a tool result for upload (nil: no capture).
	upload func(Event)
	// publish relays a registry event to the agent's toolbox.
	publish func(relay.Event)
	// fetchPlate lists the member's open objectives.
	fetchPlate func(ctx context.Context) ([]*apiv1.Objective, error)
	// persist saves the last id whose message and every earlier one were
	// delivered or skipped.
	persist func(lastID string)
	// slug names a channel id; "" when unknown.
	slug func(id string) string
	logf func(format string, args ...any)
	// askApproval asks the broker for an approval and returns its id and
	// expiry; getApproval reads its decision (nil while pending);
	// withdrawApproval ends one nothing waits for. Nil askApproval refuses
	// every request (approval.go).
	askApproval      func(ctx context.Context, tool string, input json.RawMessage, objective string) (string, time.Time, error)
	getApproval      func(ctx context.Context, id string) (*approvalDecision, error)
	withdrawApproval func(ctx context.Context, id, why string) error
}

type queued struct {
	turn   Turn
	id     string // message id; "" for the re-brief
	thread string // the message's data.thread, "" for a DM
}

type deliverResult struct {
	q   queued
	err error
}

// loop is the runner's single-threaded core: it owns the activity state,
// the queue of turns, the open plate and the last id.
type loop struct {
	me   string
	deps loopDeps

	activity Activity
	queue    []queued
	ledger   ledger
	seen     map[string]bool
	seenRing []string

	delivering bool
	// turnSeen: a turn start came while delivering. A fast agent reports
	// its turn before the write returns; the loop must not then wait for a
	// start that already happened. A turn end does not count: it may be
	// the previous turn's, read while the new one was being written.
	turnSeen bool
	// unacked is the message written to the agent whose turn has not
	// started yet: it counts as delivered (the last id passes it) only once
	// the agent reports the turn, or turnStartWait passes for an agent that
	// reports none. A runner stopped before that replays it next start
	// rather than lose it.
	unacked    string
	results    chan deliverResult
	awaiting   bool // delivered; waiting for the agent's turn start
	awaitTimer *time.Timer
	failures   int
	retryTimer *time.Timer
	retryAt    time.Time

	plate         []*apiv1.Objective
	plateTimer    *time.Timer
	plateArmed    bool
	plateFetching bool
	plateAgain    bool
	plates        chan []*apiv1.Objective

	// appr are the approvals the agent waits on (approval.go);
	// turnThread is the thread of the last delivered message, which names
	// the objective an approval is about.
	appr       approvals
	turnThread string

	now func() time.Time
}

func newLoop(me, lastID string, deps loopDeps) *loop {
	l := &loop{
		me: me, deps: deps,
		ledger:  ledger{last: lastID},
		seen:    map[string]bool{},
		results: make(chan deliverResult, 1),
		plates:  make(chan []*apiv1.Objective, 1),
		appr:    newApprovals(),
		now:     time.Now,
	}
	l.awaitTimer = stoppedTimer()
	l.retryTimer = stoppedTimer()
	l.plateTimer = stoppedTimer()
	return l
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// attach sets the first plate and queues the re-brief ahead of anything.
func (l *loop) attach(plate []*apiv1.Objective) {
	l.plate = plate
	l.rebrief()
}

// rebrief queues the context re-brief first in line; none for an empty
// plate, and at most one waiting at a time.
func (l *loop) rebrief() {
	t, ok := RenderRefresh(l.plate)
	if !ok {
		return
	}
	if len(l.queue) > 0 && l.queue[0].id == "" && !l.delivering {
		l.queue[0].turn = t
		return
	}
	at := 0
	if l.delivering && len(l.queue) > 0 {
		at = 1 // queue[0] is being delivered now
	}
	l.queue = append(l.queue[:at], append([]queued{{turn: t}}, l.queue[at:]...)...)
}

// run handles inputs until ctx ends, stop is closed or a fatal error
// arrives; it returns that error.
func (l *loop) run(ctx context.Context, msgs <-chan *apiv1.Message, hooks <-chan hookReq, events <-chan Event, stop <-chan struct{}, fatal <-chan error) error {
	defer l.awaitTimer.Stop()
	defer l.retryTimer.Stop()
	defer l.plateTimer.Stop()
	defer l.appr.timer.Stop()
	defer close(l.appr.quit)
	l.maybeDeliver(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		case err := <-fatal:
			return err
		case m := <-msgs:
			l.onMessage(m)
		case h := <-hooks:
			for _, e := range h.events {
				l.onEvent(e)
			}
			if h.done != nil {
				close(h.done)
			}
		case e := <-events:
			l.onEvent(e)
		case r := <-l.results:
			l.onDelivered(r)
		case a := <-l.appr.in:
			l.onApproval(ctx, a)
		case e := <-l.appr.events:
			l.onApprovalEvent(ctx, e)
		case <-l.appr.timer.C:
			l.pollApprovals(ctx)
		case <-l.awaitTimer.C:
			l.awaiting = false
			l.ack()
		case <-l.retryTimer.C:
			l.retryAt = time.Time{}
		case <-l.plateTimer.C:
			l.plateArmed = false
			l.fetchPlate(ctx)
		case p := <-l.plates:
			l.plateFetching = false
			if p != nil {
				l.plate = p
			}
			if l.plateAgain {
				l.plateAgain = false
				l.schedulePlate()
			}
		}
		l.maybeDeliver(ctx)
	}
}

// finish waits (bounded) for a delivery in flight, so a turn the agent got
// counts as delivered in the last id.
func (l *loop) finish(d time.Duration) {
	if !l.delivering {
		return
	}
	select {
	case r := <-l.results:
		l.onDelivered(r)
	case <-time.After(d):
	}
}

func (l *loop) onMessage(m *apiv1.Message) {
	id := m.GetId()
	if id == "" || l.seen[id] {
		return
	}
	l.remember(id)
	l.ledger.add(id)
	kind := dataString(m, "kind")
	thread := dataString(m, "thread")
	switch {
	case kind == kindApprovalDecided && strings.HasPrefix(thread, "approval:"):
		// A decision for a waiting approval: never a turn, whoever sent
		// it (an expiry comes from the member itself).
		l.onApprovalDecided(decidedOf(thread, func(k string) string { return dataString(m, k) }))
		l.done(id)
		return
	case m.GetFrom() == l.me:
		// Own messages are not echoed back.
		l.done(id)
		return
	case registryKinds[kind]:
		l.deps.publish(relay.Event{Kind: kind, Thread: thread})
		if kind == "secret" {
			slug := strings.TrimPrefix(thread, "secret:")
			if s := dataString(m, "slug"); s != "" {
				slug = s
			}
			l.deps.logf("secret %s changed; applies at next runner start", oneLine(slug, 64))
		}
		l.done(id)
		return
	}
	if strings.HasPrefix(thread, "obj:") {
		l.schedulePlate()
	}
	l.queue = append(l.queue, queued{turn: RenderTurn(m, l.deps.slug), id: id, thread: thread})
}

func (l *loop) remember(id string) {
	l.seen[id] = true
	l.seenRing = append(l.seenRing, id)
	if len(l.seenRing) > seenIDs {
		delete(l.seen, l.seenRing[0])
		l.seenRing = l.seenRing[1:]
	}
}

func (l *loop) done(id string) {
	if last, moved := l.ledger.done(id); moved {
		l.deps.persist(last)
	}
}

func (l *loop) onEvent(e Event) {
	if l.countTool(e) && l.activity.Apply(e) {
		st := l.activity.State()
		if l.deps.report != nil {
			l.deps.report(st)
		}
		if st == StateIdle {
			// A failed delivery is retried at the next idle.
			l.retryAt = time.Time{}
		}
	}
	switch e.Kind {
	case TurnStart, TurnEnd:
		l.awaiting = false
		l.awaitTimer.Stop()
		if l.delivering && e.Kind == TurnStart {
			l.turnSeen = true
		}
		if !l.delivering {
			l.ack()
		}
	case ToolEnd:
		if l.deps.upload != nil && (e.ToolResult != nil || e.ToolInput != nil) {
			l.deps.upload(e)
		}
	case SessionStart:
		if e.Source == "compact" {
			l.rebrief()
		}
	}
}

func (l *loop) schedulePlate() {
	if l.plateFetching {
		l.plateAgain = true
		return
	}
	// Armed once per window: later obj: events in the window ride along,
	// so a burst costs one fetch and a steady stream one per window.
	if !l.plateArmed {
		l.plateArmed = true
		l.plateTimer.Reset(plateDebounce)
	}
}

func (l *loop) fetchPlate(ctx context.Context) {
	if l.deps.fetchPlate == nil {
		return
	}
	l.plateFetching = true
	go func() {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		p, err := l.deps.fetchPlate(fctx)
		if err != nil {
			l.deps.logf("svc runner: open objectives not refreshed: %v", err)
			p = nil
		} else if p == nil {
			p = []*apiv1.Objective{}
		}
		l.plates <- p
	}()
}

// idle says the agent may take a new turn now.
func (l *loop) idle() bool {
	return l.activity.State() == StateIdle && !l.awaiting && !l.delivering
}

func (l *loop) maybeDeliver(ctx context.Context) {
	if len(l.queue) == 0 || !l.idle() || ctx.Err() != nil {
		return
	}
	if !l.retryAt.IsZero() && l.now().Before(l.retryAt) {
		return
	}
	q := l.queue[0]
	l.delivering = true
	l.turnSeen = false
	go func() {
		l.results <- deliverResult{q: q, err: l.deps.deliver(ctx, q.turn)}
	}()
}

func (l *loop) onDelivered(r deliverResult) {
	l.delivering = false
	if r.err != nil {
		l.failures++
		wait := min(minRetry<<min(l.failures-1, 5), maxRetry)
		l.retryAt = l.now().Add(wait)
		l.retryTimer.Reset(wait)
		what := "the context re-brief"
		if r.q.id != "" {
			what = "message " + r.q.id
		}
		l.deps.logf("svc runner: delivering %s failed (%v); it stays queued and is retried at the next idle", what, r.err)
		return
	}
	l.failures = 0
	l.retryAt = time.Time{}
	if len(l.queue) > 0 && l.queue[0].id == r.q.id && l.queue[0].turn.Text == r.q.turn.Text {
		l.queue = l.queue[1:]
	}
	l.unacked = r.q.id
	l.turnThread = r.q.thread
	if l.turnSeen {
		l.ack() // the agent already reported this turn
		return
	}
	l.awaiting = true
	l.awaitTimer.Reset(turnStartWait)
}

// ack counts the written message as delivered: its turn started.
func (l *loop) ack() {
	if l.unacked != "" {
		l.done(l.unacked)
		l.unacked = ""
	}
}

// ledger keeps received message ids in order and the last id before the
// first one not yet delivered or skipped: the resume position that neither
// misses nor replays.
type ledger struct {
	last    string
	pending []ledgerEntry
}

type ledgerEntry struct {
	id   string
	done bool
}

func (g *ledger) add(id string) { g.pending = append(g.pending, ledgerEntry{id: id}) }

// done marks id and returns the new last id when it moved.
func (g *ledger) done(id string) (string, bool) {
	for i := range g.pending {
		if g.pending[i].id == id {
			g.pending[i].done = true
			break
		}
	}
	moved := false
	for len(g.pending) > 0 && g.pending[0].done {
		g.last = g.pending[0].id
		g.pending = g.pending[1:]
		moved = true
	}
	return g.last, moved
}
