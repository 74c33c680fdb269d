package e2e

// The real Codex (agenttest's pinned release) under a real `svc runner`
// against a real broker, with the stub Responses API scripting the model
// through a custom provider in the throwaway CODEX_HOME's config.toml, as
// a user would set it. A teammate's DM wakes the agent; the stub's function
// call makes Codex call the toolbox (`svc mcp`, started by Codex from the
// runner's -c mcp_servers.svc) to reply; a second DM is a second turn of
// the same thread; the broker sees working then idle and gets Codex's own
// OTLP records.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
	"svc/cmd/svc/internal/npmcache"
)

// rxEnv is the runner's whole environment for Codex: a throwaway HOME and
// CODEX_HOME whose config.toml selects the stub as the model provider.
func rxEnv(t *testing.T, modelURL string) []string {
	home, tmp := t.TempDir(), t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	cfg := fmt.Sprintf(`model = "gpt-stub"
model_provider = "stub"

[model_providers.stub]
name = "stub"
base_url = %q
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`, modelURL)
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600))
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home, "USER": "agenttest", "TMPDIR": tmp,
		"LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "CODEX_HOME": codexHome,
		"OPENAI_API_KEY": "sk-agenttest-dummy", "RUST_LOG": "warn",
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// startCodexRunner starts `svc runner -- codex -C <dir> <userArgs>` for the
// member with token tok, with only rxEnv's environment, and waits until it
// holds its stream.
func startCodexRunner(t *testing.T, p *proc, tok, member, codex string, m *agenttest.Responses, userArgs ...string) *rcRunner {
	t.Helper()
	wd := t.TempDir()
	// The token comes from SVC_TOKEN, not --token, which any local
	// user reads on the runner's command line.
	args := append([]string{"runner", "--url", p.base, "--state-dir", filepath.Join(t.TempDir(), "state"), "--", codex, "-C", wd}, userArgs...)
	cmd := childCommand(t, args, nil)
	var keep []string
	for _, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GORACE" {
			keep = append(keep, kv)
		}
	}
	cmd.Env = append(append(keep, "SVC_TOKEN="+tok), rxEnv(t, m.URL())...)
	c := &clientChild{cmd: cmd, stdout: &lineBuffer{}, stderr: &lineBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	cmd.Stdin = strings.NewReader("")
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
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
			t.Logf("runner stderr (Codex's stderr included):\n%s\nrunner stdout (the adapter's log of the app-server traffic):\n%s",
				npmcache.Tail(c.stderr.String(), 16000), npmcache.Tail(c.stdout.String(), 16000))
			t.Logf("the stub's requests:\n%s", rxRequests(m))
		}
	})
	waitFor(t, c, c.stderr, regexp.MustCompile(`attached to the stream of `+member))
	return &rcRunner{c}
}

func rxRequests(m *agenttest.Responses) string {
	var b strings.Builder
	for _, q := range m.Requests() {
		fmt.Fprintf(&b, "#%d %s agent=%v scripted=%v answer=%q call=%s/%s %s\n  tools: %v\n  last user: %q\n",
			q.Seq, q.Path, q.IsAgentTurn(), q.Scripted, q.Answer.Text, q.Answer.Namespace, q.Answer.Call, q.Answer.Arguments,
			q.ToolNames(), npmcache.Tail(q.LastUserText(), 600))
	}
	return b.String()
}

// rxTurn is the first agent request whose latest user message holds marker.
func rxTurn(m *agenttest.Responses, marker string) (agenttest.RRequest, bool) {
	for _, q := range m.Requests() {
		if q.IsAgentTurn() && q.HasMarker(marker) {
			return q, true
		}
	}
	return agenttest.RRequest{}, false
}

func TestRunnerCodex(t *testing.T) {
	bin := agenttest.Codex(t) // installed (once) before any broker starts
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "codex1")
	aliceTok := createMember(t, d, bearer(admin), "alice")

	b := mustCall(t, d, bearer(admin), "CreateObjective", obj{"title": "Ship release 8", "outcome": "release 8 is tagged", "assignee": "codex1"})
	if inner, ok := b["objective"].(obj); ok {
		b = inner
	}
	objID, _ := b["id"].(string)
	require.NotEmpty(t, objID, "%v", b)

	const (
		dmMarker     = "RX-DM-3c1e"
		replyMarker  = "RX-REPLY-77ad"
		secondMarker = "RX-SECOND-90b2"
		secondReply  = "Second turn done."
	)
	m := agenttest.NewResponses(t)
	sendArgs, err := json.Marshal(obj{"to": "alice", "body": replyMarker})
	require.NoError(t, err)
	m.Script(
		agenttest.RTurn{Marker: dmMarker, Call: "send", Namespace: "mcp__svc", Arguments: sendArgs},
		agenttest.RTurn{Text: "Replied to alice."},
		agenttest.RTurn{Marker: secondMarker, Call: "exec_command", Arguments: json.RawMessage(`{"cmd":"env"}`)},
		agenttest.RTurn{Text: secondReply},
	)

	aliceStream := p.subscribeSSE(t, aliceTok, "alice", "")
	r := startCodexRunner(t, p, agentTok, "codex1", bin, m)

	// The re-brief at attach is the first turn; the briefing is the
	// thread's developer instructions.
	const refresh = "[svc] context refresh: your open objectives"
	var rebrief agenttest.RRequest
	rcEventually(t, r, "re-brief turn at the model", func() bool {
		var ok bool
		rebrief, ok = rxTurn(m, refresh)
		return ok
	})
	require.Contains(t, rebrief.LastUserText(), "- "+objID+" [active] Ship release 8")
	var developer string
	for _, it := range rebrief.Items() {
		if it.Type == "message" && it.Role == "developer" {
			developer += it.Text()
		}
	}
	require.Contains(t, developer, "codex1", "the briefing is in the developer instructions")
	require.Contains(t, rebrief.ToolNames(), "mcp__svc/send", "the toolbox is offered as the mcp__svc namespace")
	rcEventually(t, r, "codex1 idle after the re-brief", func() bool {
		_, busy := presenceOf(t, p, bearer(admin), "codex1")["activity"]
		return !busy
	})

	// 1. alice's DM wakes the agent; the stub's function call goes through
	// svc mcp and the reply reaches alice.
	msgID := push(t, p, aliceTok, obj{"to": "codex1", "body": "Please confirm. " + dmMarker})
	var sawWorking bool
	var reply obj
	rcEventually(t, r, "codex1's reply on alice's stream", func() bool {
		if presenceOf(t, p, bearer(admin), "codex1")["activity"] == "working" {
			sawWorking = true
		}
		select {
		case ev, ok := <-aliceStream.events:
			require.True(t, ok, "alice's stream ended: %v", aliceStream.endErr())
			if ev.event != "message" {
				return false
			}
			msg := requireMessageEvent(t, ev)
			if msg["from"] == "codex1" {
				reply = msg
				return true
			}
		default:
		}
		return false
	})
	require.Equal(t, replyMarker, reply["body"], "%v", reply)
	dm, ok := rxTurn(m, dmMarker)
	require.True(t, ok)
	require.Contains(t, dm.LastUserText(), "[svc] message "+msgID+" from alice in DM")

	// The function call's output went back to the model and holds the
	// broker's message id.
	var out agenttest.InputItem
	rcEventually(t, r, "the send output at the model", func() bool {
		for _, q := range m.Requests() {
			for _, o := range q.FunctionOutputs() {
				if o.CallID == fmt.Sprintf("call_stub_%d", dm.Seq) {
					out = o
					return true
				}
			}
		}
		return false
	})
	require.Contains(t, string(out.Output), reply["id"].(string), "send answers the broker's message: %s", out.Output)

	rcEventually(t, r, "codex1 idle after the DM turn", func() bool {
		pr := presenceOf(t, p, bearer(admin), "codex1")
		_, busy := pr["activity"]
		if pr["activity"] == "working" {
			sawWorking = true
		}
		return !busy && m.Pending() == 2
	})

	// 2. A second DM is a second turn of the same thread: its request
	// holds the first DM and the agent's reply.
	push(t, p, aliceTok, obj{"to": "codex1", "body": "One more. " + secondMarker})
	var second agenttest.RRequest
	rcEventually(t, r, "second DM turn at the model", func() bool {
		second, ok = rxTurn(m, secondMarker)
		return ok
	})
	users := strings.Join(second.UserTexts(), "\n")
	require.Contains(t, users, dmMarker, "the session is kept: the first DM is in the second turn's context")
	require.Contains(t, users, refresh)
	var assistant string
	for _, it := range second.Items() {
		if it.Type == "message" && it.Role == "assistant" {
			assistant += it.Text()
		}
	}
	require.Contains(t, assistant, "Replied to alice.")
	rcEventually(t, r, "codex1 idle after the second turn", func() bool {
		pr := presenceOf(t, p, bearer(admin), "codex1")
		_, busy := pr["activity"]
		if pr["activity"] == "working" {
			sawWorking = true
		}
		return !busy && m.Pending() == 0
	})
	require.True(t, sawWorking, "the roster showed codex1 working during a turn")

	// The second turn ran `env` in Codex's shell: the commands the model
	// runs never see the member's bearer (SVC_TOKEN, the OTLP header).
	var envOut string
	for _, q := range m.Requests() {
		for _, o := range q.FunctionOutputs() {
			if o.CallID == fmt.Sprintf("call_stub_%d", second.Seq) {
				envOut = string(o.Output)
			}
		}
	}
	require.Contains(t, envOut, "PATH=", "the env command ran: %s", envOut)
	require.NotContains(t, envOut, agentTok, "the model's shell sees no token")
	require.NotContains(t, envOut, "SVC_TOKEN")
	for _, q := range m.Requests() {
		require.NotContains(t, q.LastUserText(), "from codex1 in", "the agent's own messages are not echoed back as turns")
	}

	// 3. The runner's tool_action row for the toolbox call, from Codex's
	// mcpToolCall item.
	var action obj
	rcEventually(t, r, "the runner's tool_action row", func() bool {
		for _, row := range activityRows(t, p, agentTok, "codex1", "tool_action") {
			data, _ := row["data"].(obj)
			if data["source"] == "runner" && data["tool"] == "mcp__svc__send" {
				action = data
				return true
			}
		}
		return false
	})
	require.Equal(t, obj{"to": "alice", "body": replyMarker}, action["input"], "%v", action)
	raw, err := json.Marshal(action["result"])
	require.NoError(t, err)
	require.Contains(t, string(raw), reply["id"].(string), "%s", raw)

	// 4. Codex's own OTLP export reached the broker with the member's
	// bearer, stored as Codex-style rows without user.email or
	// user.account_id.
	var otlpRows []obj
	rcEventually(t, r, "Codex's OTLP records", func() bool {
		otlpRows = nil
		for _, kind := range []string{"opaque_http", "user_prompt"} {
			otlpRows = append(otlpRows, activityRows(t, p, agentTok, "codex1", kind)...)
		}
		return len(otlpRows) > 0
	})
	rawRows, err := json.Marshal(otlpRows)
	require.NoError(t, err)
	require.NotContains(t, string(rawRows), "user.email")
	require.NotContains(t, string(rawRows), "user.account_id")

	// 5. Full inference capture: the runner's proxy stood in for the stub
	// provider, so every model call of the DM turn and of the second turn is
	// a GenAI record of codex1 with the stub's response id and usage, and
	// the objective's trace (its open interval runs to now) shows them.
	wantIDs := map[string]int{} // response id -> input tokens the stub reported
	for _, q := range m.Requests() {
		if q.IsAgentTurn() && q.Seq >= dm.Seq {
			in, _ := agenttest.Usage(len(q.Body))
			wantIDs[q.ResponseID] = in
		}
	}
	require.GreaterOrEqual(t, len(wantIDs), 4, "two turns, each a tool call and a reply")
	var records []obj
	rcEventually(t, r, "GenAI records for every model call of both turns", func() bool {
		res := p.do(t, http.MethodGet, "/members/codex1/genai", nil, withBearer(agentTok))
		require.Equal(t, http.StatusOK, res.status, "%s", res.raw)
		records = listOf(t, res.body, "inferences")
		got := map[string]bool{}
		for _, rec := range records {
			if id, _ := rec["responseId"].(string); id != "" {
				got[id] = true
			}
		}
		for id := range wantIDs {
			if !got[id] {
				return false
			}
		}
		return true
	})
	for _, rec := range records {
		id, _ := rec["responseId"].(string)
		in, ok := wantIDs[id]
		if !ok {
			continue
		}
		require.Equal(t, "codex1", rec["member"], "%v", rec)
		require.Equal(t, "responses", rec["api"], "%v", rec)
		usage, _ := rec["usage"].(obj)
		require.EqualValues(t, in, usage["inputTokens"], "%v", rec)
		require.EqualValues(t, 7, usage["outputTokens"], "%v", rec)
		raw, err := json.Marshal(rec)
		require.NoError(t, err)
		require.NotContains(t, string(raw), agentTok, "the upload is redacted")
	}
	tr := p.do(t, http.MethodGet, "/objectives/"+objID+"/trace", nil, withBearer(admin))
	require.Equal(t, http.StatusOK, tr.status, "%s", tr.raw)
	traced := map[string]bool{}
	for _, row := range listOf(t, tr.body, "rows") {
		if inf, ok := row["inference"].(obj); ok {
			if id, _ := inf["responseId"].(string); id != "" {
				traced[id] = true
			}
		}
	}
	for id := range wantIDs {
		require.True(t, traced[id], "the objective's trace shows the record of %s: %s", id, tr.raw)
	}

	// 6. SIGTERM: exit 0; the token never in the log.
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.done:
	case <-time.After(rcStopWait):
		t.Fatalf("the runner did not exit within %s of SIGTERM", rcStopWait)
	}
	require.Equal(t, 0, r.cmd.ProcessState.ExitCode(), "a signal exits 0")
	log := r.stderr.String() + r.stdout.String()
	require.NotContains(t, log, agentTok, "the token is never logged")
	require.NotContains(t, log, "WARNING: DATA RACE")
}
