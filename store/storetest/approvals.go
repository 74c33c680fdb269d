package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// approvalTests are the subtests of ApprovalStore; RunAll runs them.
var approvalTests = []suiteTest{
	{"CreateGetApproval", testCreateGetApproval},
	{"CreateApprovalRefusals", testCreateApprovalRefusals},
	{"ListApprovals", testListApprovals},
	{"DecideApprovalOnce", testDecideApprovalOnce},
	{"DecideApprovalRace", testDecideApprovalRace},
	{"ApprovalsGoWithTheirMember", testApprovalsGoWithTheirMember},
	{"ApprovalRollsBack", testApprovalRollsBack},
}

func approval(id, memberName string, requested time.Duration) store.Approval {
	return store.Approval{
		ID: id, Member: memberName, Tool: "Bash", Input: []byte(`{"command":"rm -rf build"}`),
		Status: store.ApprovalPending, RequestedAt: at(requested), ExpiresAt: at(requested + 15*time.Minute),
	}
}

// approvalView is an Approval with comparable times.
type approvalView struct {
	ID, Member, Tool, Input, Objective, Status string
	RequestedAt, ExpiresAt, DecidedAt          int64
	DecidedBy, Reason                          string
}

func viewApproval(a store.Approval) approvalView {
	return approvalView{
		a.ID, a.Member, a.Tool, string(a.Input), a.Objective, a.Status,
		ms(a.RequestedAt), ms(a.ExpiresAt), ms(a.DecidedAt), a.DecidedBy, a.Reason,
	}
}

func approvalIDs(as []store.Approval) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func withMembers(t *testing.T, s store.Store, names ...string) {
	t.Helper()
	var ms []store.Member
	for _, n := range names {
		ms = append(ms, member(n))
	}
	require.NoError(t, s.ReplaceMembers(t.Context(), ms))
}

func testCreateGetApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent")
	a := approval("a1", "agent", 0)
	a.Objective = "obj-1"
	require.NoError(t, s.CreateApproval(ctx, a))
	got, err := s.GetApproval(ctx, "a1")
	require.NoError(t, err)
	require.Equal(t, viewApproval(a), viewApproval(got))
	require.True(t, got.DecidedAt.IsZero())

	b := approval("a2", "agent", time.Second) // no objective
	require.NoError(t, s.CreateApproval(ctx, b))
	got, err = s.GetApproval(ctx, "a2")
	require.NoError(t, err)
	require.Empty(t, got.Objective)

	_, err = s.GetApproval(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testCreateApprovalRefusals(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent")
	require.NoError(t, s.CreateApproval(ctx, approval("a1", "agent", 0)))
	require.ErrorIs(t, s.CreateApproval(ctx, approval("a1", "agent", time.Second)), store.ErrConflict)
	require.ErrorIs(t, s.CreateApproval(ctx, approval("a2", "ghost", 0)), store.ErrPrecondition)
	list, err := s.ListApprovals(ctx, store.ApprovalFilter{})
	require.NoError(t, err)
	require.Equal(t, []string{"a1"}, approvalIDs(list), "a refused create stores nothing")
}

func testListApprovals(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent", "other")
	for _, a := range []store.Approval{
		approval("old", "agent", 0),
		approval("mid", "other", time.Minute),
		approval("new", "agent", 2*time.Minute),
	} {
		require.NoError(t, s.CreateApproval(ctx, a))
	}
	_, err := s.DecideApproval(ctx, store.ApprovalDecision{ID: "mid", Status: store.ApprovalDenied, DecidedAt: at(3 * time.Minute), DecidedBy: "alice"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		f    store.ApprovalFilter
		want []string
	}{
		{"all newest first", store.ApprovalFilter{}, []string{"new", "mid", "old"}},
		{"pending", store.ApprovalFilter{Statuses: []string{store.ApprovalPending}}, []string{"new", "old"}},
		{"decided", store.ApprovalFilter{Statuses: []string{store.ApprovalAllowed, store.ApprovalDenied, store.ApprovalExpired}}, []string{"mid"}},
		{"member", store.ApprovalFilter{Member: "agent"}, []string{"new", "old"}},
		{"expires by", store.ApprovalFilter{Statuses: []string{store.ApprovalPending}, ExpiresBy: at(15*time.Minute + time.Second)}, []string{"old"}},
		{"expiry is inclusive", store.ApprovalFilter{ExpiresBy: at(15 * time.Minute)}, []string{"old"}},
		{"limit", store.ApprovalFilter{Limit: 2}, []string{"new", "mid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := s.ListApprovals(ctx, tc.f)
			require.NoError(t, err)
			require.Equal(t, tc.want, approvalIDs(list))
		})
	}
	n, err := s.CountPendingApprovals(ctx, "agent")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = s.CountPendingApprovals(ctx, "other")
	require.NoError(t, err)
	require.Zero(t, n)
}

func testDecideApprovalOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent")
	a := approval("a1", "agent", 0)
	require.NoError(t, s.CreateApproval(ctx, a))
	d := store.ApprovalDecision{ID: "a1", Status: store.ApprovalAllowed, DecidedAt: at(time.Minute), DecidedBy: "alice", Reason: "fine"}
	got, err := s.DecideApproval(ctx, d)
	require.NoError(t, err)
	want := a
	want.Status, want.DecidedAt, want.DecidedBy, want.Reason = store.ApprovalAllowed, at(time.Minute), "alice", "fine"
	require.Equal(t, viewApproval(want), viewApproval(got))
	stored, err := s.GetApproval(ctx, "a1")
	require.NoError(t, err)
	require.Equal(t, viewApproval(want), viewApproval(stored))

	again := store.ApprovalDecision{ID: "a1", Status: store.ApprovalDenied, DecidedAt: at(2 * time.Minute), DecidedBy: "bob"}
	_, err = s.DecideApproval(ctx, again)
	require.ErrorIs(t, err, store.ErrConflict, "a decision is written once")
	stored, err = s.GetApproval(ctx, "a1")
	require.NoError(t, err)
	require.Equal(t, viewApproval(want), viewApproval(stored), "a refused decision changes nothing")

	_, err = s.DecideApproval(ctx, store.ApprovalDecision{ID: "nope", Status: store.ApprovalDenied})
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, s.CreateApproval(ctx, approval("a2", "agent", 0)))
	_, err = s.DecideApproval(ctx, store.ApprovalDecision{ID: "a2", Status: store.ApprovalPending})
	require.ErrorIs(t, err, store.ErrPrecondition, "pending is no decision")
	expired, err := s.DecideApproval(ctx, store.ApprovalDecision{ID: "a2", Status: store.ApprovalExpired, DecidedAt: at(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, store.ApprovalExpired, expired.Status)
	require.Empty(t, expired.DecidedBy, "expiry has no decider")
	require.Empty(t, expired.Reason)
}

func testDecideApprovalRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent")
	require.NoError(t, s.CreateApproval(ctx, approval("a1", "agent", 0)))
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status := store.ApprovalAllowed
			if i%2 == 1 {
				status = store.ApprovalDenied
			}
			_, errs[i] = s.DecideApproval(ctx, store.ApprovalDecision{ID: "a1", Status: status, DecidedAt: at(time.Minute), DecidedBy: "m"})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.Equal(t, 1, won, "exactly one of racing decisions applies")
}

func testApprovalsGoWithTheirMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent", "other")
	require.NoError(t, s.CreateApproval(ctx, approval("a1", "agent", 0)))
	require.NoError(t, s.CreateApproval(ctx, approval("b1", "other", 0)))
	require.NoError(t, s.DeleteMember(ctx, "agent"))
	_, err := s.GetApproval(ctx, "a1")
	require.ErrorIs(t, err, store.ErrNotFound)
	list, err := s.ListApprovals(ctx, store.ApprovalFilter{})
	require.NoError(t, err)
	require.Equal(t, []string{"b1"}, approvalIDs(list))
}

func testApprovalRollsBack(t *testing.T, s store.Store) {
	ctx := t.Context()
	withMembers(t, s, "agent")
	boom := errors.New("boom")
	err := s.WithTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.CreateApproval(ctx, approval("a1", "agent", 0)))
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = s.GetApproval(ctx, "a1")
	require.ErrorIs(t, err, store.ErrNotFound)
}
