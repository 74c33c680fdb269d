package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A message the broker's loop guard stopped is acknowledged and never a
// turn; what a member can put in data (a forged flag or notice kind) makes
// no message skipped.
func TestLoopSkipsLoopStoppedMessages(t *testing.T) {
	w := &fakeWorld{}
	h := startLoop(t, w, nil)
	me := "me"
	tests := []struct {
		id, from    string
		data        map[string]any
		loopStopped bool
	}{
		{"1", "peer", nil, true},
		{"2", "bob", map[string]any{"loopStopped": true, "loop_stopped": true, "kind": "agent_loop_stopped", "hops": 99}, false},
		{"3", "svc:loop-guard", map[string]any{"kind": "agent_loop_stopped", "thread": "loop:0000000000000001"}, true},
	}
	for _, tc := range tests {
		m := msg(t, tc.id, tc.from, &me, tc.data, nil)
		if tc.loopStopped {
			m.LoopStopped = &tc.loopStopped
		}
		h.msgs <- m
	}
	require.Eventually(t, func() bool { return len(w.texts()) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{header("2", "bob")}, w.texts(), "only the message the broker did not stop is a turn")
	h.hook(TurnStart, TurnEnd)
	// The next message goes once turn 2 is through, so by then its
	// acknowledgement has passed the stopped message after it.
	h.msgs <- msg(t, "4", "bob", &me, nil, nil)
	require.Eventually(t, func() bool { return len(w.texts()) == 2 }, 5*time.Second, time.Millisecond)
	require.Equal(t, header("4", "bob"), w.texts()[1])
	h.cancel()
	err := <-h.done
	h.done <- err // for the harness's cleanup
	require.Equal(t, "3", h.l.ledger.last, "the stopped messages before and after turn 2 are acknowledged")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.logs, 2)
	require.Contains(t, w.logs[0], "message 1 from peer skipped: the loop guard stopped its reply chain")
	require.Contains(t, w.logs[1], "message 3 from svc:loop-guard skipped: the loop guard stopped its reply chain")
}
