package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// Bounds of a revoke's reach to another broker's streams: NATS brings it
// within milliseconds (one second is the promise, doubled for a loaded
// machine); without NATS the store's poll (one second) does, within two
// polls and the gap wait, here bounded generously.
const (
	revokeOverNATS  = 2 * time.Second
	revokeFromStore = 10 * time.Second
)

// TestRevokeOnBEndsStreamOnA: alice streams on broker A; her token is
// revoked on broker B. Her stream on A ends at once and a unary call on A
// is refused 401; bob's stream on A is untouched.
func TestRevokeOnBEndsStreamOnA(t *testing.T) {
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
