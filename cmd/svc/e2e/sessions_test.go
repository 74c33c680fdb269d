package e2e

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Sessions are listed and ended by the member or a manager, their streams
// end with them, and re-enrolling TOTP ends every session of the member.
func TestSessionsAreRevocable(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		aliceTok := createMember(t, d, admin, "alice")
		bob := bearer(createMember(t, d, admin, "bob"))
		alice := enroll(t, d, admin, "alice")
		s1, s2 := login(t, d, alice), login(t, d, alice)
		// sessionIDs lists alice's sessions as caller, keyed by id, with
		// whether each is the caller's own.
		sessionIDs := func(caller cred) map[string]bool {
			out := map[string]bool{}
			for _, s := range listOf(t, mustCall(t, d, caller, "ListSessions", obj{"name": "alice"}), "sessions") {
				require.ElementsMatch(t, []string{"id", "createdAt", "lastSeenAt", "expiresAt", "current"}, keys(s))
				out[s["id"].(string)] = s["current"].(bool)
			}
			return out
		}

		own := sessionIDs(sessionCred(s1))
		require.Len(t, own, 2)
		var id1, id2 string
		for id, current := range own {
			if current {
				id1 = id
			} else {
				id2 = id
			}
		}
		require.NotEmpty(t, id1, "the caller's own session is marked current")
		require.NotEmpty(t, id2)
		require.Equal(t, map[string]bool{id1: false, id2: false}, sessionIDs(admin), "a manager lists them too")
		require.Equal(t, map[string]bool{id1: false, id2: false}, sessionIDs(bearer(aliceTok)))
		mustFail(t, d, bob, "ListSessions", obj{"name": "alice"}, "forbidden")
		mustFail(t, d, bob, "RevokeSession", obj{"name": "alice", "id": id2}, "forbidden")
		mustFail(t, d, admin, "ListSessions", obj{"name": "ghost"}, "not_found")

		// Ending s2 ends its stream and its cookie at once.
		stream := p.openSSE(t, "/subscribe?name=alice", sseOpts{}, withSession(s2))
		stream.requireReady(t, "alice")
		mustCall(t, d, admin, "RevokeSession", obj{"name": "alice", "id": id2})
		stream.requireEnds(t)
		requireRejected(t, d, sessionCred(s2))
		requireWorks(t, d, sessionCred(s1), "alice")
		mustFail(t, d, admin, "RevokeSession", obj{"name": "alice", "id": id2}, "not_found")
		mustFail(t, d, admin, "RevokeSession", obj{"name": "alice", "id": "no-such-id"}, "not_found")
		mustFail(t, d, admin, "RevokeSession", obj{"name": "bob", "id": id1}, "not_found")
		require.Equal(t, map[string]bool{id1: true}, sessionIDs(sessionCred(s1)))

		// Rotating tokens is the machine plane: sessions stay.
		mustCall(t, d, admin, "RotateToken", obj{"name": "alice"})
		requireWorks(t, d, sessionCred(s1), "alice")

		// Re-enrolling TOTP ends every session of the member, and its
		// streams.
		stream = p.openSSE(t, "/subscribe?name=alice", sseOpts{}, withSession(s1))
		stream.requireReady(t, "alice")
		enroll(t, d, admin, "alice")
		stream.requireEnds(t)
		requireRejected(t, d, sessionCred(s1))
		require.Empty(t, sessionIDs(admin))

		// Ending one's own current session clears its cookie.
		alice2 := enroll(t, d, admin, "alice")
		s3 := login(t, d, alice2)
		ids := sessionIDs(sessionCred(s3))
		require.Len(t, ids, 1)
		r := d.call(t, sessionCred(s3), "RevokeSession", obj{"name": "alice", "id": slices.Collect(maps.Keys(ids))[0]})
		require.Empty(t, r.code)
		requireClearedCookie(t, r.setCookie)
		requireRejected(t, d, sessionCred(s3))
	})
}
