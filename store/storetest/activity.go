package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// maxActivityLimit is the default and the cap of ActivityFilter.Limit.
const maxActivityLimit = 1000

// RunActivity runs the conformance suite of store.ActivityStore, one subtest
// per behaviour. newStore must return a fresh, empty store on every call and
// close it when t ends.
func RunActivity(t *testing.T, newStore func(t *testing.T) store.ActivityStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.ActivityStore)
	}{
		{"AppendEmpty", testAppendEmpty},
		{"AppendAssignsIDs", testAppendAssignsIDs},
		{"ListFilters", testListFilters},
		{"ListLimitDefaultAndClamp", testListLimitDefaultAndClamp},
		{"Prune", testPrune},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

func event(memberName, kind string, ts time.Time, n int) store.ActivityEvent {
	return store.ActivityEvent{
		Member: memberName,
		Kind:   kind,
		TS:     ts,
		Data:   fmt.Appendf(nil, `{"n":%d}`, n),
	}
}

func testAppendEmpty(t *testing.T, s store.ActivityStore) {
	tests := []struct {
		name   string
		events []store.ActivityEvent
	}{
		{"nil", nil},
		{"empty", []store.ActivityEvent{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.AppendActivity(t.Context(), tc.events)
			require.NoError(t, err)
			require.Empty(t, got)
		})
	}
	got, err := s.ListActivity(t.Context(), store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Empty(t, got)
}

func testAppendAssignsIDs(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	in := []store.ActivityEvent{
		event("alice", "publish", at(2*time.Second), 0),
		event("bob", "read", at(time.Second), 1),
		event("alice", "publish", at(0), 2),
	}
	in[1].ObjectiveID = "obj-1"
	in[2].Data = []byte(`{"nested":{"a":[1,2,"ü"]}}`)

	got, err := s.AppendActivity(ctx, in)
	require.NoError(t, err)
	require.Len(t, got, len(in))
	for i := range in {
		want := viewEvent(in[i])
		want.ID = got[i].ID
		require.Equal(t, want, viewEvent(got[i]), i)
		if i > 0 {
			require.Greater(t, got[i].ID, got[i-1].ID)
		}
	}
	require.Zero(t, in[0].ID, "the input is not modified")

	more, err := s.AppendActivity(ctx, []store.ActivityEvent{event("alice", "publish", at(0), 3)})
	require.NoError(t, err)
	require.Greater(t, more[0].ID, got[len(got)-1].ID)

	// What List returns is what Append returned.
	listed, err := s.ListActivity(ctx, store.ActivityFilter{Member: "bob"})
	require.NoError(t, err)
	require.Equal(t, viewEvents(got[1:2]), viewEvents(listed))
	listed, err = s.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Equal(t, viewEvents([]store.ActivityEvent{got[0], more[0], got[2]}), viewEvents(listed))
}

func testListFilters(t *testing.T, s store.ActivityStore) {
	// Indexes into seeded. Events 1 and 2 share a TS, so id breaks the tie.
	seeded, err := s.AppendActivity(t.Context(), []store.ActivityEvent{
		0: event("alice", "a", at(0), 0),
		1: event("alice", "b", at(time.Second), 1),
		2: event("alice", "a", at(time.Second), 2),
		3: event("alice", "c", at(2*time.Second), 3),
		4: event("alice", "b", at(3*time.Second), 4),
		5: event("bob", "a", at(time.Second), 5),
	})
	require.NoError(t, err)

	tests := []struct {
		name string
		f    store.ActivityFilter
		want []int
	}{
		{"member, newest first, ties by id", store.ActivityFilter{Member: "alice"}, []int{4, 3, 2, 1, 0}},
		{"other member", store.ActivityFilter{Member: "bob"}, []int{5}},
		{"unknown member", store.ActivityFilter{Member: "carol"}, []int{}},
		{"from inclusive", store.ActivityFilter{Member: "alice", From: at(time.Second)}, []int{4, 3, 2, 1}},
		{"to inclusive", store.ActivityFilter{Member: "alice", To: at(time.Second)}, []int{2, 1, 0}},
		{"from equals to", store.ActivityFilter{Member: "alice", From: at(time.Second), To: at(time.Second)}, []int{2, 1}},
		{"from after to", store.ActivityFilter{Member: "alice", From: at(2 * time.Second), To: at(time.Second)}, []int{}},
		{"between rows", store.ActivityFilter{Member: "alice", From: at(1500 * time.Millisecond), To: at(2500 * time.Millisecond)}, []int{3}},
		{"one kind", store.ActivityFilter{Member: "alice", Kinds: []string{"b"}}, []int{4, 1}},
		{"two kinds", store.ActivityFilter{Member: "alice", Kinds: []string{"a", "c"}}, []int{3, 2, 0}},
		{"unknown kind", store.ActivityFilter{Member: "alice", Kinds: []string{"z"}}, []int{}},
		{"limit", store.ActivityFilter{Member: "alice", Limit: 2}, []int{4, 3}},
		{"limit inside a tie", store.ActivityFilter{Member: "alice", Limit: 3}, []int{4, 3, 2}},
		{"limit above count", store.ActivityFilter{Member: "alice", Limit: 50}, []int{4, 3, 2, 1, 0}},
		{
			"everything combined",
			store.ActivityFilter{Member: "alice", From: at(time.Second), To: at(3 * time.Second), Kinds: []string{"a", "b"}, Limit: 2},
			[]int{4, 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListActivity(t.Context(), tc.f)
			require.NoError(t, err)
			want := make([]store.ActivityEvent, 0, len(tc.want))
			for _, i := range tc.want {
				want = append(want, seeded[i])
			}
			require.Equal(t, viewEvents(want), viewEvents(got))
		})
	}
}

func testListLimitDefaultAndClamp(t *testing.T, s store.ActivityStore) {
	const total = maxActivityLimit + 5
	in := make([]store.ActivityEvent, total)
	for i := range in {
		in[i] = event("alice", "k", at(time.Duration(i)*time.Millisecond), i)
	}
	seeded, err := s.AppendActivity(t.Context(), in)
	require.NoError(t, err)

	tests := []struct {
		name  string
		limit int
		want  int
	}{
		{"zero means default", 0, maxActivityLimit},
		{"negative means default", -1, maxActivityLimit},
		{"at the cap", maxActivityLimit, maxActivityLimit},
		{"above the cap is clamped", maxActivityLimit + 1, maxActivityLimit},
		{"far above the cap is clamped", 1 << 30, maxActivityLimit},
		{"below the cap", 7, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListActivity(t.Context(), store.ActivityFilter{Member: "alice", Limit: tc.limit})
			require.NoError(t, err)
			require.Len(t, got, tc.want)
			// Newest first: the last appended comes first.
			require.Equal(t, seeded[total-1].ID, got[0].ID)
			require.Equal(t, seeded[total-tc.want].ID, got[len(got)-1].ID)
		})
	}
}

func testPrune(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	seeded, err := s.AppendActivity(ctx, []store.ActivityEvent{
		event("alice", "k", at(0), 0),
		event("alice", "k", at(time.Second), 1),
		event("alice", "k", at(2*time.Second-time.Millisecond), 2),
		event("alice", "k", at(2*time.Second), 3),
		event("alice", "k", at(3*time.Second), 4),
		event("bob", "k", at(0), 5),
		event("bob", "k", at(5*time.Second), 6),
	})
	require.NoError(t, err)

	n, err := s.PruneActivity(ctx, at(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, int64(4), n)

	alice, err := s.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Equal(t, viewEvents([]store.ActivityEvent{seeded[4], seeded[3]}), viewEvents(alice), "a row at the cutoff stays")
	bob, err := s.ListActivity(ctx, store.ActivityFilter{Member: "bob"})
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded[6:7]), viewEvents(bob))

	n, err = s.PruneActivity(ctx, at(2*time.Second))
	require.NoError(t, err)
	require.Zero(t, n)
}
