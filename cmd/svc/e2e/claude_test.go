package e2e

// End-to-end tests of agent telemetry (docs/TELEMETRY.md) with the real
// Claude Code CLI: the agent runs headless against a scripted stub model
// (agenttest) and exports its OpenTelemetry logs to one broker child, over
// each of its OTLP protocols, with a member token. The tests read what the
// broker made of it: the member's activity rows, its usage and its live
// activity stream.
//
// Between the agent and the stub sits a tap (ccTap): it records what the
// stub answered (request id, message id, stop reason, usage as sent), which
// is what the rows must repeat, and adds an extended-thinking block in
// front of every answer, which no row may carry.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
)

const (
	// ccRowsWait bounds the wait for an agent's rows once it exited. Claude
	// Code flushes its last export before it exits and the broker answers an
	// export once its rows are committed, so they are normally there at
	// once; the bound leaves room for a loaded machine, and stays well below
	// the 120 s after which the broker would flush unpaired records alone.
	ccRowsWait = 20 * time.Second
	ccTick     = 50 * time.Millisecond
	// ccBarrierWait bounds how long one agent of the attribution test waits
	// for the other to reach the model.
	ccBarrierWait = 15 * time.Second
	// ccOverlap is how long both agents of the attribution test are held
	// at their first model call once both are there: over two export
	// intervals.
	ccOverlap = 500 * time.Millisecond

	// ccThought and ccSignature mark the thinking blocks the tap adds.
	ccThought   = "SVC-E2E-THOUGHT"
	ccSignature = "SVC-E2E-SIGNATURE"
	ccSystem    = "You are a test agent. Answer briefly."
)

// ccBodyKeys are the llm_exchange data keys raw bodies contribute.
var ccBodyKeys = []string{"system", "messages", "tools", "content", "responseId", "stopReason"}

func TestClaudeTelemetry(t *testing.T) {
	bin := agenttest.Claude(t) // installs once, before any broker starts
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))

	// 1. Raw bodies exported: full exchanges, over each protocol.
	for _, proto := range []string{agenttest.ProtocolHTTPJSON, agenttest.ProtocolHTTPProtobuf, agenttest.ProtocolGRPC} {
		name := strings.ReplaceAll(proto, "/", "_")
		t.Run("bodies_"+name, func(t *testing.T) {
			t.Parallel()
			r := ccNewRun(t, p, admin, "cc-"+strings.ReplaceAll(name, "_", "-"), proto)
			r.run(t, bin, true)
			rows := r.awaitRows(t)
			r.checkRows(t, rows, true)
			r.checkUsage(t, rows)
		})
	}

	// 2. No raw bodies: the accounting records alone give the exchanges.
	t.Run("accounting_only", func(t *testing.T) {
		t.Parallel()
		r := ccNewRun(t, p, admin, "cc-accounting", agenttest.ProtocolHTTPJSON)
		r.run(t, bin, false)
		rows := r.awaitRows(t)
		r.checkRows(t, rows, false)
		r.checkUsage(t, rows)
	})

	// 3. The live stream sees the rows as they are committed.
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		r := ccNewRun(t, p, admin, "cc-stream", agenttest.ProtocolHTTPProtobuf)
		s := p.openSSE(t, "/members/"+r.member+"/activity/stream", sseOpts{}, withBearer(r.tok))
		s.requireReady(t, r.member)
		r.run(t, bin, true)

		var streamed []obj
		seen := map[string]bool{}
		exchanges := 0
		deadline := time.Now().Add(ccRowsWait)
		read := func() {
			ev := s.next(t)
			require.Equal(t, "activity", ev.event, "frame %q", ev.lines)
			require.Len(t, ev.data, 1, "a row is one data: line: %q", ev.lines)
			var row obj
			require.NoError(t, json.Unmarshal([]byte(ev.data[0]), &row), "data %q", ev.data[0])
			id, ok := row["id"].(float64)
			require.True(t, ok, "row id is a number: %v", row)
			require.Equal(t, strconv.FormatInt(int64(id), 10), ev.id, "the SSE id is the row id")
			require.Equal(t, r.member, row["member"])
			require.False(t, seen[ev.id], "row %s streamed twice", ev.id)
			seen[ev.id] = true
			if len(streamed) > 0 {
				require.Greater(t, id, streamed[len(streamed)-1]["id"].(float64), "rows stream in id order")
			}
			streamed = append(streamed, row)
			if row["kind"] == "llm_exchange" {
				exchanges++
			}
		}
		for exchanges < 2 {
			require.True(t, time.Now().Before(deadline),
				"the stream gave %d llm_exchange rows in %s; rows so far: %s", exchanges, ccRowsWait, ccJSON(streamed))
			read()
		}
		// Every row stored is streamed, with the same content.
		rows := r.awaitRows(t)
		for len(streamed) < len(rows) {
			require.True(t, time.Now().Before(deadline), "streamed %d rows, listed %d", len(streamed), len(rows))
			read()
		}
		listed := slices.Clone(rows)
		slices.Reverse(listed) // oldest first, as streamed
		require.Equal(t, listed, streamed, "the stream and the list disagree")
		r.checkRows(t, streamed, true)
	})

	// 4. Attribution by token: two agents at work at once, each exporting
	// with its own member's token, the same model and the same request ids
	// (each stub numbers its answers from 1); each member sees its own rows
	// only.
	t.Run("attribution", func(t *testing.T) {
		t.Parallel()
		a := ccNewRun(t, p, admin, "cc-alice", agenttest.ProtocolHTTPJSON)
		b := ccNewRun(t, p, admin, "cc-bob", agenttest.ProtocolGRPC)
		// Each agent's first model call waits (bounded) until the other's
		// has come too, and a little longer, so both are in flight at once
		// and both first request bodies are likely exported (every 200 ms)
		// before either accounting record.
		arrived := make(chan struct{}, 2)
		both := make(chan struct{})
		go func() {
			for range 2 {
				select {
				case <-arrived:
				case <-time.After(ccBarrierWait):
					return
				}
			}
			time.Sleep(ccOverlap)
			close(both)
		}()
		for _, r := range []*ccRun{a, b} {
			r.tap.setBeforeFirst(func() {
				arrived <- struct{}{}
				select {
				case <-both:
				case <-time.After(ccBarrierWait):
				}
			})
		}
		t.Run("agents", func(t *testing.T) {
			for _, r := range []*ccRun{a, b} {
				t.Run(r.member, func(t *testing.T) {
					t.Parallel()
					r.run(t, bin, true)
				})
			}
		})
		if t.Failed() {
			t.FailNow()
		}
		select {
		case <-both:
		default:
			t.Log("the two agents did not reach the model at the same time")
		}
		require.Equal(t, a.tap.requestIDs(), b.tap.requestIDs(), "both stubs answered with the same request ids")

		for _, pair := range [][2]*ccRun{{a, b}, {b, a}} {
			r, other := pair[0], pair[1]
			rows := r.awaitRows(t)
			r.checkRows(t, rows, true)
			r.checkUsage(t, rows)
			raw := ccJSON(rows)
			for _, s := range []string{other.marker, other.noteText, other.note} {
				require.NotContains(t, raw, s, "%s's rows hold %s's work", r.member, other.member)
			}
			// A member without activity.read reads only its own.
			requireRESTError(t, p.do(t, http.MethodGet, "/members/"+other.member+"/activity", nil, withBearer(r.tok)), "forbidden")
		}
	})
}

// ccRun is one agent run of one member.
type ccRun struct {
	p      *proc
	member string
	tok    string
	proto  string

	model *agenttest.Model
	tap   *ccTap

	dir      string
	note     string // file the agent reads
	noteText string
	marker   string
	prompt   string
	answer   string

	result     agenttest.Result
	start, end time.Time
}

// ccNewRun creates the member (no permissions) and scripts its model: read
// the note with Read, then answer.
func ccNewRun(t *testing.T, p *proc, admin cred, member, proto string) *ccRun {
	t.Helper()
	r := &ccRun{p: p, member: member, proto: proto, dir: t.TempDir()}
	r.tok = createMember(t, restDriver{p}, admin, member)
	tag := strings.ToUpper(strings.ReplaceAll(member, "-", "_"))
	r.marker = "MARK_" + tag
	r.noteText = "the sky over " + tag + " is green today"
	r.note = filepath.Join(r.dir, "note-"+member+".txt")
	require.NoError(t, os.WriteFile(r.note, []byte(r.noteText+"\n"), 0o644))
	r.prompt = "Read " + filepath.Base(r.note) + " and tell me what it says. " + r.marker
	r.answer = "The note says: " + r.noteText + "."
	input, err := json.Marshal(map[string]string{"file_path": r.note})
	require.NoError(t, err)
	r.model = agenttest.NewModel(t)
	r.model.CallToolOn(r.marker, "Read", string(input)).Reply(r.answer)
	r.tap = newCCTap(t, r.model.URL())
	return r
}

// run runs the agent, exporting to the broker with the member's token;
// rawBodies says whether request and response bodies are exported.
func (r *ccRun) run(t *testing.T, bin string, rawBodies bool) {
	t.Helper()
	endpoint := r.p.base + "/otlp"
	if r.proto == agenttest.ProtocolGRPC {
		endpoint = "http://" + r.p.addr
	}
	raw := "1"
	if !rawBodies {
		raw = "0"
	}
	r.start = time.Now()
	stdout, stderr := agenttest.Run(t, bin, agenttest.RunOptions{
		Prompt:       r.prompt,
		ModelURL:     r.tap.url(),
		OTLPEndpoint: endpoint,
		OTLPProtocol: r.proto,
		OTLPHeaders:  map[string]string{"Authorization": "Bearer " + r.tok},
		AllowedTools: []string{"Read"},
		// One built-in tool and a one-line system prompt keep the bodies
		// small (far below the ~60 KB the producer truncates at).
		Args: []string{"--tools", "Read", "--system-prompt", ccSystem},
		Dir:  r.dir,
		// Said here, not left to the kit's defaults: what this test needs.
		Env: []string{
			"CLAUDE_CODE_ENABLE_TELEMETRY=1",
			"OTEL_LOGS_EXPORTER=otlp",
			"OTEL_LOG_USER_PROMPTS=1",
			"OTEL_LOG_TOOL_DETAILS=1",
			"OTEL_LOG_RAW_API_BODIES=" + raw,
		},
	})
	r.end = time.Now()
	r.result = agenttest.ParseResult(t, stdout)
	require.False(t, r.result.IsError, "result %+v\nstderr: %s", r.result, stderr)
	require.Equal(t, r.answer, r.result.Result, "stderr: %s", stderr)
	require.Zero(t, r.model.Pending(), "scripted turns left")
	require.Len(t, r.model.AgentTurns(), 2, "requests: %+v", r.model.Requests())
	require.Empty(t, r.tap.failures(), "tap")
	require.Len(t, r.tap.answers(), 2, "model calls")
	// The thinking the tap added went back to the model in the history, so
	// the exported request body carries it too (and the response bodies).
	require.Contains(t, string(r.model.AgentTurns()[1].Body), ccThought, "the second request's history")
}

// rows lists the member's activity (newest first) without failing: it runs
// in require.Eventually's goroutine.
func (r *ccRun) rows() ([]obj, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.p.base+"/members/"+r.member+"/activity", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.tok)
	resp, err := r.p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var body struct {
		Activity []obj `json:"activity"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	return body.Activity, nil
}

// awaitRows waits (bounded) until the member's rows hold a user prompt, two
// tool actions and two exchanges, and returns them, newest first.
func (r *ccRun) awaitRows(t *testing.T) []obj {
	t.Helper()
	last := &ccSnapshot{}
	require.Eventually(t, func() bool {
		rows, err := r.rows()
		last.set(rows, err)
		if err != nil {
			return false
		}
		n := ccCountKinds(rows)
		return n["user_prompt"] >= 1 && n["tool_action"] >= 2 && n["llm_exchange"] >= 2
	}, ccRowsWait, ccTick, "%s's activity is not complete; last seen: %s", r.member, last)
	rows, err := r.rows()
	require.NoError(t, err)
	return rows
}

// checkRows checks the member's rows (in any order) against the run:
// exactly one user prompt, a decision and a result of the Read, and two
// exchanges that repeat what the stub answered; with bodies, the exchanges
// carry them, without thinking.
func (r *ccRun) checkRows(t *testing.T, rows []obj, bodies bool) {
	t.Helper()
	require.Equal(t, map[string]int{"user_prompt": 1, "tool_action": 2, "llm_exchange": 2}, ccCountKinds(rows),
		"rows: %s", ccJSON(rows))
	lo, hi := r.start.Add(-5*time.Second).UnixMilli(), r.end.Add(5*time.Second).UnixMilli()
	var prompt obj
	tools := map[string]obj{}
	exchanges := map[string]obj{}
	for _, row := range rows {
		require.Equal(t, r.member, row["member"], "row %v", row)
		require.IsType(t, float64(0), row["id"], "row %v", row)
		ts, ok := row["ts"].(float64)
		require.True(t, ok, "row ts: %v", row)
		require.True(t, int64(ts) >= lo && int64(ts) <= hi, "row ts %v outside the run [%d, %d]", ts, lo, hi)
		require.NotContains(t, row, "objectiveId")
		data, ok := row["data"].(obj)
		require.True(t, ok, "row data: %v", row)
		ccRequireNoThinking(t, data, "")
		switch row["kind"] {
		case "user_prompt":
			prompt = data
		case "tool_action":
			phase, _ := data["phase"].(string)
			require.NotContains(t, tools, phase, "two tool_action rows of phase %q: %s", phase, ccJSON(rows))
			tools[phase] = data
		case "llm_exchange":
			id, _ := data["requestId"].(string)
			require.NotContains(t, exchanges, id, "two llm_exchange rows of requestId %q: %s", id, ccJSON(rows))
			exchanges[id] = data
		}
	}
	raw := ccJSON(rows)
	require.NotContains(t, raw, ccThought, "thinking text stored")
	require.NotContains(t, raw, ccSignature, "thinking signature stored")

	// The prompt, with its text (OTEL_LOG_USER_PROMPTS=1).
	require.Equal(t, r.prompt, prompt["prompt"], "user_prompt %v", prompt)
	require.EqualValues(t, len(r.prompt), prompt["promptLength"], "user_prompt %v", prompt)

	// The tool: decided, then run, with its input (OTEL_LOG_TOOL_DETAILS=1).
	turns := r.model.AgentTurns()
	callID := r.tap.answers()[0].toolUseID
	require.NotEmpty(t, callID, "the first answer is a tool call")
	dec, res := tools["decision"], tools["result"]
	require.NotNil(t, dec, "no decision row: %s", raw)
	require.NotNil(t, res, "no result row: %s", raw)
	require.Equal(t, "Read", dec["tool"], "decision %v", dec)
	require.Equal(t, "accept", dec["decision"], "decision %v", dec)
	require.Equal(t, "otlp", dec["source"], "decision %v", dec)
	require.Equal(t, "Read", res["tool"], "result %v", res)
	require.Equal(t, true, res["success"], "result %v", res)
	require.Equal(t, "otlp", res["source"], "result %v", res)
	require.IsType(t, float64(0), res["durationMs"], "result %v", res)
	require.GreaterOrEqual(t, res["durationMs"].(float64), 0.0)
	require.NotContains(t, res, "error")
	in, ok := res["input"].(obj)
	require.True(t, ok, "result input is an object: %v", res)
	require.Equal(t, r.note, in["file_path"], "result input %v", in)
	for _, d := range []obj{dec, res} {
		// callId is not in docs/TELEMETRY.md; when given it must be right.
		if id, ok := d["callId"]; ok {
			require.Equal(t, callID, id, "tool_action %v", d)
		}
	}

	// The exchanges: one per model call, in order, each repeating what the
	// stub answered.
	answers := r.tap.answers()
	var ids []string
	for _, a := range answers {
		ids = append(ids, a.requestID)
	}
	require.ElementsMatch(t, ids, slices.Collect(maps.Keys(exchanges)), "requestIds of the exchanges: %s", raw)
	wantStops := []string{"tool_use", "end_turn"}
	for i, a := range answers {
		x := exchanges[a.requestID]
		turn := turns[i]
		require.Equal(t, a.requestID, turn.RequestID)
		require.Equal(t, turn.Messages.Model, x["model"], "exchange %d: %v", i, x)
		require.Equal(t, obj{
			"inputTokens":         float64(a.input),
			"outputTokens":        float64(a.output),
			"cacheReadTokens":     float64(a.cacheRead),
			"cacheCreationTokens": float64(a.cacheCreation),
		}, x["usage"], "exchange %d usage (the stub's)", i)
		cost, ok := x["costUsd"].(float64)
		require.True(t, ok && cost > 0, "exchange %d costUsd: %v", i, x["costUsd"])
		dur, ok := x["durationMs"].(float64)
		require.True(t, ok && dur >= 0, "exchange %d durationMs: %v", i, x["durationMs"])
		require.Equal(t, false, x["requestOnly"], "exchange %d", i)
		require.Equal(t, false, x["truncated"], "exchange %d", i)
		require.Equal(t, "otlp", x["source"], "exchange %d", i)
		if !bodies {
			for _, k := range ccBodyKeys {
				require.NotContains(t, x, k, "exchange %d without raw bodies", i)
			}
			continue
		}
		require.Equal(t, a.messageID, x["responseId"], "exchange %d", i)
		require.Equal(t, wantStops[i], a.stopReason, "the stub's stop reason")
		require.Equal(t, a.stopReason, x["stopReason"], "exchange %d", i)
		var offered []string
		for _, td := range turn.Messages.Tools {
			offered = append(offered, td.Name)
		}
		require.Contains(t, offered, "Read")
		require.Equal(t, offered, ccStrings(t, x["tools"]), "exchange %d tools", i)
		// system and messages are the request's own, thinking removed.
		var sent struct {
			System   any   `json:"system"`
			Messages []any `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(turn.Body, &sent))
		require.Contains(t, ccJSON(x["system"]), ccSystem, "exchange %d system", i)
		require.Equal(t, ccWithoutThinking(sent.System), x["system"], "exchange %d system", i)
		messages, ok := x["messages"].([]any)
		require.True(t, ok, "exchange %d messages: %v", i, x["messages"])
		require.Equal(t, ccWithoutThinking(sent.Messages), messages, "exchange %d messages", i)
		content, ok := x["content"].([]any)
		require.True(t, ok && len(content) > 0, "exchange %d content: %v", i, x["content"])
		// What the tap added is gone; what the stub said is there.
		require.Equal(t, a.blocks, len(content), "exchange %d content: %v", i, content)
		switch i {
		case 0:
			require.Contains(t, ccJSON(messages), r.marker, "the first request holds the prompt")
			block, _ := content[0].(obj)
			require.Equal(t, "tool_use", block["type"], "content %v", content)
			require.Equal(t, "Read", block["name"], "content %v", content)
			require.Equal(t, callID, block["id"], "content %v", content)
			require.Equal(t, obj{"file_path": r.note}, block["input"], "content %v", content)
		case 1:
			m := ccJSON(messages)
			require.Contains(t, m, r.noteText, "the second request holds the tool result")
			require.Contains(t, m, `"tool_result"`)
			require.Contains(t, m, callID)
			block, _ := content[0].(obj)
			require.Equal(t, obj{"type": "text", "text": r.answer}, ccPick(block, "type", "text"), "content %v", content)
		}
	}
}

// checkUsage checks GET /members/:name/usage against the stub's numbers
// and the rows' costs.
func (r *ccRun) checkUsage(t *testing.T, rows []obj) {
	t.Helper()
	var in, out, read, create int64
	for _, a := range r.tap.answers() {
		in, out, read, create = in+a.input, out+a.output, read+a.cacheRead, create+a.cacheCreation
	}
	var cost float64
	for _, row := range rows {
		if row["kind"] == "llm_exchange" {
			cost += row["data"].(obj)["costUsd"].(float64)
		}
	}
	resp := r.p.do(t, http.MethodGet, "/members/"+r.member+"/usage", nil, withBearer(r.tok))
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.raw)
	u, ok := resp.body["usage"].(obj)
	require.True(t, ok, "usage: %s", resp.raw)
	require.InDelta(t, cost, u["costUsd"], 1e-12, "usage %v", u)
	require.Equal(t, float64(0), u["costComputedUsd"], "Claude Code reports every exchange's cost: svc computes none")
	require.Equal(t, float64(0), u["unpricedExchanges"])
	delete(u, "costUsd")
	delete(u, "costComputedUsd")
	delete(u, "unpricedExchanges")
	require.Equal(t, obj{
		"inputTokens": float64(in), "outputTokens": float64(out),
		"cacheReadTokens": float64(read), "cacheCreationTokens": float64(create),
		"exchanges": float64(2),
	}, u)
	// The agent priced its calls the same way.
	require.InDelta(t, r.result.TotalCostUSD, cost, 1e-9, "Claude Code's own total cost")
}

// --- The tap ---------------------------------------------------------------

// ccTap forwards every request to the stub model, records each answer to
// POST /v1/messages, and adds a thinking block (with signature) in front of
// the answer's content.
type ccTap struct {
	upstream string
	srv      *httptest.Server
	client   *http.Client

	once sync.Once

	mu sync.Mutex
	// beforeFirst, when set, runs before the first /v1/messages call is
	// forwarded.
	beforeFirst func()
	ans         []ccAnswer
	errs        []string
}

// ccAnswer is what the stub answered to one /v1/messages call.
type ccAnswer struct {
	requestID  string // request-id header
	messageID  string
	stopReason string
	toolUseID  string // of the first tool_use block, if any
	blocks     int    // content blocks the stub sent (the tap's not counted)

	input, output, cacheRead, cacheCreation int64
}

func newCCTap(t *testing.T, upstream string) *ccTap {
	tp := &ccTap{upstream: upstream, client: &http.Client{Timeout: time.Minute}}
	tp.srv = httptest.NewServer(http.HandlerFunc(tp.serve))
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *ccTap) url() string { return tp.srv.URL }

func (tp *ccTap) setBeforeFirst(f func()) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.beforeFirst = f
}

func (tp *ccTap) answers() []ccAnswer {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.ans)
}

func (tp *ccTap) requestIDs() []string {
	var ids []string
	for _, a := range tp.answers() {
		ids = append(ids, a.requestID)
	}
	return ids
}

func (tp *ccTap) failures() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.errs)
}

func (tp *ccTap) fail(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	tp.mu.Lock()
	tp.errs = append(tp.errs, msg)
	tp.mu.Unlock()
	http.Error(w, msg, http.StatusBadGateway)
}

func (tp *ccTap) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		tp.fail(w, "reading the request: %v", err)
		return
	}
	messages := r.Method == http.MethodPost && r.URL.Path == "/v1/messages"
	tp.mu.Lock()
	before := tp.beforeFirst
	tp.mu.Unlock()
	if messages && before != nil {
		tp.once.Do(before)
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, tp.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		tp.fail(w, "%v", err)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Accept-Encoding") // the answer is read and rewritten
	resp, err := tp.client.Do(req)
	if err != nil {
		tp.fail(w, "forwarding %s: %v", r.URL.Path, err)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tp.fail(w, "reading the answer: %v", err)
		return
	}
	if messages && resp.StatusCode == http.StatusOK {
		a := ccAnswer{requestID: resp.Header.Get("request-id")}
		n := len(tp.answers()) + 1
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			out, err = ccRewriteStream(out, &a, n)
		} else {
			out, err = ccRewriteMessage(out, &a, n)
		}
		if err != nil {
			tp.fail(w, "answer %d: %v", n, err)
			return
		}
		tp.mu.Lock()
		tp.ans = append(tp.ans, a)
		tp.mu.Unlock()
	}
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// ccThinkingBlock is the complete block the tap adds to answer n.
func ccThinkingBlock(n int) (thought, signature string) {
	return fmt.Sprintf("%s %d: the user wants the note read first.", ccThought, n),
		fmt.Sprintf("%s-%d-c2lnbmF0dXJl", ccSignature, n)
}

func ccDecode(s string) (obj, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var o obj
	err := d.Decode(&o)
	return o, err
}

func ccInt(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return i
}

// ccRewriteStream records a streamed answer and adds a thinking block at
// index 0, moving the stub's blocks one up.
func ccRewriteStream(in []byte, a *ccAnswer, n int) ([]byte, error) {
	var b bytes.Buffer
	frame := func(event string, data any) {
		enc, _ := json.Marshal(data)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", event, enc)
	}
	for f := range strings.SplitSeq(strings.TrimSpace(strings.ReplaceAll(string(in), "\r\n", "\n")), "\n\n") {
		var event, data string
		for l := range strings.SplitSeq(f, "\n") {
			if v, ok := strings.CutPrefix(l, "event: "); ok {
				event = v
			} else if v, ok := strings.CutPrefix(l, "data: "); ok {
				data = v
			}
		}
		d, err := ccDecode(data)
		if err != nil {
			return nil, fmt.Errorf("event %q: %v", event, err)
		}
		switch event {
		case "message_start":
			m, _ := d["message"].(obj)
			u, _ := m["usage"].(obj)
			a.messageID, _ = m["id"].(string)
			a.input, a.output = ccInt(u["input_tokens"]), ccInt(u["output_tokens"])
			a.cacheRead, a.cacheCreation = ccInt(u["cache_read_input_tokens"]), ccInt(u["cache_creation_input_tokens"])
			frame(event, d)
			thought, sig := ccThinkingBlock(n)
			frame("content_block_start", obj{"type": "content_block_start", "index": 0,
				"content_block": obj{"type": "thinking", "thinking": "", "signature": ""}})
			frame("content_block_delta", obj{"type": "content_block_delta", "index": 0,
				"delta": obj{"type": "thinking_delta", "thinking": thought}})
			frame("content_block_delta", obj{"type": "content_block_delta", "index": 0,
				"delta": obj{"type": "signature_delta", "signature": sig}})
			frame("content_block_stop", obj{"type": "content_block_stop", "index": 0})
			continue
		case "content_block_start", "content_block_delta", "content_block_stop":
			d["index"] = ccInt(d["index"]) + 1
			if event == "content_block_start" {
				a.blocks++
				if cb, _ := d["content_block"].(obj); cb["type"] == "tool_use" && a.toolUseID == "" {
					a.toolUseID, _ = cb["id"].(string)
				}
			}
		case "message_delta":
			delta, _ := d["delta"].(obj)
			a.stopReason, _ = delta["stop_reason"].(string)
			if u, ok := d["usage"].(obj); ok {
				if _, ok := u["output_tokens"]; ok {
					a.output = ccInt(u["output_tokens"])
				}
			}
		}
		frame(event, d)
	}
	if a.messageID == "" || a.stopReason == "" {
		return nil, fmt.Errorf("no message_start or message_delta in %q", in)
	}
	return b.Bytes(), nil
}

// ccRewriteMessage records a non-streamed answer and puts a thinking block
// first in its content.
func ccRewriteMessage(in []byte, a *ccAnswer, n int) ([]byte, error) {
	d, err := ccDecode(string(in))
	if err != nil {
		return nil, err
	}
	a.messageID, _ = d["id"].(string)
	a.stopReason, _ = d["stop_reason"].(string)
	u, _ := d["usage"].(obj)
	a.input, a.output = ccInt(u["input_tokens"]), ccInt(u["output_tokens"])
	a.cacheRead, a.cacheCreation = ccInt(u["cache_read_input_tokens"]), ccInt(u["cache_creation_input_tokens"])
	content, _ := d["content"].([]any)
	a.blocks = len(content)
	for _, c := range content {
		if cb, _ := c.(obj); cb["type"] == "tool_use" && a.toolUseID == "" {
			a.toolUseID, _ = cb["id"].(string)
		}
	}
	thought, sig := ccThinkingBlock(n)
	d["content"] = append([]any{obj{"type": "thinking", "thinking": thought, "signature": sig}}, content...)
	return json.Marshal(d)
}

// --- Helpers ---------------------------------------------------------------

// ccSnapshot is the last list an await saw, for its failure message (read
// when the message is formatted).
type ccSnapshot struct {
	mu   sync.Mutex
	rows []obj
	err  error
}

func (s *ccSnapshot) set(rows []obj, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows, s.err = rows, err
}

func (s *ccSnapshot) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "error: " + s.err.Error()
	}
	return ccJSON(s.rows)
}

func ccCountKinds(rows []obj) map[string]int {
	n := map[string]int{}
	for _, r := range rows {
		k, _ := r["kind"].(string)
		n[k]++
	}
	return n
}

func ccJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func ccStrings(t *testing.T, v any) []string {
	t.Helper()
	list, ok := v.([]any)
	require.True(t, ok, "want a list of strings, got %#v", v)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		require.True(t, ok, "want strings, got %#v", v)
		out = append(out, s)
	}
	return out
}

// ccPick returns the given keys of o.
func ccPick(o obj, ks ...string) obj {
	out := obj{}
	for _, k := range ks {
		if v, ok := o[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ccWithoutThinking is v without its extended-thinking blocks (list
// elements or object members), at any depth.
func ccWithoutThinking(v any) any {
	isThinking := func(e any) bool {
		o, ok := e.(obj)
		return ok && (o["type"] == "thinking" || o["type"] == "redacted_thinking")
	}
	switch x := v.(type) {
	case obj:
		out := obj{}
		for k, e := range x {
			if !isThinking(e) {
				out[k] = ccWithoutThinking(e)
			}
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			if !isThinking(e) {
				out = append(out, ccWithoutThinking(e))
			}
		}
		return out
	}
	return v
}

// ccRequireNoThinking fails if v holds an extended-thinking block at any
// depth.
func ccRequireNoThinking(t *testing.T, v any, path string) {
	t.Helper()
	switch x := v.(type) {
	case obj:
		if ty, _ := x["type"].(string); ty == "thinking" || ty == "redacted_thinking" {
			t.Fatalf("a %s block at %s: %v", ty, path, x)
		}
		for k, e := range x {
			ccRequireNoThinking(t, e, path+"."+k)
		}
	case []any:
		for i, e := range x {
			ccRequireNoThinking(t, e, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}
