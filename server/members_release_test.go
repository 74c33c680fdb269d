package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
	"svc/store/sqlite"
)

// releaseEnv is a running server whose member bob holds an open objective
// (and watches another) and is the target of a notification endpoint.
type releaseEnv struct {
	core              *core
	activity          store.ActivityStore
	held, watched, ep string
}

func newReleaseEnv(t *testing.T) *releaseEnv {
	t.Helper()
	perms := map[string][]string{
		"admin": {auth.MembersManage, auth.ObjectivesCreate, auth.NotificationsManage}, "bob": {}, "carol": {},
	}
	st := mustMemStore(t)
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	srv := startTestServer(t, st, perms, Deps{Activity: act})
	e := &releaseEnv{core: srv.core, activity: act, ep: "alerts"}
	admin := auth.WithPrincipal(context.Background(), &auth.Principal{Member: "admin", Permissions: perms["admin"]})
	objs := &Objectives{core: srv.core}
	held, err := objs.CreateObjective(admin, &apiv1.CreateObjectiveRequest{Title: "held", Outcome: "o", Assignee: "bob"})
	require.NoError(t, err)
	watched, err := objs.CreateObjective(admin, &apiv1.CreateObjectiveRequest{Title: "watched", Outcome: "o", Assignee: "carol", Watchers: []string{"bob"}})
	require.NoError(t, err)
	e.held, e.watched = held.GetObjective().GetId(), watched.GetObjective().GetId()
	targets, err := structpb.NewList([]any{map[string]any{"member": "bob"}})
	require.NoError(t, err)
	_, err = srv.notify.Admin().CreateNotificationEndpoint(admin, &apiv1.CreateNotificationEndpointRequest{Slug: e.ep, Targets: targets})
	require.NoError(t, err)
	return e
}

// deleteUnreleased deletes bob as DeleteMember does, but stops before the
// release: what a crash between the two leaves.
func (e *releaseEnv) deleteUnreleased(t *testing.T) store.FormerMember {
	t.Helper()
	var gone store.FormerMember
	err := e.core.team.change(context.Background(), func(f *teamconfig.File) error {
		i := f.MemberIndex("bob")
		gone = store.FormerMember{ID: f.Store.Members[i].ID, Name: "bob", DeletedAt: e.core.now(), DeletedBy: "admin"}
		e.core.ids.add(gone)
		f.Store.Members = slices.Delete(f.Store.Members, i, i+1)
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutFormerMember(ctx, gone); err != nil {
			return err
		}
		return tx.DeleteMember(ctx, "bob")
	})
	require.NoError(t, err)
	return gone
}

// state is what the release changes: the held objective's status, the
// watched one's watchers, the endpoint's targets and enabled, and how many
// audit events the two objectives have.
func (e *releaseEnv) state(t *testing.T) (status string, watchers []string, targets string, enabled bool, events int) {
	t.Helper()
	ctx := context.Background()
	held, err := e.core.store.GetObjective(ctx, e.held)
	require.NoError(t, err)
	watched, err := e.core.store.GetObjective(ctx, e.watched)
	require.NoError(t, err)
	ep, err := e.core.store.GetHookEndpoint(ctx, e.ep)
	require.NoError(t, err)
	for _, id := range []string{e.held, e.watched} {
		evs, err := e.core.store.ListObjectiveEvents(ctx, id)
		require.NoError(t, err)
		events += len(evs)
	}
	return held.Status, watched.Watchers, string(ep.Targets), ep.Enabled, events
}

// A start finishes the release a crash interrupted, as the admin who
// deleted the member; a second pass changes nothing.
func TestReleaseDepartedAtStart(t *testing.T) {
	e := newReleaseEnv(t)
	_, _, _, _, before := e.state(t)
	gone := e.deleteUnreleased(t)
	status, watchers, _, _, _ := e.state(t)
	require.Equal(t, store.StatusActive, status, "nothing is released yet")
	require.Equal(t, []string{"bob"}, watchers)

	e.core.releaseDeparted(context.Background())
	status, watchers, targets, enabled, events := e.state(t)
	require.Equal(t, store.StatusCancelled, status)
	require.Empty(t, watchers)
	require.Equal(t, "[]", targets)
	require.False(t, enabled, "an endpoint left with no target is disabled")
	require.Equal(t, before+2, events, "one cancellation, one watcher removal")
	evs, err := e.core.store.ListObjectiveEvents(context.Background(), e.held)
	require.NoError(t, err)
	last := evs[len(evs)-1]
	require.Equal(t, evCancelled, last.Kind)
	require.Equal(t, "admin", last.Actor)
	require.JSONEq(t, `{"reason":"assignee bob was deleted"}`, string(last.Payload))

	// The close marker is in the deleted member's stream, by its id.
	rows, err := e.activity.ListActivity(context.Background(), store.ActivityFilter{Member: "bob", MemberUID: gone.ID, Kinds: []string{activityClose}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	var data struct{ Reason string }
	require.NoError(t, json.Unmarshal(rows[0].Data, &data))
	require.Equal(t, "cancelled", data.Reason)

	e.core.releaseDeparted(context.Background())
	_, _, _, _, again := e.state(t)
	require.Equal(t, events, again, "a second pass changes nothing")
}

// A name created again before the release ran is another member: a start
// cancels the deleted member's objectives by its id. Watches and targets
// name members by name only, so once the name is a member's again they are
// taken to be that member's, and left alone.
func TestReleaseDepartedSparesTheNewMember(t *testing.T) {
	e := newReleaseEnv(t)
	e.deleteUnreleased(t)
	_, err := e.core.createMember(context.Background(), &apiv1.CreateMemberRequest{Name: "bob"},
		store.Token{ID: newID(), Hash: [32]byte{1}, CreatedAt: e.core.now(), CreatedBy: "admin"}, false, nil)
	require.NoError(t, err)

	e.core.releaseDeparted(context.Background())
	status, watchers, targets, enabled, _ := e.state(t)
	require.Equal(t, store.StatusCancelled, status, "the old bob's objective, by its id")
	require.Equal(t, []string{"bob"}, watchers, "the name is a member's: its watch stays")
	require.JSONEq(t, `[{"member":"bob"}]`, targets)
	require.True(t, enabled)

	// And the new bob cannot complete the old bob's objective.
	bob := auth.WithPrincipal(context.Background(), &auth.Principal{Member: "bob"})
	_, err = (&Objectives{core: e.core}).CompleteObjective(bob, &apiv1.CompleteObjectiveRequest{Id: e.held, Result: "r"})
	require.True(t, errors.Is(err, auth.ErrForbidden), "%v", err)
}

// A deleted member's pending approvals go with it (its row cascades),
// and its name no longer reads as blocked by them: a member created again
// under the name waits on nothing.
func TestReleaseForgetsApprovals(t *testing.T) {
	e := newReleaseEnv(t)
	res, err := (&Approvals{core: e.core}).CreateApproval(as("bob"), &apiv1.CreateApprovalRequest{Tool: "Bash"})
	require.NoError(t, err)
	require.True(t, e.core.approvals.blocked("bob"))

	gone := e.deleteUnreleased(t)
	require.NoError(t, e.core.releaseMember(context.Background(), gone))
	_, err = e.core.store.GetApproval(context.Background(), res.GetApproval().GetId())
	require.ErrorIs(t, err, store.ErrNotFound)
	require.False(t, e.core.approvals.blocked("bob"), "the name is free of it")
	_, pending := e.core.approvals.next()
	require.False(t, pending, "nothing left to expire")
}
