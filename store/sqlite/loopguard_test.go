package sqlite

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// ActiveTurns answers for a set of members what ActiveTurn answers for each:
// a turn on a message that starts a chain, one inside a chain, one without
// a message, an attached member with no turn, a member whose runner never
// attached, a name that is no member, and a name given twice. In and out
// of a transaction (the messenger asks inside its commit).
func TestActiveTurnsMatchActiveTurn(t *testing.T) {
	ctx := t.Context()
	db := MustOpen(t, tempPath(t, "svc.db"))
	for _, n := range []string{"root", "hop", "bare", "idle", "person", `q"u<o>te`} {
		require.NoError(t, db.PutMember(ctx, store.Member{Name: n}))
	}
	base := time.UnixMilli(1_700_000_000_000)
	root, err := db.AppendMessages(ctx, []store.Message{{From: "person", Thread: "dm:person:root", Body: "go", Level: "info", CreatedAt: base}})
	require.NoError(t, err)
	reply := store.Message{From: "root", Thread: "dm:hop:root", Body: "relay", Level: "info", CreatedAt: base.Add(time.Second),
		ReplyTo: root[0].Seq, Hops: 1, Chain: root[0].Seq}
	hop, err := db.AppendMessages(ctx, []store.Message{reply})
	require.NoError(t, err)
	for member, u := range map[string]store.DeliveryUpdate{
		"root":     {Turn: store.TurnStarted, TurnSeq: root[0].Seq},
		"hop":      {Turn: store.TurnStarted, TurnSeq: hop[0].Seq},
		"bare":     {Turn: store.TurnStarted},
		"idle":     {},
		`q"u<o>te`: {Turn: store.TurnStarted, TurnSeq: root[0].Seq},
	} {
		_, err := db.UpdateDelivery(ctx, member, u)
		require.NoError(t, err)
	}
	members := []string{"root", "hop", "bare", "idle", "person", "nobody", "root", `q"u<o>te`, ""}

	check := func(t *testing.T, tx store.Tx) {
		got, err := tx.(queries).ActiveTurns(ctx, members)
		require.NoError(t, err)
		want := map[string]store.ActiveTurn{}
		for _, m := range members {
			turn, ok, err := tx.ActiveTurn(ctx, m)
			require.NoError(t, err)
			if ok {
				want[m] = turn
			}
		}
		require.Equal(t, want, got)
		require.Len(t, got, 4, "root, hop, bare and the quoted name are in a turn")
	}
	t.Run("in a transaction", func(t *testing.T) {
		require.NoError(t, db.WithTx(ctx, func(tx store.Tx) error { check(t, tx); return nil }))
	})
	t.Run("outside", func(t *testing.T) { check(t, db.queries) })
	t.Run("a turn started in the transaction", func(t *testing.T) {
		rollback := errors.New("roll back")
		require.ErrorIs(t, db.WithTx(ctx, func(tx store.Tx) error {
			_, err := tx.UpdateDelivery(ctx, "idle", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: hop[0].Seq})
			require.NoError(t, err)
			got, err := tx.(queries).ActiveTurns(ctx, []string{"idle"})
			require.NoError(t, err)
			require.Equal(t, map[string]store.ActiveTurn{"idle": {Seq: hop[0].Seq, Hops: 1, Chain: root[0].Seq}}, got)
			return rollback
		}), rollback)
	})
	t.Run("no members", func(t *testing.T) {
		got, err := db.ActiveTurns(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("a name that is not UTF-8 is refused, not looked up as another", func(t *testing.T) {
		_, err := db.ActiveTurns(ctx, []string{"root", "ro\xffot"})
		require.Error(t, err)
	})
}
