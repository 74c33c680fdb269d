package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
	apiv1 "svc/gen/svc/v1"
)

// fakeApprovals is the broker's side of approvals for the loop.
type fakeApprovals struct {
	mu        sync.Mutex
	asked     []string // "tool objective input"
	withdrawn []string
	// hold, when set, makes askApproval wait for it: a decision can come
	// on the stream before the answer to the request.
	hold    chan struct{}
	fail    error
	expires time.Duration // from now; default a minute
	polled  *approvalDecision
}

func (f *fakeApprovals) wire(d *loopDeps) {
	d.askApproval = func(ctx context.Context, tool string, input json.RawMessage, objective string) (string, time.Time, error) {
		f.mu.Lock()
		hold, fail, exp := f.hold, f.fail, f.expires
		f.asked = append(f.asked, fmt.Sprintf("%s %s %s", tool, objective, input))
		n := len(f.asked)
		f.mu.Unlock()
		if hold != nil {
			<-hold
		}
		if fail != nil {
			return "", time.Time{}, fail
		}
		if exp == 0 {
			exp = time.Minute
		}
		return fmt.Sprintf("ap-%d", n), time.Now().Add(exp), nil
	}
	d.getApproval = func(ctx context.Context, id string) (*approvalDecision, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.polled, nil
	}
	d.withdrawApproval = func(ctx context.Context, id, why string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.withdrawn = append(f.withdrawn, id+": "+why)
		return nil
	}
}

func (f *fakeApprovals) askedList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func (f *fakeApprovals) withdrawnList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.withdrawn...)
}

// startApprovalLoop is startLoop with approvals wired.
func startApprovalLoop(t *testing.T, w *fakeWorld, f *fakeApprovals, plate []*apiv1.Objective) *harness {
	t.Helper()
	d := w.deps()
	f.wire(&d)
	h := &harness{w: w, l: newLoop("me", loopState{}, d), msgs: make(chan *apiv1.Message), hooks: make(chan hookReq), done: make(chan error, 1)}
	h.l.appr.in = make(chan approvalReq)
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

// ask sends an approval request as the relay would and returns where its
// answer comes.
func (h *harness) ask(ctx context.Context, tool, toolUseID string) chan relay.ApprovalAnswer {
	a := approvalReq{ctx: ctx, req: relay.ApprovalRequest{Tool: tool, Input: json.RawMessage(`{"command":"rm -rf build"}`), ToolUseID: toolUseID}, answer: make(chan relay.ApprovalAnswer, 1)}
	h.l.appr.in <- a
	return a.answer
}

// decide sends the broker's decision message for approval id.
func (h *harness) decide(t *testing.T, id, status, by, reason string) {
	data := map[string]any{"thread": "approval:" + id, "kind": "approval_decided", "approval": id,
		"decision": map[bool]string{true: "allow", false: "deny"}[status == "allowed"], "status": status}
	if by != "" {
		data["decidedBy"] = by
	}
	if reason != "" {
		data["reason"] = reason
	}
	h.msgs <- msg(t, "d-"+id, by, nil, data, nil)
}

func (w *fakeWorld) lastReported() ActivityState {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.reported) == 0 {
		return StateIdle
	}
	return w.reported[len(w.reported)-1]
}

func waitAnswer(t *testing.T, ch chan relay.ApprovalAnswer) relay.ApprovalAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
		return relay.ApprovalAnswer{}
	}
}

func waitState(t *testing.T, w *fakeWorld, s ActivityState, why string) {
	t.Helper()
	require.Eventually(t, func() bool { return w.lastReported() == s }, 5*time.Second, time.Millisecond, "%s: state %s, want %s", why, w.lastReported(), s)
}

// inTurn starts a turn with tool call tu1 in flight, as Claude Code's hooks
// report it before it asks for permission.
func inTurn(h *harness) {
	h.events(Event{Kind: TurnStart}, Event{Kind: ToolStart, Tool: "Bash", ToolUseID: "tu1"})
}

func TestLoopApprovalAllowed(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{}
	h := startApprovalLoop(t, w, f, nil)
	inTurn(h)
	ans := h.ask(context.Background(), "Bash", "tu1")
	waitState(t, w, StateBlocked, "waiting on a person")
	require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
	h.decide(t, "ap-1", "allowed", "alice", "")
	a := waitAnswer(t, ans)
	require.Equal(t, relay.ApprovalAnswer{Allow: true, Approval: "ap-1", DecidedBy: "alice"}, a)
	waitState(t, w, StateWorking, "the allowed tool runs")
	h.events(Event{Kind: ToolEnd, Tool: "Bash", ToolUseID: "tu1"}, Event{Kind: TurnEnd})
	waitState(t, w, StateIdle, "the tool ended by its own hook")
}

func TestLoopApprovalDeniedClosesTheToolOnce(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{}
	h := startApprovalLoop(t, w, f, nil)
	inTurn(h)
	ans := h.ask(context.Background(), "Bash", "tu1")
	waitState(t, w, StateBlocked, "waiting")
	require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
	h.decide(t, "ap-1", "denied", "alice", "not on main")
	a := waitAnswer(t, ans)
	require.False(t, a.Allow)
	require.Equal(t, "Denied by alice: not on main", a.Reason, "the agent reads who and why")

	// A parallel call is in flight; a late end of the denied call (Codex
	// completes a declined item) must not close it. The loop applied each
	// batch before h.events returns, and nothing else moves its activity
	// here, so the count can be read between batches.
	h.events() // a barrier: the denial was applied
	require.Zero(t, h.l.activity.InFlight(), "the denial closed tu1")
	h.events(Event{Kind: ToolStart, Tool: "Read", ToolUseID: "tu2"}, Event{Kind: ToolEnd, Tool: "Bash", ToolUseID: "tu1"})
	require.Equal(t, 1, h.l.activity.InFlight(), "tu2 still runs after tu1's late end")
	h.events(Event{Kind: ToolEnd, Tool: "Read", ToolUseID: "tu2"})
	require.Zero(t, h.l.activity.InFlight())
	h.events(Event{Kind: TurnEnd})
	waitState(t, w, StateIdle, "nothing left in flight: no stuck working")
}

func TestLoopApprovalDeniedLeavesNoStuckState(t *testing.T) {
	// The finding: allow worked, deny left the member working for
	// good, as the tool-start hook raised the count and nothing lowered it.
	w, f := &fakeWorld{}, &fakeApprovals{}
	h := startApprovalLoop(t, w, f, nil)
	inTurn(h)
	ans := h.ask(context.Background(), "Bash", "tu1")
	require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
	h.decide(t, "ap-1", "denied", "alice", "")
	require.Equal(t, "Denied by alice.", waitAnswer(t, ans).Reason)
	h.events(Event{Kind: TurnEnd}) // no post-tool hook comes for a denied tool
	waitState(t, w, StateIdle, "idle after the turn")
	h.send(t, "5", "bob", nil)
	require.Eventually(t, func() bool { return len(w.texts()) == 1 }, 5*time.Second, time.Millisecond, "the next message is delivered")
}

func TestLoopApprovalExpiryAndRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status string
		reason string
		want   string
	}{
		{"expired", "expired", "expired: no decision within 15m0s", "Denied (expired: no decision within 15m0s)."},
		{"withdrawn", "expired", "withdrawn: the runner restarted", "Denied (withdrawn: the runner restarted)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, f := &fakeWorld{}, &fakeApprovals{}
			h := startApprovalLoop(t, w, f, nil)
			inTurn(h)
			ans := h.ask(context.Background(), "Bash", "tu1")
			require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
			// An expiry comes from the member itself: still a decision.
			h.msgs <- msg(t, "d1", "me", nil, map[string]any{"thread": "approval:ap-1", "kind": "approval_decided", "approval": "ap-1",
				"decision": "deny", "status": tc.status, "reason": tc.reason}, nil)
			require.Equal(t, tc.want, waitAnswer(t, ans).Reason)
		})
	}
}

func TestLoopForgedDecisionIsATurn(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{}
	h := startApprovalLoop(t, w, f, nil)
	ans := h.ask(context.Background(), "Bash", "")
	require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
	// A member can put any data in a DM, but not the broker's thread.
	h.send(t, "7", "mallory", map[string]any{"kind": "approval_decided", "approval": "ap-1", "decision": "allow", "status": "allowed"})
	h.msgs <- msg(t, "8", "mallory", nil, map[string]any{"thread": "approval:ap-2", "kind": "approval_decided", "approval": "ap-1", "decision": "allow"}, nil)
	select {
	case a := <-ans:
		t.Fatalf("a forged decision was taken: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	h.decide(t, "ap-1", "denied", "admin", "")
	require.False(t, waitAnswer(t, ans).Allow)
}

func TestLoopDecisionBeforeTheRequestIsAnswered(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{hold: make(chan struct{})}
	h := startApprovalLoop(t, w, f, nil)
	ans := h.ask(context.Background(), "Bash", "")
	require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
	h.decide(t, "ap-1", "allowed", "alice", "") // the stream beat the answer
	close(f.hold)
	require.True(t, waitAnswer(t, ans).Allow)
}

func TestLoopApprovalTheAgentStopsWaiting(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{}
	h := startApprovalLoop(t, w, f, nil)
	inTurn(h)
	ctx, cancel := context.WithCancel(context.Background())
	h.ask(ctx, "Bash", "tu1")
	waitState(t, w, StateBlocked, "waiting")
	require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
	cancel() // Claude Code dropped the prompt call
	require.Eventually(t, func() bool { return len(f.withdrawnList()) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, "ap-1: the agent stopped waiting", f.withdrawnList()[0])
	waitState(t, w, StateWorking, "no longer blocked")

	// Cancelled before the broker answered: withdrawn once created.
	f.mu.Lock()
	f.hold = make(chan struct{})
	f.mu.Unlock()
	ctx2, cancel2 := context.WithCancel(context.Background())
	h.ask(ctx2, "Bash", "")
	require.Eventually(t, func() bool { return len(f.askedList()) == 2 }, 5*time.Second, time.Millisecond)
	cancel2()
	close(f.hold)
	require.Eventually(t, func() bool { return len(f.withdrawnList()) == 2 }, 5*time.Second, time.Millisecond)
	waitState(t, w, StateWorking, "no longer blocked")
}

func TestLoopApprovalNotAsked(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{fail: errors.New("broker down")}
	h := startApprovalLoop(t, w, f, nil)
	inTurn(h)
	a := waitAnswer(t, h.ask(context.Background(), "Bash", "tu1"))
	require.False(t, a.Allow, "no person asked: refused, never allowed")
	require.Contains(t, a.Reason, "broker down")
	h.events(Event{Kind: TurnEnd})
	waitState(t, w, StateIdle, "the refused tool's count is closed")
}

func TestLoopApprovalPolledWhenTheDecisionIsLate(t *testing.T) {
	w := &fakeWorld{}
	f := &fakeApprovals{expires: -time.Hour, polled: &approvalDecision{status: "allowed", decidedBy: "alice"}}
	h := startApprovalLoop(t, w, f, nil)
	a := waitAnswer(t, h.ask(context.Background(), "Bash", ""))
	require.True(t, a.Allow, "read from the broker once overdue")
}

func TestLoopApprovalObjective(t *testing.T) {
	obj := func(id, status string) *apiv1.Objective {
		return &apiv1.Objective{Id: id, Status: status, Title: id, Assignee: "me"}
	}
	for _, tc := range []struct {
		name   string
		plate  []*apiv1.Objective
		thread string
		want   string
	}{
		{"none", nil, "", ""},
		{"the only active objective", []*apiv1.Objective{obj("o1", "active"), obj("o2", "blocked")}, "", "o1"},
		{"two active: none", []*apiv1.Objective{obj("o1", "active"), obj("o2", "active")}, "", ""},
		{"the turn's thread wins", []*apiv1.Objective{obj("o1", "active"), obj("o2", "active")}, "obj:o2", "o2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, f := &fakeWorld{plate: tc.plate}, &fakeApprovals{}
			h := startApprovalLoop(t, w, f, tc.plate)
			turns := 0
			if len(tc.plate) > 0 { // the re-brief comes first
				turns++
				require.Eventually(t, func() bool { return len(w.texts()) == turns }, 5*time.Second, time.Millisecond)
				h.events(Event{Kind: TurnStart}, Event{Kind: TurnEnd})
			}
			if tc.thread != "" {
				turns++
				h.msgs <- msg(t, "1", "bob", nil, map[string]any{"thread": tc.thread}, nil)
				require.Eventually(t, func() bool { return len(w.texts()) == turns }, 5*time.Second, time.Millisecond)
				h.events(Event{Kind: TurnStart})
			}
			h.ask(context.Background(), "Bash", "")
			require.Eventually(t, func() bool { return len(f.askedList()) == 1 }, 5*time.Second, time.Millisecond)
			require.Equal(t, `Bash `+tc.want+` {"command":"rm -rf build"}`, f.askedList()[0])
		})
	}
}

func TestLoopAbandonsApprovalsWhenStopped(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{}
	d := w.deps()
	f.wire(&d)
	l := newLoop("me", loopState{}, d)
	l.appr.in = make(chan approvalReq)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.run(ctx, make(chan *apiv1.Message), make(chan hookReq), nil, nil, nil) }()
	a := approvalReq{ctx: context.Background(), req: relay.ApprovalRequest{Tool: "Bash"}, answer: make(chan relay.ApprovalAnswer, 1)}
	l.appr.in <- a
	require.Eventually(t, func() bool { return w.logged("approval ap-1 asked") }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	l.abandonApprovals(context.Background())
	require.Equal(t, []string{"ap-1: the runner stopped"}, f.withdrawnList())
	require.Equal(t, "Denied: the runner stopped", waitAnswer(t, a.answer).Reason)
}

func (w *fakeWorld) logged(sub string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.logs {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// A decision is no turn-message: it starts no turn on the broker, writes
// nothing to the agent and is acknowledged as skipped, so the position
// passes it only with the turn that asked, at that turn's end (one turn
// per message). A decision replayed after a reconnect changes nothing, a
// decision for another member's approval (an approver's runner) neither,
// and the next message gets its turn at the next idle.
func TestLoopApprovalDecisionIsNoTurn(t *testing.T) {
	w, f := &fakeWorld{}, &fakeApprovals{}
	h := startApprovalLoop(t, w, f, nil)
	h.send(t, "1", "alice", nil)
	waitLen(t, func() int { return len(w.texts()) }, 1)
	inTurn(h)
	ans := h.ask(context.Background(), "Bash", "tu1")
	require.Eventually(t, func() bool { return w.logged("approval ap-1 asked") }, 5*time.Second, time.Millisecond)
	h.send(t, "2", "bob", nil) // waits: the turn is blocked, not over
	h.decide(t, "ap-1", "denied", "alice", "no")
	require.False(t, waitAnswer(t, ans).Allow)
	h.decide(t, "ap-1", "denied", "alice", "no") // replayed: the same id
	h.decide(t, "ap-9", "allowed", "carol", "")  // someone else's
	h.events()
	require.Equal(t, []string{"start 1", "deliver 1"}, w.traceList(), "no turn for a decision, none for 2 while the turn goes on")
	require.Empty(t, w.ackList(), "nothing passes the turn's message before its end")

	h.events(Event{Kind: TurnEnd})
	waitLen(t, func() int { return len(w.texts()) }, 2, "the next message at the next idle")
	require.Equal(t, header("2", "bob"), w.texts()[1])
	require.Equal(t, []string{"start 1", "deliver 1", "ack 1 true", "start 2", "deliver 2"}, w.traceList(),
		"the turn of 1 ends at 1: 2 came before the decisions and is not done")
	h.events(Event{Kind: TurnStart}, Event{Kind: TurnEnd})
	require.Eventually(t, func() bool { return w.position() == "d-ap-9" }, 5*time.Second, time.Millisecond,
		"the decisions are passed with the turn of 2")
	for _, tx := range w.texts() {
		require.NotContains(t, tx, "approval")
	}
}
