package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"svc/server/apierr"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
	"svc/store/sqlite"
)

// objectivesEnv is a running server (committer included) over in-memory
// stores, with members admin (members.manage), alice (objectives.create),
// bob and carol.
type objectivesEnv struct {
	s        *Objectives
	activity store.ActivityStore
	perms    map[string][]string
}

func newObjectivesEnv(t *testing.T) *objectivesEnv {
	t.Helper()
	perms := map[string][]string{
		"admin": {auth.MembersManage}, "alice": {auth.ObjectivesCreate}, "bob": {}, "carol": {},
	}
	st, err := sqlite.Open(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	srv := startTestServer(t, st, perms, Deps{Activity: act})
	return &objectivesEnv{s: &Objectives{core: srv.core}, activity: act, perms: perms}
}

func (e *objectivesEnv) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

// markers returns member's objective markers, oldest first, as
// "kind objective reason".
func (e *objectivesEnv) markers(t *testing.T, member string) []string {
	t.Helper()
	rows, err := e.activity.ListActivity(context.Background(), store.ActivityFilter{
		Member: member, Kinds: []string{activityOpen, activityClose},
	})
	require.NoError(t, err)
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		var data struct{ Reason string }
		require.NoError(t, json.Unmarshal(rows[i].Data, &data))
		out = append(out, rows[i].Kind+" "+rows[i].ObjectiveID+" "+data.Reason)
	}
	return out
}

func (e *objectivesEnv) create(t *testing.T, assignee string) *apiv1.Objective {
	t.Helper()
	resp, err := e.s.CreateObjective(e.as("alice"), &apiv1.CreateObjectiveRequest{Title: "t", Outcome: "o", Assignee: assignee})
	require.NoError(t, err)
	return resp.GetObjective()
}

func TestObjectiveActivityMarkers(t *testing.T) {
	e := newObjectivesEnv(t)
	done := e.create(t, "bob")
	_, err := e.s.CompleteObjective(e.as("bob"), &apiv1.CompleteObjectiveRequest{Id: done.Id, Result: "shipped"})
	require.NoError(t, err)

	moved := e.create(t, "bob")
	_, err = e.s.UpdateObjective(e.as("bob"), &apiv1.UpdateObjectiveRequest{Id: moved.Id, Status: ptr("blocked"), BlockReason: ptr("waiting")})
	require.NoError(t, err)
	_, err = e.s.ReassignObjective(e.as("admin"), &apiv1.ReassignObjectiveRequest{Id: moved.Id, To: "carol"})
	require.NoError(t, err)
	_, err = e.s.CancelObjective(e.as("alice"), &apiv1.CancelObjectiveRequest{Id: moved.Id})
	require.NoError(t, err)

	require.Equal(t, []string{
		"objective_open " + done.Id + " ",
		"objective_close " + done.Id + " done",
		"objective_open " + moved.Id + " ",
		"objective_close " + moved.Id + " reassigned",
	}, e.markers(t, "bob"), "blocking writes no marker")
	require.Equal(t, []string{
		"objective_open " + moved.Id + " ",
		"objective_close " + moved.Id + " cancelled",
	}, e.markers(t, "carol"))
	require.Empty(t, e.markers(t, "alice"), "the originator's stream is not the assignee's")
}

func TestRefusedChangesWriteNoMarker(t *testing.T) {
	e := newObjectivesEnv(t)
	o := e.create(t, "bob")
	_, err := e.s.CompleteObjective(e.as("carol"), &apiv1.CompleteObjectiveRequest{Id: o.Id, Result: "x"})
	require.Equal(t, apierr.CodeForbidden, apierr.Classify(err).Code)
	_, err = e.s.ReassignObjective(e.as("admin"), &apiv1.ReassignObjectiveRequest{Id: o.Id, To: "bob"})
	require.Equal(t, apierr.CodeConflict, apierr.Classify(err).Code)
	require.Equal(t, []string{"objective_open " + o.Id + " "}, e.markers(t, "bob"))
}

// Racing closes of one objective: exactly one wins, the rest see the
// terminal state, and the audit log records one close.
func TestConcurrentClosesCommitOnce(t *testing.T) {
	e := newObjectivesEnv(t)
	o := e.create(t, "bob")
	const racers = 16
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, errs[i] = e.s.CompleteObjective(e.as("bob"), &apiv1.CompleteObjectiveRequest{Id: o.Id, Result: "r"})
			} else {
				_, errs[i] = e.s.CancelObjective(e.as("alice"), &apiv1.CancelObjectiveRequest{Id: o.Id})
			}
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.Equal(t, apierr.CodeConflict, apierr.Classify(err).Code, "%v", err)
	}
	require.Equal(t, 1, wins)
	got, err := e.s.GetObjective(e.as("carol"), &apiv1.GetObjectiveRequest{Id: o.Id})
	require.NoError(t, err)
	var kinds []string
	for _, ev := range got.GetEvents() {
		kinds = append(kinds, ev.GetKind())
	}
	require.Len(t, kinds, 2, "%v", kinds)
	require.Equal(t, evAssigned, kinds[0])
	require.Contains(t, []string{evCompleted, evCancelled}, kinds[1])
	require.Len(t, e.markers(t, "bob"), 2, "one open, one close")
}

// Objective changes read the team before they reach the committer: a team
// change holds the team lock while it waits for the store's writer, so a
// read inside the commit would deadlock the two.
func TestObjectiveChangesAndTeamChangesDoNotDeadlock(t *testing.T) {
	e := newObjectivesEnv(t)
	o := e.create(t, "bob")
	const rounds = 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range rounds {
				_, err := e.s.UpdateObjective(e.as("bob"), &apiv1.UpdateObjectiveRequest{Id: o.Id, Status: ptr("blocked"), BlockReason: ptr("r")})
				require.NoError(t, err)
				_, err = e.s.UpdateObjective(e.as("bob"), &apiv1.UpdateObjectiveRequest{Id: o.Id, Status: ptr("active")})
				require.NoError(t, err)
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				require.NoError(t, e.s.team.change(context.Background(),
					func(*teamconfig.File) error { return nil },
					func(context.Context, store.Tx) error { return nil }))
			}
		}()
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("objective changes and team changes deadlocked")
	}
}

// Grants follow the attached file, never whatever a path names later: a
// private file written where an attachment used to be stays private when
// the objective changes, and a new participant gets the attached file.
func TestObjectiveGrantsFollowTheAttachedFile(t *testing.T) {
	e := newObjectivesEnv(t)
	ctx := context.Background()
	st := e.s.store
	file := func(path, content string) store.FsEntry {
		sum := sha256.Sum256([]byte(content))
		got, err := st.CreateEntry(ctx, store.FsEntry{Path: path, Owner: "alice", Kind: store.FsFile, Size: int64(len(content)), MimeType: "text/plain", Blob: hex.EncodeToString(sum[:])})
		require.NoError(t, err)
		return got
	}
	granted := func(path, member string) bool {
		ok, err := st.HasGrant(ctx, path, member)
		require.NoError(t, err)
		return ok
	}
	file("/alice/r.txt", "report")
	resp, err := e.s.CreateObjective(e.as("alice"), &apiv1.CreateObjectiveRequest{
		Title: "t", Outcome: "o", Assignee: "bob", Attachments: []*structpb.Value{structpb.NewStringValue("/alice/r.txt")},
	})
	require.NoError(t, err)
	id := resp.GetObjective().GetId()
	require.True(t, granted("/alice/r.txt", "bob"))
	require.False(t, granted("/alice/r.txt", "carol"))

	// The attached file moves; a new private file takes its old path.
	_, err = st.MoveEntry(ctx, store.FsMove{From: "/alice/r.txt", To: "/alice/moved.txt"})
	require.NoError(t, err)
	file("/alice/r.txt", "private")
	_, err = e.s.UpdateObjective(e.as("bob"), &apiv1.UpdateObjectiveRequest{Id: id, Status: ptr("blocked"), BlockReason: ptr("r")})
	require.NoError(t, err)
	_, err = e.s.UpdateWatchers(e.as("alice"), &apiv1.UpdateWatchersRequest{Id: id, Add: []string{"carol"}})
	require.NoError(t, err)

	require.False(t, granted("/alice/r.txt", "bob"), "the new file at the old path is not shared")
	require.False(t, granted("/alice/r.txt", "carol"))
	require.True(t, granted("/alice/moved.txt", "carol"), "a new watcher reads the attached file")
}
