package e2e

// Full capture and redaction with the real agents under a real `svc
// runner` (docs/RUNNER-CLAUDE.md, "Full capture"; docs/RUNNER.md, "Logs").
// Claude Code's model calls go through the runner's capturing proxy: the
// objective's trace shows, for every exchange, the OTLP llm_exchange joined
// with the GenAI record that holds the whole request. A bound secret the
// agent uses (written to a file with its shell, quoted in its answer, in
// base64 and URL-encoded) reaches no line of the runner's output, no GenAI
// record and no stored activity row.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
	"svc/cmd/svc/internal/npmcache"
)

// capSecret is a bound secret whose URL encoding differs from it.
const capSecret = "hunter2/Capture+5e1d"

// capFakeToken has the shape of a token svc mints: the runner redacts
// every such token, not only its own.
const capFakeToken = "svc_Zm9yZ2VkLXRva2VuLW5vdC1vbmUtb2YtdGhpcy1icm9rZXI"

// capQuoted is the agent's answer quoting the secret in three forms and a
// token.
var capQuoted = fmt.Sprintf("Done: %s, %s, %s, %s", capSecret,
	base64.StdEncoding.EncodeToString([]byte(capSecret)), url.QueryEscape(capSecret), capFakeToken)

// capForms are what must appear nowhere.
func capForms(agentTok string) []string {
	return []string{capSecret, base64.StdEncoding.EncodeToString([]byte(capSecret)),
		base64.RawURLEncoding.EncodeToString([]byte(capSecret)), url.QueryEscape(capSecret), capFakeToken, agentTok}
}

// bindSecret gives member the bound secret E2E_SECRET = capSecret.
func bindSecret(t *testing.T, d driver, admin cred, member string) {
	t.Helper()
	mustCall(t, d, admin, "CreateSecret", obj{"slug": "capture", "envName": "E2E_SECRET"})
	mustCall(t, d, admin, "SetSecretValue", obj{"slug": "capture", "value": capSecret})
	mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "capture", "member": member})
}

// startAgentRunner starts `svc runner -- <agent argv…>` in dir with env (and
// the token in SVC_TOKEN) and waits until it holds member's stream; dump
// describes what the model saw, for a failure's log.
func startAgentRunner(t *testing.T, p *proc, tok, member, dir string, env, agent []string, dump func() string) *rcRunner {
	t.Helper()
	args := append([]string{"runner", "--url", p.base, "--state-dir", filepath.Join(t.TempDir(), "state"), "--"}, agent...)
	cmd := childCommand(t, args, nil)
	cmd.Dir = dir
	var keep []string
	for _, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GORACE" {
			keep = append(keep, kv)
		}
	}
	cmd.Env = append(append(keep, "SVC_TOKEN="+tok), env...)
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
			t.Logf("runner stderr:\n%s\nrunner stdout:\n%s\nthe stub's requests:\n%s",
				npmcache.Tail(c.stderr.String(), 16000), npmcache.Tail(c.stdout.String(), 16000), dump())
		}
	})
	waitFor(t, c, c.stderr, regexp.MustCompile(`attached to the stream of `+member))
	return &rcRunner{c}
}

// stopAndCheckLogs stops the runner and checks that no form of the secret
// and no token is in any line it printed.
func stopAndCheckLogs(t *testing.T, r *rcRunner, agentTok string) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.done:
	case <-time.After(rcStopWait):
		t.Fatalf("the runner did not exit within %s of SIGTERM", rcStopWait)
	}
	out := r.stdout.String() + r.stderr.String()
	for _, f := range capForms(agentTok) {
		require.NotContains(t, out, f, "the runner's output holds the secret or a token")
	}
	require.Empty(t, tokenShape.FindAllString(out, -1))
}

// genaiRecordsClean checks that no GenAI record of member holds the
// secret in any form.
func genaiRecordsClean(t *testing.T, p *proc, tok, member string, atLeast int) []obj {
	t.Helper()
	res := p.do(t, http.MethodGet, "/members/"+member+"/genai", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, res.status, "%s", res.raw)
	recs := listOf(t, res.body, "inferences")
	require.GreaterOrEqual(t, len(recs), atLeast, "%s", res.raw)
	for _, f := range capForms(tok) {
		require.NotContains(t, string(res.raw), f, "a GenAI record holds the secret or a token")
	}
	require.Contains(t, string(res.raw), "[REDACTED]", "the secret was in the context, redacted")
	return recs
}

// activityClean checks that no activity row of member (OTLP telemetry
// and the runner's tool results, every kind) holds the secret in any form:
// the broker redacts at ingest, the runner before upload.
func activityClean(t *testing.T, p *proc, tok, member string) {
	t.Helper()
	res := p.do(t, http.MethodGet, "/members/"+member+"/activity?limit=1000", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, res.status, "%s", res.raw)
	require.NotEmpty(t, listOf(t, res.body, "activity"))
	for _, f := range capForms(tok) {
		require.NotContains(t, string(res.raw), f, "a stored activity row holds the secret or a token")
	}
	require.Contains(t, string(res.raw), "[REDACTED]", "the secret reached the telemetry, redacted")
}

func TestRunnerClaudeFullCapture(t *testing.T) {
	bin := agenttest.Claude(t)
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "claude1")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	bindSecret(t, d, bearer(admin), "claude1")
	b := mustCall(t, d, bearer(admin), "CreateObjective", obj{"title": "Capture the context", "outcome": "every exchange whole", "assignee": "claude1"})
	if inner, ok := b["objective"].(obj); ok {
		b = inner
	}
	objID, _ := b["id"].(string)
	require.NotEmpty(t, objID)

	const dmMarker = "CAP-DM-2b7e"
	bash, err := json.Marshal(obj{"command": `printf '%s' "$E2E_SECRET" > secret.txt && cat secret.txt && printf '%s' "$E2E_SECRET" | base64`, "description": "Write the secret"})
	require.NoError(t, err)
	m := agenttest.NewModel(t)
	m.Script(agenttest.Turn{Marker: dmMarker, ToolName: "Bash", ToolInput: bash}).Reply(capQuoted)

	wd := t.TempDir()
	r := startAgentRunner(t, p, agentTok, "claude1", wd, rcEnv(t, m.URL()), []string{bin, "--allowedTools", "Bash"}, func() string { return rcRequests(m) })

	push(t, p, aliceTok, obj{"to": "claude1", "body": "Please write the secret down. " + dmMarker})
	rcEventually(t, r, "the scripted turn played out, claude1 idle", func() bool {
		_, busy := presenceOf(t, p, bearer(admin), "claude1")["activity"]
		return m.Pending() == 0 && !busy
	})
	var toolRes agenttest.Request
	for _, q := range m.AgentTurns() {
		for _, tr := range q.ToolResults() {
			if strings.Contains(tr.ResultText(), capSecret) {
				toolRes = q
			}
		}
	}
	require.NotZero(t, toolRes.Seq, "Bash ran with the secret: its result went back to the model")

	// Every agent exchange (a request offering tools) in the trace: the
	// OTLP llm_exchange joined with the GenAI record of the same response,
	// which holds the whole request.
	want := map[string]agenttest.Request{}
	for _, q := range m.AgentTurns() {
		want[fmt.Sprintf("msg_stub_%d", q.Seq)] = q
	}
	require.GreaterOrEqual(t, len(want), 3, "the re-brief, the tool call and the answer")
	var rows []obj
	rcEventually(t, r, "every exchange joined in the objective's trace", func() bool {
		res := p.do(t, http.MethodGet, "/objectives/"+objID+"/trace", nil, withBearer(admin))
		require.Equal(t, http.StatusOK, res.status, "%s", res.raw)
		rows = listOf(t, res.body, "rows")
		joined := 0
		for _, row := range rows {
			act, _ := row["activity"].(obj)
			inf, _ := row["inference"].(obj)
			if act == nil || inf == nil || act["kind"] != "llm_exchange" {
				continue
			}
			if _, ok := want[inf["responseId"].(string)]; ok {
				joined++
			}
		}
		return joined == len(want)
	})
	for _, row := range rows {
		act, _ := row["activity"].(obj)
		inf, _ := row["inference"].(obj)
		if act == nil || inf == nil {
			continue
		}
		q, ok := want[inf["responseId"].(string)]
		if !ok {
			continue
		}
		data, _ := act["data"].(obj)
		require.Equal(t, q.RequestID, data["requestId"], "the exchange and the record are one call")
		// The whole request: the system prompt (the briefing in it),
		// every message, every tool.
		sys, _ := json.Marshal(inf["systemInstructions"])
		require.Contains(t, string(sys), "claude1", "the system prompt holds the briefing")
		msgs, _ := inf["inputMessages"].([]any)
		require.Len(t, msgs, len(q.Messages.Messages), "every message of request %d", q.Seq)
		tools, _ := inf["toolDefinitions"].([]any)
		require.Len(t, tools, len(q.Messages.Tools), "every tool of request %d", q.Seq)
		names, _ := json.Marshal(tools)
		require.Contains(t, string(names), "mcp__svc__send")
		require.Contains(t, string(names), "Bash")
	}

	genaiRecordsClean(t, p, agentTok, "claude1", len(want))
	activityClean(t, p, agentTok, "claude1")
	// The secret was written to a file by the agent's shell.
	got, err := os.ReadFile(filepath.Join(wd, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, capSecret, string(got))
	stopAndCheckLogs(t, r, agentTok)
}

func TestRunnerCodexSecretInNoLogLine(t *testing.T) {
	bin := agenttest.Codex(t)
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "codex1")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	bindSecret(t, d, bearer(admin), "codex1")

	const dmMarker = "CAP-DM-81f0"
	cmdArgs, err := json.Marshal(obj{"cmd": `printf '%s' "$E2E_SECRET" > secret.txt && cat secret.txt && printf '%s' "$E2E_SECRET" | base64`})
	require.NoError(t, err)
	m := agenttest.NewResponses(t)
	m.Script(agenttest.RTurn{Marker: dmMarker, Call: "exec_command", Arguments: cmdArgs}, agenttest.RTurn{Text: capQuoted})

	wd := t.TempDir()
	r := startAgentRunner(t, p, agentTok, "codex1", wd, rxEnv(t, m.URL()), []string{bin, "-C", wd, "--yolo"}, func() string { return rxRequests(m) })
	push(t, p, aliceTok, obj{"to": "codex1", "body": "Please write the secret down. " + dmMarker})
	rcEventually(t, r, "the scripted turn played out, codex1 idle", func() bool {
		_, busy := presenceOf(t, p, bearer(admin), "codex1")["activity"]
		return m.Pending() == 0 && !busy
	})
	rcEventually(t, r, "the agent's answer in the runner's output", func() bool {
		return strings.Contains(r.stdout.String(), "codex: Done: [REDACTED]")
	})
	got, err := os.ReadFile(filepath.Join(wd, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, capSecret, string(got))
	var saw bool
	for _, q := range m.Requests() {
		for _, o := range q.FunctionOutputs() {
			saw = saw || strings.Contains(string(o.Output), capSecret)
		}
	}
	require.True(t, saw, "the command's output, holding the secret, went back to the model")
	rcEventually(t, r, "the GenAI records", func() bool {
		res := p.do(t, http.MethodGet, "/members/codex1/genai", nil, withBearer(agentTok))
		return res.status == http.StatusOK && len(listOf(t, res.body, "inferences")) >= 2
	})
	genaiRecordsClean(t, p, agentTok, "codex1", 2)
	activityClean(t, p, agentTok, "codex1")
	stopAndCheckLogs(t, r, agentTok)
}
