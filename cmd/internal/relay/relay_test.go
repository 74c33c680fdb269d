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
