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

// fakeWorld is the loop's outside: a session whose deliveries can fail, a
// plate, and records of what the loop did.
type fakeWorld struct {
	mu        sync.Mutex
	delivered []Turn
	failNext  int
	persisted []string
	published []relay.Event
	reported  []ActivityState
	uploaded  []Event
	logs      []string
	plate     []*apiv1.Objective
	fetches   atomic.Int32
	// onDeliver, when set, runs inside a delivery before it returns: an
	// agent that reports its turn before the runner's write comes back.
	onDeliver func()
}

func (w *fakeWorld) deps() loopDeps {
	return loopDeps{
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
			return nil
		},
		report:  func(s ActivityState) { w.mu.Lock(); w.reported = append(w.reported, s); w.mu.Unlock() },
		upload:  func(e Event) { w.mu.Lock(); w.uploaded = append(w.uploaded, e); w.mu.Unlock() },
		publish: func(e relay.Event) { w.mu.Lock(); w.published = append(w.published, e); w.mu.Unlock() },
		fetchPlate: func(context.Context) ([]*apiv1.Objective, error) {
			w.fetches.Add(1)
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.plate, nil
		},
		persist: func(id string) { w.mu.Lock(); w.persisted = append(w.persisted, id); w.mu.Unlock() },
		slug:    func(string) string { return "" },
		logf:    func(f string, a ...any) { w.mu.Lock(); w.logs = append(w.logs, fmt.Sprintf(f, a...)); w.mu.Unlock() },
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

func (w *fakeWorld) lastPersisted() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.persisted) == 0 {
		return ""
	}
	return w.persisted[len(w.persisted)-1]
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
	h := &harness{w: w, l: newLoop("me", "", w.deps()), msgs: make(chan *apiv1.Message), hooks: make(chan hookReq), done: make(chan error, 1)}
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

func TestLoopOneMessagePerTurn(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.send(t, "1", "alice", nil)
	h.send(t, "2", "bob", nil)
	require.Eventually(t, func() bool { return len(w.texts()) == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, []string{header("1", "alice")}, w.texts(), "the second waits for the first turn")
	require.Empty(t, w.lastPersisted(), "written but its turn not started: a stop now replays it")
	h.hook(TurnStart)
	require.Equal(t, "1", w.lastPersisted(), "its turn started: the last id moves")
	time.Sleep(20 * time.Millisecond)
	require.Len(t, w.texts(), 1, "not while working")
	h.hook(TurnEnd)
	require.Eventually(t, func() bool { return len(w.texts()) == 2 }, 5*time.Second, time.Millisecond)
	require.Equal(t, header("2", "bob"), w.texts()[1])
	h.hook(TurnStart)
	require.Equal(t, "2", w.lastPersisted())
	w.mu.Lock()
	require.Equal(t, []ActivityState{StateWorking, StateIdle, StateWorking}, w.reported)
	w.mu.Unlock()
}

// A fast agent starts and ends its turn before the write of the turn
// returns: the loop must not wait turnStartWait for a start it already saw.
func TestLoopTurnReportedBeforeTheWriteReturns(t *testing.T) {
	w := &fakeWorld{}
	var h *harness
	w.onDeliver = func() { h.hook(TurnStart, TurnEnd) }
	h = startLoop(t, w, nil)
	for i := range 5 {
		h.send(t, fmt.Sprint(i+1), "alice", nil)
	}
	require.Eventually(t, func() bool { return len(w.texts()) == 5 }, 5*time.Second, time.Millisecond,
		"each turn ended before its write returned; the next goes at once, not after %s", turnStartWait)
}

// The previous turn's end read while the next turn is being written must
// not let a third message go before the agent started the second turn.
func TestLoopStaleTurnEndDuringTheWrite(t *testing.T) {
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
	require.Eventually(t, func() bool { return len(w.texts()) == 1 }, 5*time.Second, time.Millisecond)
	h.hook(TurnStart)
	h.hook(TurnEnd)
	require.Eventually(t, func() bool { return len(w.texts()) == 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Len(t, w.texts(), 2, "turn 2 has not started: message 3 waits")
	require.Equal(t, "1", w.lastPersisted(), "message 2 is written, not yet acknowledged by a turn start")
	h.hook(TurnStart)
	require.Equal(t, "2", w.lastPersisted())
	h.hook(TurnEnd)
	require.Eventually(t, func() bool { return len(w.texts()) == 3 }, 5*time.Second, time.Millisecond)
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
	require.Empty(t, w.lastPersisted(), "nothing delivered: the last id stays before message 1")
	h.hook(TurnStart)
	h.hook(TurnEnd)
	require.Eventually(t, func() bool { return len(w.texts()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{header("1", "alice")}, w.texts())
	h.hook(TurnStart)
	require.Eventually(t, func() bool { return w.lastPersisted() == "2" }, 5*time.Second, time.Millisecond,
		"delivered: the last id passes the skipped own message too")
	w.mu.Lock()
	require.Contains(t, w.logs[0], "delivering message 1 failed (agent not reading); it stays queued and is retried at the next idle")
	w.mu.Unlock()
}

func TestLoopRegistryEventsAndOwnMessages(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	h.send(t, "1", "admin", map[string]any{"kind": "tool_source", "thread": "tool:gh"})
	h.send(t, "2", "admin", map[string]any{"kind": "secret", "thread": "secret:db"})
	h.send(t, "3", "admin", map[string]any{"kind": "notification_endpoint", "thread": "hook:ci"})
	h.send(t, "4", "me", nil)
	h.send(t, "4", "alice", nil) // a replayed id is dropped
	require.Eventually(t, func() bool { return w.lastPersisted() == "4" }, 5*time.Second, time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	require.Empty(t, w.texts(), "registry events and own messages are no turns")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, []relay.Event{{Kind: "tool_source", Thread: "tool:gh"}, {Kind: "secret", Thread: "secret:db"}, {Kind: "notification_endpoint", Thread: "hook:ci"}}, w.published)
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
