package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/cluster/natstest"
)

// Members in the database when brokers share a team (docs/DECISIONS.md,
// "Members in the database when brokers share a team").

// sharedTeam is two brokers of one team, both started before any member
// but the first-boot admin exists.
type sharedTeam struct {
	a, b    *serving
	ns      *natstest.Server
	admin   string
	args    []string
	cfgPath string
	dbURL   string
}

func startSharedTeam(t *testing.T) *sharedTeam {
	t.Helper()
	st := &sharedTeam{}
	st.a, st.args, st.dbURL, st.ns, st.admin = firstBroker(t)
	st.cfgPath = st.args[1] // firstBroker's args start with --config-path PATH
	st.b = startServe(t, st.args...)
	return st
}

// create makes a member on s and returns its token.
func (st *sharedTeam) create(t *testing.T, s *serving, name string, perms ...string) string {
	t.Helper()
	body := map[string]any{"name": name}
	if perms != nil {
		body["permissions"] = perms
	}
	code, out := s.call(t, http.MethodPost, "/members", st.admin, body)
	require.Equal(t, http.StatusOK, code, "%v", out)
	return out["token"].(string)
}

// memberNames lists the members s knows, by name.
func memberNames(t *testing.T, s *serving, token string) []string {
	t.Helper()
	code, out := s.call(t, http.MethodGet, "/members", token, nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	var names []string
	for _, m := range out["members"].([]any) {
		names = append(names, m.(map[string]any)["name"].(string))
	}
	sort.Strings(names)
	return names
}

// A member created on A, after both brokers started, pushes and
// subscribes on B with the very next request.
func TestSharedMembersCreatedOnOneBrokerWorkOnTheOther(t *testing.T) {
	st := startSharedTeam(t)
	carol := st.create(t, st.a, "carol")
	code, out := st.b.call(t, http.MethodPost, "/push", carol, map[string]any{"to": "admin", "body": "hello from B"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	stream := openStream(t, st.b, carol, "carol", "")
	code, out = st.a.call(t, http.MethodPost, "/push", st.admin, map[string]any{"to": "carol", "body": "to carol"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "to carol", collect(t, stream, 1)[0].body)
	require.Equal(t, []string{"admin", "carol"}, memberNames(t, st.b, carol))
}

// A permission removed on B is refused on A with the very next request.
func TestSharedMembersPermissionRemovedOnOneBrokerRefusedOnTheOther(t *testing.T) {
	st := startSharedTeam(t)
	dave := st.create(t, st.b, "dave", "admin")
	// Dave manages members on A...
	st.create(t, st.a, "erin")
	code, out := st.a.call(t, http.MethodPost, "/members", dave, map[string]any{"name": "frank"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	// ...until B takes it away.
	code, out = st.b.call(t, http.MethodPatch, "/members/dave", st.admin, map[string]any{"permissions": []string{}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	code, out = st.a.call(t, http.MethodPost, "/members", dave, map[string]any{"name": "grace"})
	require.Equal(t, http.StatusForbidden, code, "%v", out)
	// Given back on A, it works on B at once.
	code, out = st.a.call(t, http.MethodPatch, "/members/dave", st.admin, map[string]any{"permissions": []string{"admin"}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	code, out = st.b.call(t, http.MethodPost, "/members", dave, map[string]any{"name": "grace"})
	require.Equal(t, http.StatusOK, code, "%v", out)
}

// A member deleted on A is gone on B: its token is refused at once, its
// stream there ends, and B no longer lists it.
func TestSharedMembersDeletedOnOneBrokerGoneOnTheOther(t *testing.T) {
	st := startSharedTeam(t)
	carol := st.create(t, st.a, "carol")
	stream := openStream(t, st.b, carol, "carol", "")
	code, out := st.a.call(t, http.MethodDelete, "/members/carol", st.admin, nil)
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	code, out = st.b.call(t, http.MethodPost, "/push", carol, map[string]any{"to": "admin", "body": "still here?"})
	require.Equal(t, http.StatusUnauthorized, code, "%v", out)
	require.Equal(t, []string{"admin"}, memberNames(t, st.b, st.admin))
	select {
	case m, ok := <-stream:
		require.False(t, ok, "the deleted member's stream on B got %v", m)
	case <-time.After(30 * time.Second):
		t.Fatal("the deleted member's stream on B did not end")
	}
	// Created again on B, the name is a new member with a new token.
	carol2 := st.create(t, st.b, "carol")
	code, out = st.a.call(t, http.MethodPost, "/push", carol2, map[string]any{"to": "admin", "body": "new carol"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	code, out = st.a.call(t, http.MethodPost, "/push", carol, map[string]any{"to": "admin", "body": "old carol"})
	require.Equal(t, http.StatusUnauthorized, code, "%v", out)
}

// Changes made at the same time on both brokers all land: each is made on
// the stored members under the store's write lock, never on a stale copy.
func TestSharedMembersConcurrentChangesAllLand(t *testing.T) {
	st := startSharedTeam(t)
	const each = 8
	var wg sync.WaitGroup
	want := []string{"admin"}
	for _, side := range []struct {
		s    *serving
		name string
	}{{st.a, "a"}, {st.b, "b"}} {
		for i := range each {
			name := fmt.Sprintf("m%s%d", side.name, i)
			want = append(want, name)
			wg.Go(func() {
				code, out := side.s.call(t, http.MethodPost, "/members", st.admin, map[string]any{"name": name})
				if code != http.StatusOK {
					t.Errorf("create %s: %d %v", name, code, out)
				}
			})
		}
	}
	wg.Wait()
	sort.Strings(want)
	require.Equal(t, want, memberNames(t, st.a, st.admin))
	require.Equal(t, want, memberNames(t, st.b, st.admin))
	// Updates of different members at once, half on each broker.
	for i := range each {
		for _, side := range []string{"a", "b"} {
			s := st.a
			if i%2 == 1 {
				s = st.b
			}
			name := fmt.Sprintf("m%s%d", side, i)
			wg.Go(func() {
				code, out := s.call(t, http.MethodPatch, "/members/"+name, st.admin, map[string]any{"role": map[string]any{"title": "t-" + name}})
				if code != http.StatusOK {
					t.Errorf("update %s: %d %v", name, code, out)
				}
			})
		}
	}
	wg.Wait()
	for _, s := range []*serving{st.a, st.b} {
		code, out := s.call(t, http.MethodGet, "/members", st.admin, nil)
		require.Equal(t, http.StatusOK, code, "%v", out)
		for _, m := range out["members"].([]any) {
			mm := m.(map[string]any)
			if mm["name"] == "admin" {
				continue
			}
			require.Equal(t, "t-"+mm["name"].(string), mm["role"].(map[string]any)["title"], "%v", mm)
		}
	}
}

// The members survive a restart of both brokers; the config file holds
// none of them, and says where they are; a broker started on it without
// NATS refuses rather than serve a team with no members.
func TestSharedMembersSurviveRestartAndLeaveTheFile(t *testing.T) {
	st := startSharedTeam(t)
	carol := st.create(t, st.a, "carol")
	dave := st.create(t, st.b, "dave", "operator")

	var file struct {
		Team  map[string]any `json:"team"`
		Store struct {
			Members           []any `json:"members"`
			MembersInDatabase bool  `json:"membersInDatabase"`
		} `json:"store"`
	}
	raw, err := os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &file))
	require.Empty(t, file.Store.Members, "the config file keeps no members: %s", raw)
	require.True(t, file.Store.MembersInDatabase)
	require.NotEmpty(t, file.Team["id"], "the team block stays in the file")
	for _, secret := range []string{carol, dave, st.admin, "carol", "dave"} {
		require.NotContains(t, string(raw), secret)
	}

	require.NoError(t, st.a.stop())
	require.NoError(t, st.b.stop())

	var stderr strings.Builder
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--config-path", st.cfgPath, "--db-url", st.dbURL}, nil, io.Discard, &stderr)
	require.ErrorContains(t, err, "members live in the database")

	a, b := startServe(t, st.args...), startServe(t, st.args...)
	for _, s := range []*serving{a, b} {
		require.Equal(t, []string{"admin", "carol", "dave"}, memberNames(t, s, carol))
		code, out := s.call(t, http.MethodPost, "/push", dave, map[string]any{"to": "carol", "body": "after the restart"})
		require.Equal(t, http.StatusOK, code, "%v", out)
	}
	code, out := a.call(t, http.MethodGet, "/members", st.admin, nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	for _, m := range out["members"].([]any) {
		mm := m.(map[string]any)
		if mm["name"] == "dave" {
			require.Contains(t, mm["permissions"], "objectives.create", "dave's permissions: %v", mm)
		}
	}
	raw, err = os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &file))
	require.Empty(t, file.Store.Members, "a restart does not write the members back: %s", raw)
}
