package e2e

// The delivery state over the wire (docs/RUNNER.md, Delivery contract):
// GET/POST /members/{name}/delivery and their gRPC twins, and the runner
// stream whose close makes its member idle at once.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"GetDelivery":    {http.MethodGet, "/members/{name}/delivery", http.StatusOK, "delivery", unary(apiv1.BrokerClient.GetDelivery)},
		"UpdateDelivery": {http.MethodPost, "/members/{name}/delivery", http.StatusOK, "delivery", unary(apiv1.BrokerClient.UpdateDelivery)},
	} {
		rpcs[name] = spec
	}
}

func TestDeliveryState(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		agentTok := createMember(t, d, admin, "agent")
		aliceTok := createMember(t, d, admin, "alice")
		agent, alice := bearer(agentTok), bearer(aliceTok)

		// Never attached: no position, the backlog from the member's start.
		st := mustCall(t, d, agent, "GetDelivery", obj{"name": "agent"})
		require.Equal(t, obj{"turnActive": false, "backlogAfter": "0000000000000000", "backlogOmitted": 0.0}, st)

		one := push(t, p, aliceTok, obj{"to": "agent", "body": "one"})
		two := push(t, p, aliceTok, obj{"to": "agent", "body": "two"})

		st = mustCall(t, d, agent, "UpdateDelivery", obj{"name": "agent"})
		require.InDelta(t, float64(time.Now().UnixMilli()), st["firstAttachedAt"], float64(time.Minute.Milliseconds()), "%v", st)
		st = mustCall(t, d, agent, "UpdateDelivery", obj{"name": "agent", "turn": "TURN_PHASE_STARTED", "turnMessageId": one})
		require.Equal(t, true, st["turnActive"], "%v", st)
		require.Equal(t, one, st["turnMessageId"], "%v", st)
		require.Contains(t, st, "turnStartedAt")
		require.Equal(t, st, mustCall(t, d, admin, "GetDelivery", obj{"name": "agent"}), "members.manage reads it")

		st = mustCall(t, d, agent, "UpdateDelivery", obj{"name": "agent", "turn": "TURN_PHASE_ENDED", "position": two})
		require.Equal(t, false, st["turnActive"], "%v", st)
		require.Equal(t, two, st["position"], "%v", st)
		for _, k := range []string{"turnMessageId", "turnStartedAt", "backlogAfter"} {
			require.NotContains(t, st, k, "%v", st)
		}
		st = mustCall(t, d, agent, "UpdateDelivery", obj{"name": "agent", "position": one})
		require.Equal(t, two, st["position"], "never backwards: %v", st)

		mustFail(t, d, alice, "GetDelivery", obj{"name": "agent"}, "forbidden")
		mustFail(t, d, alice, "UpdateDelivery", obj{"name": "agent", "position": two}, "forbidden")
		mustFail(t, d, admin, "UpdateDelivery", obj{"name": "agent", "position": two}, "forbidden")
		mustFail(t, d, admin, "GetDelivery", obj{"name": "nobody"}, "not_found")
		mustFail(t, d, agent, "UpdateDelivery", obj{"name": "agent", "position": "9999"}, "bad_request")
		mustFail(t, d, agent, "UpdateDelivery", obj{"name": "agent", "position": "one"}, "bad_request")
		mustFail(t, d, agent, "UpdateDelivery", obj{"name": "agent", "turn": "TURN_PHASE_ENDED", "turnMessageId": one}, "bad_request")
		mustFail(t, d, anonymous, "GetDelivery", obj{"name": "agent"}, "unauthenticated")
		require.Equal(t, two, mustCall(t, d, agent, "GetDelivery", obj{"name": "agent"})["position"], "refused updates changed nothing")

		// The state goes with its member.
		mustCall(t, d, admin, "DeleteMember", obj{"name": "agent"})
		createMember(t, d, admin, "agent")
		st = mustCall(t, d, admin, "GetDelivery", obj{"name": "agent"})
		require.NotContains(t, st, "position", "%v", st)
		require.NotContains(t, st, "firstAttachedAt", "%v", st)
	})
}

// A crashed runner's working does not hold until the 30 s lapse: when the
// member's last runner stream closes (gRPC runner=true or SSE runner=1), it
// is idle at once. Other streams of the member change nothing.
func TestRunnerStreamCloseIsIdle(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	tok := createMember(t, restDriver{p}, admin, "agent")
	activity := func() any { return presenceOf(t, p, admin, "agent")["activity"] }
	working := func() {
		mustCall(t, restDriver{p}, bearer(tok), "SetActivity", obj{"state": "working"})
		require.Equal(t, "working", activity())
	}
	idleSoon := func(what string) {
		// Well within the 30 s lapse: the close is seen on the server's
		// own time, so poll briefly.
		require.Eventually(t, func() bool { return activity() == nil }, 10*time.Second, 10*time.Millisecond, what)
	}

	plain := p.subscribeSSE(t, tok, "agent", "")
	g, ready, err := p.grpcSubscribe(t, bearer(tok), &apiv1.SubscribeRequest{Name: "agent", Runner: true})
	require.NoError(t, err)
	require.NotNil(t, ready.GetReady())
	sse := p.subscribeSSE(t, tok, "agent", "&runner=1")
	working()
	g.close()
	time.Sleep(200 * time.Millisecond) // the close is seen on the server's own time
	require.Equal(t, "working", activity(), "another runner stream is open")
	sse.close()
	idleSoon("the last runner stream closed")
	working()
	plain.close()
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, "working", activity(), "a stream that is not a runner's changes nothing")

	r := p.do(t, http.MethodGet, "/subscribe?name=agent&runner=yes", nil, withBearer(tok))
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
}
