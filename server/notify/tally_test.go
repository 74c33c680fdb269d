package notify

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestHookTallyTouch: every receipt is touched once, in the order it was
// first touched, however often the pipeline touches it (by note, by the
// messages it owns, or directly).
func TestHookTallyTouch(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *hookTally)
		want []string
	}{
		{"none", func(*hookTally) {}, nil},
		{"once each", func(t *hookTally) { t.touch("a"); t.touch("b") }, []string{"a", "b"}},
		{"again", func(t *hookTally) { t.touch("b"); t.touch("a"); t.touch("b"); t.touch("a") }, []string{"b", "a"}},
		{"by note and message", func(t *hookTally) {
			t.note("c", "x")
			t.add(store.Message{}, "a", "c")
			t.add(store.Message{}, "b")
			t.touch("a")
			t.note("b", "y")
		}, []string{"c", "a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tally := (&Service{d: Deps{}}).newTally()
			tc.run(tally)
			require.Equal(t, tc.want, tally.touched)
		})
	}
}

// BenchmarkHookTallyTouch is a flush of n queued receipts, each touched
// once by its message and again when finished.
func BenchmarkHookTallyTouch(b *testing.B) {
	for _, n := range []int{256, 4096} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("receipt-%d", i)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				t := (&Service{d: Deps{}}).newTally()
				for _, id := range ids {
					t.add(store.Message{}, id)
				}
				for _, id := range ids {
					t.touch(id)
				}
			}
		})
	}
}

// readsStore counts the reads of a receipt and of its pending rows made
// in its transactions.
type readsStore struct {
	store.Store
	reads *atomic.Int64
}

func (s readsStore) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx store.Tx) error { return fn(readsTx{tx, s.reads}) })
}

type readsTx struct {
	store.Tx
	reads *atomic.Int64
}

func (tx readsTx) GetHookDelivery(ctx context.Context, id string) (store.HookDelivery, error) {
	tx.reads.Add(1)
	return tx.Tx.GetHookDelivery(ctx, id)
}

func (tx readsTx) CountHookPending(ctx context.Context, delivery string) (int, error) {
	tx.reads.Add(1)
	return tx.Tx.CountHookPending(ctx, delivery)
}

// TestFreshReceiptIsNotReadBack: the commit of a verified delivery that
// is not debounced decides its receipt's status from what it wrote
// (the receipt, the pending rows it held) without reading either back,
// and decides as a read would: delivered, pending, dropped with its
// reasons.
func TestFreshReceiptIsNotReadBack(t *testing.T) {
	tests := []struct {
		name, query string
		online      bool
		to          []string
		status      string
		reason      string
		pending     int
	}{
		{"delivered", "", true, []string{"alice"}, StatusDelivered, "", 0},
		{"queued", "if_offline=queue", false, []string{"alice"}, StatusPending, "", 1},
		{"queued for two", "if_offline=queue", false, []string{"alice", "bob"}, StatusPending, "", 2},
		{"dropped offline", "if_offline=drop", false, []string{"alice"}, StatusDropped,
			"copy for alice dropped: offline (ifOffline drop)", 0},
		{"one delivered, one queued", "if_offline=queue", true, []string{"alice", "bob"}, StatusPending, "", 1},
		{"channel only", "", false, []string{"#ops"}, StatusDelivered, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reads := &atomic.Int64{}
			e := &policyEnv{newHookEnvOn(t, readsStore{memStore(t), reads}, false)}
			e.endpoint(t, "h", nil, tc.to...)
			if tc.online {
				e.online(t, "alice")
			}
			reads.Store(0)
			res := e.post(t, "h", tc.query, `{"n":1}`)
			require.Zero(t, reads.Load(), "receipt or pending rows read back")
			require.Equal(t, tc.status, res.Status)
			d := e.receipt(t, res.ID)
			require.Equal(t, tc.status, d.Status)
			require.Equal(t, tc.reason, d.Reason)
			left, err := e.st.CountHookPending(context.Background(), res.ID)
			require.NoError(t, err)
			require.Equal(t, tc.pending, left)
		})
	}
}
