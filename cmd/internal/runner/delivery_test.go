package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
)

// fakeBroker records UpdateDelivery calls; fail, when set, answers each.
type fakeBroker struct {
	mu    sync.Mutex
	calls []string
	fail  func(req *apiv1.UpdateDeliveryRequest) error
	// gate, when set, holds each call until it is closed.
	gate chan struct{}
}

func (b *fakeBroker) update(ctx context.Context, req *apiv1.UpdateDeliveryRequest) error {
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		if err := b.fail(req); err != nil {
			return err
		}
	}
	b.calls = append(b.calls, fmt.Sprintf("%s %s %s", req.GetTurn(), req.GetPosition(), req.GetTurnMessageId()))
	return nil
}

func (b *fakeBroker) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

func runAcker(t *testing.T, b *fakeBroker) *acker {
	a := newAcker("me", b.update, func(string, ...any) {})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// The broker sees the changes in order; a turn start waits for the
// acknowledgements before it, and those that queue up behind one under way
// go as one update.
func TestAckerOrdersAndMerges(t *testing.T) {
	b := &fakeBroker{gate: make(chan struct{})}
	a := runAcker(t, b)
	a.add(ack{position: "1", ended: true}) // taken at once, held at the gate
	time.Sleep(20 * time.Millisecond)
	a.add(ack{position: "2"})
	a.add(ack{position: "3"})
	a.add(ack{ended: true})
	started := make(chan error, 1)
	go func() { started <- a.startTurn(context.Background(), "4") }()
	time.Sleep(20 * time.Millisecond)
	a.add(ack{position: "4", ended: true})
	close(b.gate)
	require.NoError(t, <-started)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.flush(ctx)
	require.Equal(t, []string{
		"TURN_PHASE_ENDED 1 ",
		"TURN_PHASE_ENDED 3 ", // 2, 3 and an end, merged
		"TURN_PHASE_STARTED  4",
		"TURN_PHASE_ENDED 4 ",
	}, b.list())
}

// An acknowledgement the broker does not take is sent again, and what comes
// after it waits: the broker never sees a turn start before the previous
// turn's end. One refused for good is dropped.
func TestAckerRetriesInOrder(t *testing.T) {
	var n int
	b := &fakeBroker{fail: func(req *apiv1.UpdateDeliveryRequest) error {
		switch {
		case req.GetPosition() == "bad":
			return status.Error(codes.InvalidArgument, "no message bad")
		case req.GetTurn() == apiv1.TurnPhase_TURN_PHASE_ENDED && n < 2:
			n++
			return status.Error(codes.Unavailable, "broker restarting")
		}
		return nil
	}}
	a := runAcker(t, b)
	a.add(ack{position: "bad"})
	a.add(ack{position: "1", ended: true})
	require.NoError(t, a.startTurn(context.Background(), "2"))
	require.Equal(t, []string{"TURN_PHASE_ENDED 1 ", "TURN_PHASE_STARTED  2"}, b.list())

	// A start the broker refuses is the caller's error.
	b.fail = func(*apiv1.UpdateDeliveryRequest) error { return status.Error(codes.Unavailable, "down") }
	require.Error(t, a.startTurn(context.Background(), "3"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.startTurn(ctx, "3"), context.Canceled)
}

func TestStartState(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		name string
		st   *apiv1.DeliveryState
		want loopState
	}{
		{"resumes after the position", &apiv1.DeliveryState{Position: s("7")}, loopState{position: "7"}},
		{"an open turn is delivered again", &apiv1.DeliveryState{Position: s("7"), TurnActive: true, TurnMessageId: s("9")},
			loopState{position: "7", redeliver: "9"}},
		{"an open turn with no message", &apiv1.DeliveryState{Position: s("7"), TurnActive: true}, loopState{position: "7"}},
		{"a first start replays the backlog", &apiv1.DeliveryState{BacklogAfter: s("0000000000000000")}, loopState{position: "0000000000000000"}},
		{"and says what its bound left out", &apiv1.DeliveryState{BacklogAfter: s("12"), BacklogOmitted: 3},
			loopState{position: "12", note: BacklogNote(3)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, startState(tc.st))
		})
	}
}

// historyBroker answers History from a fixed thread per objective.
type historyBroker struct {
	apiv1.BrokerClient
	threads map[string][]*apiv1.Message // newest first
	calls   int
}

func (b *historyBroker) History(_ context.Context, req *apiv1.HistoryRequest, _ ...grpc.CallOption) (*apiv1.HistoryResponse, error) {
	b.calls++
	msgs, ok := b.threads[req.GetThread()]
	if !ok {
		return nil, errors.New("not found")
	}
	var out []*apiv1.Message
	for _, m := range msgs {
		if req.GetBeforeId() == "" || idAfter(req.GetBeforeId(), m.GetId()) {
			out = append(out, m)
		}
		if len(out) == int(req.GetLimit()) {
			break
		}
	}
	return &apiv1.HistoryResponse{Messages: out}, nil
}

func objEvent(t *testing.T, id, from, event string, payload map[string]any) *apiv1.Message {
	t.Helper()
	data, err := structpb.NewStruct(map[string]any{"kind": "objective_event", "event": event, "payload": payload})
	require.NoError(t, err)
	return &apiv1.Message{Id: id, From: from, Data: data}
}

// The lifecycle messages of open objectives that the replay will deliver
// are covered by the re-brief (skipped): one turn for an objective assigned
// while the runner was down. Only those after the position, only lifecycle
// events, only for objectives the re-brief shows.
func TestReplayedEventsAreCoveredByTheRebrief(t *testing.T) {
	id := func(n int) string { return fmt.Sprintf("%016d", n) }
	long := []*apiv1.Message{}
	for n := 1300; n > 20; n-- { // newest first; its assignment is on the third page
		m := &apiv1.Message{Id: id(n), From: "alice"}
		if n == 21 {
			m = objEvent(t, id(n), "admin", "assigned", nil)
		}
		long = append(long, m)
	}
	b := &historyBroker{threads: map[string][]*apiv1.Message{
		"obj:old":     {objEvent(t, id(3), "admin", "assigned", nil)},
		"obj:new":     {{Id: id(12), From: "alice", Body: "a discussion post"}, objEvent(t, id(11), "admin", "assigned", nil)},
		"obj:moved":   {objEvent(t, id(14), "admin", "reassigned", map[string]any{"from": "bob", "to": "me"}), objEvent(t, id(4), "admin", "assigned", nil)},
		"obj:blocked": {objEvent(t, id(16), "bob", "blocked", nil), objEvent(t, id(2), "admin", "assigned", nil)},
		"obj:long":    long,
	}}
	var plate []*apiv1.Objective
	for _, o := range []string{"old", "new", "moved", "blocked", "long", "unreadable"} {
		plate = append(plate, &apiv1.Objective{Id: o})
	}
	got := replayedEvents(context.Background(), b, id(10), plate)
	require.Equal(t, map[string]string{id(11): "new", id(14): "moved", id(16): "blocked", id(21): "long"}, got)

	// The plate the re-brief shows decides: moved went to someone else
	// meanwhile, so its event is a turn.
	now := []*apiv1.Objective{{Id: "new"}, {Id: "blocked"}, {Id: "long"}}
	require.Equal(t, map[string]bool{id(11): true, id(16): true, id(21): true}, coveredBy(got, now))

	require.Nil(t, replayedEvents(context.Background(), b, "", plate), "a live start replays nothing")
	require.Len(t, replayedEvents(context.Background(), b, id(0), plate), 7, "a backlog from the start replays every event")
}

func TestIDAfter(t *testing.T) {
	tests := []struct {
		id, after string
		want      bool
	}{
		{"0000000000000011", "0000000000000010", true},
		{"0000000000000010", "0000000000000010", false},
		{"0000000000000009", "0000000000000010", false},
		{"10000000000000000", "9999999999999999", true},
		{"0000000000000001", "0", true},
		{"0000000000000001", "", true},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, idAfter(tc.id, tc.after), "%s after %s", tc.id, tc.after)
	}
}
