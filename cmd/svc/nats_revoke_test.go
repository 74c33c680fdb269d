package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"svc/server"
)

// streamEnds fails unless the stream c ends (its events drained) within
// bound.
func streamEnds(t *testing.T, c <-chan sseMessage, bound time.Duration) {
	t.Helper()
	deadline := time.After(bound)
	for {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the stream did not end within %v", bound)
		}
	}
}

// tokenID is the id of member's only active token.
func tokenID(t *testing.T, s *serving, token, member string) string {
	t.Helper()
	code, out := s.call(t, http.MethodGet, "/members/"+member+"/tokens", token, nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	toks := out["tokens"].([]any)
	require.Len(t, toks, 1)
	return toks[0].(map[string]any)["id"].(string)
}

// Bounds of a revoke's reach to another broker's streams. NATS brings it
// within milliseconds; the tests of that path lengthen the store's poll
// to natsOnlyPoll (revokesOverNATSOnly), so a stream that ends within
// revokeOverNATS ended by NATS, and the bound can be generous for a
// loaded machine. Without NATS the store's poll (one second) does, within
// two polls and the gap wait, here bounded generously.
const (
	revokeOverNATS  = 15 * time.Second
	natsOnlyPoll    = 10 * time.Minute
	revokeFromStore = 10 * time.Second
)

// revokesOverNATSOnly makes the brokers started next read the revocations
// log and the members' version every natsOnlyPoll instead of every
// second, until the test ends: a revoke (or a member deleted, which
// reaches streams both ways) then reaches another broker's streams within
// revokeOverNATS only through NATS.
func revokesOverNATSOnly(t *testing.T) {
	wasRevocations, wasMembers := server.RevocationPoll, server.MembersPoll
	server.RevocationPoll, server.MembersPoll = natsOnlyPoll, natsOnlyPoll
	t.Cleanup(func() { server.RevocationPoll, server.MembersPoll = wasRevocations, wasMembers })
}

// TestRevokeOnBEndsStreamOnA: alice streams on broker A; her token is
// revoked on broker B. Her stream on A ends at once and a unary call on A
// is refused 401; bob's stream on A is untouched.
func TestRevokeOnBEndsStreamOnA(t *testing.T) {
	revokesOverNATSOnly(t)
	a, b, _, admin, tokens := twoBrokers(t)
	alice := openStream(t, a, tokens["alice"], "alice", "")
	bob := openStream(t, a, tokens["bob"], "bob", "")
	id := tokenID(t, a, tokens["alice"], "alice")

	code, out := b.call(t, http.MethodDelete, "/members/alice/tokens/"+id, admin, nil)
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	streamEnds(t, alice, revokeOverNATS)
	code, _ = a.call(t, http.MethodGet, "/members", tokens["alice"], nil)
	require.Equal(t, http.StatusUnauthorized, code, "the revoked token is refused on A")

	code, out = b.call(t, http.MethodPost, "/push", admin, map[string]any{"to": "bob", "body": "still here"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "still here", collect(t, bob, 1)[0].body, "another member's stream goes on")
}

// TestRevokeOnBWithoutNATS: the same while NATS is down: the revoke
// reaches A's streams from the store's revocations log.
func TestRevokeOnBWithoutNATS(t *testing.T) {
	a, b, ns, admin, tokens := twoBrokers(t)
	alice := openStream(t, a, tokens["alice"], "alice", "")
	id := tokenID(t, a, tokens["alice"], "alice")

	ns.Stop()
	code, out := b.call(t, http.MethodDelete, "/members/alice/tokens/"+id, admin, nil)
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	code, _ = a.call(t, http.MethodGet, "/members", tokens["alice"], nil)
	require.Equal(t, http.StatusUnauthorized, code, "the revoked token is refused on A")
	streamEnds(t, alice, revokeFromStore)
}

// TestDeleteMemberOnBEndsStreamOnA: deleting a member on B ends every
// stream of hers on A.
func TestDeleteMemberOnBEndsStreamOnA(t *testing.T) {
	revokesOverNATSOnly(t)
	a, b, _, admin, tokens := twoBrokers(t)
	alice := openStream(t, a, tokens["alice"], "alice", "")
	code, out := b.call(t, http.MethodDelete, "/members/alice", admin, nil)
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	streamEnds(t, alice, revokeOverNATS)
	code, _ = a.call(t, http.MethodGet, "/members", tokens["alice"], nil)
	require.Equal(t, http.StatusUnauthorized, code)
}

// TestRotateTokenOnBEndsStreamOnA: rotating alice's token on B ends the
// stream her old token opened on A.
func TestRotateTokenOnBEndsStreamOnA(t *testing.T) {
	revokesOverNATSOnly(t)
	a, b, _, admin, tokens := twoBrokers(t)
	alice := openStream(t, a, tokens["alice"], "alice", "")
	code, out := b.call(t, http.MethodPost, "/members/alice/rotate-token", admin, map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", out)
	streamEnds(t, alice, revokeOverNATS)
	code, _ = a.call(t, http.MethodGet, "/members", tokens["alice"], nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = a.call(t, http.MethodGet, "/members", out["token"].(string), nil)
	require.Equal(t, http.StatusOK, code, "the new token works on A")
}

// twoBrokersTOTP starts brokers a and b of one team, as twoBrokers does,
// with member alice enrolled in TOTP before b starts (b reads members from
// the config file); it returns alice's TOTP secret.
func twoBrokersTOTP(t *testing.T) (a, b *serving, secret string) {
	t.Helper()
	a, args, _, _, admin := firstBroker(t)
	code, out := a.call(t, http.MethodPost, "/members", admin, map[string]any{"name": "alice"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	code, out = a.call(t, http.MethodPost, "/members/alice/enroll-totp", admin, map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", out)
	b = startServe(t, args...)
	return a, b, out["totpSecret"].(string)
}

// login posts a TOTP code for alice to s, with no other credential, and
// returns the status.
func login(t *testing.T, s *serving, code string) int {
	t.Helper()
	body, err := json.Marshal(map[string]any{"member": "alice", "code": code})
	require.NoError(t, err)
	resp, err := http.Post(s.base+"/session/totp", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

// currentCode is the secret's code now; wrongCode one that is not.
func currentCode(t *testing.T, secret string) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, time.Now())
	require.NoError(t, err)
	return c
}

func wrongCode(t *testing.T, secret string) string {
	n, err := strconv.Atoi(currentCode(t, secret))
	require.NoError(t, err)
	return fmt.Sprintf("%06d", (n+500_000)%1_000_000)
}

// TestTOTPCodeUsedOnARefusedOnB: a TOTP code that opened a session on
// broker A does not open one on broker B.
func TestTOTPCodeUsedOnARefusedOnB(t *testing.T) {
	a, b, secret := twoBrokersTOTP(t)
	code := currentCode(t, secret)
	require.Equal(t, http.StatusOK, login(t, a, code))
	require.Equal(t, http.StatusUnauthorized, login(t, b, code), "a used code is refused on the other broker")
	require.Equal(t, http.StatusUnauthorized, login(t, a, code), "and on the broker that took it")
}

// TestLoginFailuresCountAcrossBrokers: the member's failed logins spread
// over A and B lock her out as many on one broker would: past the limit
// even her correct code is refused, on either broker.
func TestLoginFailuresCountAcrossBrokers(t *testing.T) {
	a, b, secret := twoBrokersTOTP(t)
	const limit = 5 // auth.TOTPMemberFailures
	for i := range limit {
		s := a
		if i%2 == 1 {
			s = b
		}
		require.Equal(t, http.StatusUnauthorized, login(t, s, wrongCode(t, secret)), "failure %d", i+1)
	}
	code := currentCode(t, secret)
	require.Equal(t, http.StatusTooManyRequests, login(t, a, code), "locked out on A")
	require.Equal(t, http.StatusTooManyRequests, login(t, b, code), "locked out on B")
}

// TestEnrollMintsCountAcrossBrokers: enrollment codes minted from one
// address on A and B count against one limit.
func TestEnrollMintsCountAcrossBrokers(t *testing.T) {
	a, b, _ := twoBrokersTOTP(t)
	const limit = 10 // auth.EnrollMintLimit
	mint := func(s *serving) int {
		resp, err := http.Post(s.base+"/enroll", "application/json", bytes.NewReader([]byte(`{}`)))
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	for i := range limit {
		s := a
		if i%2 == 1 {
			s = b
		}
		require.Equal(t, http.StatusOK, mint(s), "mint %d", i+1)
	}
	require.Equal(t, http.StatusTooManyRequests, mint(a))
	require.Equal(t, http.StatusTooManyRequests, mint(b))
}

// sessionLogin logs alice in on s with the secret's current code and
// returns her session cookie.
func sessionLogin(t *testing.T, s *serving, secret string) *http.Cookie {
	t.Helper()
	body, err := json.Marshal(map[string]any{"member": "alice", "code": currentCode(t, secret)})
	require.NoError(t, err)
	resp, err := http.Post(s.base+"/session/totp", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Value != "" {
			return c
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// cookieStream opens alice's message stream on s with a session cookie;
// the returned channel closes when the stream ends.
func cookieStream(t *testing.T, s *serving, c *http.Cookie) <-chan sseMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/subscribe?name=alice", nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseMessage)
	ready := make(chan struct{})
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		once := false
		for sc.Scan() {
			if !once && strings.TrimSpace(sc.Text()) == "event: ready" {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("stream not ready within 30 s")
	}
	return out
}

// sessionCall sends a GET with the session cookie and returns the status.
func sessionCall(t *testing.T, s *serving, path string, c *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

// TestSessionRevokedOnBEndsStreamOnA: alice's web session, streaming on
// A, is revoked on B: the stream on A ends and the session is refused on A.
func TestSessionRevokedOnBEndsStreamOnA(t *testing.T) {
	revokesOverNATSOnly(t)
	a, b, secret := twoBrokersTOTP(t)
	c := sessionLogin(t, a, secret)
	stream := cookieStream(t, a, c)
	req, err := http.NewRequest(http.MethodGet, b.base+"/members/alice/sessions", nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	_ = resp.Body.Close()
	require.Len(t, list.Sessions, 1)

	req, err = http.NewRequest(http.MethodDelete, b.base+"/members/alice/sessions/"+list.Sessions[0].ID, nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	streamEnds(t, stream, revokeOverNATS)
	require.Equal(t, http.StatusUnauthorized, sessionCall(t, a, "/session", c), "the revoked session is refused on A")
}
