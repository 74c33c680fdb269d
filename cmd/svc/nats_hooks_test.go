package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/server"
	"svc/server/notify"
)

// hookBrokers is twoBrokers with a short hooks lease, A holding it (B
// starts once A took it), a third member carol, and the database's URL.
func hookBrokers(t *testing.T) (a, b *serving, url, admin string, tokens map[string]string) {
	t.Helper()
	was := server.HookLeaseTTL
	server.HookLeaseTTL = 3 * time.Second
	t.Cleanup(func() { server.HookLeaseTTL = was })
	a, args, url, _, admin := firstBroker(t)
	tokens = map[string]string{}
	for _, name := range []string{"alice", "bob", "carol"} {
		code, out := a.call(t, http.MethodPost, "/members", admin, map[string]any{"name": name})
		require.Equal(t, http.StatusOK, code, "%v", out)
		tokens[name] = out["token"].(string)
	}
	first := leaseHolder(t, url)
	require.NotEmpty(t, first, "A takes the hooks lease at start")
	b = startServe(t, args...)
	return a, b, url, admin, tokens
}

// leaseHolder waits for the hooks lease to be held and answers its
// holder.
func leaseHolder(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var owner string
	require.Eventually(t, func() bool {
		err := conn.QueryRow(t.Context(), `SELECT owner FROM leases WHERE name = $1`, notify.LeaseName).Scan(&owner)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	return owner
}

// leaseEpoch answers the hooks lease's epoch.
func leaseEpoch(t *testing.T, url string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var epoch int64
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT epoch FROM leases WHERE name = $1`, notify.LeaseName).Scan(&epoch))
	return epoch
}

// hookEndpoint creates on s an endpoint slug that queues for member while
// it is offline, with a header secret.
func hookEndpoint(t *testing.T, s *serving, admin, slug, member string) {
	t.Helper()
	code, out := s.call(t, http.MethodPost, "/notifications/endpoints", admin, map[string]any{
		"slug": slug, "targets": []any{map[string]any{"member": member}},
		"auth": map[string]any{"kind": "header-secret"}, "policy": map[string]any{"ifOffline": "queue"},
	})
	require.Equal(t, http.StatusCreated, code, "%v", out)
	code, out = s.call(t, http.MethodPut, "/notifications/endpoints/"+slug+"/secret", admin, map[string]any{"secret": hookSecret})
	require.Equal(t, http.StatusOK, code, "%v", out)
}

const hookSecret = "a-hook-secret-of-enough-length-0123456789"

// postHook posts body to s's /hooks/slug and requires it queued.
func postHook(t *testing.T, s *serving, slug, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.base+"/hooks/"+slug, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hook-Secret", hookSecret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	return body
}

// requireOnly requires exactly one message on c, carrying want, and
// nothing more for a while.
func requireOnly(t *testing.T, c <-chan sseMessage, want string, within time.Duration) {
	t.Helper()
	select {
	case m := <-c:
		require.Contains(t, m.body, want)
	case <-time.After(within):
		t.Fatalf("nothing delivered within %s", within)
	}
	select {
	case m := <-c:
		t.Fatalf("delivered twice, or more: %v", m)
	case <-time.After(time.Second):
	}
}

// TestTwoBrokersHookQueueOnAttach: a hook for bob lands while bob is
// offline; bob attaches to the broker that does not run the hook
// scheduler, and gets it once. Then the holder stops: carol's queued hook
// goes out once carol attaches to the other broker, which took the lease
// over within its lifetime (and a renewal period).
func TestTwoBrokersHookQueueOnAttach(t *testing.T) {
	a, b, url, admin, tokens := hookBrokers(t)
	hookEndpoint(t, a, admin, "q", "bob")
	hookEndpoint(t, a, admin, "qc", "carol")

	postHook(t, a, "q", `{"text":"for bob while offline"}`)
	bob := openStream(t, b, tokens["bob"], "bob", "")
	requireOnly(t, bob, "for bob while offline", 20*time.Second)

	postHook(t, a, "qc", `{"text":"for carol before the takeover"}`)
	require.NoError(t, a.stop())
	// Only the holder's loop flushes a queue: delivered means B holds the
	// lease (within its lifetime and a renewal period of A's stop; the
	// bound here leaves room for a loaded machine).
	carol := openStream(t, b, tokens["carol"], "carol", "")
	requireOnly(t, carol, "for carol before the takeover", 5*server.HookLeaseTTL)
	require.GreaterOrEqual(t, leaseEpoch(t, url), int64(2), "B took the lease over")
}

// TestTwoBrokersHookDebounceOnNonHolder: a debounced hook posted to the
// broker that does not run the scheduler goes out at the end of its
// window, not at the holder's next 30 s rescan: the non-holder tells the
// holder its ingress wrote rows, and the holder looks at the store every
// few seconds anyway.
func TestTwoBrokersHookDebounceOnNonHolder(t *testing.T) {
	a, b, _, admin, tokens := hookBrokers(t)
	code, out := a.call(t, http.MethodPost, "/notifications/endpoints", admin, map[string]any{
		"slug": "deb", "targets": []any{map[string]any{"member": "bob"}},
		"auth": map[string]any{"kind": "header-secret"}, "policy": map[string]any{"debounceMs": 500},
	})
	require.Equal(t, http.StatusCreated, code, "%v", out)
	code, out = a.call(t, http.MethodPut, "/notifications/endpoints/deb/secret", admin, map[string]any{"secret": hookSecret})
	require.Equal(t, http.StatusOK, code, "%v", out)
	bob := openStream(t, b, tokens["bob"], "bob", "")
	eventually(t, admin, "bob", rosterEntry{Connected: 1}, a, b) // the holder sees bob attached on B
	// The holder's loop passed on bob's attach and has nothing pending: it
	// would sleep 30 s unless told or looking by itself.
	time.Sleep(time.Second)

	postHook(t, b, "deb", `{"text":"debounced on the non-holder"}`)
	requireOnly(t, bob, "debounced on the non-holder", 10*time.Second)
}

// TestTwoBrokersApprovalAcrossBrokers: bob asks on A, where its stream
// is (so presence reads blocked there); the admin's decision on B reaches
// bob on A, and A's presence no longer reads blocked. (The admin decides:
// approvers named on one broker are in its config file only until the
// members move to the store.)
func TestTwoBrokersApprovalAcrossBrokers(t *testing.T) {
	a, b, _, admin, tokens := hookBrokers(t)
	bob := openStream(t, a, tokens["bob"], "bob", "")
	code, out := a.call(t, http.MethodPost, "/approvals", tokens["bob"], map[string]any{"tool": "Bash", "input": map[string]any{"command": "ls"}})
	require.Equal(t, http.StatusCreated, code, "%v", out)
	id := out["id"].(string)
	require.Equal(t, "blocked", activityOn(t, a, tokens["alice"], "bob"))

	code, out = b.call(t, http.MethodPost, "/approvals/"+id+"/decide", admin, map[string]any{"decision": "allow"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "allowed", out["status"], "%v", out)
	// bob's stream on A gets the decision (on the approval's thread).
	deadline := time.After(30 * time.Second)
	for found := false; !found; {
		select {
		case m := <-bob:
			found = strings.Contains(m.body, "allow")
		case <-deadline:
			t.Fatal("the decision never reached bob on A")
		}
	}
	require.Eventually(t, func() bool { return activityOn(t, a, tokens["alice"], "bob") != "blocked" },
		20*time.Second, 50*time.Millisecond, "A's presence still reads bob blocked")
	code, out = a.call(t, http.MethodPost, "/approvals/"+id+"/decide", admin, map[string]any{"decision": "deny"})
	require.Equal(t, http.StatusConflict, code, "decided once: %v", out)
}

// activityOn answers member's live activity in s's roster ("" when not
// connected there).
func activityOn(t *testing.T, s *serving, token, member string) string {
	t.Helper()
	code, out := s.call(t, http.MethodGet, "/roster", token, nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	conn, _ := out["connected"].([]any)
	for _, c := range conn {
		p := c.(map[string]any)
		if p["name"] == member {
			act, _ := p["activity"].(string)
			return act
		}
	}
	return ""
}

// TestTwoBrokersRunnerMovesLosesNoTurn: bob's runner works on A (the
// runner's protocol over REST: attach with an empty delivery update, a
// turn started and ended per message, its position acknowledged); A
// stops in the middle of a turn; the runner attaches to B, finds the
// position and the turn it left, and resumes from the position: every
// message once, none lost.
func TestTwoBrokersRunnerMovesLosesNoTurn(t *testing.T) {
	a, b, _, _, tokens := twoBrokers(t)
	deliver := func(s *serving, body map[string]any) map[string]any {
		t.Helper()
		code, out := s.call(t, http.MethodPost, "/members/bob/delivery", tokens["bob"], body)
		require.Equal(t, http.StatusOK, code, "%v", out)
		return out
	}
	deliver(a, map[string]any{})
	stream := openStream(t, a, tokens["bob"], "bob", "")
	var ids []string
	for i := range 3 {
		code, out := b.call(t, http.MethodPost, "/push", tokens["alice"], map[string]any{"to": "bob", "body": fmt.Sprintf("turn %d", i)})
		require.Equal(t, http.StatusOK, code, "%v", out)
		ids = append(ids, out["message"].(map[string]any)["id"].(string))
	}
	got := collect(t, stream, 3)
	require.Equal(t, ids, []string{got[0].id, got[1].id, got[2].id})
	deliver(a, map[string]any{"turn": "TURN_PHASE_STARTED", "turnMessageId": ids[0]})
	deliver(a, map[string]any{"turn": "TURN_PHASE_ENDED", "position": ids[0]})
	deliver(a, map[string]any{"turn": "TURN_PHASE_STARTED", "turnMessageId": ids[1]})
	require.NoError(t, a.stop())

	st := deliver(b, map[string]any{})
	require.Equal(t, ids[0], st["position"], "%v", st)
	require.Equal(t, true, st["turnActive"], "%v", st)
	require.Equal(t, ids[1], st["turnMessageId"], "%v", st)
	resumed := openStream(t, b, tokens["bob"], "bob", ids[0])
	got = collect(t, resumed, 2)
	require.Equal(t, []string{"turn 1", "turn 2"}, []string{got[0].body, got[1].body})
	require.Equal(t, ids[1:], []string{got[0].id, got[1].id})
	select {
	case extra := <-resumed:
		t.Fatalf("nothing more: %v", extra)
	case <-time.After(300 * time.Millisecond):
	}
}
