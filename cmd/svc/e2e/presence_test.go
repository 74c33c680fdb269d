package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// presenceFields are the keys a Presence may carry (proto/svc/v1).
var presenceFields = []string{"activity", "busy", "connected", "createdAt", "lastSeen", "name", "role"}

// presenceOf returns the roster's Presence of name, or nil when the roster
// does not list it.
func presenceOf(t testing.TB, p *proc, c cred, name string) obj {
	t.Helper()
	return presenceVia(t, restDriver{p}, c, name)
}

// presenceVia is presenceOf over a given transport.
func presenceVia(t testing.TB, d driver, c cred, name string) obj {
	t.Helper()
	var got obj
	for _, pr := range listOf(t, mustCall(t, d, c, "GetRoster", nil), "connected") {
		for k := range pr {
			require.Contains(t, presenceFields, k, "unexpected Presence field %q: %v", k, pr)
		}
		if pr["name"] == name {
			got = pr
		}
	}
	return got
}

func TestPresenceConnections(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")
	carol := createMember(t, d, admin, "carol")

	roster := mustCall(t, d, admin, "GetRoster", nil)
	var names []string
	for _, tm := range listOf(t, roster, "teammates") {
		names = append(names, tm["name"].(string))
	}
	require.ElementsMatch(t, []string{"admin", "bob", "carol"}, names)
	require.Nil(t, presenceOf(t, p, admin, "bob"), "a member never seen is not listed")
	require.Nil(t, presenceVia(t, grpcDriver{p.grpcConn(t)}, admin, "bob"))

	connected := func(t *testing.T, want float64) obj {
		t.Helper()
		// Stream ends reach the broker asynchronously: poll, bounded, until
		// both transports' rosters show the count.
		deadline := time.Now().Add(callTimeout)
		for {
			pr := presenceVia(t, restDriver{p}, admin, "bob")
			pg := presenceVia(t, grpcDriver{p.grpcConn(t)}, admin, "bob")
			if pr != nil && pr["connected"] == want && pg != nil && pg["connected"] == want {
				return pr
			}
			if time.Now().After(deadline) {
				t.Fatalf("bob not connected %v within %s; REST %v, gRPC %v", want, callTimeout, pr, pg)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	sse := p.subscribeSSE(t, bob, "bob", "")
	pr := connected(t, 1)
	created := pr["createdAt"].(float64)
	require.InDelta(t, float64(time.Now().UnixMilli()), created, float64(time.Minute.Milliseconds()))
	require.GreaterOrEqual(t, pr["lastSeen"].(float64), created)
	require.NotContains(t, pr, "activity", "idle has no activity")
	require.NotContains(t, pr, "busy")

	g := p.subscribeGRPC(t, bob, "bob", "")
	connected(t, 2)
	sse.close()
	connected(t, 1)
	g.close()
	pr = connected(t, 0)
	require.Equal(t, created, pr["createdAt"], "createdAt is the first sighting")

	// A push moves lastSeen of a member already seen; it does not make an
	// unseen member seen (only a stream or an activity post does).
	seen := pr["lastSeen"].(float64)
	time.Sleep(5 * time.Millisecond) // lastSeen has millisecond resolution
	mustPush(t, d, bearer(bob), obj{"to": "carol", "body": "hi"})
	require.Greater(t, presenceOf(t, p, admin, "bob")["lastSeen"], seen, "a push refreshes lastSeen")
	mustPush(t, d, bearer(carol), obj{"to": "bob", "body": "hi"})
	require.Nil(t, presenceOf(t, p, admin, "carol"))
}

func TestPresenceActivity(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			d := tr.connect(t, p)
			name := "worker-" + tr.name
			tok := createMember(t, restDriver{p}, admin, name)
			me := bearer(tok)
			require.Nil(t, presenceOf(t, p, admin, name))

			// Refused posts leave the state before them: working.
			tests := []struct {
				name     string
				req      obj
				code     string
				activity any // nil: absent
				busy     any // nil: absent
			}{
				{name: "working", req: obj{"state": "working"}, activity: "working", busy: true},
				{name: "blocked", req: obj{"state": "blocked"}, activity: "blocked", busy: false},
				{name: "idle", req: obj{"state": "idle"}},
				{name: "busy true means working", req: obj{"busy": true}, activity: "working", busy: true},
				{name: "busy false means idle", req: obj{"busy": false}},
				{name: "working again", req: obj{"state": "working"}, activity: "working", busy: true},
				{name: "neither state nor busy", req: obj{}, code: "bad_request", activity: "working", busy: true},
				{name: "unknown state", req: obj{"state": "sleeping"}, code: "bad_request", activity: "working", busy: true},
				{name: "state in capitals", req: obj{"state": "WORKING"}, code: "bad_request", activity: "working", busy: true},
				{name: "empty state", req: obj{"state": ""}, code: "bad_request", activity: "working", busy: true},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					if tc.code != "" {
						mustFail(t, d, me, "SetActivity", tc.req, tc.code)
					} else {
						mustCall(t, d, me, "SetActivity", tc.req)
					}
					pr := presenceVia(t, d, admin, name)
					require.NotNil(t, pr, "posting activity makes a member seen")
					require.Equal(t, 0.0, pr["connected"])
					want := obj{}
					if tc.activity != nil {
						want["activity"], want["busy"] = tc.activity, tc.busy
					}
					got := obj{}
					for _, k := range []string{"activity", "busy"} {
						if v, ok := pr[k]; ok {
							got[k] = v
						}
					}
					require.Equal(t, want, got)
				})
			}

			t.Run("session cookie is refused", func(t *testing.T) {
				session := login(t, d, enroll(t, d, admin, name))
				mustFail(t, d, sessionCred(session), "SetActivity", obj{"state": "idle"}, "forbidden")
				require.Equal(t, "working", presenceOf(t, p, admin, name)["activity"])
			})
			t.Run("no credential", func(t *testing.T) {
				mustFail(t, d, anonymous, "SetActivity", obj{"state": "idle"}, "unauthenticated")
			})
		})
	}
}
