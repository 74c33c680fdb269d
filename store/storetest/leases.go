package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// leaseTests are the subtests of LeaseStore; RunAll runs them.
var leaseTests = []suiteTest{
	{"LeaseTakeRenewExpire", testLeaseTakeRenewExpire},
	{"LeaseFencesOldEpoch", testLeaseFencesOldEpoch},
	{"LeaseRejectsEmpty", testLeaseRejectsEmpty},
}

// A free lease is taken at epoch 1; its holder renews it at the same
// epoch; another broker is refused while it runs and takes it over, at
// the next epoch, once it lapsed; the old holder is then refused.
func testLeaseTakeRenewExpire(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	ttl := 15 * time.Second

	l, ok, err := s.TakeLease(ctx, "hooks", "a", t0, ttl)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.Lease{Name: "hooks", Owner: "a", Epoch: 1, ExpiresAt: t0.Add(ttl)}, l)

	l, ok, err = s.TakeLease(ctx, "hooks", "b", t0.Add(ttl-time.Millisecond), ttl)
	require.NoError(t, err)
	require.False(t, ok, "held by a until it lapses")
	require.Equal(t, store.Lease{Name: "hooks", Owner: "a", Epoch: 1, ExpiresAt: t0.Add(ttl)}, l)

	l, ok, err = s.TakeLease(ctx, "hooks", "a", t0.Add(5*time.Second), ttl)
	require.NoError(t, err)
	require.True(t, ok, "a renews")
	require.Equal(t, store.Lease{Name: "hooks", Owner: "a", Epoch: 1, ExpiresAt: t0.Add(20 * time.Second)}, l)

	l, ok, err = s.TakeLease(ctx, "hooks", "b", t0.Add(19*time.Second), ttl)
	require.NoError(t, err)
	require.False(t, ok, "the renewal moved the lapse")
	require.Equal(t, "a", l.Owner)

	at := t0.Add(20*time.Second + time.Millisecond)
	l, ok, err = s.TakeLease(ctx, "hooks", "b", at, ttl)
	require.NoError(t, err)
	require.True(t, ok, "b takes over once a's time ran out")
	require.Equal(t, store.Lease{Name: "hooks", Owner: "b", Epoch: 2, ExpiresAt: at.Add(ttl)}, l)

	l, ok, err = s.TakeLease(ctx, "hooks", "a", at.Add(time.Second), ttl)
	require.NoError(t, err)
	require.False(t, ok, "a, back from a pause, is refused")
	require.Equal(t, int64(2), l.Epoch)

	// Another name is another lease.
	l, ok, err = s.TakeLease(ctx, "other", "a", at, ttl)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1), l.Epoch)
}

// A transaction that checks the lease's epoch writes nothing once
// another holder took it: the old holder is fenced off.
func testLeaseFencesOldEpoch(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	old, ok, err := s.TakeLease(ctx, "hooks", "a", t0, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	held, err := s.HoldsLease(ctx, "hooks", "a", old.Epoch)
	require.NoError(t, err)
	require.True(t, held)

	_, ok, err = s.TakeLease(ctx, "hooks", "b", t0.Add(2*time.Second), time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	for _, c := range []struct {
		owner string
		epoch int64
	}{{"a", old.Epoch}, {"b", old.Epoch}, {"a", old.Epoch + 1}, {"nobody", 1}} {
		held, err := s.HoldsLease(ctx, "hooks", c.owner, c.epoch)
		require.NoError(t, err)
		require.False(t, held, "%s at epoch %d", c.owner, c.epoch)
	}
	held, err = s.HoldsLease(ctx, "hooks", "b", old.Epoch+1)
	require.NoError(t, err)
	require.True(t, held)

	// The fenced write: checked in the transaction, the old epoch's write
	// is refused and rolled back.
	errLost := errLeaseLost{}
	err = s.WithTx(ctx, func(tx store.Tx) error {
		if err := tx.PutMeta(ctx, "fenced", "written"); err != nil {
			return err
		}
		held, err := tx.HoldsLease(ctx, "hooks", "a", old.Epoch)
		if err != nil {
			return err
		}
		if !held {
			return errLost
		}
		return nil
	})
	require.ErrorIs(t, err, errLost)
	_, err = s.GetMeta(ctx, "fenced")
	require.ErrorIs(t, err, store.ErrNotFound, "the old holder's write is rolled back")
}

type errLeaseLost struct{}

func (errLeaseLost) Error() string { return "lease lost" }

func testLeaseRejectsEmpty(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	for _, c := range []struct {
		name, owner string
		ttl         time.Duration
	}{{"", "a", time.Second}, {"hooks", "", time.Second}, {"hooks", "a", 0}} {
		_, _, err := s.TakeLease(ctx, c.name, c.owner, now, c.ttl)
		require.Error(t, err, "%+v", c)
	}
}
