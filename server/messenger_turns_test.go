package server

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
	"svc/store"
)

// turnsStore counts the messenger's turn reads, holds the first
// AppendMessages until release is closed (so the changes behind it share
// one batch), and offers ActiveTurns only when batched is set.
type turnsStore struct {
	store.Store
	batched     bool
	release     chan struct{}
	appends     atomic.Int32
	activeTurn  atomic.Int32
	activeTurns atomic.Int32
}

func (s *turnsStore) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx store.Tx) error {
		if s.batched {
			return fn(batchedTurnsTx{countedTx{Tx: tx, s: s}})
		}
		return fn(countedTx{Tx: tx, s: s})
	})
}

// countedTx hides the store's ActiveTurns: the messenger reads each sender.
type countedTx struct {
	store.Tx
	s *turnsStore
}

func (t countedTx) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	if t.s.appends.Add(1) == 1 {
		<-t.s.release
	}
	return t.Tx.AppendMessages(ctx, msgs)
}

func (t countedTx) ActiveTurn(ctx context.Context, member string) (store.ActiveTurn, bool, error) {
	t.s.activeTurn.Add(1)
	return t.Tx.ActiveTurn(ctx, member)
}

type batchedTurnsTx struct{ countedTx }

func (t batchedTurnsTx) ActiveTurns(ctx context.Context, members []string) (map[string]store.ActiveTurn, error) {
	t.s.activeTurns.Add(1)
	return t.Tx.(turnsReader).ActiveTurns(ctx, members)
}

// stamp is what the loop guard decided for a stored message.
type stamp struct {
	Seq                int64
	From, Body         string
	ReplyTo, Hops      int64
	Chain              int64
	LoopStopped, Found bool
}

// One batch of plain pushes from agents in a turn, an idle agent, a person
// and a hook, then a change that starts a turn, then more pushes: read in
// one statement per stretch between changes, every message is stamped as
// when each sender is read alone, and the senders are not read one by one.
func TestBatchTurnReadsStampAsSingleReads(t *testing.T) {
	run := func(t *testing.T, batched bool) ([]stamp, *turnsStore) {
		ctx := t.Context()
		ts := &turnsStore{Store: mustMemStore(t), batched: batched, release: make(chan struct{})}
		for _, n := range []string{"alice", "bob", "carol", "dave"} {
			require.NoError(t, ts.PutMember(ctx, store.Member{Name: n}))
		}
		root, err := ts.AppendMessages(ctx, []store.Message{{From: "carol", Thread: dmThread("alice", "carol"), Body: "root", Level: "info", CreatedAt: time.Now()}})
		require.NoError(t, err)
		rootSeq := root[0].Seq
		_, err = ts.UpdateDelivery(ctx, "alice", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: rootSeq})
		require.NoError(t, err)
		for _, n := range []string{"bob", "dave"} {
			_, err = ts.UpdateDelivery(ctx, n, store.DeliveryUpdate{})
			require.NoError(t, err)
		}
		m := mustMessenger(t, ts, hub.New())

		var wg sync.WaitGroup
		queued := 0
		submit := func(f func() committed) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				require.NoError(t, f().err)
			}()
		}
		push := func(from, body string) {
			msg, pm := dm(from, "carol", body)
			if from == "carol" {
				msg, pm = dm(from, "alice", body)
			}
			submit(func() committed { return m.push(context.Background(), nil, &msg, pm) })
			queued++
			require.Eventually(t, func() bool { return m.queue.Len() == queued }, 5*time.Second, time.Millisecond)
		}
		// The first push holds the committer in its transaction; the rest
		// queue behind it, in this order, and commit as one batch.
		msg, pm := dm("carol", "alice", "first")
		submit(func() committed { return m.push(context.Background(), nil, &msg, pm) })
		require.Eventually(t, func() bool { return ts.appends.Load() == 1 }, 5*time.Second, time.Millisecond)
		push("alice", "a1")
		push("carol", "c1")
		hook := store.Message{From: "hook:ci", Thread: "chan:general", Body: "h1", Level: "info", All: true}
		submit(func() committed {
			return m.change(context.Background(), nil, &hook, &apiv1.Message{From: hook.From, Body: hook.Body})
		})
		queued++
		require.Eventually(t, func() bool { return m.queue.Len() == queued }, 5*time.Second, time.Millisecond)
		push("bob", "b1")
		push("alice", "a2")
		submit(func() committed {
			return m.change(context.Background(), func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
				_, err := tx.UpdateDelivery(ctx, "dave", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: rootSeq})
				return nil, err
			}, nil, nil)
		})
		queued++
		require.Eventually(t, func() bool { return m.queue.Len() == queued }, 5*time.Second, time.Millisecond)
		push("dave", "d1")
		push("alice", "a3")
		push("bob", "b2")
		close(ts.release)
		wg.Wait()
		require.Equal(t, int32(2), ts.appends.Load(), "everything behind the first push committed in one batch")

		var got []store.Message
		for _, thread := range []string{dmThread("alice", "carol"), dmThread("bob", "carol"), dmThread("carol", "dave"), "chan:general"} {
			msgs, err := ts.ListMessages(ctx, store.MessageFilter{Thread: thread, Limit: 100})
			require.NoError(t, err)
			got = append(got, msgs...)
		}
		slices.SortFunc(got, func(a, b store.Message) int { return cmp.Compare(a.Seq, b.Seq) })
		require.Len(t, got, 10)
		var out []stamp
		for _, g := range got {
			out = append(out, stamp{Seq: g.Seq, From: g.From, Body: g.Body, ReplyTo: g.ReplyTo, Hops: int64(g.Hops), Chain: g.Chain, LoopStopped: g.LoopStopped, Found: true})
		}
		return out, ts
	}
	single, st := run(t, false)
	require.Equal(t, int32(0), st.activeTurns.Load())
	require.Equal(t, int32(7), st.activeTurn.Load(), "carol for the first push; then alice, carol, bob; then dave, alice, bob")
	batch, bt := run(t, true)
	require.Equal(t, single, batch)
	require.Equal(t, int32(3), bt.activeTurns.Load(), "one read per stretch: the first push's, and one on each side of the change")
	require.Equal(t, int32(0), bt.activeTurn.Load(), "no sender is read alone")

	// The stamps themselves: alice and dave (once its turn started) reply
	// to the root; everyone else starts a chain.
	byBody := map[string]stamp{}
	for _, s := range batch {
		byBody[s.Body] = s
	}
	for _, body := range []string{"a1", "a2", "a3", "d1"} {
		require.Equal(t, int64(1), byBody[body].Hops, body)
		require.Equal(t, byBody["root"].Seq, byBody[body].Chain, body)
		require.Equal(t, byBody["root"].Seq, byBody[body].ReplyTo, body)
	}
	for _, body := range []string{"first", "c1", "h1", "b1", "b2"} {
		require.Zero(t, byBody[body].Hops, body)
		require.Zero(t, byBody[body].ReplyTo, body)
	}
}
