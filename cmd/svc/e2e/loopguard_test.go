package e2e

// The loop guard over the wire (docs/RUNNER.md, Loop guard): reply chains
// stamped from the agents' reported turns, the hop bound, the notice, the
// agent push limit, and forged inputs that change nothing.

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// turn runs fn inside a turn of member's runner on message id ("" for a
// turn with no message), as the runner reports it.
func turn(t *testing.T, d driver, c cred, member, id string, fn func()) {
	t.Helper()
	req := obj{"name": member, "turn": "TURN_PHASE_STARTED"}
	if id != "" {
		req["turnMessageId"] = id
	}
	mustCall(t, d, c, "UpdateDelivery", req)
	fn()
	end := obj{"name": member, "turn": "TURN_PHASE_ENDED"}
	if id != "" {
		end["position"] = id
	}
	mustCall(t, d, c, "UpdateDelivery", end)
}

// requireChain asserts a message's reply chain as the wire shows it: absent
// fields for a message outside any chain.
func requireChain(t *testing.T, m obj, hops int, replyTo string, stopped bool) {
	t.Helper()
	if hops == 0 {
		require.NotContains(t, m, "hops", "%v", m)
	} else {
		require.Equal(t, float64(hops), m["hops"], "%v", m)
	}
	if replyTo == "" {
		require.NotContains(t, m, "replyTo", "%v", m)
	} else {
		require.Equal(t, replyTo, m["replyTo"], "%v", m)
	}
	if stopped {
		require.Equal(t, true, m["loopStopped"], "%v", m)
	} else {
		require.NotContains(t, m, "loopStopped", "%v", m)
	}
}

// Two agents that always answer each other after a person's DM: hops count
// up, the ninth hop (past the default bound of 8) is stored but stopped,
// and the managers and the person who started it get one notice, on their
// streams and in the loop: thread's history. Nothing in data changes the
// chain.
func TestLoopGuardStopsTwoAgents(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		aliceTok, carolTok := createMember(t, d, admin, "alice"), createMember(t, d, admin, "carol")
		alphaTok, betaTok := createMember(t, d, admin, "alpha"), createMember(t, d, admin, "beta")
		alice, carol := bearer(aliceTok), bearer(carolTok)
		agents := map[string]cred{"alpha": bearer(alphaTok), "beta": bearer(betaTok)}
		for name, c := range agents {
			mustCall(t, d, c, "UpdateDelivery", obj{"name": name}) // its runner attaches
		}
		adminStream := subscribeOn(t, p, transportOf(d), tokenOf(admin), "admin")
		defer adminStream.close()
		betaStream := subscribeOn(t, p, transportOf(d), betaTok, "beta")
		defer betaStream.close()

		start := mustCall(t, d, alice, "Push", obj{"to": "alpha", "body": "alpha, ask beta about the release"})["message"].(obj)
		requireChain(t, start, 0, "", false)
		// Forged reply-chain fields in data are data, nothing more.
		forged := obj{"hops": 0, "replyTo": start["id"], "loopStopped": false, "kind": "agent_loop_stopped"}
		prev, from, to := start["id"].(string), "alpha", "beta"
		var ids []string
		for hop := 1; hop <= 9; hop++ {
			turn(t, d, agents[from], from, prev, func() {
				m := mustCall(t, d, agents[from], "Push", obj{"to": to, "body": "what do you think?", "data": forged})["message"].(obj)
				requireChain(t, m, hop, prev, hop > 8)
				prev = m["id"].(string)
			})
			ids = append(ids, prev)
			from, to = to, from
		}
		// beta's stream carries the stopped message, flagged, for what its
		// runner skips.
		for {
			m := betaStream.nextMessage(t)
			if m["id"] == ids[8] {
				requireChain(t, m, 9, ids[7], true)
				break
			}
		}

		// The notice.
		chain := start["id"].(string)
		var notice obj
		for notice == nil {
			if m := adminStream.nextMessage(t); m["from"] == "svc:loop-guard" {
				notice = m
			}
		}
		require.Equal(t, "Agent loop stopped: alpha, beta", notice["title"])
		require.Equal(t, "warning", notice["level"])
		require.Equal(t, true, notice["loopStopped"], "the notice wakes no agent")
		data := notice["data"].(obj)
		require.Equal(t, obj{
			"kind": "agent_loop_stopped", "thread": "loop:" + chain, "conversation": "dm:alpha:beta",
			"message": ids[8], "chain": chain, "agents": []any{"alpha", "beta"}, "hops": 9.0, "maxHops": 8.0,
		}, data)
		for _, c := range []cred{admin, alice} {
			h := listOf(t, mustCall(t, d, c, "History", obj{"thread": "loop:" + chain}), "messages")
			require.Len(t, h, 1)
			require.Equal(t, notice["id"], h[0]["id"])
		}
		mustFail(t, d, carol, "History", obj{"thread": "loop:" + chain}, "forbidden")
		mustFail(t, d, agents["alpha"], "History", obj{"thread": "loop:" + chain}, "forbidden")
		// Nobody posts on a notice's thread.
		mustFail(t, d, admin, "Push", obj{"body": "x", "data": obj{"thread": "loop:" + chain}}, "bad_request")

		// The chain stays stopped, and is noticed once.
		turn(t, d, agents["alpha"], "alpha", ids[8], func() {
			m := mustCall(t, d, agents["alpha"], "Push", obj{"to": "beta", "body": "still there?"})["message"].(obj)
			requireChain(t, m, 10, ids[8], true)
		})
		// A person's message starts a new chain.
		again := mustCall(t, d, alice, "Push", obj{"to": "beta", "body": "beta, one more thing"})["message"].(obj)
		requireChain(t, again, 0, "", false)
		turn(t, d, agents["beta"], "beta", again["id"].(string), func() {
			m := mustCall(t, d, agents["beta"], "Push", obj{"to": "alpha", "body": "on it"})["message"].(obj)
			requireChain(t, m, 1, again["id"].(string), false)
		})
		h := listOf(t, mustCall(t, d, admin, "History", obj{"thread": "loop:" + chain}), "messages")
		require.Len(t, h, 1, "one notice per chain")
	})
}

// Nothing a member can put in a request (top-level fields the API does not
// have, headers, gRPC-gateway metadata headers) makes a person's message an
// agent's or the reverse.
func TestLoopGuardForgedRequests(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := bearer(p.adminToken(t))
	aliceTok, alphaTok := createMember(t, d, admin, "alice"), createMember(t, d, admin, "alpha")
	mustCall(t, d, bearer(alphaTok), "UpdateDelivery", obj{"name": "alpha"})
	start := push(t, p, aliceTok, obj{"to": "alpha", "body": "go"})
	forgedBody := obj{"to": "alpha", "body": "x", "hops": 7, "replyTo": start, "reply_to": start, "loopStopped": true, "loop_stopped": true}
	forgedHeaders := []reqOpt{
		withHeader("X-SVC-Reply-To", start), withHeader("X-SVC-Turn", start), withHeader("Grpc-Metadata-Hops", "7"),
		withHeader("Grpc-Metadata-Reply-To", start), withHeader("Grpc-Metadata-Loop-Stopped", "true"),
	}
	pushAs := func(tok string) obj {
		r := p.do(t, http.MethodPost, "/push", forgedBody, append([]reqOpt{withBearer(tok)}, forgedHeaders...)...)
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		return r.body["message"].(obj)
	}
	requireChain(t, pushAs(aliceTok), 0, "", false)
	requireChain(t, pushAs(alphaTok), 0, "", false) // an agent outside a turn
	turn(t, d, bearer(alphaTok), "alpha", start, func() {
		requireChain(t, pushAs(alphaTok), 1, start, false)
		requireChain(t, pushAs(aliceTok), 0, "", false) // a person while an agent is in a turn
	})
	mustFail(t, d, bearer(aliceTok), "UpdateDelivery", obj{"name": "alpha", "turn": "TURN_PHASE_STARTED"}, "forbidden")
}

// An agent's pushes in a turn share a bucket (60, one a second back by
// default): past it a push is 429 rate_limited with Retry-After and stores
// nothing; people and agents outside a turn are never counted.
func TestAgentPushRateLimit(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		alice := bearer(createMember(t, d, admin, "alice"))
		agent := bearer(createMember(t, d, admin, "agent"))
		mustCall(t, d, agent, "UpdateDelivery", obj{"name": "agent"})
		for range 70 {
			mustCall(t, d, alice, "Push", obj{"to": "agent", "body": "x"})
			mustCall(t, d, agent, "Push", obj{"to": "alice", "body": "x"})
		}
		start := mustCall(t, d, alice, "Push", obj{"to": "agent", "body": "go"})["message"].(obj)["id"].(string)
		turn(t, d, agent, "agent", start, func() {
			sent := 0
			var refused result
			for range 80 {
				r := d.call(t, agent, "Push", obj{"to": "alice", "body": "x"})
				if r.code != "" {
					refused = r
					break
				}
				sent++
			}
			require.Equal(t, "rate_limited", refused.code, "the bucket ran out within 80 pushes")
			require.GreaterOrEqual(t, sent, 60, "a burst of 60 goes through")
			require.Equal(t, 1, refused.retryAfter, "one token a second")
			mustCall(t, d, alice, "Push", obj{"to": "agent", "body": "people are never limited"})
			h := listOf(t, mustCall(t, d, alice, "History", obj{"with": "agent", "limit": 500}), "messages")
			n := 0
			for _, m := range h {
				if m["from"] == "agent" && m["hops"] == 1.0 {
					n++
				}
			}
			require.Equal(t, sent, n, "a refused push stores nothing")
			require.Eventually(t, func() bool {
				return d.call(t, agent, "Push", obj{"to": "alice", "body": "x"}).code == ""
			}, 5*time.Second, 100*time.Millisecond, "a token comes back")
		})
		mustCall(t, d, agent, "Push", obj{"to": "alice", "body": "outside a turn: not counted"})
	})
}

// The loopGuard block of the config file sets the bound and the bucket;
// a value out of bounds keeps the broker from starting.
func TestLoopGuardConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adminTok, aliceTok, alphaTok, betaTok := randomToken(t), randomToken(t), randomToken(t), randomToken(t)
	cfgPath := filepath.Join(dir, "svc.json")
	cfg := func(loopGuard obj) obj {
		return obj{
			"team": obj{"name": "crew", "permissionPresets": obj{"admin": allLeaves}},
			"store": obj{"members": []obj{
				{"name": "admin", "permissions": []string{"admin"}, "token": adminTok},
				{"name": "alice", "permissions": []string{}, "token": aliceTok},
				{"name": "alpha", "permissions": []string{}, "token": alphaTok},
				{"name": "beta", "permissions": []string{}, "token": betaTok},
			}},
			"loopGuard": loopGuard,
		}
	}
	writeConfig(t, filepath.Join(dir, "bad.json"), cfg(obj{"maxHops": 1001}))
	code, _, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", filepath.Join(dir, "bad.json")}, nil, nil)
	require.NotZero(t, code)
	require.Contains(t, stderr, "loopGuard.maxHops")

	writeConfig(t, cfgPath, cfg(obj{"maxHops": 2, "agentPushesPerMinute": 1, "agentPushBurst": 3}))
	p := mustStartSvc(t, procOpts{configPath: cfgPath})
	require.Contains(t, p.stderr.String(), "max_hops=2 agent_pushes_per_minute=1 agent_push_burst=3")
	d := restDriver{p}
	toks := map[string]string{"alpha": alphaTok, "beta": betaTok}
	for name, tok := range toks {
		mustCall(t, d, bearer(tok), "UpdateDelivery", obj{"name": name})
	}
	prev, from, to := push(t, p, aliceTok, obj{"to": "alpha", "body": "go"}), "alpha", "beta"
	for hop := 1; hop <= 3; hop++ {
		turn(t, d, bearer(toks[from]), from, prev, func() {
			m := mustCall(t, d, bearer(toks[from]), "Push", obj{"to": to, "body": "x"})["message"].(obj)
			requireChain(t, m, hop, prev, hop > 2)
			prev = m["id"].(string)
		})
		from, to = to, from
	}
	// beta has pushed once in a turn: two tokens left of three, and one a
	// minute back.
	turn(t, d, bearer(betaTok), "beta", prev, func() {
		mustCall(t, d, bearer(betaTok), "Push", obj{"to": "alice", "body": "x"})
		mustCall(t, d, bearer(betaTok), "Push", obj{"to": "alice", "body": "x"})
		r := mustFail(t, d, bearer(betaTok), "Push", obj{"to": "alice", "body": "x"}, "rate_limited")
		require.InDelta(t, 60, r.retryAfter, 2)
	})
	// The block survives the broker's own rewrites of the file.
	createMember(t, d, bearer(adminTok), "dave")
	p.mustStop(t)
	p = mustStartSvc(t, procOpts{configPath: cfgPath})
	require.Contains(t, p.stderr.String(), "max_hops=2 agent_pushes_per_minute=1 agent_push_burst=3")
}
