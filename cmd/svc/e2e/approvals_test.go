package e2e

// The approvals resource over both transports against the real broker:
// who is asked, who may decide (403), a decision once (409), the message
// that carries it to the agent, presence blocked until it, the activity
// row saying who decided what, expiry as denied, and a pending approval
// that outlives a kill -9 of the broker.

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/teamconfig"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"ListApprovals":    {http.MethodGet, "/approvals", http.StatusOK, "", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.ListApprovals)},
		"CreateApproval":   {http.MethodPost, "/approvals", http.StatusCreated, "approval", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.CreateApproval)},
		"GetApproval":      {http.MethodGet, "/approvals/{id}", http.StatusOK, "approval", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.GetApproval)},
		"DecideApproval":   {http.MethodPost, "/approvals/{id}/decide", http.StatusOK, "approval", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.DecideApproval)},
		"WithdrawApproval": {http.MethodPost, "/approvals/{id}/withdraw", http.StatusOK, "approval", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.WithdrawApproval)},
		"GetApprovers":     {http.MethodGet, "/members/{name}/approvers", http.StatusOK, "", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.GetApprovers)},
		"SetApprovers":     {http.MethodPut, "/members/{name}/approvers", http.StatusOK, "", unaryOn(apiv1.NewApprovalsClient, apiv1.ApprovalsClient.SetApprovers)},
	} {
		rpcs[name] = spec
	}
	queryOps["ListApprovals"] = true
}

// approvalKeys are the fields of an Approval on the wire: the issue's, plus
// expiresAt.
var approvalKeys = []string{"id", "member", "tool", "input", "objective", "status", "requestedAt", "decidedAt", "decidedBy", "reason", "expiresAt"}

func requireApproval(t testing.TB, a obj, status string) obj {
	t.Helper()
	require.ElementsMatch(t, approvalKeys, keys(a), "an Approval: %v", a)
	require.Equal(t, status, a["status"])
	for _, k := range []string{"decidedAt", "decidedBy", "reason"} {
		if status == "pending" {
			_, present := a[k]
			require.True(t, present, "%s is null, not missing, while pending", k)
			require.Nil(t, a[k], "%s while pending", k)
		}
	}
	objRecentMillis(t, a["requestedAt"], "requestedAt")
	return a
}

func approvalIDsOf(t testing.TB, body obj) []string {
	t.Helper()
	out := []string{}
	for _, a := range listOf(t, body, "approvals") {
		out = append(out, a["id"].(string))
	}
	return out
}

func TestApprovalsAPI(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		agent := bearer(createMember(t, d, admin, "agent"))
		aliceTok := createMember(t, d, admin, "alice")
		bob := bearer(createMember(t, d, admin, "bob"))
		orig := bearer(createMember(t, d, admin, "orig", "objectives.create"))
		alice := sessionCred(login(t, d, enroll(t, d, admin, "alice")))

		// The team names alice as agent's approver.
		mustFail(t, d, bob, "SetApprovers", obj{"name": "agent", "approvers": []string{"bob"}}, "forbidden")
		mustFail(t, d, admin, "SetApprovers", obj{"name": "agent", "approvers": []string{"ghost"}}, "bad_request")
		mustFail(t, d, admin, "SetApprovers", obj{"name": "agent", "approvers": []string{"agent"}}, "bad_request")
		set := mustCall(t, d, admin, "SetApprovers", obj{"name": "agent", "approvers": []string{"alice"}})
		require.Equal(t, []string{"alice"}, strs(t, set["approvers"]))
		require.Equal(t, []string{"agent"}, strs(t, mustCall(t, d, bearer(aliceTok), "GetApprovers", obj{"name": "alice"})["approverOf"]))

		o := mustCall(t, d, orig, "CreateObjective", obj{"title": "Deploy", "outcome": "deployed", "assignee": "agent"})
		if inner, ok := o["objective"].(obj); ok {
			o = inner
		}
		objID := o["id"].(string)

		mustCall(t, d, agent, "SetActivity", obj{"state": "working"})
		agentStream := subscribeOn(t, p, transportOf(d), tokenOf(agent), "agent")
		mustFail(t, d, agent, "CreateApproval", obj{"tool": "", "input": obj{}}, "bad_request")
		mustFail(t, d, agent, "CreateApproval", obj{"tool": "Bash", "objective": "nope"}, "bad_request")
		a := requireApproval(t, mustCall(t, d, agent, "CreateApproval", obj{"tool": "Bash", "input": obj{"command": "make deploy"}, "objective": objID}), "pending")
		id := a["id"].(string)
		require.Equal(t, "agent", a["member"])
		require.Equal(t, "Bash", a["tool"])
		require.Equal(t, obj{"command": "make deploy"}, a["input"])
		require.Equal(t, objID, a["objective"])
		require.Equal(t, "blocked", presenceVia(t, d, admin, "agent")["activity"], "blocked until the decision")

		// Each approver got the request as a DM from the agent.
		for _, who := range []struct {
			name string
			c    cred
		}{{"admin", admin}, {"alice", alice}, {"orig", orig}} {
			hist := listOf(t, mustCall(t, d, who.c, "History", obj{"with": "agent"}), "messages")
			require.Len(t, hist, 1, "%s's DM with the agent", who.name)
			m := hist[0]
			require.Equal(t, "agent", m["from"])
			require.Equal(t, "agent asks to use Bash", m["title"])
			data := m["data"].(obj)
			require.Equal(t, "approval_request", data["kind"])
			require.Equal(t, id, data["approval"])
		}
		require.Empty(t, listOf(t, mustCall(t, d, bob, "History", obj{"with": "agent"}), "messages"), "bob is asked nothing")

		// Listing: what each may decide plus their own.
		require.Equal(t, []string{id}, approvalIDsOf(t, mustCall(t, d, admin, "ListApprovals", obj{})), "pending by default")
		require.Equal(t, []string{id}, approvalIDsOf(t, mustCall(t, d, alice, "ListApprovals", obj{"status": "pending"})))
		require.Equal(t, []string{id}, approvalIDsOf(t, mustCall(t, d, agent, "ListApprovals", obj{"status": "all"})), "its own request")
		require.Empty(t, approvalIDsOf(t, mustCall(t, d, bob, "ListApprovals", obj{"status": "all"})))
		require.Empty(t, approvalIDsOf(t, mustCall(t, d, admin, "ListApprovals", obj{"status": "decided"})))
		mustFail(t, d, admin, "ListApprovals", obj{"status": "open"}, "bad_request")
		mustFail(t, d, bob, "GetApproval", obj{"id": id}, "not_found")
		requireApproval(t, mustCall(t, d, orig, "GetApproval", obj{"id": id}), "pending")

		// Who may decide: 403 for the others, 409 once decided.
		mustFail(t, d, bob, "DecideApproval", obj{"id": id, "decision": "allow"}, "forbidden")
		mustFail(t, d, agent, "DecideApproval", obj{"id": id, "decision": "allow"}, "forbidden")
		mustFail(t, d, alice, "DecideApproval", obj{"id": id, "decision": "maybe"}, "bad_request")
		mustFail(t, d, alice, "DecideApproval", obj{"id": "nope", "decision": "allow"}, "not_found")
		dec := requireApproval(t, mustCall(t, d, alice, "DecideApproval", obj{"id": id, "decision": "deny", "reason": "not on Friday"}), "denied")
		require.Equal(t, "alice", dec["decidedBy"])
		require.Equal(t, "not on Friday", dec["reason"])
		objRecentMillis(t, dec["decidedAt"], "decidedAt")
		mustFail(t, d, admin, "DecideApproval", obj{"id": id, "decision": "allow"}, "conflict")
		mustFail(t, d, orig, "DecideApproval", obj{"id": id, "decision": "allow"}, "conflict")
		mustFail(t, d, bob, "DecideApproval", obj{"id": id, "decision": "allow"}, "forbidden")
		require.Equal(t, "working", presenceVia(t, d, admin, "agent")["activity"], "the runner's own state again")

		// The decision reaches the agent's stream on the broker's thread.
		m := agentStream.nextMessage(t)
		data := m["data"].(obj)
		require.Equal(t, "approval_decided", data["kind"])
		require.Equal(t, "approval:"+id, data["thread"])
		require.Equal(t, id, data["approval"])
		require.Equal(t, "deny", data["decision"])
		require.Equal(t, "not on Friday", data["reason"])
		require.Equal(t, "alice", m["from"])

		// It is in the agent's activity: who decided what.
		var row obj
		for _, r := range activityRows(t, p, tokenOf(admin), "agent", "tool_action") {
			if rd, _ := r["data"].(obj); rd["approval"] == id {
				row = rd
			}
		}
		require.NotNil(t, row, "the decision's tool_action")
		require.Equal(t, "denied", row["decision"])
		require.Equal(t, "alice", row["decidedBy"])
		require.Equal(t, "alice denied Bash for agent", row["summary"])
		require.Equal(t, "Bash", row["tool"])

		// Allowed by the objective's originator; withdrawn by the agent.
		b := mustCall(t, d, agent, "CreateApproval", obj{"tool": "Write", "input": obj{"file_path": "/srv/x"}, "objective": objID})
		requireApproval(t, mustCall(t, d, orig, "DecideApproval", obj{"id": b["id"], "decision": "allow"}), "allowed")
		c := mustCall(t, d, agent, "CreateApproval", obj{"tool": "Read"})
		require.Nil(t, c["objective"], "no objective: null")
		mustFail(t, d, orig, "DecideApproval", obj{"id": c["id"], "decision": "allow"}, "forbidden") // no objective: orig is not its originator
		mustFail(t, d, admin, "WithdrawApproval", obj{"id": c["id"]}, "forbidden")
		w := requireApproval(t, mustCall(t, d, agent, "WithdrawApproval", obj{"id": c["id"], "reason": "the agent stopped"}), "expired")
		require.Equal(t, "withdrawn: the agent stopped", w["reason"])
		require.Nil(t, w["decidedBy"])
		decided := approvalIDsOf(t, mustCall(t, d, admin, "ListApprovals", obj{"status": "decided"}))
		require.Equal(t, []string{c["id"].(string), b["id"].(string), id}, decided, "newest first")
	})
}

// setApprovalExpiry writes approvals.expireAfter into a stopped broker's
// config file.
func setApprovalExpiry(t *testing.T, path, d string) {
	t.Helper()
	f, err := teamconfig.Load(path)
	require.NoError(t, err)
	f.Approvals = &teamconfig.Approvals{ExpireAfter: d}
	require.NoError(t, teamconfig.Save(path, f))
}

func TestApprovalsExpireAndOutliveTheBroker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{dbPath: dir + "/svc.db", configPath: dir + "/svc.json"})
	d := restDriver{p}
	admin := bearer(p.adminToken(t))
	agentTok := createMember(t, d, admin, "agent")
	agent := bearer(agentTok)

	// Acknowledged is durable: a pending approval survives kill -9, keeps
	// the agent blocked, and is decided after the restart.
	kept := mustCall(t, d, agent, "CreateApproval", obj{"tool": "Bash", "input": obj{"command": "ls"}})["id"].(string)
	p.kill(t)
	p = p.restart(t)
	d = restDriver{p}
	require.Equal(t, []string{kept}, approvalIDsOf(t, mustCall(t, d, admin, "ListApprovals", obj{})))
	mustCall(t, d, agent, "SetActivity", obj{"state": "working"})
	require.Equal(t, "working", presenceVia(t, d, admin, "agent")["activity"], "not blocked while nothing of the agent is connected (its runner died)")
	runnerStream := p.subscribeSSE(t, agentTok, "agent", "")
	require.Equal(t, "blocked", presenceVia(t, d, admin, "agent")["activity"], "blocked again once connected")
	runnerStream.close()
	requireApproval(t, mustCall(t, d, admin, "DecideApproval", obj{"id": kept, "decision": "allow"}), "allowed")
	mustFail(t, d, admin, "DecideApproval", obj{"id": kept, "decision": "deny"}, "conflict")

	// A short expiry: unanswered, the approval expires as denied, also when
	// the broker restarted in between, and the agent is told on its stream.
	p.mustStop(t)
	setApprovalExpiry(t, dir+"/svc.json", "2s")
	p = p.restart(t)
	d = restDriver{p}
	stream := p.subscribeSSE(t, agentTok, "agent", "")
	a := requireApproval(t, mustCall(t, d, agent, "CreateApproval", obj{"tool": "Bash"}), "pending")
	require.InDelta(t, 2000, a["expiresAt"].(float64)-a["requestedAt"].(float64), 1)
	m := stream.nextMessage(t)
	data := m["data"].(obj)
	require.Equal(t, "approval_decided", data["kind"])
	require.Equal(t, a["id"], data["approval"])
	require.Equal(t, "deny", data["decision"], "an expiry is a denial to the agent")
	require.Equal(t, "expired", data["status"])
	got := requireApproval(t, mustCall(t, d, agent, "GetApproval", obj{"id": a["id"]}), "expired")
	require.Equal(t, "expired: no decision within 2s", got["reason"])
	require.Nil(t, got["decidedBy"])
	require.GreaterOrEqual(t, got["decidedAt"].(float64), got["expiresAt"].(float64), "not before its expiry")
	mustFail(t, d, admin, "DecideApproval", obj{"id": a["id"], "decision": "allow"}, "conflict")

	b := mustCall(t, d, agent, "CreateApproval", obj{"tool": "Bash"})["id"].(string)
	p.kill(t)
	p = p.restart(t)
	d = restDriver{p}
	require.Eventually(t, func() bool {
		r := d.call(t, agent, "GetApproval", obj{"id": b})
		return r.code == "" && r.body["status"] == "expired"
	}, 30*time.Second, 20*time.Millisecond, "expired after the restart")
	require.NotEqual(t, "blocked", presenceVia(t, d, admin, "agent")["activity"])
	require.True(t, slices.Contains(approvalIDsOf(t, mustCall(t, d, admin, "ListApprovals", obj{"status": "decided"})), b))
}
