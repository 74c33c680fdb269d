package e2e

// The whole agent side end to end: the real Claude Code (agenttest's pinned
// release) runs under a real `svc runner` (the harness's svc binary) against
// a real broker, with the stub Anthropic Messages API scripting the model.
// A teammate's DM wakes the agent; the stub's tool_use makes Claude Code
// call the toolbox (`svc mcp`, started by Claude Code from the runner's
// MCP config) to reply and to complete an objective; the broker sees the
// agent working and then idle on one connection, gets its telemetry and
// the runner's tool_action rows; SIGTERM leaves runner_shutdown markers.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
	"svc/cmd/svc/internal/npmcache"
)

const (
	// rcWait bounds one wait for the agent: a turn through Claude Code, a
	// tool call through svc mcp, telemetry export. Tens of seconds leave
	// room for a loaded 2-core machine; a run normally needs a few.
	rcWait = 60 * time.Second
	rcTick = 50 * time.Millisecond
	// rcStopWait bounds the runner's exit after SIGTERM: it closes the
	// agent's input, waits for it (SIGTERM, then SIGKILL after its grace)
	// and writes the markers.
	rcStopWait = 30 * time.Second
)

// rcEnv is the runner's whole environment, which the agent inherits:
// nothing of the caller's own Claude Code, Anthropic or OpenTelemetry
// settings, a throwaway HOME, the stub model, and a short export interval
// so the telemetry arrives while the agent runs.
func rcEnv(t *testing.T, modelURL string) []string {
	home, tmp := t.TempDir(), t.TempDir()
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home, "USER": "agenttest", "TMPDIR": tmp,
		"CLAUDE_CODE_TMPDIR": tmp, "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"), "XDG_CACHE_HOME": filepath.Join(home, ".cache"),
		"XDG_DATA_HOME": filepath.Join(home, ".local", "share"), "XDG_STATE_HOME": filepath.Join(home, ".local", "state"),
		"CLAUDE_CONFIG_DIR":  filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL": modelURL, "ANTHROPIC_API_KEY": agenttest.DummyAPIKey,
		"DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		// The toolbox's tools are offered to the model directly, not behind
		// a tool search, so the stub's tool_use names a tool Claude Code has.
		"ENABLE_TOOL_SEARCH":        "false",
		"OTEL_LOGS_EXPORT_INTERVAL": "200",
		"OTEL_METRICS_EXPORTER":     "none",
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// rcRunner is `svc runner -- claude` as a child process.
type rcRunner struct{ *clientChild }

// startClaudeRunner starts `svc runner` for the member with token tok over
// the claude binary (with the user's flags userArgs), with only rcEnv's
// environment (plus the race detector's GORACE), and waits
// until it holds its stream.
func startClaudeRunner(t *testing.T, p *proc, tok, claude string, m *agenttest.Model, userArgs ...string) *rcRunner {
	t.Helper()
	args := append([]string{"runner", "--url", p.base, "--token", tok, "--state-dir", filepath.Join(t.TempDir(), "state"), "--", claude}, userArgs...)
	cmd := childCommand(t, args, nil)
	var keep []string
	for _, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GORACE" {
			keep = append(keep, kv)
		}
	}
	cmd.Env = append(keep, rcEnv(t, m.URL())...)
	c := &clientChild{cmd: cmd, stdout: &lineBuffer{}, stderr: &lineBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	cmd.Stdin = strings.NewReader("")
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		// A runner left running (a failed test) is stopped the way a user
		// would, so it stops its agent too; killed only if that hangs.
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.done:
			case <-time.After(rcStopWait):
				_ = cmd.Process.Kill()
				<-c.done
			}
		}
		if t.Failed() {
			t.Logf("runner stderr (the agent's stderr included):\n%s\nrunner stdout (the adapter's log of the agent's output):\n%s",
				npmcache.Tail(c.stderr.String(), 16000), npmcache.Tail(c.stdout.String(), 16000))
			t.Logf("the stub's requests:\n%s", rcRequests(m))
		}
	})
	r := &rcRunner{c}
	waitFor(t, c, c.stderr, regexp.MustCompile(`attached to the stream of claude1`))
	return r
}

// rcRequests describes what the stub model received and answered, for a
// failure's log.
func rcRequests(m *agenttest.Model) string {
	var b strings.Builder
	for _, q := range m.Requests() {
		fmt.Fprintf(&b, "#%d %s %s agent=%v scripted=%v answer=%q tool=%s %s\n  last user: %q\n",
			q.Seq, q.Method, q.Path, q.IsAgentTurn(), q.Scripted, q.Answer.Text, q.Answer.ToolName, q.Answer.ToolInput,
			npmcache.Tail(q.LastUserText(), 600))
	}
	return b.String()
}

// rcEventually polls cond until it holds or rcWait passes, then fails with
// the message and the runner's log.
func rcEventually(t *testing.T, r *rcRunner, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(rcWait)
	for !cond() {
		select {
		case <-r.done:
			t.Fatalf("the runner exited (code %d) before %s", r.cmd.ProcessState.ExitCode(), what)
		case <-time.After(rcTick):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, rcWait)
		}
	}
}

// rcAgentTurn returns the first agent request (one that offers tools) whose
// latest user message holds marker.
func rcAgentTurn(m *agenttest.Model, marker string) (agenttest.Request, bool) {
	for _, q := range m.AgentTurns() {
		if q.HasMarker(marker) {
			return q, true
		}
	}
	return agenttest.Request{}, false
}

// rcToolResult is the only tool_result of the agent request that follows
// the stub's answer to q, which must have been a tool_use.
func rcToolResult(t *testing.T, m *agenttest.Model, q agenttest.Request) agenttest.ContentBlock {
	t.Helper()
	turns := m.AgentTurns()
	for i, x := range turns {
		if x.Seq == q.Seq {
			require.Less(t, i+1, len(turns), "no request after the tool_use of request %d", q.Seq)
			res := turns[i+1].ToolResults()
			require.Len(t, res, 1, "request %d: %s", turns[i+1].Seq, turns[i+1].LastUserText())
			return res[0]
		}
	}
	t.Fatalf("request %d is not an agent turn", q.Seq)
	return agenttest.ContentBlock{}
}

func TestRunnerClaude(t *testing.T) {
	bin := agenttest.Claude(t) // installed (once) before any broker starts
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "claude1")
	aliceTok := createMember(t, d, bearer(admin), "alice")

	// 1. Two objectives on claude1's plate before it starts: one it
	// completes, one that stays open until the runner stops.
	type objective struct{ id, title, outcome string }
	var objs []objective
	for _, o := range []objective{
		{title: "Ship release 7", outcome: "release 7 is tagged and announced"},
		{title: "Write the runbook", outcome: "the on-call runbook is in /shared"},
	} {
		b := mustCall(t, d, bearer(admin), "CreateObjective", obj{"title": o.title, "outcome": o.outcome, "assignee": "claude1"})
		if inner, ok := b["objective"].(obj); ok {
			b = inner
		}
		o.id, _ = b["id"].(string)
		require.NotEmpty(t, o.id, "%v", b)
		objs = append(objs, o)
	}
	done, open := objs[0], objs[1]

	// 2. The model's script. The DM turn's first answer is held until the
	// test has seen the agent working; then it replies to alice, completes
	// the objective and ends the turn.
	const (
		dmMarker    = "RC-DM-7f3a"
		replyMarker = "RC-REPLY-51c9"
		resultText  = "release 7 tagged as v7.0.0"
		finalText   = "Replied to alice and closed the objective."
	)
	hold := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(hold) }) }
	m := agenttest.NewModel(t)
	t.Cleanup(release) // runs before the stub's Close, which waits for it
	sendIn, err := json.Marshal(obj{"to": "alice", "body": replyMarker})
	require.NoError(t, err)
	completeIn, err := json.Marshal(obj{"id": done.id, "result": resultText})
	require.NoError(t, err)
	m.Script(agenttest.Turn{Marker: dmMarker, ToolName: "mcp__svc__send", ToolInput: sendIn, Hold: hold}).
		CallTool("mcp__svc__objectives_complete", string(completeIn)).
		Reply(finalText)

	aliceStream := p.subscribeSSE(t, aliceTok, "alice", "")
	r := startClaudeRunner(t, p, agentTok, bin, m)

	// The re-brief at attach is the agent's first turn: the model sees each
	// open objective's id, title, status and outcome.
	const refresh = "[svc] context refresh: your open objectives"
	var rebrief agenttest.Request
	rcEventually(t, r, "re-brief turn at the model", func() bool {
		var ok bool
		rebrief, ok = rcAgentTurn(m, refresh)
		return ok
	})
	for _, o := range objs {
		require.Contains(t, rebrief.LastUserText(), "- "+o.id+" [active] "+o.title+"\n  outcome: "+o.outcome)
	}
	require.Contains(t, ccaSystem(t, rebrief), "claude1", "the briefing is the agent's system prompt")

	// 3. alice's DM wakes the agent; while the model holds the turn, the
	// roster shows claude1 working on one connection.
	msgID := push(t, p, aliceTok, obj{"to": "claude1", "title": "Release", "body": "Please confirm the release. " + dmMarker, "level": "warning"})
	rcEventually(t, r, "DM turn at the model", func() bool { _, ok := rcAgentTurn(m, dmMarker); return ok })
	var pr obj
	rcEventually(t, r, "claude1 working in the roster", func() bool {
		pr = presenceOf(t, p, bearer(admin), "claude1")
		return pr["activity"] == "working"
	})
	require.Equal(t, float64(1), pr["connected"], "the runner is one connection, its svc mcp none: %v", pr)
	require.Equal(t, true, pr["busy"], "%v", pr)
	release()

	// The reply reaches alice's stream, from claude1.
	var reply obj
	rcEventually(t, r, "claude1's reply on alice's stream", func() bool {
		select {
		case ev, ok := <-aliceStream.events:
			require.True(t, ok, "alice's stream ended: %v", aliceStream.endErr())
			if ev.event != "message" {
				return false
			}
			msg := requireMessageEvent(t, ev)
			if msg["from"] == "claude1" {
				reply = msg
				return true
			}
			t.Logf("alice got %v", msg)
		default:
		}
		return false
	})
	require.Equal(t, replyMarker, reply["body"], "%v", reply)
	require.Equal(t, "alice", reply["to"], "%v", reply)

	// The turn ends: idle again (no activity in the roster), still one
	// connection, the objective done, the script played out.
	rcEventually(t, r, "claude1 idle after the turn", func() bool {
		pr = presenceOf(t, p, bearer(admin), "claude1")
		_, busy := pr["activity"]
		return !busy && m.Pending() == 0
	})
	require.Equal(t, float64(1), pr["connected"], "%v", pr)
	o, _ := getObjective(t, d, bearer(admin), done.id)
	require.Equal(t, "done", o["status"], "%v", o)
	require.Equal(t, resultText, o["result"], "%v", o)
	o, _ = getObjective(t, d, bearer(admin), open.id)
	require.Equal(t, "active", o["status"], "%v", o)

	// What the model saw: the DM as a turn naming sender, thread and level;
	// both toolbox calls succeeded.
	dm, _ := rcAgentTurn(m, dmMarker)
	require.Contains(t, dm.LastUserText(), "[svc] message "+msgID+" from alice in DM (level warning)\nTitle: Release\nPlease confirm the release. "+dmMarker)
	require.True(t, dm.Scripted, "the held tool_use answered the DM turn")
	sent := rcToolResult(t, m, dm)
	require.False(t, sent.IsError, "send failed: %s", sent.ResultText())
	require.Contains(t, sent.ResultText(), reply["id"].(string), "send answers the broker's message")
	var completeReq agenttest.Request
	for _, q := range m.AgentTurns() {
		if q.Answer.ToolName == "mcp__svc__objectives_complete" {
			completeReq = q
		}
	}
	require.NotZero(t, completeReq.Seq, "no request was answered with objectives_complete")
	completed := rcToolResult(t, m, completeReq)
	require.False(t, completed.IsError, "objectives_complete failed: %s", completed.ResultText())
	require.Contains(t, completed.ResultText(), done.id)
	for _, q := range m.Requests() {
		require.NotContains(t, q.LastUserText(), "from claude1 in", "the agent's own messages are not echoed back as turns")
	}

	// 4. Telemetry: an llm_exchange row for every agent request the stub
	// answered, from Claude Code's OTLP export with the member's bearer.
	want := map[string]bool{}
	for _, q := range m.AgentTurns() {
		want[q.RequestID] = true
	}
	var exchanges []obj
	rcEventually(t, r, "an llm_exchange row for each model call", func() bool {
		exchanges = activityRows(t, p, agentTok, "claude1", "llm_exchange")
		got := map[string]bool{}
		for _, row := range exchanges {
			data, _ := row["data"].(obj)
			if id, _ := data["requestId"].(string); id != "" {
				got[id] = true
			}
		}
		for id := range want {
			if !got[id] {
				return false
			}
		}
		return true
	})
	for _, row := range exchanges {
		require.Equal(t, "claude1", row["member"], "%v", row)
		data, _ := row["data"].(obj)
		require.Equal(t, "otlp", data["source"], "%v", row)
	}

	// The runner's own tool_action rows: each toolbox call with its input
	// and the result of the PostToolUse hook.
	var fromRunner map[string]obj
	rcEventually(t, r, "the runner's tool_action rows", func() bool {
		fromRunner = map[string]obj{}
		for _, row := range activityRows(t, p, agentTok, "claude1", "tool_action") {
			data, _ := row["data"].(obj)
			if data["source"] == "runner" {
				tool, _ := data["tool"].(string)
				fromRunner[tool] = data
			}
		}
		return len(fromRunner) >= 2
	})
	require.ElementsMatch(t, []string{"mcp__svc__send", "mcp__svc__objectives_complete"}, slices.Collect(maps.Keys(fromRunner)))
	s := fromRunner["mcp__svc__send"]
	require.Equal(t, obj{"to": "alice", "body": replyMarker}, s["input"], "%v", s)
	raw, err := json.Marshal(s["result"])
	require.NoError(t, err)
	require.Contains(t, string(raw), reply["id"].(string), "the uploaded result is the toolbox's answer: %s", raw)
	c := fromRunner["mcp__svc__objectives_complete"]
	require.Equal(t, obj{"id": done.id, "result": resultText}, c["input"], "%v", c)
	raw, err = json.Marshal(c["result"])
	require.NoError(t, err)
	require.Contains(t, string(raw), done.id, "%s", raw)

	// 5. SIGTERM: exit 0, one runner_shutdown marker per open objective
	// (the done one has the broker's own close, reason done).
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.done:
	case <-time.After(rcStopWait):
		t.Fatalf("the runner did not exit within %s of SIGTERM", rcStopWait)
	}
	require.Equal(t, 0, r.cmd.ProcessState.ExitCode(), "a signal exits 0")
	var shutdown []string
	reasons := map[string]string{}
	for _, row := range activityRows(t, p, agentTok, "claude1", "objective_close") {
		data, _ := row["data"].(obj)
		id, _ := row["objectiveId"].(string)
		reason, _ := data["reason"].(string)
		if reason == "runner_shutdown" {
			shutdown = append(shutdown, id)
		} else {
			reasons[id] = reason
		}
	}
	require.Equal(t, []string{open.id}, shutdown, "one marker per open objective")
	require.Equal(t, map[string]string{done.id: "done"}, reasons)
	require.Eventually(t, func() bool {
		pr = presenceOf(t, p, bearer(admin), "claude1")
		return pr == nil || pr["connected"] == float64(0)
	}, rcWait, rcTick, "claude1 still connected after the runner stopped: %v", pr)
	require.NotContains(t, pr, "activity", "%v", pr)

	log := r.stderr.String()
	require.NotContains(t, log, agentTok, "the token is never logged")
	require.NotContains(t, log, "WARNING: DATA RACE")
}
