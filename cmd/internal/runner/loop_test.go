package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
	apiv1 "svc/gen/svc/v1"
)

// fakeWorld is the loop's outside: a broker whose turn starts can fail, a
// session whose deliveries can fail, a plate, and records of what the loop
// did, in order.
type fakeWorld struct {
	mu        sync.Mutex
	delivered []Turn
	failNext  int // deliveries that fail
	failStart int // turn starts the broker refuses
	starts    []string
	acks      []ack
	trace     []string // "start <id>", "deliver <id>", "ack <position> ended"
	published []relay.Event
	reported  []ActivityState
	uploaded  []Event
	stalls    []string
	logs      []string
	plate     []*apiv1.Objective
	fetches   atomic.Int32
	// onDeliver, when set, runs inside a delivery before it returns: an
	// agent that reports its turn before the runner's write comes back.
	onDeliver func()
}

func (w *fakeWorld) deps() loopDeps {
	return loopDeps{
		startTurn: func(ctx context.Context, id string) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.failStart > 0 {
				w.failStart--
				return errors.New("broker unavailable")
			}
			w.starts = append(w.starts, id)
			w.trace = append(w.trace, "start "+id)
			return nil
		},
		deliver: func(ctx context.Context, t Turn) error {
			if w.onDeliver != nil {
				w.onDeliver()
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.failNext > 0 {
				w.failNext--
				return errors.New("agent not reading")
			}
			w.delivered = append(w.delivered, t)
			w.trace = append(w.trace, "deliver "+t.MessageID)
			return nil
		},
		ack: func(a ack) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.acks = append(w.acks, a)
			w.trace = append(w.trace, fmt.Sprintf("ack %s %v", a.position, a.ended))
		},
		report:  func(s ActivityState) { w.mu.Lock(); w.reported = append(w.reported, s); w.mu.Unlock() },
		upload:  func(e Event) { w.mu.Lock(); w.uploaded = append(w.uploaded, e); w.mu.Unlock() },
		publish: func(e relay.Event) { w.mu.Lock(); w.published = append(w.published, e); w.mu.Unlock() },
		stalled: func(id string, _ time.Time, _ time.Duration) {
			w.mu.Lock()
			w.stalls = append(w.stalls, id)
			w.mu.Unlock()
		},
		fetchPlate: func(context.Context) ([]*apiv1.Objective, error) {
			w.fetches.Add(1)
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.plate, nil
		},
		slug: func(string) string { return "" },
		logf: func(f string, a ...any) { w.mu.Lock(); w.logs = append(w.logs, fmt.Sprintf(f, a...)); w.mu.Unlock() },
	}
}

func (w *fakeWorld) texts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, t := range w.delivered {
		first, _, _ := strings.Cut(t.Text, "\n")
		out = append(out, first)
	}
	return out
}

// position is the last position handed to the broker.
func (w *fakeWorld) position() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.acks) - 1; i >= 0; i-- {
		if w.acks[i].position != "" {
			return w.acks[i].position
		}
	}
	return ""
}

func (w *fakeWorld) ackList() []ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ack(nil), w.acks...)
}

func (w *fakeWorld) traceList() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.trace...)
}

// harness runs a loop in a goroutine.
type harness struct {
	w      *fakeWorld
	l      *loop
	msgs   chan *apiv1.Message
	hooks  chan hookReq
	cancel context.CancelFunc
	done   chan error
}

func startLoop(t *testing.T, w *fakeWorld, plate []*apiv1.Objective) *harness {
	t.Helper()
	return startLoopAt(t, w, loopState{}, plate, nil)
}

// startLoopAt starts a loop from st; tune, when set, adjusts it first.
func startLoopAt(t *testing.T, w *fakeWorld, st loopState, plate []*apiv1.Objective, tune func(*loop)) *harness {
	t.Helper()
	h := &harness{w: w, l: newLoop("me", st, w.deps()), msgs: make(chan *apiv1.Message), hooks: make(chan hookReq), done: make(chan error, 1)}
	if tune != nil {
		tune(h.l)
	}
	h.l.attach(plate)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.l.run(ctx, h.msgs, h.hooks, nil, nil, nil) }()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

func (h *harness) hook(kinds ...EventKind) {
	var evs []Event
	for _, k := range kinds {
		evs = append(evs, Event{Kind: k})
	}
	h.events(evs...)
}

func (h *harness) events(evs ...Event) {
	done := make(chan struct{})
	h.hooks <- hookReq{events: evs, done: done}
	<-done
}

func (h *harness) send(t *testing.T, id, from string, data map[string]any) {
	me := "me"
	h.msgs <- msg(t, id, from, &me, data, nil)
}

func header(id, from string) string {
	return "[svc] message " + id + " from " + from + " in DM (level warning)"
}

func waitLen(t *testing.T, f func() int, n int, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return f() == n }, 5*time.Second, time.Millisecond, msgAndArgs...)
}

// One message per turn: the broker hears of the turn before the agent gets
// it, and the message is acknowledged only once its turn ended.
func TestLoopOneMessagePerTurnAckedAtItsEnd(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.send(t, "1", "alice", nil)
	h.send(t, "2", "bob", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, []string{header("1", "alice")}, w.texts(), "the second waits for the first turn")
	require.Equal(t, []string{"start 1", "deliver 1"}, w.traceList(), "the turn starts on the broker first")
	h.hook(TurnStart)
	time.Sleep(20 * time.Millisecond)
	require.Empty(t, w.ackList(), "started, not ended: a stop now delivers it again")
	require.Len(t, w.texts(), 1, "not while working")
	h.hook(TurnEnd)
	waitLen(t, func() int { return len(w.texts()) }, 2)
	require.Equal(t, header("2", "bob"), w.texts()[1])
	h.hook(TurnStart, TurnEnd)
	require.Eventually(t, func() bool { return w.position() == "2" }, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{"start 1", "deliver 1", "ack 1 true", "start 2", "deliver 2", "ack 2 true"}, w.traceList())
	w.mu.Lock()
	require.Equal(t, []ActivityState{StateWorking, StateIdle, StateWorking, StateIdle}, w.reported)
	w.mu.Unlock()
}

// A turn the broker did not record as started is never written to the
// agent; it stays queued and goes once the broker takes it.
func TestLoopTurnStartRefusedWritesNothing(t *testing.T) {
	w := &fakeWorld{failStart: 2}
	h := startLoop(t, w, nil)
	h.send(t, "1", "alice", nil)
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.logs) >= 1 }, 5*time.Second, time.Millisecond)
	require.Empty(t, w.texts(), "not written while the broker has not recorded the turn")
	waitLen(t, func() int { return len(w.texts()) }, 1, "retried after the backoff")
	require.Equal(t, []string{"start 1", "deliver 1"}, w.traceList())
	w.mu.Lock()
	require.Contains(t, w.logs[0], "delivering message 1 failed (broker unavailable); it stays queued")
	w.mu.Unlock()
}

// A fast agent starts and ends its turn before the write of the turn
// returns: the turn ends then, and the next goes at once, not after
// turnStartWait.
func TestLoopTurnReportedBeforeTheWriteReturns(t *testing.T) {
	w := &fakeWorld{}
	var h *harness
	w.onDeliver = func() { h.hook(TurnStart, TurnEnd) }
	h = startLoop(t, w, nil)
	for i := range 5 {
		h.send(t, fmt.Sprint(i+1), "alice", nil)
	}
	waitLen(t, func() int { return len(w.texts()) }, 5, "each turn ended before its write returned")
	require.Eventually(t, func() bool { return w.position() == "5" }, 5*time.Second, time.Millisecond)
}

// The previous turn's end read while the next turn is being written, or
// after it was written but before the agent started it, is not the new
// turn's end: it neither acknowledges the new message nor lets a third one
// go.
func TestLoopStaleTurnEndIsNotTheNewTurns(t *testing.T) {
	w := &fakeWorld{}
	var h *harness
	var calls atomic.Int32
	w.onDeliver = func() {
		if calls.Add(1) == 2 {
			h.hook(TurnEnd) // turn 1's late end, during turn 2's write
		}
	}
	h = startLoop(t, w, nil)
	for i := range 3 {
		h.send(t, fmt.Sprint(i+1), "alice", nil)
	}
	waitLen(t, func() int { return len(w.texts()) }, 1)
	h.hook(TurnStart)
	h.hook(TurnEnd)
	waitLen(t, func() int { return len(w.texts()) }, 2)
	h.hook(TurnEnd) // late again, after the write returned
	time.Sleep(50 * time.Millisecond)
	require.Len(t, w.texts(), 2, "turn 2 has not started: message 3 waits")
	require.Equal(t, "1", w.position(), "message 2 is not acknowledged by another turn's end")
	h.hook(TurnStart)
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, "1", w.position(), "started is not ended")
	h.hook(TurnEnd)
	require.Eventually(t, func() bool { return w.position() == "2" }, 5*time.Second, time.Millisecond)
	waitLen(t, func() int { return len(w.texts()) }, 3)
}

func TestLoopFailedDeliveryIsRetriedNeverDropped(t *testing.T) {
	w := &fakeWorld{failNext: 2}
	h := startLoop(t, w, nil)
	h.send(t, "1", "alice", nil)
	h.send(t, "2", "me", nil) // own: skipped, but after an undelivered one
	// First try fails; the retry at the next idle (a turn end) fails too;
	// the backoff retry then delivers it.
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.logs) >= 1
	}, 5*time.Second, time.Millisecond)
	require.Empty(t, w.position(), "nothing delivered: the position stays before message 1")
	h.hook(TurnStart)
	h.hook(TurnEnd)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	require.Equal(t, []string{header("1", "alice")}, w.texts())
	h.hook(TurnStart, TurnEnd)
	require.Eventually(t, func() bool { return w.position() == "2" }, 5*time.Second, time.Millisecond,
		"its turn ended: the position passes the skipped own message too")
	w.mu.Lock()
	require.Contains(t, w.logs[0], "delivering message 1 failed (agent not reading); it stays queued and is retried at the next idle")
	w.mu.Unlock()
}

// The message whose turn the last runner left open is delivered again with
// a header saying so; the others as usual.
func TestLoopRedelivery(t *testing.T) {
	w := &fakeWorld{}
	h := startLoopAt(t, w, loopState{position: "4", redeliver: "5"}, nil, nil)
	h.send(t, "5", "alice", nil)
	h.send(t, "6", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	h.hook(TurnStart, TurnEnd)
	waitLen(t, func() int { return len(w.texts()) }, 2)
	w.mu.Lock()
	first, second := w.delivered[0].Text, w.delivered[1].Text
	w.mu.Unlock()
	require.True(t, strings.HasPrefix(first, header("5", "alice")+" (redelivery)\n"+redeliveryNote+"\nhello"), first)
	require.True(t, strings.HasPrefix(second, header("6", "alice")+"\nhello"), second)
}

// What a bounded backlog left out is said in the first turn delivered,
// whatever it is, and only there.
func TestLoopBacklogNoteInTheFirstTurn(t *testing.T) {
	plate := []*apiv1.Objective{{Id: "o1", Title: "T", Status: "active", Outcome: "O"}}
	w := &fakeWorld{failNext: 1}
	h := startLoopAt(t, w, loopState{position: "0", note: BacklogNote(12)}, plate, nil)
	h.send(t, "1", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1, "the re-brief, after one failed try")
	h.hook(TurnStart, TurnEnd)
	waitLen(t, func() int { return len(w.texts()) }, 2)
	w.mu.Lock()
	defer w.mu.Unlock()
	require.True(t, strings.HasSuffix(w.delivered[0].Text, "\n\n[svc] 12 older message(s) addressed to you were not delivered as turns: "+
		"a first start replays only the newest 200 messages of the last 7 days. The recent tool shows them."), w.delivered[0].Text)
	require.NotContains(t, w.delivered[1].Text, "older message")
}

// A stop during a turn acknowledges nothing: the loop returns and the
// broker's turn stays open for the next start. A turn that ends with an
// error as the runner stops (the agent killed under it) is not
// acknowledged either; one that ends with an error otherwise is.
func TestLoopStopHandsTheTurnBack(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.send(t, "1", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	h.hook(TurnStart)
	h.cancel()
	<-h.done
	h.done <- nil // for the cleanup
	require.Empty(t, w.ackList())

	for _, tc := range []struct {
		name     string
		stopping bool
		want     []ack
	}{
		{"stopping", true, nil},
		{"running", false, []ack{{position: "1", ended: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWorld{}
			l := newLoop("me", loopState{}, w.deps())
			l.stopping = func() bool { return tc.stopping }
			l.onMessage(msg(t, "1", "alice", nil, nil, nil))
			l.cur = &turnState{q: l.queue[0], delivered: true}
			l.queue = l.queue[1:]
			l.onEvent(Event{Kind: TurnStart})
			l.onEvent(Event{Kind: TurnEnd, Failed: true})
			require.Equal(t, tc.want, w.ackList())
			require.Nil(t, l.cur, "the turn is over either way")
		})
	}
}

// An agent that reports no turns has its turn counted as ended after
// turnStartWait, so the queue moves on.
func TestLoopAgentWithoutHooks(t *testing.T) {
	w := &fakeWorld{}
	h := startLoopAt(t, w, loopState{}, nil, func(l *loop) { l.startWait = 30 * time.Millisecond })
	h.send(t, "1", "alice", nil)
	h.send(t, "2", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 2)
	require.Eventually(t, func() bool { return w.position() == "2" }, 5*time.Second, time.Millisecond)
}

// A turn that shows nothing for the quiet period is reported, and again
// after each further period; not while the agent is blocked on a person.
func TestLoopQuietTurnIsReported(t *testing.T) {
	w := &fakeWorld{}
	h := startLoopAt(t, w, loopState{quiet: 40 * time.Millisecond}, nil, nil)
	h.send(t, "1", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	h.hook(TurnStart)
	stalls := func() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.stalls) }
	require.Eventually(t, func() bool { return stalls() >= 2 }, 5*time.Second, time.Millisecond, "reported, then again")
	w.mu.Lock()
	require.Equal(t, "1", w.stalls[0])
	require.Contains(t, strings.Join(w.logs, "\n"), "svc runner: the turn of message 1 has shown nothing for 40ms")
	w.mu.Unlock()
	h.hook(Blocked)
	n := stalls()
	time.Sleep(150 * time.Millisecond)
	require.LessOrEqual(t, stalls(), n+1, "blocked: waiting for a person is not stuck")
	h.hook(TurnEnd)
	n = stalls()
	time.Sleep(150 * time.Millisecond)
	require.Equal(t, n, stalls(), "no turn, nothing to report")
}

// A tool whose end never comes (denied by a permission prompt) does not
// leave the member working: the turn's end resets it, and the next
// message goes.
func TestLoopToolWithoutEndDoesNotStick(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.send(t, "1", "alice", nil)
	h.send(t, "2", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	h.events(Event{Kind: TurnStart}, Event{Kind: ToolStart, Tool: "Write"}, Event{Kind: Blocked}, Event{Kind: TurnEnd})
	waitLen(t, func() int { return len(w.texts()) }, 2)
	w.mu.Lock()
	require.Equal(t, StateIdle, w.reported[len(w.reported)-1])
	w.mu.Unlock()
}

func TestLoopRegistryEventsAndOwnMessages(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.send(t, "1", "admin", map[string]any{"kind": "tool_source", "thread": "tool:gh"})
	h.send(t, "2", "admin", map[string]any{"kind": "secret", "thread": "secret:db"})
	h.send(t, "3", "admin", map[string]any{"kind": "notification_endpoint", "thread": "hook:ci"})
	h.send(t, "4", "admin", map[string]any{"kind": "notification_profile", "thread": "hook-profile:gh"})
	h.send(t, "5", "me", nil)
	h.send(t, "5", "alice", nil) // a replayed id is dropped
	require.Eventually(t, func() bool { return w.position() == "5" }, 5*time.Second, time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	require.Empty(t, w.texts(), "registry events and own messages are no turns")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, []relay.Event{{Kind: "tool_source", Thread: "tool:gh"}, {Kind: "secret", Thread: "secret:db"}, {Kind: "notification_endpoint", Thread: "hook:ci"}, {Kind: "notification_profile", Thread: "hook-profile:gh"}}, w.published)
	require.Equal(t, []string{"secret db changed; applies at next runner start"}, w.logs)
}

func TestLoopRebrief(t *testing.T) {
	plate := []*apiv1.Objective{{Id: "o1", Title: "T", Status: "active", Outcome: "O"}}
	w := &fakeWorld{}
	h := startLoop(t, w, plate)
	require.Eventually(t, func() bool { return len(w.texts()) == 1 }, 5*time.Second, time.Millisecond)
	w.mu.Lock()
	require.Equal(t, RefreshMeta(), w.delivered[0].Meta, "re-brief at attach")
	w.mu.Unlock()
	h.hook(TurnStart, TurnEnd)
	// Compaction: the re-brief again.
	h.hooks <- hookReq{events: []Event{{Kind: SessionStart, Source: "compact"}}}
	require.Eventually(t, func() bool { return len(w.texts()) == 2 }, 5*time.Second, time.Millisecond)
	require.Equal(t, "[svc] context refresh: your open objectives", w.texts()[1])
	h.hook(TurnStart, TurnEnd)
	h.hooks <- hookReq{events: []Event{{Kind: SessionStart, Source: "startup"}}}
	time.Sleep(30 * time.Millisecond)
	require.Len(t, w.texts(), 2, "no re-brief for other session starts")

	w2 := &fakeWorld{}
	startLoop(t, w2, nil)
	time.Sleep(30 * time.Millisecond)
	require.Empty(t, w2.texts(), "no re-brief for an empty plate")
}

func TestLoopPlateDebounce(t *testing.T) {
	w := &fakeWorld{plate: []*apiv1.Objective{{Id: "o9", Title: "New", Status: "active", Outcome: "O"}}}
	h := startLoop(t, w, nil)
	for i := range 20 {
		h.send(t, fmt.Sprint(i+1), "alice", map[string]any{"thread": "obj:o9"})
	}
	require.Eventually(t, func() bool { return w.fetches.Load() >= 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(2 * plateDebounce)
	require.LessOrEqual(t, w.fetches.Load(), int32(2), "a burst costs one fetch per 150 ms window")
	// The refreshed plate is what a compaction re-briefs.
	h.hook(TurnStart, TurnEnd)
	h.hooks <- hookReq{events: []Event{{Kind: SessionStart, Source: "compact"}}}
	require.Eventually(t, func() bool {
		h.hook(TurnStart, TurnEnd) // the queued messages take their turns
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, d := range w.delivered {
			if strings.HasPrefix(d.Text, "[svc] context refresh") {
				require.Contains(t, d.Text, "- o9 [active] New", "the refetched plate")
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
}

func TestLoopUploadsToolResults(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.hooks <- hookReq{events: []Event{{Kind: ToolStart, Tool: "Bash"}, {Kind: ToolEnd, Tool: "Bash", ToolResult: []byte(`"ok"`)}, {Kind: ToolEnd, Tool: "Bash"}}}
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.uploaded) == 1 }, 5*time.Second, time.Millisecond)
}

func TestLedger(t *testing.T) {
	tests := []struct {
		name  string
		add   []string
		done  []string
		want  string
		moved []bool
	}{
		{"in order", []string{"1", "2"}, []string{"1", "2"}, "2", []bool{true, true}},
		{"a later one waits for an earlier", []string{"1", "2", "3"}, []string{"2", "3", "1"}, "3", []bool{false, false, true}},
		{"unknown id", []string{"1"}, []string{"9"}, "0", []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := ledger{last: "0"}
			for _, id := range tc.add {
				g.add(id)
			}
			for i, id := range tc.done {
				_, moved := g.done(id)
				require.Equal(t, tc.moved[i], moved, "done(%s)", id)
			}
			require.Equal(t, tc.want, g.last)
		})
	}
}

// A replayed lifecycle message the re-brief states is acknowledged without
// a turn of its own.
func TestLoopSkipsWhatTheRebriefStates(t *testing.T) {
	plate := []*apiv1.Objective{{Id: "o1", Title: "T", Status: "active", Outcome: "O"}}
	w := &fakeWorld{}
	h := startLoopAt(t, w, loopState{position: "0"}, plate, func(l *loop) { l.skip = map[string]bool{"1": true} })
	h.send(t, "1", "admin", map[string]any{"thread": "obj:o1", "kind": "objective_event", "event": "assigned"})
	h.send(t, "2", "admin", map[string]any{"thread": "obj:o1", "kind": "objective_event", "event": "blocked"})
	waitLen(t, func() int { return len(w.texts()) }, 1)
	require.Equal(t, "[svc] context refresh: your open objectives", w.texts()[0])
	h.hook(TurnStart, TurnEnd)
	waitLen(t, func() int { return len(w.texts()) }, 2)
	require.Equal(t, header("2", "admin"), w.texts()[1], "only what it covers")
	h.hook(TurnStart, TurnEnd)
	require.Eventually(t, func() bool { return w.position() == "2" }, 5*time.Second, time.Millisecond)
}
