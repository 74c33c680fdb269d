package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// testActivityBetween: every row in the id range, of every member, oldest
// first; nothing outside it.
func testActivityBetween(t *testing.T, s store.ActivityStore) {
	r, ok := s.(store.ActivityRanger)
	require.True(t, ok, "the store reads activity by id range")
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_000)
	var ids []int64
	for i, who := range []string{"alice", "bob", "alice", "carol", "bob"} {
		// Timestamps out of id order: the range goes by id.
		rows, err := s.AppendActivity(ctx, []store.ActivityEvent{event(who, "status", at.Add(-time.Duration(i)*time.Minute), i)})
		require.NoError(t, err)
		ids = append(ids, rows[0].ID)
	}
	for _, tc := range []struct {
		name        string
		after, upTo int64
		want        []int64
	}{
		{"all", 0, ids[4], ids},
		{"inner", ids[0], ids[3], ids[1:4]},
		{"one", ids[1], ids[2], ids[2:3]},
		{"empty", ids[2], ids[2], nil},
		{"past the end", ids[4], ids[4] + 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.ActivityBetween(ctx, tc.after, tc.upTo)
			require.NoError(t, err)
			var gotIDs []int64
			for _, g := range got {
				gotIDs = append(gotIDs, g.ID)
			}
			require.Equal(t, tc.want, gotIDs)
		})
	}
	got, err := r.ActivityBetween(ctx, ids[0], ids[1])
	require.NoError(t, err)
	require.Equal(t, "bob", got[0].Member)
	require.JSONEq(t, `{"n":1}`, string(got[0].Data))
}
