package e2e

// Approvals end to end with the real agents under a real `svc runner`: the
// stub model makes the agent use a tool it may not use alone; a person is
// asked (a DM from the agent), the member reads blocked, and the decision
// (made with `svc approve` / `svc deny`) reaches the agent, which goes on
// (allowed) or reads the refusal with its reason (denied); after a denial
// the member is idle again and the next DM is answered. Tools the user
// allowed never ask. The runner's log gives the approval round trip.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
)

// approvalRequestOn waits for the next approval_request on s and returns
// its approval id.
func approvalRequestOn(t *testing.T, r *rcRunner, s *sseStream, from, tool string) string {
	t.Helper()
	var id string
	rcEventually(t, r, "an approval request for "+tool, func() bool {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "the approver's stream ended: %v", s.endErr())
			if ev.event != "message" {
				return false
			}
			m := requireMessageEvent(t, ev)
			data, _ := m["data"].(obj)
			if data["kind"] == "approval_request" && m["from"] == from && data["tool"] == tool {
				id, _ = data["approval"].(string)
				require.Equal(t, from+" asks to use "+tool, m["title"])
				return true
			}
		default:
		}
		return false
	})
	require.NotEmpty(t, id)
	return id
}

// decideWithCLI runs `svc approve|deny <id> [reason]` as the member whose
// token is tok and returns its output line.
func decideWithCLI(t *testing.T, p *proc, tok string, args ...string) string {
	t.Helper()
	code, out, errOut := runSvc(t, append(args, "--url", p.base), []string{"SVC_TOKEN=" + tok}, nil)
	require.Zero(t, code, "svc %v: %s", args, errOut)
	return strings.TrimSpace(out)
}

// roundTrips are the runner's measured approval round trips: from the
// agent's request to the decision answered to it.
var roundTripRE = regexp.MustCompile(`approval (\S+): (\S+) (?:allowed by \S+|refused) after ([0-9.]+m?s)`)

func logRoundTrips(t *testing.T, runnerLog string) {
	for _, m := range roundTripRE.FindAllStringSubmatch(runnerLog, -1) {
		t.Logf("approval round trip: %s of %s: %s (request to the decision reaching the agent, the person's decision included)", m[1], m[2], m[3])
	}
}

func TestRunnerClaudeApprovals(t *testing.T) {
	bin := agenttest.Claude(t)
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "claude1")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	mustCall(t, d, bearer(admin), "SetApprovers", obj{"name": "claude1", "approvers": []string{"alice"}})

	const (
		allowMarker = "RA-ALLOW-3c1e"
		denyMarker  = "RA-DENY-90ab"
		freeMarker  = "RA-FREE-77d2"
		doneMarker  = "RA-DONE-5f06"
	)
	m := agenttest.NewModel(t)
	aliceStream := p.subscribeSSE(t, aliceTok, "alice", "")
	adminStream := p.subscribeSSE(t, admin, "admin", "")
	// The user allows `touch` in Bash: that never asks anyone.
	r := startClaudeRunner(t, p, agentTok, bin, m, "--allowedTools", "Bash(touch:*)")
	wd := r.cmd.Dir
	write := func(name string) json.RawMessage {
		b, err := json.Marshal(obj{"file_path": filepath.Join(wd, name), "content": name})
		require.NoError(t, err)
		return b
	}
	touch, err := json.Marshal(obj{"command": "touch " + filepath.Join(wd, "free.txt")})
	require.NoError(t, err)
	send, err := json.Marshal(obj{"to": "alice", "body": doneMarker})
	require.NoError(t, err)
	m.Script(
		agenttest.Turn{Marker: allowMarker, ToolName: "Write", ToolInput: write("allowed.txt")}, agenttest.Turn{Text: "wrote allowed.txt"},
		agenttest.Turn{Marker: denyMarker, ToolName: "Write", ToolInput: write("denied.txt")}, agenttest.Turn{Text: "understood the refusal"},
		agenttest.Turn{Marker: freeMarker, ToolName: "Bash", ToolInput: touch}, agenttest.Turn{ToolName: "mcp__svc__send", ToolInput: send},
		agenttest.Turn{Text: "done"},
	)
	idle := func(what string) {
		rcEventually(t, r, what, func() bool {
			_, busy := presenceOf(t, p, bearer(admin), "claude1")["activity"]
			return !busy
		})
	}

	// 1. Allowed: alice, the named approver, is asked and allows it with
	// `svc approve`; the tool runs.
	push(t, p, aliceTok, obj{"to": "claude1", "body": "Write allowed.txt. " + allowMarker})
	id := approvalRequestOn(t, r, aliceStream, "claude1", "Write")
	require.Equal(t, id, approvalRequestOn(t, r, adminStream, "claude1", "Write"), "members.manage is asked too")
	rcEventually(t, r, "claude1 blocked while a person decides", func() bool {
		return presenceOf(t, p, bearer(admin), "claude1")["activity"] == "blocked"
	})
	a := mustCall(t, d, bearer(aliceTok), "GetApproval", obj{"id": id})
	require.Equal(t, obj{"file_path": filepath.Join(wd, "allowed.txt"), "content": "allowed.txt"}, a["input"])
	require.Equal(t, "allowed "+id+": claude1 may use Write", decideWithCLI(t, p, aliceTok, "approve", id))
	rcEventually(t, r, "the allowed turn's end", func() bool { return m.Pending() == 5 })
	idle("claude1 idle after the allowed turn")
	got, err := os.ReadFile(filepath.Join(wd, "allowed.txt"))
	require.NoError(t, err, "the allowed Write ran")
	require.Equal(t, "allowed.txt", string(got))

	// 2. Denied with a reason: the model reads it; no post-tool hook comes,
	// and still the member is idle after the turn (not working for good).
	push(t, p, aliceTok, obj{"to": "claude1", "body": "Write denied.txt. " + denyMarker})
	id2 := approvalRequestOn(t, r, adminStream, "claude1", "Write")
	require.Equal(t, "denied "+id2+": claude1 may not use Write", decideWithCLI(t, p, admin, "deny", id2, "not", "in", "prod"))
	rcEventually(t, r, "the denied turn's end", func() bool { return m.Pending() == 3 })
	idle("claude1 idle after the denied turn")
	require.NoFileExists(t, filepath.Join(wd, "denied.txt"))
	q, ok := rcAgentTurn(m, denyMarker)
	require.True(t, ok)
	refused := rcToolResult(t, m, q)
	require.Contains(t, refused.ResultText(), "Denied by admin: not in prod", "the agent reads who refused and why")

	// 3. The next DM is answered: the runner is not deaf. The user's allowed
	// Bash(touch:*) runs without asking.
	push(t, p, aliceTok, obj{"to": "claude1", "body": "Touch free.txt and tell me. " + freeMarker})
	rcEventually(t, r, "claude1's reply", func() bool {
		select {
		case ev := <-aliceStream.events:
			if ev.event == "message" {
				msg := requireMessageEvent(t, ev)
				return msg["from"] == "claude1" && msg["body"] == doneMarker
			}
		default:
		}
		return false
	})
	require.FileExists(t, filepath.Join(wd, "free.txt"))
	idle("claude1 idle after the last turn")
	all := listOf(t, mustCall(t, d, bearer(admin), "ListApprovals", obj{"status": "all"}), "approvals")
	require.Len(t, all, 2, "the allowed tool asked no one: %v", all)

	// The model was never offered the permission-prompt tool.
	for _, q := range m.AgentTurns() {
		for _, tool := range q.Messages.Tools {
			require.NotEqual(t, "mcp__svc_approvals__prompt", tool.Name)
		}
	}
	// Every decision is in the agent's activity: who decided what.
	var summaries []string
	rcEventually(t, r, "the decisions in claude1's activity", func() bool {
		summaries = nil
		for _, row := range activityRows(t, p, agentTok, "claude1", "tool_action") {
			data, _ := row["data"].(obj)
			if s, ok := data["summary"].(string); ok && data["phase"] == "approval" {
				summaries = append(summaries, s)
			}
		}
		return len(summaries) == 2
	})
	require.ElementsMatch(t, []string{"alice allowed Write for claude1", "admin denied Write for claude1"}, summaries)
	logRoundTrips(t, r.stderr.String())

	// 4. Several approvals in one turn, each decided the moment it reaches
	// alice's stream (allowed, denied, in turn): each call gets its own
	// decision, and the runner's round trips measure the system alone.
	const batch, batchMarker = 6, "RA-BATCH-c4d1"
	var turns []agenttest.Turn
	for i := range batch {
		tr := agenttest.Turn{ToolName: "Write", ToolInput: write(fmt.Sprintf("batch%d.txt", i))}
		if i == 0 {
			tr.Marker = batchMarker
		}
		turns = append(turns, tr)
	}
	m.Script(append(turns, agenttest.Turn{Text: "batch done"})...)
	before := len(roundTripRE.FindAllString(r.stderr.String(), -1))
	push(t, p, aliceTok, obj{"to": "claude1", "body": "Write the batch. " + batchMarker})
	for i := range batch {
		id := approvalRequestOn(t, r, aliceStream, "claude1", "Write")
		decision := map[bool]string{true: "allow", false: "deny"}[i%2 == 0]
		mustCall(t, d, bearer(aliceTok), "DecideApproval", obj{"id": id, "decision": decision})
	}
	rcEventually(t, r, "the batch turn's end", func() bool { return m.Pending() == 0 })
	idle("claude1 idle after the batch")
	for i := range batch {
		path := filepath.Join(wd, fmt.Sprintf("batch%d.txt", i))
		if i%2 == 0 {
			require.FileExists(t, path, "allowed")
		} else {
			require.NoFileExists(t, path, "denied")
		}
	}
	var trips []time.Duration
	for _, x := range roundTripRE.FindAllStringSubmatch(r.stderr.String(), -1)[before:] {
		trip, err := time.ParseDuration(x[3])
		require.NoError(t, err)
		trips = append(trips, trip)
	}
	require.Len(t, trips, batch)
	slices.Sort(trips)
	t.Logf("approval round trips decided at once (request to the decision reaching the agent, %d): p50 %s, max %s, all %v", len(trips), trips[len(trips)/2], trips[len(trips)-1], trips)
}

func TestRunnerCodexApprovals(t *testing.T) {
	bin := agenttest.Codex(t)
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "codex1")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	mustCall(t, d, bearer(admin), "SetApprovers", obj{"name": "codex1", "approvers": []string{"alice"}})

	const (
		allowMarker = "RXA-ALLOW-1b2c"
		denyMarker  = "RXA-DENY-3d4e"
		nextMarker  = "RXA-NEXT-5f60"
		doneMarker  = "RXA-DONE-7a81"
	)
	dir := t.TempDir()
	touch := func(name string) json.RawMessage {
		b, err := json.Marshal(obj{"cmd": "touch " + filepath.Join(dir, name)})
		require.NoError(t, err)
		return b
	}
	send, err := json.Marshal(obj{"to": "alice", "body": doneMarker})
	require.NoError(t, err)
	m := agenttest.NewResponses(t)
	m.Script(
		agenttest.RTurn{Marker: allowMarker, Call: "exec_command", Arguments: touch("allowed.txt")}, agenttest.RTurn{Text: "touched allowed.txt"},
		agenttest.RTurn{Marker: denyMarker, Call: "exec_command", Arguments: touch("denied.txt")}, agenttest.RTurn{Text: "understood the refusal"},
		agenttest.RTurn{Marker: nextMarker, Call: "send", Namespace: "mcp__svc", Arguments: send}, agenttest.RTurn{Text: "done"},
	)
	aliceStream := p.subscribeSSE(t, aliceTok, "alice", "")
	adminStream := p.subscribeSSE(t, admin, "admin", "")
	// The user's policy: every command that is not known to be safe asks.
	r := startCodexRunner(t, p, agentTok, "codex1", bin, m, "-a", "untrusted", "-s", "danger-full-access")
	idle := func(what string) {
		rcEventually(t, r, what, func() bool {
			_, busy := presenceOf(t, p, bearer(admin), "codex1")["activity"]
			return !busy
		})
	}

	// 1. Allowed by alice with `svc approve`: the command runs.
	push(t, p, aliceTok, obj{"to": "codex1", "body": "Touch allowed.txt. " + allowMarker})
	id := approvalRequestOn(t, r, aliceStream, "codex1", "exec_command")
	require.Equal(t, id, approvalRequestOn(t, r, adminStream, "codex1", "exec_command"), "members.manage is asked too")
	rcEventually(t, r, "codex1 blocked while a person decides", func() bool {
		return presenceOf(t, p, bearer(admin), "codex1")["activity"] == "blocked"
	})
	a := mustCall(t, d, bearer(aliceTok), "GetApproval", obj{"id": id})
	input, _ := a["input"].(obj)
	require.Contains(t, input["command"], filepath.Join(dir, "allowed.txt"), "%v", a)
	require.Equal(t, "allowed "+id+": codex1 may use exec_command", decideWithCLI(t, p, aliceTok, "approve", id))
	rcEventually(t, r, "the allowed turn's end", func() bool { return m.Pending() == 4 })
	idle("codex1 idle after the allowed turn")
	require.FileExists(t, filepath.Join(dir, "allowed.txt"))

	// 2. Denied with a reason: not run, and the reason reaches the model.
	push(t, p, aliceTok, obj{"to": "codex1", "body": "Touch denied.txt. " + denyMarker})
	id2 := approvalRequestOn(t, r, adminStream, "codex1", "exec_command")
	require.Equal(t, "denied "+id2+": codex1 may not use exec_command", decideWithCLI(t, p, admin, "deny", id2, "not", "in", "prod"))
	rcEventually(t, r, "the denied turn's end", func() bool { return m.Pending() == 2 })
	idle("codex1 idle after the denied turn")
	require.NoFileExists(t, filepath.Join(dir, "denied.txt"))
	var steered bool
	for _, q := range m.Requests() {
		for _, u := range q.UserTexts() {
			steered = steered || strings.Contains(u, "exec_command was not run: Denied by admin: not in prod")
		}
	}
	require.True(t, steered, "the model reads who refused and why")

	// 3. The next DM is answered.
	push(t, p, aliceTok, obj{"to": "codex1", "body": "Tell me. " + nextMarker})
	rcEventually(t, r, "codex1's reply", func() bool {
		select {
		case ev := <-aliceStream.events:
			if ev.event == "message" {
				msg := requireMessageEvent(t, ev)
				return msg["from"] == "codex1" && msg["body"] == doneMarker
			}
		default:
		}
		return false
	})
	idle("codex1 idle after the last turn")
	require.Len(t, listOf(t, mustCall(t, d, bearer(admin), "ListApprovals", obj{"status": "all"}), "approvals"), 2)
	logRoundTrips(t, r.stderr.String())
}
