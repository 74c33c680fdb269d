package agenttest

// What the real Claude Code 2.1.328 did against the stub model and the
// collector below (linux/amd64, 2 cores; measured 2026-11-23):
//
// Model requests. A `claude -p` run whose script is "call Read, then
// answer" made exactly 2 requests, both `POST /v1/messages?beta=true`,
// streaming, model "claude-opus-5-5", each offering the tools (12 by
// default; `--tools Read` leaves Read and a "DeferredToolPlaceholder"):
// the first with the prompt, the second with the tool_result. No
// count_tokens call, no non-streaming call, no side request (quota probe,
// title) and no other endpoint was hit. Headers: x-api-key, anthropic-beta
// (claude-code-20250219,…), anthropic-version 2023-06-01, user-agent
// "claude-cli/2.1.328 (external, sdk-cli)", x-claude-code-session-id. The
// first user message is a list of blocks: a <system-reminder> about commit
// attribution, then the prompt (a bare string with --system-prompt); a
// {"role":"system"} message with the environment (cwd, platform, date)
// follows it, so "the latest user message" is not the last message.
// A multi-turn session (--input-format stream-json, two user lines written
// at once) made one request per line and printed two result objects.
//
// Timing. A run takes 0.6–0.9 s (exit included) on an idle machine, up to
// ~14 s while an npm install unpacks beside it; the binary answers
// --version in ~15 ms. The install took ~5.5 s with a warm npm cache and
// ~37 s with an empty one (~167 MB downloaded, ~370 MB installed).
//
// Surprises. Each run starts a file-watch probe in
// $TMPDIR/claude-<uid>/fswatch-probe-* and, exiting within ~1 s, leaves
// it behind: Run gives every run its own TMPDIR (and CLAUDE_CODE_TMPDIR)
// under t.TempDir(). The agent runs `git ls-files` in its working
// directory at start. The stream-json "assistant" lines carry the stub's
// request-id as request_id. The usage of --output-format json adds up the
// stub's numbers, and its cost is priced as claude-opus-5-5.
//
// Telemetry. One resource (service.name=claude-code, service.version=
// 2.1.328, host.arch, os.type, os.version) and one scope
// (com.anthropic.claude_code.events@2.1.328). Each record's body is the
// string "claude_code.<name>"; attributes: event.name (bare name),
// event.sequence (an int, from 0, in emission order across exports),
// event.timestamp (RFC 3339 string), session.id, user.id (hex hash),
// terminal.type, anthropic.provider=firstParty, anthropic.custom_base_url
// (a bool); all other values are strings, numbers included. Order in one
// run:
//
//	0 managed_settings_resolved, 1-3 plugin_loaded (three builtin plugins),
//	4 user_prompt (prompt, prompt_text, prompt_length, prompt.id, message.uuid),
//	5 api_request_body (body = the request JSON, body_length, request_body_id,
//	  model, query_source=sdk; no request_id),
//	6 tool_decision (decision=accept, source=config, tool_name=Read,
//	  tool_use_id, tool_source=builtin, permission_mode, request_id) — before
//	  the api_request of the same response: the tool is decided while the
//	  message is being accounted,
//	7 api_request (model, input_tokens, output_tokens, cache_read_tokens,
//	  cache_creation_tokens, cache_creation_5m/1h_tokens, cost_usd,
//	  cost_usd_micros, duration_ms, ttft_ms, effort, speed, request_id =
//	  the stub's request-id header),
//	8 api_response_body (body = the response message JSON, message.id,
//	  message.uuid, request_body_id linking it to its api_request_body,
//	  request_id),
//	9 tool_result (tool_name, tool_use_id, success, duration_ms, tool_input
//	  JSON with OTEL_LOG_TOOL_DETAILS, tool_input_size_bytes,
//	  tool_result_size_bytes, request_id of the response that asked for it),
//	10 api_request_body, 11 api_request, 12 assistant_response (response,
//	  response_length, request_id; only for a response with text), 13
//	  api_response_body.
//
// prompt.id is on every event from user_prompt on. The token counts are
// the stub's usage (input_tokens, cache_read_input_tokens,
// cache_creation_input_tokens, output_tokens) as sent. With a 200 ms
// interval an idle run gave 2 exports (split after api_request_body or
// after api_response_body), a loaded one up to 4; the last is flushed
// before the process exits, so every event is in when Run returns; Authorization from OTEL_EXPORTER_OTLP_HEADERS
// was on every export, for all three protocols. http/json posts
// application/json to <endpoint>/v1/logs, http/protobuf
// application/x-protobuf (neither gzipped), grpc calls LogsService/Export
// on http://host:port in cleartext. With OTEL_METRICS_EXPORTER=none nothing
// else was posted. An export of the http/json run with the default system
// prompt and tools is ~60 KB (the request body is ~49 KB); the tests below
// pass --tools Read and a one-line --system-prompt to keep samples ~15 KB.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"svc/cmd/svc/internal/npmcache"
)

// samplesDir receives the http/json export payloads when
// AGENTTEST_WRITE_SAMPLES=1: `AGENTTEST_WRITE_SAMPLES=1 go test -run
// 'TestTelemetry/http_json' ./cmd/svc/internal/agenttest/`.
const samplesDir = "../../../../server/otlp/testdata"

func samplePrefix() string { return "claude-code-" + ClaudeCodeVersion + "-" }

// smallArgs keep the request bodies (and so the api_request_body events)
// small: one built-in tool and a one-line system prompt.
var smallArgs = []string{"--tools", "Read", "--system-prompt", "You are a test agent. Answer briefly."}

func TestClaudeBinary(t *testing.T) {
	t.Parallel()
	bin := Claude(t)
	dir, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(bin, dir+string(filepath.Separator)) {
		t.Errorf("binary %s is not under the cache %s", bin, dir)
	}
	if !strings.HasSuffix(dir, filepath.Join("svc-test", "claude-code-"+ClaudeCodeVersion)) {
		t.Errorf("cache dir %s is not keyed by version", dir)
	}
	if err := checkVersion(bin); err != nil {
		t.Fatal(err)
	}
	if again := Claude(t); again != bin {
		t.Errorf("second call: %s, first: %s", again, bin)
	}
}

// TestInstallConcurrent installs into a fresh directory from three
// goroutines at once (flock conflicts between open files of one process as
// between processes), over the debris of a crashed install: a stale temp
// dir and an incomplete install in place.
//
// Not parallel: it runs before the parallel tests, so the install (CPU
// bound: it unpacks ~370 MB) does not slow their bounded runs.
func TestInstallConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("a full npm install; skipped with -short")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "svc-test", "claude-code-"+ClaudeCodeVersion)
	stale := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-crashed")
	for _, d := range []string{stale, filepath.Join(dir, "node_modules")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	paths := make([]string, 3)
	errs := make([]error, 3)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = ensureClaudeIn(t, dir)
		}()
	}
	wg.Wait()
	t.Logf("concurrent install took %s", time.Since(start).Round(time.Millisecond))
	for i := range paths {
		if errs[i] != nil {
			t.Fatalf("install %d: %v", i, errs[i])
		}
		if paths[i] != paths[0] {
			t.Errorf("install %d gave %s, install 0 %s", i, paths[i], paths[0])
		}
	}
	if err := checkVersion(paths[0]); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".*tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary install dirs left behind: %v", left)
	}
}

// TestInstallWithoutNPM checks a machine without npm gets a clear error
// (which Claude turns into a test failure, never a skip).
func TestInstallWithoutNPM(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := ensureClaudeIn(t, filepath.Join(t.TempDir(), "claude-code-"+ClaudeCodeVersion))
	if err == nil || !strings.Contains(err.Error(), "npm is not on PATH") {
		t.Fatalf("err = %v", err)
	}
}

func TestTelemetry(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{ProtocolHTTPJSON, ProtocolHTTPProtobuf, ProtocolGRPC} {
		t.Run(strings.ReplaceAll(proto, "/", "_"), func(t *testing.T) {
			t.Parallel()
			toolRun(t, proto)
		})
	}
}

// toolRun runs the agent on a prompt whose script reads a file with the
// Read tool and then answers, and checks the model's and the collector's
// view of it.
func toolRun(t *testing.T, proto string) {
	bin := Claude(t)
	m := NewModel(t)
	var c *collector
	if proto == ProtocolGRPC {
		c = newGRPCCollector(t)
	} else {
		c = newHTTPCollector(t)
	}
	dir, home := t.TempDir(), t.TempDir()
	note := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(note, []byte("the sky is green today\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := "AGENTTEST-" + strings.ToUpper(strings.ReplaceAll(proto, "/", "-"))
	input, _ := json.Marshal(map[string]string{"file_path": note})
	const answer = "The note says the sky is green today."
	m.CallToolOn(marker, "Read", string(input)).Reply(answer)
	token := fmt.Sprintf("agenttest-token-%d", time.Now().UnixNano())

	stdout, stderr := Run(t, bin, RunOptions{
		Prompt:       "Read note.txt and tell me what it says. " + marker,
		ModelURL:     m.URL(),
		OTLPEndpoint: c.endpoint,
		OTLPProtocol: proto,
		OTLPHeaders:  map[string]string{"Authorization": "Bearer " + token},
		AllowedTools: []string{"Read"},
		Args:         smallArgs,
		Dir:          dir,
		Home:         home,
	})
	if pids := processesWithHome(home); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
	res := ParseResult(t, stdout)
	if res.IsError || res.Result != answer || res.NumTurns != 2 {
		t.Fatalf("result: %+v\nstderr: %s", res, stderr)
	}

	// The model's side: the tool call, then the tool_result.
	if n := m.Pending(); n != 0 {
		t.Errorf("%d scripted turns not served", n)
	}
	turns := m.AgentTurns()
	if len(turns) != 2 {
		t.Fatalf("%d agent turns, want 2: %+v", len(turns), m.Requests())
	}
	if !turns[0].HasMarker(marker) || !turns[0].Scripted || turns[0].Answer.ToolName != "Read" {
		t.Errorf("first turn: marker %v, answer %+v", turns[0].HasMarker(marker), turns[0].Answer)
	}
	results := turns[1].ToolResults()
	if len(results) != 1 || results[0].ToolUseID != toolUseID(turns[0].Seq) ||
		!strings.Contains(results[0].ResultText(), "the sky is green today") || results[0].IsError {
		t.Errorf("second turn's tool results: %+v", results)
	}
	var messageIDs []string
	for _, r := range m.Requests() {
		if r.Path == "/v1/messages" {
			messageIDs = append(messageIDs, r.RequestID)
		}
	}

	// The collector's side.
	exports := c.Exports()
	if len(exports) == 0 {
		t.Fatalf("no export received; stderr:\n%s", stderr)
	}
	for i, e := range exports {
		if e.Protocol != proto {
			t.Errorf("export %d: protocol %s, want %s", i, e.Protocol, proto)
		}
		if e.Authorization != "Bearer "+token {
			t.Errorf("export %d: Authorization %q", i, e.Authorization)
		}
	}
	if o := c.Others(); len(o) > 0 {
		t.Errorf("requests to other paths: %v", o)
	}
	evs := c.Events()
	var order []string
	for _, e := range evs {
		order = append(order, fmt.Sprintf("%s:%s@%d", e.Attrs["event.sequence"], e.Name, e.Export))
	}
	t.Logf("%d exports, %d events (sequence:name@export): %s", len(exports), len(evs), strings.Join(order, " "))
	byName := map[string][]event{}
	for _, e := range evs {
		byName[e.Name] = append(byName[e.Name], e)
		if e.Attrs["session.id"] != res.SessionID {
			t.Errorf("%s: session.id %q, result's %q", e.Name, e.Attrs["session.id"], res.SessionID)
		}
		if e.Body != "claude_code."+e.Name {
			t.Errorf("%s: body %q", e.Name, e.Body)
		}
		if e.Resource["service.name"] != "claude-code" || e.Resource["service.version"] != ClaudeCodeVersion {
			t.Errorf("%s: resource %v", e.Name, e.Resource)
		}
	}
	for _, name := range []string{"user_prompt", "api_request", "api_request_body", "api_response_body", "tool_decision", "tool_result"} {
		if len(byName[name]) == 0 {
			t.Errorf("no %s event; got:\n%s", name, describe(evs))
		}
	}
	if t.Failed() {
		t.Logf("events:\n%s", describe(evs))
		return
	}
	seq := func(e event) int {
		n, err := strconv.Atoi(e.Attrs["event.sequence"])
		if err != nil {
			t.Fatalf("%s: event.sequence %q", e.Name, e.Attrs["event.sequence"])
		}
		return n
	}

	up := byName["user_prompt"][0]
	if !strings.Contains(up.Attrs["prompt"], marker) {
		t.Errorf("user_prompt prompt %q lacks the marker", up.Attrs["prompt"])
	}
	promptID := up.Attrs["prompt.id"]
	if promptID == "" {
		t.Error("user_prompt has no prompt.id")
	}

	// One api_request per model call, request_id = the stub's header.
	var reqIDs []string
	for _, e := range byName["api_request"] {
		reqIDs = append(reqIDs, e.Attrs["request_id"])
		if e.Attrs["prompt.id"] != promptID {
			t.Errorf("api_request prompt.id %q, want %q", e.Attrs["prompt.id"], promptID)
		}
		for _, k := range []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"} {
			if n, err := strconv.Atoi(e.Attrs[k]); err != nil || n <= 0 {
				t.Errorf("api_request %s = %q", k, e.Attrs[k])
			}
		}
		if e.Attrs["model"] == "" || e.Attrs["cost_usd"] == "" || e.Attrs["duration_ms"] == "" {
			t.Errorf("api_request lacks model/cost_usd/duration_ms: %v", e.Attrs)
		}
	}
	if !slices.Equal(reqIDs, messageIDs) {
		t.Errorf("api_request request_ids %v, stub's request-id headers %v", reqIDs, messageIDs)
	}
	first := byName["api_request"][0]
	if first.Attrs["request_id"] != turns[0].RequestID {
		t.Errorf("first api_request request_id %q, stub's %q", first.Attrs["request_id"], turns[0].RequestID)
	}

	// Raw bodies: each request body precedes its api_request; each
	// response body names its request_body_id and request_id.
	bodies := map[string]event{}
	for _, e := range byName["api_request_body"] {
		bodies[e.Attrs["request_body_id"]] = e
		if !strings.Contains(e.Attrs["body"], `"messages"`) {
			t.Errorf("api_request_body body: %.200q", e.Attrs["body"])
		}
	}
	if len(byName["api_request_body"]) != len(messageIDs) || len(byName["api_response_body"]) != len(messageIDs) {
		t.Errorf("%d api_request_body and %d api_response_body for %d model calls",
			len(byName["api_request_body"]), len(byName["api_response_body"]), len(messageIDs))
	}
	for _, e := range byName["api_response_body"] {
		rb, ok := bodies[e.Attrs["request_body_id"]]
		if !ok {
			t.Errorf("api_response_body request_body_id %q matches no api_request_body", e.Attrs["request_body_id"])
			continue
		}
		if !slices.Contains(messageIDs, e.Attrs["request_id"]) {
			t.Errorf("api_response_body request_id %q", e.Attrs["request_id"])
		}
		if seq(rb) > seq(e) {
			t.Errorf("api_request_body (seq %d) after its api_response_body (seq %d)", seq(rb), seq(e))
		}
		var msg struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(e.Attrs["body"]), &msg); err != nil || !strings.HasPrefix(msg.ID, "msg_stub_") {
			t.Errorf("api_response_body body %.200q: %v", e.Attrs["body"], err)
		}
	}
	if strings.Contains(bodies[byName["api_response_body"][0].Attrs["request_body_id"]].Attrs["body"], "tool_result") {
		t.Error("the first request body already carries a tool_result")
	}

	// The tool: accepted, run, linked to the response that asked for it.
	td, tr := byName["tool_decision"][0], byName["tool_result"][0]
	wantTool := map[string]string{"tool_name": "Read", "tool_use_id": toolUseID(turns[0].Seq), "request_id": turns[0].RequestID}
	for k, v := range wantTool {
		if td.Attrs[k] != v || tr.Attrs[k] != v {
			t.Errorf("%s: tool_decision %q, tool_result %q, want %q", k, td.Attrs[k], tr.Attrs[k], v)
		}
	}
	if td.Attrs["decision"] != "accept" || tr.Attrs["success"] != "true" {
		t.Errorf("decision %q, success %q", td.Attrs["decision"], tr.Attrs["success"])
	}
	if !strings.Contains(tr.Attrs["tool_input"], "note.txt") {
		t.Errorf("tool_result tool_input %q", tr.Attrs["tool_input"])
	}

	// Order: prompt < first call < tool decision, result < second call.
	second := byName["api_request"][len(byName["api_request"])-1]
	if !(seq(up) < seq(first) && seq(first) < seq(tr) && seq(td) < seq(tr) && seq(tr) < seq(second)) {
		t.Errorf("order: user_prompt %d, api_request %d, tool_decision %d, tool_result %d, api_request %d",
			seq(up), seq(first), seq(td), seq(tr), seq(second))
	}
	// Sequences are unique.
	seen := map[int]string{}
	for _, e := range evs {
		if prev, dup := seen[seq(e)]; dup {
			t.Errorf("event.sequence %d on %s and %s", seq(e), prev, e.Name)
		}
		seen[seq(e)] = e.Name
	}

	if proto == ProtocolHTTPJSON {
		checkAndSaveSamples(t, exports, token)
	}
}

// checkAndSaveSamples checks that the http/json payloads hold no secret,
// and with AGENTTEST_WRITE_SAMPLES=1 saves them, exactly as received, one
// file per export, as samplesDir/claude-code-<version>-<n>.json.
func checkAndSaveSamples(t *testing.T, exports []export, token string) {
	for i, e := range exports {
		for _, secret := range []string{token, DummyAPIKey, "Bearer"} {
			if bytes.Contains(e.Raw, []byte(secret)) {
				t.Errorf("export %d contains %q", i, secret)
			}
		}
		if !json.Valid(e.Raw) {
			t.Errorf("export %d is not JSON", i)
		}
	}
	if os.Getenv("AGENTTEST_WRITE_SAMPLES") != "1" || t.Failed() {
		return
	}
	if err := os.MkdirAll(samplesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(samplesDir, samplePrefix()+"*.json"))
	for _, o := range old {
		if err := os.Remove(o); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range exports {
		p := filepath.Join(samplesDir, fmt.Sprintf("%s%d.json", samplePrefix(), i+1))
		if err := os.WriteFile(p, e.Raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", p, len(e.Raw))
	}
}

// TestSamples checks the saved http/json samples still decode as OTLP logs
// and hold one whole tool-using run.
func TestSamples(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(samplesDir, samplePrefix()+"*.json"))
	if len(files) == 0 {
		t.Fatalf("no %s*.json in %s: regenerate them with AGENTTEST_WRITE_SAMPLES=1 go test -run TestTelemetry/http_json", samplePrefix(), samplesDir)
	}
	c := &collector{t: t}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		req := &collogspb.ExportLogsServiceRequest{}
		if err := protojson.Unmarshal(raw, req); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		c.exports = append(c.exports, export{Protocol: ProtocolHTTPJSON, Raw: raw, Req: req})
	}
	names := map[string]int{}
	for _, e := range c.Events() {
		names[e.Name]++
	}
	for _, n := range []string{"user_prompt", "api_request", "api_request_body", "api_response_body", "tool_decision", "tool_result", "assistant_response"} {
		if names[n] == 0 {
			t.Errorf("samples hold no %s event (have %v)", n, names)
		}
	}
}

// TestStreamJSONTurns drives one session through two turns written on
// stdin, each recognized by the stub through its marker.
func TestStreamJSONTurns(t *testing.T) {
	t.Parallel()
	bin := Claude(t)
	m := NewModel(t)
	m.ReplyOn("TURN-ONE", "first answer").ReplyOn("TURN-TWO", "second answer")
	line := func(text string) string {
		b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
		return string(b) + "\n"
	}
	stdout, _ := Run(t, bin, RunOptions{
		ModelURL:     m.URL(),
		OutputFormat: "stream-json",
		Args:         append([]string{"--input-format", "stream-json"}, smallArgs...),
		Stdin:        strings.NewReader(line("hello TURN-ONE") + line("again TURN-TWO")),
	})
	var results []string
	for _, l := range strings.Split(stdout, "\n") {
		var r Result
		if json.Unmarshal([]byte(l), &r) == nil && r.Type == "result" {
			results = append(results, r.Result)
		}
	}
	if !slices.Equal(results, []string{"first answer", "second answer"}) {
		t.Errorf("results %q\nstdout:\n%s", results, npmcache.Tail(stdout, 4000))
	}
	if ParseResult(t, stdout).Result != "second answer" {
		t.Error("ParseResult did not take the last result")
	}
	if m.Pending() != 0 {
		t.Errorf("%d turns not served", m.Pending())
	}
}

// TestRunTimeout checks a hung agent is killed at the timeout: the stub
// never answers, and the run must fail in time and leave no process.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	bin := Claude(t)
	hang := make(chan struct{})
	url := newHangingServer(t, hang)
	home := t.TempDir()
	ft := &fatalRecorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			}
		}()
		Run(ft, bin, RunOptions{Prompt: "hello", ModelURL: url, Home: home, Timeout: 3 * time.Second})
	}()
	close(hang)
	if !ft.fatal || !strings.Contains(ft.msg, "did not exit within") {
		t.Fatalf("want a timeout failure, got fatal=%v %q", ft.fatal, ft.msg)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("timed-out run took %s", d)
	}
	if pids := processesWithHome(home); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
}

var errFatal = errors.New("fatal recorded")

// fatalRecorder turns Fatal into a recorded failure and a panic, so a test
// can check that a helper fails.
type fatalRecorder struct {
	testing.TB
	fatal bool
	msg   string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal, f.msg = true, fmt.Sprintf(format, args...)
	panic(errFatal)
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.fatal, f.msg = true, fmt.Sprint(args...)
	panic(errFatal)
}

// newHangingServer answers nothing until hang is closed.
func newHangingServer(t *testing.T, hang chan struct{}) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		http.Error(w, "gone", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// processesWithHome lists the processes whose environment has HOME=home.
func processesWithHome(home string) []int {
	var pids []int
	want := []byte("HOME=" + home + "\x00")
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && (bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte("\x00"), want...))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestModelStub exercises the stub over plain HTTP: non-streaming and
// streaming answers, count_tokens, headers, markers and the default reply.
func TestModelStub(t *testing.T) {
	t.Parallel()
	m := NewModel(t)
	m.ReplyOn("MARK", "marked").CallTool("Bash", `{"command":"echo hi"}`).Reply("done")
	post := func(path string, body any) (*http.Response, string) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(m.URL()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, string(out)
	}
	tools := []map[string]any{{"name": "Bash"}}
	msg := func(content any, stream bool) map[string]any {
		return map[string]any{"model": "claude-test", "max_tokens": 100, "stream": stream, "tools": tools,
			"messages": []map[string]any{{"role": "user", "content": content}}}
	}

	// No tools: a side request takes the default reply, not the script.
	resp, body := post("/v1/messages", map[string]any{"model": "m", "max_tokens": 1, "messages": []map[string]any{{"role": "user", "content": "MARK quota"}}})
	if !strings.Contains(body, `"text":"OK."`) || resp.Header.Get("request-id") != "req_stub_1" {
		t.Errorf("side request: %s %v", body, resp.Header)
	}
	// The head turn waits for its marker.
	_, body = post("/v1/messages", msg("no marker here", false))
	if !strings.Contains(body, DefaultReply) {
		t.Errorf("unmarked request: %s", body)
	}
	_, body = post("/v1/messages", msg([]map[string]any{{"type": "text", "text": "<system-reminder>x</system-reminder>"}, {"type": "text", "text": "go MARK"}}, false))
	var nm struct {
		Content []ContentBlock `json:"content"`
		Usage   map[string]any `json:"usage"`
		Stop    string         `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(body), &nm); err != nil || len(nm.Content) != 1 || nm.Content[0].Text != "marked" || nm.Stop != "end_turn" {
		t.Errorf("marked request: %s", body)
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} {
		if n, _ := nm.Usage[k].(float64); n <= 0 {
			t.Errorf("usage %s = %v", k, nm.Usage[k])
		}
	}
	// Streaming tool call.
	resp, body = post("/v1/messages?beta=true", msg("run it", true))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("stream content type %q", ct)
	}
	var events []string
	var partial string
	for _, l := range strings.Split(body, "\n") {
		if ev, ok := strings.CutPrefix(l, "event: "); ok {
			events = append(events, ev)
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			var x struct {
				Delta struct {
					Type        string `json:"type"`
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			_ = json.Unmarshal([]byte(d), &x)
			partial += x.Delta.PartialJSON
		}
	}
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(events, want) || partial != `{"command":"echo hi"}` || !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Errorf("tool stream: events %v, input %q\n%s", events, partial, body)
	}
	// The tool_result turn takes the next reply.
	_, body = post("/v1/messages", msg([]map[string]any{{"type": "tool_result", "tool_use_id": "toolu_stub_4", "content": "hi"}}, true))
	if !strings.Contains(body, `"text":"done"`) && !strings.Contains(body, `"done"`) {
		t.Errorf("after tool: %s", body)
	}
	resp, body = post("/v1/messages/count_tokens", msg("count me", false))
	if !strings.Contains(body, `"input_tokens":`) || resp.Header.Get("request-id") == "" {
		t.Errorf("count_tokens: %s", body)
	}
	resp, _ = post("/v1/other", map[string]any{})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}

	if m.Pending() != 0 {
		t.Errorf("pending %d", m.Pending())
	}
	reqs := m.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	if got := reqs[4].ToolResults(); len(got) != 1 || got[0].ResultText() != "hi" {
		t.Errorf("tool results %+v", got)
	}
	ids := m.RequestIDs()
	if len(ids) != 6 || len(slices.Compact(slices.Clone(ids))) != 6 {
		t.Errorf("request ids %v", ids)
	}
	if len(m.AgentTurns()) != 4 {
		t.Errorf("agent turns %d", len(m.AgentTurns()))
	}
}

// TestModelHold: a turn with Hold is recorded at once and answered only
// once Hold is closed; a request the agent drops ends the wait.
func TestModelHold(t *testing.T) {
	t.Parallel()
	hold, dropped := make(chan struct{}), make(chan struct{})
	// Registered before the stub, so it runs after the stub's Close, which
	// waits for every request: it would hang if a dropped request still
	// waited.
	t.Cleanup(func() { close(dropped) })
	m := NewModel(t)
	m.Script(Turn{Marker: "HELD", Text: "released", Hold: hold}, Turn{Marker: "DROP", Text: "never sent", Hold: dropped})
	body := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 10, "tools": []map[string]any{{"name": "Bash"}},
			"messages": []map[string]any{{"role": "user", "content": text}}})
		return b
	}
	type answer struct {
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Post(m.URL()+"/v1/messages", "application/json", bytes.NewReader(body("go HELD")))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{string(b), err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(m.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held request was not recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case a := <-got:
		t.Fatalf("answered while held: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	close(hold)
	select {
	case a := <-got:
		if a.err != nil || !strings.Contains(a.body, `"text":"released"`) {
			t.Fatalf("after release: %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not answered after release")
	}

	// A dropped request ends its wait (see the cleanup above).
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL()+"/v1/messages", bytes.NewReader(body("DROP")))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the held request was answered")
	}
	if m.Pending() != 0 || len(m.Requests()) != 2 {
		t.Fatalf("pending %d, requests %d", m.Pending(), len(m.Requests()))
	}
}
