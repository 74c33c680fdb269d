package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server"
	"svc/server/notify"
)

// The throughput limits counted with every broker of a team
// (docs/DECISIONS.md, "Rate limits across brokers"): requests sent
// alternately to A and B are refused at the limit in total, not at N
// times it.

// postHookAs posts to s's /hooks/slug with secret and answers the status
// and the Retry-After header.
func postHookAs(t *testing.T, s *serving, slug, secret string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.base+"/hooks/"+slug, strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hook-Secret", secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// dropEndpoint creates on s an endpoint slug for bob, who stays offline,
// that drops what comes while he is (a receipt and no message: the
// cheapest delivery), with the header secret hookSecret.
func dropEndpoint(t *testing.T, s *serving, admin, slug string) {
	t.Helper()
	code, out := s.call(t, http.MethodPost, "/notifications/endpoints", admin, map[string]any{
		"slug": slug, "targets": []any{map[string]any{"member": "bob"}},
		"auth": map[string]any{"kind": "header-secret"}, "policy": map[string]any{"ifOffline": "drop"},
	})
	require.Equal(t, http.StatusCreated, code, "%v", out)
	code, out = s.call(t, http.MethodPut, "/notifications/endpoints/"+slug+"/secret", admin, map[string]any{"secret": hookSecret})
	require.Equal(t, http.StatusOK, code, "%v", out)
}

// TestTwoBrokersHookLimits: an endpoint's verified requests, posted
// alternately to A and B, are refused at its rate limit in total (20 a
// minute here, 120 in production: the same code, fewer requests); failed
// verifications from one address likewise at the address's budget, and
// they do not close the endpoint to its sender.
func TestTwoBrokersHookLimits(t *testing.T) {
	was := server.HookRateLimit
	server.HookRateLimit = 20
	t.Cleanup(func() { server.HookRateLimit = was })
	a, b, _, admin, _ := twoBrokers(t)
	dropEndpoint(t, a, admin, "rl")
	dropEndpoint(t, a, admin, "rb")
	brokers := []*serving{a, b}

	for i := range server.HookRateLimit {
		code, _ := postHookAs(t, brokers[i%2], "rl", hookSecret)
		require.Equal(t, http.StatusAccepted, code, "request %d", i+1)
	}
	for _, s := range brokers {
		code, after := postHookAs(t, s, "rl", hookSecret)
		require.Equal(t, http.StatusTooManyRequests, code, "past the endpoint's limit, on either broker")
		require.NotEmpty(t, after, "with Retry-After")
	}

	for i := range notify.RejectAddrLimit {
		code, _ := postHookAs(t, brokers[i%2], "rb", "wrong")
		require.Equal(t, http.StatusUnauthorized, code, "failure %d", i+1)
	}
	for _, s := range brokers {
		code, after := postHookAs(t, s, "rb", "wrong")
		require.Equal(t, http.StatusTooManyRequests, code, "past the address's failure budget, on either broker")
		require.NotEmpty(t, after, "with Retry-After")
	}
	code, _ := postHookAs(t, b, "rb", hookSecret)
	require.Equal(t, http.StatusAccepted, code, "failures do not close the endpoint to its sender")
}

// TestTwoBrokersAgentPushLimit: bob's runner starts a turn on A; bob
// pushing in it alternately on A and B is refused at the team's burst
// (the default, 60 at 60 a minute) in total, give or take the tokens that
// came back while the test pushed, not at twice it.
func TestTwoBrokersAgentPushLimit(t *testing.T) {
	a, b, _, _, tokens := twoBrokers(t)
	const burst, perSecond = 60, 1 // teamconfig's defaults
	code, out := a.call(t, http.MethodPost, "/members/bob/delivery", tokens["bob"], map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", out)
	code, out = b.call(t, http.MethodPost, "/push", tokens["alice"], map[string]any{"to": "bob", "body": "work"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	turn := out["message"].(map[string]any)["id"].(string)
	code, out = a.call(t, http.MethodPost, "/members/bob/delivery", tokens["bob"], map[string]any{"turn": "TURN_PHASE_STARTED", "turnMessageId": turn})
	require.Equal(t, http.StatusOK, code, "%v", out)

	brokers := []*serving{a, b}
	start := time.Now()
	allowed := 0
	for ; allowed < 3*burst; allowed++ {
		code, out := brokers[allowed%2].call(t, http.MethodPost, "/push", tokens["bob"], map[string]any{"to": "alice", "body": "reply"})
		if code == http.StatusTooManyRequests {
			break
		}
		require.Equal(t, http.StatusOK, code, "push %d: %v", allowed+1, out)
	}
	// Tokens come back at perSecond while the test pushes.
	refilled := int(time.Since(start).Seconds()*perSecond) + 1
	require.GreaterOrEqual(t, allowed, burst, "the burst is there")
	require.LessOrEqual(t, allowed, burst+refilled, "the burst once for both brokers, plus what came back in %s", time.Since(start))
}
