package relay

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHookReachesTheRunnerBeforeTheAck(t *testing.T) {
	var mu sync.Mutex
	var got []string
	s, err := Listen("", func(p json.RawMessage) {
		time.Sleep(20 * time.Millisecond) // the hook waits for this
		mu.Lock()
		got = append(got, string(p))
		mu.Unlock()
	})
	require.NoError(t, err)
	defer s.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, SendHook(ctx, s.Path(), []byte("{\n \"hook_event_name\": \"Stop\"\n}")))
	mu.Lock()
	require.Equal(t, []string{`{"hook_event_name":"Stop"}`}, got, "applied, compacted, before SendHook returned")
	mu.Unlock()

	require.Error(t, SendHook(ctx, s.Path(), []byte("not json")))
}

func TestEventsReachEverySubscriberUntilClose(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Subscribe(ctx, s.Path())
	require.NoError(t, err)
	b, err := Subscribe(ctx, s.Path())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Subscribers() == 2 }, 5*time.Second, 5*time.Millisecond)

	ev := Event{Kind: "tool_source", Thread: "tool:gh"}
	s.Publish(ev)
	for _, ch := range []<-chan Event{a, b} {
		select {
		case got := <-ch:
			require.Equal(t, ev, got)
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
	}

	require.NoError(t, s.Close())
	for _, ch := range []<-chan Event{a, b} {
		select {
		case _, ok := <-ch:
			require.False(t, ok, "closed when the runner goes away")
		case <-time.After(5 * time.Second):
			t.Fatal("not closed")
		}
	}
}

func TestSubscriberLeavingIsForgotten(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := Subscribe(ctx, s.Path())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Subscribers() == 1 }, 5*time.Second, 5*time.Millisecond)
	cancel()
	for range ch {
	}
	require.Eventually(t, func() bool { return s.Subscribers() == 0 }, 5*time.Second, 5*time.Millisecond)
	s.Publish(Event{Kind: "secret"}) // nobody left: no panic, no block
}

func TestApprovalIsAnsweredWithTheDecision(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err = RequestApproval(ctx, s.Path(), ApprovalRequest{Tool: "Bash"})
	require.Error(t, err, "refused while no approver is set")

	got := make(chan ApprovalRequest, 1)
	s.SetApprover(func(_ context.Context, r ApprovalRequest) ApprovalAnswer {
		got <- r
		return ApprovalAnswer{Allow: r.Tool == "Read", Reason: "only reads", Approval: "a1", DecidedBy: "alice"}
	})
	for _, tc := range []struct {
		name string
		req  ApprovalRequest
		want ApprovalAnswer
	}{
		{"allowed", ApprovalRequest{Tool: "Read", Input: json.RawMessage(`{"file_path":"/x"}`), ToolUseID: "toolu_1"},
			ApprovalAnswer{Allow: true, Reason: "only reads", Approval: "a1", DecidedBy: "alice"}},
		{"denied", ApprovalRequest{Tool: "Write"}, ApprovalAnswer{Reason: "only reads", Approval: "a1", DecidedBy: "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans, err := RequestApproval(ctx, s.Path(), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, ans)
			require.Equal(t, tc.req, <-got)
		})
	}
}

func TestApprovalClientGoneCancelsTheApprover(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	defer s.Close()
	started, cancelled := make(chan struct{}), make(chan struct{})
	s.SetApprover(func(ctx context.Context, _ ApprovalRequest) ApprovalAnswer {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return ApprovalAnswer{}
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := RequestApproval(ctx, s.Path(), ApprovalRequest{Tool: "Bash"})
		errc <- err
	}()
	waitClosed(t, started, "the approver was called")
	cancel() // the agent stops waiting
	waitClosed(t, cancelled, "the approver's context ended with the client")
	require.ErrorIs(t, <-errc, context.Canceled)
}

func TestApprovalEndsWhenTheRelayCloses(t *testing.T) {
	s, err := Listen("", nil)
	require.NoError(t, err)
	started := make(chan struct{})
	s.SetApprover(func(ctx context.Context, _ ApprovalRequest) ApprovalAnswer {
		close(started)
		<-ctx.Done()
		return ApprovalAnswer{}
	})
	errc := make(chan error, 1)
	go func() {
		_, err := RequestApproval(context.Background(), s.Path(), ApprovalRequest{Tool: "Bash"})
		errc <- err
	}()
	waitClosed(t, started, "the approver was called")
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	waitClosed(t, closed, "Close returned with an approval waiting")
	select {
	case err := <-errc:
		require.Error(t, err, "no decision: the runner went away")
	case <-time.After(5 * time.Second):
		t.Fatal("the client still waits")
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("not done within 5s: %s", what)
	}
}
