package otlp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
)

// readCapture decodes one captured file into its exports: OTLP/JSON (one
// request, or one per line), else protobuf; gzip is undone first.
func readCapture(t *testing.T, path string) []*collogspb.ExportLogsServiceRequest {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		require.NoError(t, err)
		b, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	trimmed := bytes.TrimSpace(b)
	if !bytes.HasPrefix(trimmed, []byte("{")) {
		req, err := DecodeProto(b)
		require.NoError(t, err, path)
		return []*collogspb.ExportLogsServiceRequest{req}
	}
	if req, err := DecodeJSON(trimmed); err == nil {
		return []*collogspb.ExportLogsServiceRequest{req}
	}
	var out []*collogspb.ExportLogsServiceRequest
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		req, err := DecodeJSON(line)
		require.NoError(t, err, path)
		out = append(out, req)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestClaudeCodeCaptures replays real Claude Code exports dropped in
// testdata as claude-code-* (in name order, as one member's exports) and
// checks what must hold of them: each accounting record gives exactly one
// exchange, bodies no accounting claimed come out request-only, every
// exchange whose response was captured has it, and no thinking or private
// attribute comes out.
func TestClaudeCodeCaptures(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "claude-code-*"))
	require.NoError(t, err)
	if len(paths) == 0 {
		t.Skip("no captured Claude Code exports in testdata")
	}
	sort.Strings(paths)
	clock := t0
	c := NewCorrelator(Options{Now: func() time.Time { return clock }})
	var (
		events                        []Event
		accountings, bodies, unusable int
		responses                     = map[string]bool{}
	)
	for _, path := range paths {
		for _, req := range readCapture(t, path) {
			recs := Records(req)
			for _, r := range recs {
				require.Equal(t, Claude, r.Agent, "%s: %s", path, r.Name)
				switch r.Name {
				case "api_request":
					accountings++
				case "api_request_body":
					bodies++
				case "api_response_body":
					responses[r.Attrs["request_id"]] = true
				case "user_prompt", "tool_decision", "tool_result":
				default:
					unusable++
				}
			}
			got, rejected := c.Ingest("alice", recs)
			events = append(events, got...)
			require.LessOrEqual(t, rejected, unusable)
			clock = clock.Add(time.Second)
		}
	}
	for _, evs := range c.Due(clock.Add(time.Hour)) {
		events = append(events, evs...)
	}
	require.Empty(t, c.Members())
	checkOutput(t, events)

	exchanges, requestOnly := 0, 0
	for _, e := range events {
		if e.Kind != KindLLMExchange {
			continue
		}
		require.NotEmpty(t, e.Data["model"])
		if e.Data["requestOnly"] == true {
			requestOnly++
			continue
		}
		exchanges++
		if id, ok := e.Data["requestId"].(string); ok && responses[id] && e.Data["truncated"] != true {
			require.Contains(t, e.Data, "responseId", "exchange %s lost its response", id)
		}
	}
	require.Equal(t, accountings, exchanges)
	require.Equal(t, max(0, bodies-accountings), requestOnly)
}

// TestClaudeCode2_1_328 checks the two exports of one Claude Code 2.1.328
// session (a prompt, a Read tool call, two model calls against a stub API)
// down to each event: the payloads as captured, and the same payloads
// through protobuf.
func TestClaudeCode2_1_328(t *testing.T) {
	paths := []string{"testdata/claude-code-2.1.328-1.json", "testdata/claude-code-2.1.328-2.json"}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("capture %s absent", p)
		}
	}
	for _, viaProto := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "protobuf"}[viaProto], func(t *testing.T) {
			c := NewCorrelator(Options{Now: func() time.Time { return t0 }})
			var events []Event
			rejected := 0
			for _, p := range paths {
				reqs := readCapture(t, p)
				require.Len(t, reqs, 1)
				req := reqs[0]
				if viaProto {
					b, err := proto.Marshal(req)
					require.NoError(t, err)
					req, err = DecodeProto(b)
					require.NoError(t, err)
				}
				got, n := c.Ingest("alice", Records(req))
				events = append(events, got...)
				rejected += n
			}
			require.Empty(t, c.Members(), "everything paired")
			// managed_settings_resolved, 3 plugin_loaded, assistant_response
			require.Equal(t, 5, rejected)
			checkOutput(t, events)

			var kinds []string
			for _, e := range events {
				kinds = append(kinds, e.Kind)
			}
			require.Equal(t, []string{KindUserPrompt, KindToolAction, KindLLMExchange, KindToolAction, KindLLMExchange}, kinds)

			require.Equal(t, map[string]any{"prompt": "Read note.txt and tell me what it says. AGENTTEST-HTTP-JSON", "promptLength": int64(59)}, events[0].Data)
			require.Equal(t, time.Date(2026, 11, 23, 22, 51, 21, 291e6, time.UTC), events[0].TS)
			require.Equal(t, map[string]any{"tool": "Read", "phase": "decision", "decision": "accept", "callId": "toolu_stub_1", "source": "otlp"}, events[1].Data)
			require.Equal(t, map[string]any{
				"tool": "Read", "phase": "result", "success": true, "durationMs": 33.0, "callId": "toolu_stub_1", "source": "otlp",
				"input": json.RawMessage(`{"file_path":"/tmp/TestTelemetryhttp_json2516439506/001/note.txt"}`),
			}, events[3].Data)

			first, second := events[2], events[4]
			require.Equal(t, time.Date(2026, 11, 23, 22, 51, 21, 436e6, time.UTC), first.TS, "the accounting record's time")
			for _, tc := range []struct {
				ev                                         Event
				requestID, responseID, stopReason, content string
				usage                                      map[string]any
				cost, duration                             float64
			}{
				{
					ev: first, requestID: "req_stub_1", responseID: "msg_stub_1", stopReason: "tool_use",
					content: `[{"id":"toolu_stub_1","input":{"file_path":"/tmp/TestTelemetryhttp_json2516439506/001/note.txt"},"name":"Read","type":"tool_use"}]`,
					usage:   map[string]any{"inputTokens": int64(22), "outputTokens": int64(29), "cacheReadTokens": int64(747), "cacheCreationTokens": int64(250)},
					cost:    0.0020674, duration: 84,
				},
				{
					ev: second, requestID: "req_stub_2", responseID: "msg_stub_2", stopReason: "end_turn",
					content: `[{"text":"The note says the sky is green today.","type":"text"}]`,
					usage:   map[string]any{"inputTokens": int64(7), "outputTokens": int64(10), "cacheReadTokens": int64(807), "cacheCreationTokens": int64(270)},
					cost:    0.0017394, duration: 10,
				},
			} {
				d := tc.ev.Data
				require.Equal(t, "claude-opus-5-5", d["model"])
				require.Equal(t, tc.requestID, d["requestId"])
				require.Equal(t, tc.responseID, d["responseId"])
				require.Equal(t, tc.stopReason, d["stopReason"])
				require.JSONEq(t, tc.content, string(d["content"].(json.RawMessage)))
				require.Equal(t, tc.usage, d["usage"])
				require.InDelta(t, tc.cost, d["costUsd"], 1e-12)
				require.Equal(t, tc.duration, d["durationMs"])
				require.Equal(t, []any{false, false, "otlp"}, []any{d["truncated"], d["requestOnly"], d["source"]})
				require.Contains(t, d["tools"], "Read")
				require.Contains(t, string(d["system"].(json.RawMessage)), "You are a test agent. Answer briefly.")
				var msgs []map[string]any
				require.NoError(t, json.Unmarshal(d["messages"].(json.RawMessage), &msgs))
				require.Equal(t, "Read note.txt and tell me what it says. AGENTTEST-HTTP-JSON", msgs[0]["content"])
			}
			var msgs []map[string]any
			require.NoError(t, json.Unmarshal(second.Data["messages"].(json.RawMessage), &msgs))
			require.Greater(t, len(msgs), 2, "the second request carries the tool round trip")
		})
	}
}
