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
	// after obj: events (docs/RUNNER.md).
	plateDebounce = 150 * time.Millisecond
	// turnStartWait: after a delivery the runner waits for the agent to
	// report the turn's start; an agent that reports no turns at all
	// (a plain agent without hooks) has its turn counted as ended after
	// this, so the next message goes then.
	turnStartWait = 30 * time.Second
	// Retry of a failed delivery: at the next idle, and also after this
	// backoff, so an agent that stays idle still gets the message.
	minRetry = 500 * time.Millisecond
	maxRetry = 10 * time.Second
	// seenIDs is how many recent message ids are remembered to drop a
	// message a reconnect replays twice.
	seenIDs = 4096
	// DefaultTurnQuiet is how long a turn may show nothing (no hook, no
	// tool, no agent event) before the runner reports it; --turn-quiet.
	DefaultTurnQuiet = 15 * time.Minute
)

// registryKinds are the data.kind values of registry events: relayed to the
// agent's toolbox, never delivered as turns.
var registryKinds = map[string]bool{"tool_source": true, "secret": true, "notification_endpoint": true, "notification_profile": true}

// hookReq is one batch of agent events; done (if not nil) is closed once
// the loop applied them, which is when the hook command may return.
type hookReq struct {
	events []Event
	done   chan struct{}
}

// ack is one change of the member's delivery state on the broker
// (docs/RUNNER.md, Delivery contract): the position to advance to ("" for
// none) and, with ended, the end of the turn in progress.
type ack struct {
	position string
	ended    bool
}

// loopDeps are the loop's ways out; every one is called from the loop's
// goroutine (startTurn, deliver and fetchPlate from goroutines it starts).
type loopDeps struct {
	// startTurn tells the broker a turn of message id ("" for none)
	// starts; only once it succeeded is the turn written to the agent.
	// It waits for every ack handed over before it.
	startTurn func(ctx context.Context, id string) error
	// deliver starts a turn in the agent.
	deliver func(ctx context.Context, t Turn) error
	// ack hands the broker a change of the delivery state, in order; it
	// never blocks.
	ack func(ack)
	// report hands the reporter a new activity state (nil: no capture).
	report func(ActivityState)
	// upload queues a tool result for upload (nil: no capture).
	upload func(Event)
	// stalled reports a turn that has shown nothing for quiet (nil: only
	// the log says it).
	stalled func(id string, started time.Time, quiet time.Duration)
	// publish relays a registry event to the agent's toolbox.
	publish func(relay.Event)
	// fetchPlate lists the member's open objectives.
	fetchPlate func(ctx context.Context) ([]*apiv1.Objective, error)
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

// turnState is the turn in progress: from its start on the broker,
// through the write to the agent, to the agent's report of its end.
type turnState struct {
	q         queued
	startedAt time.Time
	// delivered: the write to the agent returned.
	delivered bool
	// started: the agent reported this turn's start. Only a turn end
	// after it ends this turn: an end seen before it is the previous
	// turn's, read late.
	started bool
	// endedEarly: the start and the end both came while the write was in
	// progress (a fast agent); the turn ends once the write returns.
	endedEarly bool
}

// loop is the runner's single-threaded core: it owns the activity state,
// the queue of turns, the turn in progress, the open plate and the ledger
// of acknowledged message ids.
type loop struct {
	me   string
	deps loopDeps

	activity Activity
	queue    []queued
	ledger   ledger
	seen     map[string]bool
	seenRing []string

	// redeliver is the message whose turn was in progress when the last
	// runner stopped: it is delivered again as a redelivery.
	redeliver string
	// note is added to the first turn delivered (what a bounded backlog
	// left out).
	note string
	// skip holds the replayed lifecycle messages the re-brief at attach
	// states already: acknowledged without a turn.
	skip map[string]bool

	cur        *turnState // the turn in progress; nil between turns
	delivering bool       // cur's start and write are under way
	results    chan deliverResult
	awaitTimer *time.Timer // cur was written; waiting for the agent's turn start
	failures   int
	retryTimer *time.Timer
	retryAt    time.Time

	// startWait is turnStartWait (shorter in tests).
	startWait time.Duration
	// quiet is how long a turn may show nothing before it is reported.
	quiet      time.Duration
	quietTimer *time.Timer

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

	// stopping says the runner is stopping (a signal, the agent's exit):
	// a turn that ends with an error then is handed back, not
	// acknowledged.
	stopping func() bool

	now func() time.Time
}

// loopState is where a loop starts: the position the broker holds, the
// message to deliver again, the note for the first turn.
type loopState struct {
	position  string // the last acknowledged id, or where the backlog starts
	redeliver string
	note      string
	quiet     time.Duration // 0: DefaultTurnQuiet
}

func newLoop(me string, st loopState, deps loopDeps) *loop {
	l := &loop{
		me: me, deps: deps,
		ledger:    ledger{last: st.position},
		redeliver: st.redeliver,
		note:      st.note,
		quiet:     st.quiet,
		seen:      map[string]bool{},
		results:   make(chan deliverResult, 1),
		plates:    make(chan []*apiv1.Objective, 1),
		appr:      newApprovals(),
		stopping:  func() bool { return false },
		startWait: turnStartWait,
		now:       time.Now,
	}
	if l.quiet <= 0 {
		l.quiet = DefaultTurnQuiet
	}
	l.awaitTimer = stoppedTimer()
	l.retryTimer = stoppedTimer()
	l.plateTimer = stoppedTimer()
	l.quietTimer = stoppedTimer()
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
// arrives; it returns that error. From then on the loop acknowledges
// nothing: a turn in progress is handed back to the broker's position,
// and the next runner delivers it again.
func (l *loop) run(ctx context.Context, msgs <-chan *apiv1.Message, hooks <-chan hookReq, events <-chan Event, stop <-chan struct{}, fatal <-chan error) error {
	defer l.awaitTimer.Stop()
	defer l.retryTimer.Stop()
	defer l.plateTimer.Stop()
	defer l.quietTimer.Stop()
	defer l.appr.timer.Stop()
	defer close(l.appr.quit)
	l.stopping = func() bool {
		if ctx.Err() != nil {
			return true
		}
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
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
			// No turn start reported: an agent that reports none. Its
			// turn counts as ended, so the next message goes.
			if l.cur != nil && l.cur.delivered && !l.cur.started {
				l.endTurn(false)
			}
		case <-l.retryTimer.C:
			l.retryAt = time.Time{}
		case <-l.quietTimer.C:
			l.onQuiet()
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
	case l.skip[id]:
		delete(l.skip, id)
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
	if m.GetLoopStopped() {
		// The broker's loop guard stopped this reply chain (docs/RUNNER.md,
		// Loop guard): it is for people to read, never a turn.
		l.deps.logf("svc runner: message %s from %s skipped: the loop guard stopped its reply chain", oneLine(id, 32), oneLine(m.GetFrom(), 64))
		l.done(id)
		return
	}
	t := RenderTurn(m, l.deps.slug)
	if id == l.redeliver {
		t = RenderRedelivery(m, l.deps.slug)
		l.redeliver = ""
	}
	l.queue = append(l.queue, queued{turn: t, id: id, thread: thread})
}

func (l *loop) remember(id string) {
	l.seen[id] = true
	l.seenRing = append(l.seenRing, id)
	if len(l.seenRing) > seenIDs {
		delete(l.seen, l.seenRing[0])
		l.seenRing = l.seenRing[1:]
	}
}

// done marks a message that gets no turn (skipped) and hands the broker
// the position when it moved.
func (l *loop) done(id string) {
	if last, moved := l.ledger.done(id); moved {
		l.deps.ack(ack{position: last})
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
	if l.cur != nil && l.cur.delivered && e.Kind != SessionStart {
		l.quietTimer.Reset(l.quiet) // the turn shows something
	}
	switch e.Kind {
	case TurnStart:
		if l.cur != nil && !l.cur.started {
			l.cur.started = true
			l.awaitTimer.Stop()
		}
	case TurnEnd:
		switch {
		case l.cur == nil || !l.cur.started:
			// Not this turn's end: the previous turn's, read late, or
			// an agent's turn the runner never delivered.
		case l.delivering:
			l.cur.endedEarly = true
		default:
			l.endTurn(e.Failed)
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

// endTurn ends the turn in progress: its message is done, and the broker
// is told the turn ended at the position that passes it. A turn that ended
// with an error while the runner is stopping (the agent was killed under
// it) is handed back instead: the next start delivers it again.
func (l *loop) endTurn(failed bool) {
	cur := l.cur
	l.cur = nil
	l.awaitTimer.Stop()
	l.quietTimer.Stop()
	if failed && l.stopping() {
		return
	}
	a := ack{ended: true}
	if cur.q.id != "" {
		if last, moved := l.ledger.done(cur.q.id); moved {
			a.position = last
		}
	}
	l.deps.ack(a)
}

// onQuiet reports a turn that has shown nothing for the quiet period and
// looks again after another. A blocked agent waits for a person, which its
// presence already shows.
func (l *loop) onQuiet() {
	if l.cur == nil || !l.cur.delivered {
		return
	}
	l.quietTimer.Reset(l.quiet)
	if l.activity.State() == StateBlocked {
		return
	}
	what := "the context re-brief"
	if l.cur.q.id != "" {
		what = "message " + l.cur.q.id
	}
	l.deps.logf("svc runner: the turn of %s has shown nothing for %s (started %s); the agent may be stuck",
		what, l.quiet, l.cur.startedAt.Format(time.RFC3339))
	if l.deps.stalled != nil {
		l.deps.stalled(l.cur.q.id, l.cur.startedAt, l.quiet)
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
	return l.activity.State() == StateIdle && l.cur == nil
}

func (l *loop) maybeDeliver(ctx context.Context) {
	if len(l.queue) == 0 || !l.idle() || ctx.Err() != nil {
		return
	}
	if !l.retryAt.IsZero() && l.now().Before(l.retryAt) {
		return
	}
	q := l.queue[0]
	t := q.turn
	if l.note != "" {
		t.Text += "\n\n" + l.note
	}
	l.cur = &turnState{q: q, startedAt: l.now()}
	l.delivering = true
	go func() {
		err := l.deps.startTurn(ctx, q.id)
		if err == nil {
			err = l.deps.deliver(ctx, t)
		}
		l.results <- deliverResult{q: q, err: err}
	}()
}

func (l *loop) onDelivered(r deliverResult) {
	l.delivering = false
	cur := l.cur
	if r.err != nil {
		// The broker may hold this turn as started: the next attempt
		// starts it again, and a runner stopped before that delivers it
		// as a redelivery, which it then is not quite; never lost.
		l.cur = nil
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
	l.note = ""
	if len(l.queue) > 0 && l.queue[0].id == r.q.id && l.queue[0].turn.Text == cur.q.turn.Text {
		l.queue = l.queue[1:]
	}
	cur.delivered = true
	l.turnThread = cur.q.thread
	l.quietTimer.Reset(l.quiet)
	switch {
	case cur.endedEarly:
		l.endTurn(false)
	case !cur.started:
		l.awaitTimer.Reset(l.startWait)
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
