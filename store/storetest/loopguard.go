package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// loopTests are the subtests of LoopStore; RunAll runs them.
var loopTests = []suiteTest{
	{"ActiveTurn", testActiveTurn},
	{"ActiveTurnInTx", testActiveTurnInTx},
	{"ReplyPath", testReplyPath},
	{"AddLoopStopOnce", testAddLoopStopOnce},
	{"ListAgents", testListAgents},
}

// A turn in progress is read with its message's place in the chain; a
// member with no turn, or whose runner never attached, has none.
func testActiveTurn(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent", "person")
	root := mustAppend(t, s, message("person", "dm:agent:person", "hello", 0))[0]
	reply := message("agent", "dm:agent:other", "relay", time.Second)
	reply.ReplyTo, reply.Hops, reply.Chain = root.Seq, 1, root.Seq
	hop := mustAppend(t, s, reply)[0]

	for _, member := range []string{"agent", "person", "nobody"} {
		_, ok, err := s.ActiveTurn(ctx, member)
		require.NoError(t, err)
		require.False(t, ok, "%s never attached", member)
	}
	_, err := s.UpdateDelivery(ctx, "agent", store.DeliveryUpdate{})
	require.NoError(t, err)
	_, ok, err := s.ActiveTurn(ctx, "agent")
	require.NoError(t, err)
	require.False(t, ok, "attached, no turn")

	tests := []struct {
		name    string
		turnSeq int64
		want    store.ActiveTurn
	}{
		{"a message that starts a chain", root.Seq, store.ActiveTurn{Seq: root.Seq, Hops: 0, Chain: root.Seq}},
		{"a message inside a chain", hop.Seq, store.ActiveTurn{Seq: hop.Seq, Hops: 1, Chain: root.Seq}},
		{"no message", 0, store.ActiveTurn{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.UpdateDelivery(ctx, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: tc.turnSeq})
			require.NoError(t, err)
			got, ok, err := s.ActiveTurn(ctx, "agent")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tc.want, got)
		})
	}

	_, err = s.UpdateDelivery(ctx, "agent", store.DeliveryUpdate{Turn: store.TurnEnded})
	require.NoError(t, err)
	_, ok, err = s.ActiveTurn(ctx, "agent")
	require.NoError(t, err)
	require.False(t, ok, "the turn ended")
}

// Inside a transaction, a turn started earlier in it is read.
func testActiveTurnInTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent")
	root := mustAppend(t, s, message("person", "dm:agent:person", "hello", 0))[0]
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.UpdateDelivery(ctx, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: root.Seq}); err != nil {
			return err
		}
		got, ok, err := tx.ActiveTurn(ctx, "agent")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.ActiveTurn{Seq: root.Seq, Chain: root.Seq}, got)
		return nil
	}))
}

// The path follows ReplyTo from a message back to the chain's first one,
// newest first, bounded by its limit.
func testReplyPath(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := mustAppend(t, s, message("person", "dm:a:person", "go", 0))[0]
	seqs := []int64{root.Seq}
	for i, from := range []string{"a", "b", "a", "b"} {
		m := message(from, "dm:a:b", "hop", time.Duration(i+1)*time.Second)
		m.ReplyTo, m.Hops, m.Chain = seqs[len(seqs)-1], i+1, root.Seq
		seqs = append(seqs, mustAppend(t, s, m)[0].Seq)
	}
	// A message outside the chain in between changes nothing.
	mustAppend(t, s, message("person", "chan:general", "noise", 10*time.Second))

	newest := seqs[len(seqs)-1]
	got, err := s.ReplyPath(ctx, newest, 100)
	require.NoError(t, err)
	require.Equal(t, reversed(seqs), seqsOf(got))
	require.Equal(t, []int{4, 3, 2, 1, 0}, hopsOf(got))
	require.Equal(t, "b", got[0].From)

	got, err = s.ReplyPath(ctx, newest, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{seqs[4], seqs[3]}, seqsOf(got), "bounded")

	got, err = s.ReplyPath(ctx, root.Seq, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{root.Seq}, seqsOf(got), "a message that replies to none")

	got, err = s.ReplyPath(ctx, newest+100, 10)
	require.NoError(t, err)
	require.Empty(t, got, "no such message")
}

func hopsOf(msgs []store.Message) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = m.Hops
	}
	return out
}

// A chain's stop is recorded once: the second of two stops, in one
// transaction or two, is not the first; a rolled back stop was never
// recorded.
func testAddLoopStopOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	first, err := s.AddLoopStop(ctx, store.LoopStop{Chain: 1, Message: 10, At: at(time.Second)})
	require.NoError(t, err)
	require.True(t, first)
	first, err = s.AddLoopStop(ctx, store.LoopStop{Chain: 1, Message: 11, At: at(2 * time.Second)})
	require.NoError(t, err)
	require.False(t, first, "the chain already stopped")

	err = s.WithTx(ctx, func(tx store.Tx) error {
		first, err := tx.AddLoopStop(ctx, store.LoopStop{Chain: 2, Message: 20})
		require.NoError(t, err)
		require.True(t, first)
		first, err = tx.AddLoopStop(ctx, store.LoopStop{Chain: 2, Message: 21})
		require.NoError(t, err)
		require.False(t, first, "twice in one transaction")
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	first, err = s.AddLoopStop(ctx, store.LoopStop{Chain: 2, Message: 22})
	require.NoError(t, err)
	require.True(t, first, "the rolled back stop was not recorded")

	_, err = s.AddLoopStop(ctx, store.LoopStop{Chain: 0, Message: 1})
	require.Error(t, err, "a chain is a message")
}

// The agents are the members whose runner attached; a deleted member's
// state goes with it.
func testListAgents(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "zed", "amy", "person")
	got, err := s.ListAgents(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	for _, m := range []string{"zed", "amy"} {
		_, err := s.UpdateDelivery(ctx, m, store.DeliveryUpdate{})
		require.NoError(t, err)
	}
	got, err = s.ListAgents(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"amy", "zed"}, got)
	require.NoError(t, s.DeleteMember(ctx, "zed"))
	got, err = s.ListAgents(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"amy"}, got)
}
