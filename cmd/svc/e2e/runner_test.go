package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `svc runner` end to end: a real broker, a real runner process, and the
// test binary itself as a scripted plain agent. The agent appends every
// turn it reads to <dir>/turns.jsonl and reports its hook events by running
// `svc hook`, driven by words in the turn text:
//
//	TOOL:  a PreToolUse/PostToolUse pair whose result holds the text and
//	       $E2E_SECRET
//	HOLD   the turn lasts until <dir>/release exists (unless the agent
//	       runs with E2E_NO_HOLD set)
//	COMPACT a SessionStart hook with source compact after the turn
//	EXIT:n the agent exits with code n after the turn

const scriptedAgentArg = "-svc-e2e-scripted-agent"

func init() {
	// Runs before TestMain: the runner starts this binary as its agent.
	if len(os.Args) == 4 && os.Args[1] == scriptedAgentArg {
		os.Exit(runScriptedAgent(os.Args[2], os.Args[3]))
	}
}

// agentTurn is one line the plain adapter writes.
type agentTurn struct {
	Type string         `json:"type"`
	ID   string         `json:"id"`
	Text string         `json:"text"`
	Meta map[string]any `json:"meta"`
}

// runScriptedAgent is the agent of files in dir; svc is the binary its
// hooks run as `svc hook`.
func runScriptedAgent(dir, svc string) int {
	hook := func(payload map[string]any) {
		b, _ := json.Marshal(payload)
		cmd := exec.Command(svc, "hook")
		cmd.Stdin = strings.NewReader(string(b))
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "scripted agent: svc hook: %v\n", err)
		}
	}
	env := map[string]string{}
	for _, k := range []string{"SVC_RUNNER_SOCKET", "SVC_TOKEN", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_LOG_TOOL_DETAILS", "E2E_SECRET"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	b, _ := json.Marshal(env)
	// Written whole (temp file, rename) so the test never reads half.
	_ = os.WriteFile(filepath.Join(dir, "env.tmp"), b, 0o600)
	_ = os.Rename(filepath.Join(dir, "env.tmp"), filepath.Join(dir, "env.json"))
	hook(map[string]any{"hook_event_name": "SessionStart", "source": "startup"})

	turns, err := os.OpenFile(filepath.Join(dir, "turns.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 90
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var tr agentTurn
		if json.Unmarshal(sc.Bytes(), &tr) != nil || tr.Type != "turn" {
			return 91
		}
		if _, err := turns.Write(append(sc.Bytes(), '\n')); err != nil {
			return 92
		}
		hook(map[string]any{"hook_event_name": "UserPromptSubmit", "prompt": tr.Text})
		if strings.Contains(tr.Text, "TOOL:") {
			hook(map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "echo " + env["E2E_SECRET"]}})
			hook(map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "echo " + env["E2E_SECRET"]},
				"tool_response": map[string]any{"stdout": "ran with " + env["E2E_SECRET"] + " and " + env["SVC_TOKEN"]}})
		}
		if strings.Contains(tr.Text, "HOLD") && os.Getenv("E2E_NO_HOLD") == "" {
			for deadline := time.Now().Add(runTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
					os.Remove(filepath.Join(dir, "release"))
					break
				}
			}
		}
		hook(map[string]any{"hook_event_name": "Stop"})
		if strings.Contains(tr.Text, "COMPACT") {
			hook(map[string]any{"hook_event_name": "SessionStart", "source": "compact"})
		}
		if m := regexp.MustCompile(`EXIT:(\d+)`).FindStringSubmatch(tr.Text); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

// runnerChild is a running `svc runner` with its scripted agent.
type runnerChild struct {
	*clientChild
	dir string // the agent's files
}

// startRunner starts `svc runner` as the member with token tok.
func startRunner(t *testing.T, p *proc, tok, stateDir string, extraArgs []string, env ...string) *runnerChild {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	args := append([]string{"runner", "--url", p.base, "--state-dir", stateDir}, extraArgs...)
	args = append(args, "--", exe, scriptedAgentArg, dir, svcPath(t))
	c := startClient(t, args, append([]string{"SVC_TOKEN=" + tok}, env...))
	r := &runnerChild{clientChild: c, dir: dir}
	waitFor(t, c, c.stderr, regexp.MustCompile(`attached to the stream of`))
	return r
}

// turns reads what the agent got so far.
func (r *runnerChild) turns(t *testing.T) []agentTurn {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "turns.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []agentTurn
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var tr agentTurn
		require.NoError(t, json.Unmarshal([]byte(line), &tr))
		out = append(out, tr)
	}
	return out
}

// waitTurns waits until the agent got n turns and returns them.
func (r *runnerChild) waitTurns(t *testing.T, n int) []agentTurn {
	t.Helper()
	var got []agentTurn
	require.Eventually(t, func() bool { got = r.turns(t); return len(got) >= n }, runTimeout, 10*time.Millisecond,
		"want %d turns; stderr:\n%s", n, r.stderr)
	return got
}

// env is the agent's environment as it recorded it at start.
func (r *runnerChild) env(t *testing.T) map[string]string {
	t.Helper()
	var b []byte
	require.Eventually(t, func() bool {
		var err error
		b, err = os.ReadFile(filepath.Join(r.dir, "env.json"))
		return err == nil
	}, runTimeout, 10*time.Millisecond)
	var env map[string]string
	require.NoError(t, json.Unmarshal(b, &env))
	return env
}

func (r *runnerChild) release(t *testing.T) {
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o600))
}

// term sends SIGTERM and returns the exit code.
func (r *runnerChild) term(t *testing.T) int {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	return r.wait(t)
}

func push(t *testing.T, p *proc, tok string, body obj) string {
	t.Helper()
	r := p.do(t, http.MethodPost, "/push", body, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	m, _ := r.body["message"].(obj)
	id, _ := m["id"].(string)
	require.NotEmpty(t, id)
	return id
}

func activityRows(t *testing.T, p *proc, tok, member, kind string) []obj {
	t.Helper()
	r := p.do(t, http.MethodGet, "/members/"+member+"/activity?kind="+kind, nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	return listOf(t, r.body, "activity")
}

func TestRunnerWakesAgentReportsActivityAndRedacts(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "agent")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	mustCall(t, d, bearer(admin), "CreateSecret", obj{"slug": "db", "envName": "E2E_SECRET"})
	mustCall(t, d, bearer(admin), "SetSecretValue", obj{"slug": "db", "value": "hunter2-e2e"})
	mustCall(t, d, bearer(admin), "AddSecretBinding", obj{"slug": "db", "member": "agent"})

	r := startRunner(t, p, agentTok, t.TempDir(), nil)
	// One stream: the runner is one connection.
	require.Eventually(t, func() bool {
		pr := presenceOf(t, p, bearer(admin), "agent")
		return pr != nil && pr["connected"] == float64(1)
	}, runTimeout, 10*time.Millisecond)

	env := r.env(t)
	require.Equal(t, "hunter2-e2e", env["E2E_SECRET"], "the member's secrets in the agent's environment")
	// The exporter goes to the runner's OTLP relay with the relay's key;
	// the relay adds the bearer.
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/otlp$`, env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	require.Equal(t, "http/protobuf", env["OTEL_EXPORTER_OTLP_PROTOCOL"])
	require.Regexp(t, `^X-Svc-Relay-Key=[0-9a-f]{32}$`, env["OTEL_EXPORTER_OTLP_HEADERS"])
	require.Equal(t, "1", env["OTEL_LOG_TOOL_DETAILS"])
	require.NotEmpty(t, env["SVC_RUNNER_SOCKET"])
	require.NotContains(t, env, "SVC_TOKEN", "the agent reaches the broker only through its toolbox")

	// Own messages are not echoed; a teammate's DM wakes the agent.
	push(t, p, agentTok, obj{"body": "note to everyone from me"})
	id := push(t, p, aliceTok, obj{"to": "agent", "title": "Deploy", "body": "HOLD TOOL: please deploy", "level": "warning"})
	turns := r.waitTurns(t, 1)
	require.Equal(t, id, turns[0].ID)
	require.True(t, strings.HasPrefix(turns[0].Text, "[svc] message "+id+" from alice in DM (level warning)\nTitle: Deploy\nHOLD TOOL: please deploy"), turns[0].Text)

	// Working while the turn runs, idle once it ends.
	require.Eventually(t, func() bool {
		pr := presenceOf(t, p, bearer(admin), "agent")
		return pr["activity"] == "working" && pr["busy"] == true
	}, runTimeout, 10*time.Millisecond)
	r.release(t)
	require.Eventually(t, func() bool {
		pr := presenceOf(t, p, bearer(admin), "agent")
		_, has := pr["activity"]
		return !has
	}, runTimeout, 10*time.Millisecond)

	// The tool result is uploaded with the secret and the token redacted.
	var rows []obj
	require.Eventually(t, func() bool { rows = activityRows(t, p, agentTok, "agent", "tool_action"); return len(rows) == 1 }, runTimeout, 10*time.Millisecond)
	data, _ := rows[0]["data"].(obj)
	require.Equal(t, "Bash", data["tool"])
	require.Equal(t, "runner", data["source"])
	require.Equal(t, obj{"stdout": "ran with [REDACTED] and "}, data["result"])
	require.Equal(t, obj{"command": "echo [REDACTED]"}, data["input"])

	// A secret change is logged and not applied.
	mustCall(t, d, bearer(admin), "SetSecretValue", obj{"slug": "db", "value": "rotated-e2e"})
	waitFor(t, r.clientChild, r.stderr, regexp.MustCompile(`(?m)^secret db changed; applies at next runner start$`))
	time.Sleep(100 * time.Millisecond)
	require.Len(t, r.turns(t), 1, "no turn for registry events or own messages")

	require.Equal(t, 0, r.term(t), "stderr:\n%s", r.stderr)
	require.Empty(t, activityRows(t, p, agentTok, "agent", "objective_close"), "no open objectives: no markers")
	require.NotContains(t, r.stderr.String(), agentTok, "the token is never logged")
	require.NotContains(t, r.stderr.String(), "hunter2-e2e")
}

func TestRunnerRestartNeitherMissesNorReplays(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "agent")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	state := filepath.Join(t.TempDir(), "state")

	r := startRunner(t, p, agentTok, state, nil)
	id1 := push(t, p, aliceTok, obj{"to": "agent", "body": "one"})
	r.waitTurns(t, 1)
	// A message is acknowledged on the broker once its turn ended (the
	// agent's Stop hook): wait for that before stopping, or the restart
	// rightly delivers it again.
	waitPosition(t, p, agentTok, "agent", id1)
	require.Equal(t, 0, r.term(t), "stderr:\n%s", r.stderr)
	_, err := os.Stat(state)
	require.ErrorIs(t, err, os.ErrNotExist, "the runner keeps no local state: the broker's position is the authority")

	// While the runner is down.
	id2 := push(t, p, aliceTok, obj{"to": "agent", "body": "two"})
	id3 := push(t, p, aliceTok, obj{"body": "three, to everyone"})

	r2 := startRunner(t, p, agentTok, state, nil)
	got := r2.waitTurns(t, 2)
	id4 := push(t, p, aliceTok, obj{"to": "agent", "body": "four"})
	got = r2.waitTurns(t, 3)
	time.Sleep(100 * time.Millisecond)
	got = r2.turns(t)
	var ids []string
	for _, tr := range got {
		ids = append(ids, tr.ID)
	}
	require.Equal(t, []string{id2, id3, id4}, ids, "after %s: no miss, no replay", id1)
	require.Contains(t, got[1].Text, "from alice in general")
	waitPosition(t, p, agentTok, "agent", id4)
	require.Equal(t, 0, r2.term(t))
}

// waitPosition waits until the broker holds pos as member's delivery
// position, with no turn open.
func waitPosition(t *testing.T, p *proc, tok, member, pos string) {
	t.Helper()
	var st obj
	require.Eventually(t, func() bool {
		st = mustCall(t, restDriver{p}, bearer(tok), "GetDelivery", obj{"name": member})
		return st["position"] == pos && st["turnActive"] == false
	}, runTimeout, 10*time.Millisecond, "position %s never acknowledged: %v", pos, st)
}

func TestRunnerRebriefAndShutdownMarkers(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "agent")
	var objIDs []string
	for _, title := range []string{"Ship v1", "Write docs"} {
		o := mustCall(t, d, bearer(admin), "CreateObjective", obj{"title": title, "outcome": title + " done", "assignee": "agent"})
		ob, _ := o["objective"].(obj)
		if ob == nil {
			ob = o
		}
		objIDs = append(objIDs, ob["id"].(string))
	}
	r := startRunner(t, p, agentTok, t.TempDir(), nil)
	turns := r.waitTurns(t, 1)
	require.Equal(t, map[string]any{"kind": "context_refresh", "from": "svc"}, turns[0].Meta)
	require.Empty(t, turns[0].ID)
	for i, id := range objIDs {
		require.Contains(t, turns[0].Text, "- "+id+" [active] "+[]string{"Ship v1", "Write docs"}[i]+"\n  outcome: ")
	}

	// Compaction re-briefs again.
	push(t, p, admin, obj{"to": "agent", "body": "COMPACT now"})
	turns = r.waitTurns(t, 3)
	require.Equal(t, "context_refresh", turns[2].Meta["kind"])

	require.Equal(t, 0, r.term(t), "a signal exits 0; stderr:\n%s", r.stderr)
	rows := activityRows(t, p, agentTok, "agent", "objective_close")
	var got []string
	for _, row := range rows {
		data, _ := row["data"].(obj)
		require.Equal(t, "runner_shutdown", data["reason"])
		got = append(got, row["objectiveId"].(string))
	}
	require.ElementsMatch(t, objIDs, got, "one marker per open objective")
}

func TestRunnerNoCaptureAndAgentExitCode(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "agent")
	r := startRunner(t, p, agentTok, t.TempDir(), []string{"--no-capture"})
	env := r.env(t)
	require.NotContains(t, env, "OTEL_EXPORTER_OTLP_ENDPOINT", "no telemetry without capture")

	push(t, p, admin, obj{"to": "agent", "body": "HOLD TOOL: x"})
	r.waitTurns(t, 1)
	// Working, but nothing is reported.
	for range 10 {
		pr := presenceOf(t, p, bearer(admin), "agent")
		require.NotContains(t, pr, "activity")
		time.Sleep(20 * time.Millisecond)
	}
	r.release(t)
	push(t, p, admin, obj{"to": "agent", "body": "EXIT:3"})
	require.Equal(t, 3, r.wait(t), "the agent's own exit code; stderr:\n%s", r.stderr)
	require.Empty(t, activityRows(t, p, agentTok, "agent", "tool_action"))
}

func TestRunnerHookAndUsage(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    []string
		stdin  string
		code   int
		stderr string
	}{
		{"hook outside a runner", []string{"hook"}, nil, `{"hook_event_name":"Stop"}`, 0, "SVC_RUNNER_SOCKET is not set"},
		{"hook with the runner gone", []string{"hook"}, []string{"SVC_RUNNER_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}, `{"hook_event_name":"Stop"}`, 0, "svc hook: dial unix"},
		{"hook with bad input", []string{"hook"}, []string{"SVC_RUNNER_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}, `not json`, 0, "not JSON"},
		{"runner without a command", []string{"runner", "--token", "svc_x"}, nil, "", 2, "no agent command"},
		{"runner with an unknown adapter", []string{"runner", "--token", "svc_x", "--agent", "nope", "--", "true"}, nil, "", 2, `unknown agent "nope"`},
		{"runner with the broker down", []string{"runner", "--url", "http://127.0.0.1:1", "--token", "svc_x", "--state-dir", t.TempDir(), "--", "true"}, nil, "", 1, "cannot reach the broker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runSvc(t, tc.args, tc.env, strings.NewReader(tc.stdin))
			require.Equal(t, tc.code, code, "stderr: %s", stderr)
			require.Empty(t, stdout, "a hook prints nothing the agent would read")
			require.Contains(t, stderr, tc.stderr)
		})
	}
}
