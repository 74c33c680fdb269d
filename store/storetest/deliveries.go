package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// deliveryTests are the subtests of DeliveryStore; RunAll runs them.
var deliveryTests = []suiteTest{
	{"DeliveryAbsentUntilAttach", testDeliveryAbsentUntilAttach},
	{"DeliveryTurns", testDeliveryTurns},
	{"DeliveryPositionNeverBackwards", testDeliveryPositionNeverBackwards},
	{"DeliveryGoesWithMember", testDeliveryGoesWithMember},
	{"DeliveryInTx", testDeliveryInTx},
	{"DeliveryBacklog", testDeliveryBacklog},
	{"DeliveryBacklogAge", testDeliveryBacklogAge},
	{"DeliveryBacklogOmittedCap", testDeliveryBacklogOmittedCap},
}

// deliveryView is a Delivery with comparable times.
type deliveryView struct {
	Member                                    string
	Position, TurnSeq                         int64
	TurnActive                                bool
	TurnStartedAt, FirstAttachedAt, UpdatedAt int64
}

func viewDelivery(d store.Delivery) deliveryView {
	return deliveryView{
		Member: d.Member, Position: d.Position, TurnSeq: d.TurnSeq, TurnActive: d.TurnActive,
		TurnStartedAt: ms(d.TurnStartedAt), FirstAttachedAt: ms(d.FirstAttachedAt), UpdatedAt: ms(d.UpdatedAt),
	}
}

func mustUpdateDelivery(t *testing.T, s store.DeliveryStore, member string, u store.DeliveryUpdate) deliveryView {
	t.Helper()
	d, err := s.UpdateDelivery(t.Context(), member, u)
	require.NoError(t, err)
	got, err := s.GetDelivery(t.Context(), member)
	require.NoError(t, err)
	require.Equal(t, viewDelivery(d), viewDelivery(got), "UpdateDelivery answers what GetDelivery reads")
	return viewDelivery(d)
}

// A member has no delivery state until an update (its runner's attach)
// creates one; an update of an unknown member is ErrNotFound.
func testDeliveryAbsentUntilAttach(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent")
	_, err := s.GetDelivery(ctx, "agent")
	require.ErrorIs(t, err, store.ErrNotFound)

	got := mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{At: at(time.Second)})
	require.Equal(t, deliveryView{Member: "agent", FirstAttachedAt: ms(at(time.Second)), UpdatedAt: ms(at(time.Second))}, got,
		"an empty update records the attach and nothing else")

	got = mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{At: at(time.Minute)})
	require.Equal(t, ms(at(time.Second)), got.FirstAttachedAt, "the first attach stays")
	require.Equal(t, ms(at(time.Minute)), got.UpdatedAt)

	_, err = s.UpdateDelivery(ctx, "nobody", store.DeliveryUpdate{Position: 1})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetDelivery(ctx, "nobody")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A started turn is active with its message (or none) until it ends; an
// update without a phase leaves the turn alone.
func testDeliveryTurns(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "agent", "other")
	msgs := mustAppend(t, s, message("alice", "dm:agent:alice", "one", 0), message("alice", "dm:agent:alice", "two", 0))
	one, two := msgs[0].Seq, msgs[1].Seq

	got := mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: one, At: at(time.Second)})
	require.Equal(t, deliveryView{Member: "agent", TurnActive: true, TurnSeq: one, TurnStartedAt: ms(at(time.Second)),
		FirstAttachedAt: ms(at(time.Second)), UpdatedAt: ms(at(time.Second))}, got, "the first update may start a turn")

	got = mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{At: at(2 * time.Second)})
	require.True(t, got.TurnActive, "no phase: the turn stays")
	require.Equal(t, one, got.TurnSeq)
	require.Equal(t, ms(at(time.Second)), got.TurnStartedAt)

	got = mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Turn: store.TurnEnded, Position: one, At: at(3 * time.Second)})
	require.Equal(t, deliveryView{Member: "agent", Position: one, FirstAttachedAt: ms(at(time.Second)), UpdatedAt: ms(at(3 * time.Second))}, got,
		"an end clears the turn and advances the position in one update")

	got = mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, At: at(4 * time.Second)})
	require.True(t, got.TurnActive, "a turn with no message")
	require.Zero(t, got.TurnSeq)
	require.Equal(t, ms(at(4*time.Second)), got.TurnStartedAt)

	got = mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: two, At: at(5 * time.Second)})
	require.Equal(t, two, got.TurnSeq, "a start replaces a turn that never ended")
	require.Equal(t, ms(at(5*time.Second)), got.TurnStartedAt)

	got = mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Turn: store.TurnEnded, At: at(6 * time.Second)})
	require.False(t, got.TurnActive)
	require.Zero(t, got.TurnSeq)
	require.Zero(t, got.TurnStartedAt)
	require.Equal(t, one, got.Position, "an end without a position leaves it")

	_, err := s.GetDelivery(t.Context(), "other")
	require.ErrorIs(t, err, store.ErrNotFound, "another member's state is its own")
}

// The position only moves forwards: an older one is ignored, whatever else
// the update says.
func testDeliveryPositionNeverBackwards(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "agent")
	tests := []struct {
		name string
		u    store.DeliveryUpdate
		want int64
	}{
		{"first", store.DeliveryUpdate{Position: 5}, 5},
		{"forwards", store.DeliveryUpdate{Position: 9}, 9},
		{"backwards", store.DeliveryUpdate{Position: 7}, 9},
		{"backwards with a turn end", store.DeliveryUpdate{Position: 3, Turn: store.TurnEnded}, 9},
		{"unchanged", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: 10}, 9},
		{"same", store.DeliveryUpdate{Position: 9}, 9},
		{"forwards again", store.DeliveryUpdate{Position: 12, Turn: store.TurnEnded}, 12},
	}
	for _, tc := range tests {
		got := mustUpdateDelivery(t, s, "agent", tc.u)
		require.Equal(t, tc.want, got.Position, tc.name)
	}
}

// Deleting a member, or replacing the member set without it, removes its
// delivery state: a new member of the name starts afresh.
func testDeliveryGoesWithMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent", "keep")
	mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Position: 4})
	mustUpdateDelivery(t, s, "keep", store.DeliveryUpdate{Position: 4})
	require.NoError(t, s.DeleteMember(ctx, "agent"))
	_, err := s.GetDelivery(ctx, "agent")
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, s.PutMember(ctx, member("agent")))
	_, err = s.GetDelivery(ctx, "agent")
	require.ErrorIs(t, err, store.ErrNotFound, "the new member of the name inherits nothing")

	mustUpdateDelivery(t, s, "agent", store.DeliveryUpdate{Position: 4})
	require.NoError(t, s.ReplaceMembers(ctx, []store.Member{member("keep")}))
	_, err = s.GetDelivery(ctx, "agent")
	require.ErrorIs(t, err, store.ErrNotFound)
	d, err := s.GetDelivery(ctx, "keep")
	require.NoError(t, err)
	require.Equal(t, int64(4), d.Position)
}

// A transaction sees its own update and a rollback undoes it.
func testDeliveryInTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent")
	err := s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.UpdateDelivery(ctx, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: 3}); err != nil {
			return err
		}
		d, err := tx.GetDelivery(ctx, "agent")
		require.NoError(t, err)
		require.True(t, d.TurnActive)
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	_, err = s.GetDelivery(ctx, "agent")
	require.ErrorIs(t, err, store.ErrNotFound, "rolled back")

	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		_, err := tx.UpdateDelivery(ctx, "agent", store.DeliveryUpdate{Turn: store.TurnStarted, TurnSeq: 3})
		return err
	}))
	d, err := s.GetDelivery(ctx, "agent")
	require.NoError(t, err)
	require.Equal(t, int64(3), d.TurnSeq)
}

// The backlog keeps the newest Max messages addressed to the member by
// others after Since, and counts what it leaves out.
func testDeliveryBacklog(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent", "alice")
	dm := func(from, to, body string) store.Message {
		m := message(from, dmThreadOf(from, to), body, 0)
		m.To, m.Recipients = to, []string{to}
		return m
	}
	broadcast := func(from, body string) store.Message {
		m := message(from, "chan:general", body, 0)
		m.All = true
		return m
	}
	own := func(body string) store.Message {
		// A thread message addressed to its sender too (objective events).
		m := message("agent", "obj:1", body, 0)
		m.Recipients = []string{"agent", "alice"}
		return m
	}
	msgs := mustAppend(t, s,
		dm("alice", "agent", "before"), // 0: at or before since
		dm("alice", "agent", "a1"),     // 1
		broadcast("alice", "b1"),       // 2
		dm("alice", "bob", "not mine"), // 3
		broadcast("agent", "mine"),     // 4: sent by the member
		own("own thread event"),        // 5: sent by the member
		dm("alice", "agent", "a2"),     // 6
		broadcast("bob", "b2"),         // 7
	)
	seq := func(i int) int64 { return msgs[i].Seq }
	since := seq(0)
	tests := []struct {
		name string
		max  int
		want store.Backlog
	}{
		{"everything fits", 10, store.Backlog{After: since}},
		{"exactly fits", 4, store.Backlog{After: since}},
		{"one left out", 3, store.Backlog{After: seq(1), Omitted: 1}},
		{"the newest only", 1, store.Backlog{After: seq(6), Omitted: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.DeliveryBacklog(ctx, store.BacklogFilter{Member: "agent", Since: since, Max: tc.max, MaxOmitted: 1000})
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			// What the backlog replays is exactly the newest max of them.
			after, err := s.MessagesFor(ctx, "agent", got.After, 100)
			require.NoError(t, err)
			n := 0
			for _, m := range after {
				if m.From != "agent" {
					n++
				}
			}
			require.Equal(t, min(tc.max, 4), n)
		})
	}
	got, err := s.DeliveryBacklog(ctx, store.BacklogFilter{Member: "agent", Since: seq(7), Max: 5, MaxOmitted: 10})
	require.NoError(t, err)
	require.Equal(t, store.Backlog{After: seq(7)}, got, "nothing after since")
	got, err = s.DeliveryBacklog(ctx, store.BacklogFilter{Member: "carol", Since: 0, Max: 5, MaxOmitted: 10})
	require.NoError(t, err)
	require.Equal(t, store.Backlog{After: 0, Omitted: 0}, got, "a member with no messages at all")
	_, err = s.DeliveryBacklog(ctx, store.BacklogFilter{Member: "agent", Max: 0, MaxOmitted: 10})
	require.Error(t, err)
}

// Messages older than NotBefore are left out of the backlog, however few.
func testDeliveryBacklogAge(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "agent")
	var in []store.Message
	for i, d := range []time.Duration{0, time.Hour, 2 * time.Hour, 3 * time.Hour} {
		m := message("alice", "dm:agent:alice", string(rune('a'+i)), d)
		m.To, m.Recipients = "agent", []string{"agent"}
		in = append(in, m)
	}
	msgs := mustAppend(t, s, in...)
	tests := []struct {
		name      string
		notBefore time.Time
		want      store.Backlog
	}{
		{"no age bound", time.Time{}, store.Backlog{}},
		{"all recent", at(0), store.Backlog{}},
		{"two too old", at(2 * time.Hour), store.Backlog{After: msgs[1].Seq, Omitted: 2}},
		{"all too old", at(4 * time.Hour), store.Backlog{After: msgs[3].Seq, Omitted: 4}},
	}
	for _, tc := range tests {
		got, err := s.DeliveryBacklog(ctx, store.BacklogFilter{Member: "agent", Max: 10, NotBefore: tc.notBefore, MaxOmitted: 100})
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

// The count of what was left out stops at MaxOmitted.
func testDeliveryBacklogOmittedCap(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "agent")
	var in []store.Message
	for i := range 12 {
		m := message("alice", "chan:general", "b", time.Duration(i)*time.Millisecond)
		m.All = true
		in = append(in, m)
	}
	msgs := mustAppend(t, s, in...)
	got, err := s.DeliveryBacklog(t.Context(), store.BacklogFilter{Member: "agent", Max: 2, MaxOmitted: 5})
	require.NoError(t, err)
	require.Equal(t, store.Backlog{After: msgs[9].Seq, Omitted: 5}, got)
}

func dmThreadOf(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return "dm:" + a + ":" + b
}
