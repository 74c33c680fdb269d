package otlp

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at is t0 plus sec seconds; a negative sec is the zero time (a record
// without one).
func at(sec int) time.Time {
	if sec < 0 {
		return time.Time{}
	}
	return t0.Add(time.Duration(sec) * time.Second)
}

// rec is a Claude Code record as Records gives it: bare event.name,
// prefixed body, the standard attributes, and a user.email to strip.
func rec(name string, sec int, attrs ...string) Record {
	a := map[string]string{
		"event.name": name, "session.id": "s1", "user.id": "u1", "prompt.id": "p1",
		"user.email": "alice@example.com", "user.account_id": "acc-1",
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		if attrs[i+1] == "<absent>" {
			delete(a, attrs[i])
			continue
		}
		a[attrs[i]] = attrs[i+1]
	}
	return Record{Name: name, Agent: Claude, Time: at(sec), Attrs: a, Body: "claude_code." + name, Resource: map[string]string{"service.name": "claude-code"}}
}

func codexRec(name string, sec int, attrs ...string) Record {
	r := rec(name, sec, attrs...)
	r.Agent, r.Body, r.Resource = Codex, "codex."+name, map[string]string{"service.name": "codex_cli_rs"}
	return r
}

// reqJSON is an Anthropic request body whose first user message says msg,
// with thinking in the history, as Claude Code sends it.
func reqJSON(msg string) string {
	return `{"model":"claude-sonnet-4-5","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"system":[{"type":"text","text":"sys"}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"` + msg + `"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"secret plan","signature":"sig"},{"type":"redacted_thinking","data":"enc"},{"type":"text","text":"ok"}]},` +
		`{"role":"user","content":"plain"}],` +
		`"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"name":"Read","input_schema":{}}]}`
}

const respJSON = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"thinking","thinking":"hmm secret","signature":"s"},{"type":"text","text":"answer"}],` +
	`"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4}}`

const model = "claude-sonnet-4-5"

func body(seq int, msg string, sec int, attrs ...string) Record {
	return rec("api_request_body", sec, append([]string{"model", model, "event.sequence", fmt.Sprint(seq), "body", reqJSON(msg)}, attrs...)...)
}

func acct(rid string, sec int, attrs ...string) Record {
	return rec("api_request", sec, append([]string{
		"model", model, "request_id", rid, "input_tokens", "10", "output_tokens", "20",
		"cache_read_tokens", "0", "cache_creation_tokens", "5", "cost_usd", "0.0012", "duration_ms", "830",
	}, attrs...)...)
}

func resp(rid string, sec int, attrs ...string) Record {
	return rec("api_response_body", sec, append([]string{"request_id", rid, "body", respJSON}, attrs...)...)
}

// Expected llm_exchange data fragments.
func reqParts(msg string) string {
	return `"system":[{"type":"text","text":"sys"}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"` + msg + `"}]},{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"user","content":"plain"}],` +
		`"tools":["Bash","Read"]`
}

func acctParts(rid string) string {
	return `"requestId":"` + rid + `","usage":{"inputTokens":10,"outputTokens":20,"cacheReadTokens":0,"cacheCreationTokens":5},"costUsd":0.0012,"durationMs":830`
}

const respParts = `"responseId":"msg_1","content":[{"type":"text","text":"answer"}],"stopReason":"end_turn"`

// ex is an expected llm_exchange at t0+ts seconds.
func ex(ts int, truncated, requestOnly bool, parts ...string) string {
	parts = append(parts, fmt.Sprintf(`"model":%q,"truncated":%t,"requestOnly":%t,"source":"otlp"`, model, truncated, requestOnly))
	return fmt.Sprintf(`{"kind":"llm_exchange","ts":%d,"data":{%s}}`, ts, strings.Join(parts, ","))
}

func evs(events ...string) string { return "[" + strings.Join(events, ",") + "]" }

// normalize renders events as the tests write them: ts in seconds after t0.
func normalize(t *testing.T, events []Event) string {
	t.Helper()
	out := make([]map[string]any, 0, len(events))
	for _, e := range events {
		out = append(out, map[string]any{"kind": e.Kind, "ts": e.TS.Sub(t0).Seconds(), "data": e.Data})
	}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	return string(b)
}

// step is one call on the correlator under test, for member "alice".
type step struct {
	clock   int      // seconds after t0 the clock reads
	ingest  []Record // Ingest these
	due     bool     // call Due(clock) instead
	restore bool     // move the state to a fresh correlator instead
	want    string   // events returned (JSON, see normalize); "" is none
	// wantFlushed: after Due, whether alice is in its answer.
	wantFlushed bool
	rejected    int
	pending     int
}

func runSteps(t *testing.T, opts Options, steps []step) {
	t.Helper()
	var clock time.Time
	opts.Now = func() time.Time { return clock }
	c := NewCorrelator(opts)
	for i, s := range steps {
		clock = at(s.clock)
		msg := fmt.Sprintf("step %d", i)
		want := s.want
		if want == "" {
			want = "[]"
		}
		switch {
		case s.restore:
			state, err := c.State("alice")
			require.NoError(t, err, msg)
			for _, secret := range []string{"secret", "alice@example.com", "acc-1"} {
				require.NotContains(t, string(state), secret, msg)
			}
			c = NewCorrelator(opts)
			require.NoError(t, c.Restore("alice", state), msg)
			again, err := c.State("alice")
			require.NoError(t, err, msg)
			require.Equal(t, string(state), string(again), msg)
		case s.due:
			out := c.Due(clock)
			got, ok := out["alice"]
			require.Equal(t, s.wantFlushed, ok, msg)
			require.JSONEq(t, want, normalize(t, got), msg)
		default:
			got, rejected := c.Ingest("alice", s.ingest)
			require.JSONEq(t, want, normalize(t, got), msg)
			require.Equal(t, s.rejected, rejected, msg)
			for _, e := range got {
				b, err := json.Marshal(e.Data)
				require.NoError(t, err)
				for _, secret := range []string{"secret", "alice@example.com", "acc-1", "user.email", "user.account_id"} {
					require.NotContains(t, string(b), secret, msg)
				}
			}
		}
		require.Equal(t, s.pending, c.pending("alice"), msg)
		if s.pending == 0 {
			require.NotContains(t, c.Members(), "alice", msg)
		} else {
			require.Contains(t, c.Members(), "alice", msg)
		}
	}
}

func TestCorrelatorExchanges(t *testing.T) {
	full := ex(1, false, false, acctParts("req_1"), reqParts("hello"), respParts)
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name:  "body, accounting, response in one export; thinking stripped from both sides",
			steps: []step{{ingest: []Record{body(1, "hello", 0), acct("req_1", 1), resp("req_1", 2)}, want: evs(full)}},
		},
		{
			name:  "one export in reverse order pairs all the same",
			steps: []step{{ingest: []Record{resp("req_1", 2), acct("req_1", 1), body(1, "hello", 0)}, want: evs(full)}},
		},
		{
			name: "body, accounting, response in three exports",
			steps: []step{
				{ingest: []Record{body(1, "hello", 0)}, pending: 1},
				{clock: 1, ingest: []Record{acct("req_1", 1)}, pending: 1},
				{clock: 2, ingest: []Record{resp("req_1", 2)}, want: evs(full)},
			},
		},
		{
			name: "ordering by event.sequence across two exports",
			steps: []step{
				{ingest: []Record{body(5, "second", 0)}, pending: 1},
				{ingest: []Record{body(3, "first", 1)}, pending: 2},
				{clock: 2, ingest: []Record{acct("req_1", 2)}, pending: 2},
				{clock: 3, ingest: []Record{resp("req_1", 3)}, want: evs(ex(2, false, false, acctParts("req_1"), reqParts("first"), respParts)), pending: 1},
				{clock: 4, ingest: []Record{acct("req_2", 4), resp("req_2", 5)}, want: evs(ex(4, false, false, acctParts("req_2"), reqParts("second"), respParts))},
			},
		},
		{
			name: "sequence compares as a number",
			steps: []step{
				{ingest: []Record{body(10, "ten", 0), body(9, "nine", 1)}, pending: 2},
				{ingest: []Record{acct("", 2)}, want: evs(ex(2, false, false, acctParts("")[len(`"requestId":"",`):], reqParts("nine"))), pending: 1},
			},
		},
		{
			name: "claim by model",
			steps: []step{
				{ingest: []Record{body(1, "opus body", 0, "model", "claude-opus-4-1"), body(2, "sonnet body", 1)}, pending: 2},
				{ingest: []Record{acct("req_1", 2), resp("req_1", 3)}, want: evs(ex(2, false, false, acctParts("req_1"), reqParts("sonnet body"), respParts)), pending: 1},
			},
		},
		{
			name: "claim within the accounting record's session",
			steps: []step{
				{ingest: []Record{body(1, "other session", 0, "session.id", "s2"), body(7, "own session", 1)}, pending: 2},
				{ingest: []Record{acct("req_1", 2), resp("req_1", 3)}, want: evs(ex(2, false, false, acctParts("req_1"), reqParts("own session"), respParts)), pending: 1},
			},
		},
		{
			name: "body without event.sequence comes after numbered ones",
			steps: []step{
				{ingest: []Record{body(1, "unnumbered", 0, "event.sequence", "<absent>"), body(8, "numbered", 1)}, pending: 2},
				{ingest: []Record{acct("", 2)}, want: evs(ex(2, false, false, acctParts("")[len(`"requestId":"",`):], reqParts("numbered"))), pending: 1},
			},
		},
		{
			name:  "accounting only",
			steps: []step{{ingest: []Record{acct("req_1", 1)}, want: evs(ex(1, false, false, acctParts("req_1")))}},
		},
		{
			name:  "accounting only without request id or counts",
			steps: []step{{ingest: []Record{rec("api_request", 1, "model", model)}, want: evs(ex(1, false, false))}},
		},
		{
			name: "unparsable counts are left out",
			steps: []step{{
				ingest: []Record{rec("api_request", 1, "model", model, "input_tokens", "many", "output_tokens", "2.0", "cost_usd", "NaN", "duration_ms", "x")},
				want:   evs(ex(1, false, false, `"usage":{"outputTokens":2}`)),
			}},
		},
		{
			name: "accounting without request id takes the body and is done",
			steps: []step{
				{ingest: []Record{body(1, "hello", 0)}, pending: 1},
				{ingest: []Record{acct("req_1", 1, "request_id", "<absent>")}, want: evs(ex(1, false, false, acctParts("req_1")[len(`"requestId":"req_1",`):], reqParts("hello")))},
			},
		},
		{
			name: "truncated body flushed: model only",
			steps: []step{
				{ingest: []Record{rec("api_request_body", 0, "model", model, "event.sequence", "1", "body", reqJSON("hello")[:100])}, pending: 1},
				{clock: 120, due: true, wantFlushed: true, want: evs(ex(0, true, true))},
			},
		},
		{
			name: "truncated body paired",
			steps: []step{{
				ingest: []Record{rec("api_request_body", 0, "model", model, "event.sequence", "1", "body", `{"messages":[{"role":"us`), acct("req_1", 1), resp("req_1", 2)},
				want:   evs(ex(1, true, false, acctParts("req_1"), respParts)),
			}},
		},
		{
			name: "truncated response",
			steps: []step{{
				ingest: []Record{body(1, "hello", 0), acct("req_1", 1), resp("req_1", 2, "body", respJSON[:50])},
				want:   evs(ex(1, true, false, acctParts("req_1"), reqParts("hello"))),
			}},
		},
		{
			name: "body over the state limit is handled as truncated",
			steps: []step{{
				ingest: []Record{body(1, strings.Repeat("x", maxBodyBytes), 0), acct("req_1", 1), resp("req_1", 2)},
				want:   evs(ex(1, true, false, acctParts("req_1"), respParts)),
			}},
		},
		{
			name:  "body that is JSON but not an object is truncated",
			steps: []step{{ingest: []Record{body(1, "", 0, "body", `[1,2]`), acct("", 1)}, want: evs(ex(1, true, false, acctParts("")[len(`"requestId":"",`):]))}},
		},
		{
			name: "usage from the response when the accounting has none",
			steps: []step{{
				ingest: []Record{body(1, "hello", 0), rec("api_request", 1, "model", model, "request_id", "req_1", "input_tokens", "10"), resp("req_1", 2)},
				want:   evs(ex(1, false, false, `"requestId":"req_1","usage":{"inputTokens":10,"outputTokens":2,"cacheReadTokens":3,"cacheCreationTokens":4}`, reqParts("hello"), respParts)),
			}},
		},
		{
			name: "response before accounting, across exports",
			steps: []step{
				{ingest: []Record{body(1, "hello", 0)}, pending: 1},
				{clock: 2, ingest: []Record{resp("req_1", 2)}, pending: 2},
				{clock: 3, ingest: []Record{acct("req_1", 1)}, want: evs(full)},
			},
		},
		{
			name: "response before accounting without body",
			steps: []step{
				{ingest: []Record{resp("req_1", 2)}, pending: 1},
				{ingest: []Record{acct("req_1", 1)}, want: evs(ex(1, false, false, acctParts("req_1"), respParts))},
			},
		},
		{
			name: "request without system or tools, response without usage",
			steps: []step{{
				ingest: []Record{
					body(1, "", 0, "body", `{"messages":[{"role":"user","content":"hi"}]}`),
					rec("api_request", 1, "model", model, "request_id", "req_1"),
					resp("req_1", 2, "body", `{"id":"msg_2","content":[]}`),
				},
				want: evs(ex(1, false, false, `"requestId":"req_1","messages":[{"role":"user","content":"hi"}],"responseId":"msg_2","content":[]`)),
			}},
		},
		{
			name:  "record without time takes the clock",
			steps: []step{{clock: 7, ingest: []Record{acct("req_1", -1)}, want: evs(ex(7, false, false, acctParts("req_1")))}},
		},
		{
			name: "request_body_id on the response corrects the oldest-body claim",
			steps: []step{
				{ingest: []Record{body(1, "failed attempt", 0, "request_body_id", "b1"), body(2, "hello", 0, "request_body_id", "b2")}, pending: 2},
				{clock: 1, ingest: []Record{acct("req_1", 1)}, pending: 2}, // claims b1, the oldest
				{clock: 2, ingest: []Record{resp("req_1", 2, "request_body_id", "b2")}, want: evs(full), pending: 1},
				{clock: 119, due: true, pending: 1}, // b1 is queued again, still by its first ingest time
				{clock: 120, due: true, wantFlushed: true, want: evs(ex(0, false, true, reqParts("failed attempt")))},
			},
		},
		{
			name: "request_body_id naming no queued body keeps the claim",
			steps: []step{
				{ingest: []Record{body(1, "hello", 0, "request_body_id", "b1"), acct("req_1", 1), resp("req_1", 2, "request_body_id", "b9")}, want: evs(full)},
			},
		},
		{
			name: "a held response names its body",
			steps: []step{
				{ingest: []Record{body(1, "failed attempt", 0, "request_body_id", "b1"), body(2, "hello", 0, "request_body_id", "b2")}, pending: 2},
				{clock: 2, ingest: []Record{resp("req_1", 2, "request_body_id", "b2")}, pending: 3},
				{clock: 3, ingest: []Record{acct("req_1", 1)}, want: evs(full), pending: 1},
			},
		},
		{
			name: "message.id stands in for the id of a truncated response",
			steps: []step{{
				ingest: []Record{body(1, "hello", 0), acct("req_1", 1), resp("req_1", 2, "body", respJSON[:40], "message.id", "msg_9")},
				want:   evs(ex(1, true, false, acctParts("req_1"), reqParts("hello"), `"responseId":"msg_9"`)),
			}},
		},
		{
			name: "state and restore in the middle of a pairing",
			steps: []step{
				{ingest: []Record{body(1, "hello", 0), body(2, "later", 0), resp("req_0", 0)}, pending: 3},
				{restore: true, pending: 3},
				{clock: 1, ingest: []Record{acct("req_1", 1)}, pending: 3},
				{restore: true, pending: 3},
				{clock: 2, ingest: []Record{resp("req_1", 2)}, want: evs(full), pending: 2},
				{restore: true, pending: 2},
				{clock: 119, due: true, pending: 2},
				{clock: 120, due: true, wantFlushed: true, want: evs(ex(0, false, true, reqParts("later")))},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.opts, tc.steps) })
	}
}

func TestCorrelatorFlush(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "due flushes unclaimed bodies by ingest time, not record time",
			steps: []step{
				{clock: 10, ingest: []Record{body(1, "hello", 0)}, pending: 1}, // the record says t0, Ingest saw it at t0+10
				{clock: 129, due: true, pending: 1},
				{clock: 130, due: true, wantFlushed: true, want: evs(ex(0, false, true, reqParts("hello")))},
				{clock: 500, due: true},
			},
		},
		{
			name: "a producer clock far in the future does not keep state",
			steps: []step{
				{ingest: []Record{body(1, "hello", 1_000_000_000)}, pending: 1},
				{clock: 120, due: true, wantFlushed: true, want: evs(ex(1_000_000_000, false, true, reqParts("hello")))},
			},
		},
		{
			name: "due flushes claimed exchanges without response, by claim time",
			steps: []step{
				{ingest: []Record{body(1, "hello", 0)}, pending: 1},
				{clock: 100, ingest: []Record{acct("req_1", 100)}, pending: 1},
				{clock: 120, due: true, pending: 1},
				{clock: 220, due: true, wantFlushed: true, want: evs(ex(100, false, false, acctParts("req_1"), reqParts("hello")))},
				{clock: 221, ingest: []Record{resp("req_1", 221)}, pending: 1}, // too late: held
				{clock: 341, due: true, wantFlushed: true},                     // and dropped, not emitted
			},
		},
		{
			name: "custom flush delay",
			opts: Options{FlushAfter: time.Second},
			steps: []step{
				{ingest: []Record{body(1, "hello", 0)}, pending: 1},
				{clock: 1, due: true, wantFlushed: true, want: evs(ex(0, false, true, reqParts("hello")))},
			},
		},
		{
			name: "max pending evicts the oldest first",
			opts: Options{MaxPending: 3},
			steps: []step{
				{ingest: []Record{body(1, "A", 0)}, pending: 1},
				{clock: 1, ingest: []Record{body(2, "B", 1), acct("req_1", 1)}, pending: 2}, // B queued, A claimed
				{clock: 2, ingest: []Record{resp("req_9", 2)}, pending: 3},                  // held
				{clock: 3, ingest: []Record{body(3, "C", 3)}, want: evs(ex(1, false, true, reqParts("B"))), pending: 3},
				{clock: 4, ingest: []Record{body(4, "D", 4)}, want: evs(ex(1, false, false, acctParts("req_1"), reqParts("A"))), pending: 3},
				{clock: 5, ingest: []Record{body(5, "E", 5)}, pending: 3},  // the held response is dropped
				{clock: 6, ingest: []Record{acct("req_9", 6)}, pending: 3}, // claims C; its response is gone
				{clock: 7, ingest: []Record{body(6, "F", 7), body(7, "G", 7)}, want: evs(ex(4, false, true, reqParts("D")), ex(5, false, true, reqParts("E"))), pending: 3},
			},
		},
		{
			name: "max pending within one export",
			opts: Options{MaxPending: 2},
			steps: []step{
				{ingest: []Record{body(1, "A", 0), body(2, "B", 1), body(3, "C", 2)}, want: evs(ex(0, false, true, reqParts("A"))), pending: 2},
			},
		},
		{
			name: "max bytes evicts the oldest first",
			opts: Options{MaxBytes: 2 * (len(reqParts("A")) + 200)},
			steps: []step{
				{ingest: []Record{body(1, "A", 0), body(2, "B", 1)}, pending: 2},
				{ingest: []Record{body(3, "C", 2)}, want: evs(ex(0, false, true, reqParts("A"))), pending: 2},
			},
		},
		{
			name: "a repeated request id flushes the first exchange",
			steps: []step{
				{ingest: []Record{body(1, "A", 0), body(2, "B", 1), acct("req_1", 2)}, pending: 2},
				{ingest: []Record{acct("req_1", 3)}, want: evs(ex(2, false, false, acctParts("req_1"), reqParts("A"))), pending: 1},
				{ingest: []Record{resp("req_1", 4)}, want: evs(ex(3, false, false, acctParts("req_1"), reqParts("B"), respParts))},
			},
		},
		{
			name: "a repeated response replaces the held one",
			steps: []step{
				{ingest: []Record{resp("req_1", 0, "body", `{"id":"msg_old"}`), resp("req_1", 1)}, pending: 1},
				{ingest: []Record{acct("req_1", 2)}, want: evs(ex(2, false, false, acctParts("req_1"), respParts))},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.opts, tc.steps) })
	}
}

func TestCorrelatorRecords(t *testing.T) {
	tests := []struct {
		name     string
		recs     []Record
		want     string
		rejected int
	}{
		{
			name: "claude tool decision",
			recs: []Record{rec("tool_decision", 1, "tool_name", "Bash", "decision", "accept", "source", "config", "tool_use_id", "toolu_1")},
			want: `[{"kind":"tool_action","ts":1,"data":{"tool":"Bash","phase":"decision","decision":"accept","callId":"toolu_1","source":"otlp"}}]`,
		},
		{
			name: "claude tool result",
			recs: []Record{rec("tool_result", 1, "tool_name", "Bash", "success", "false", "duration_ms", "12", "error", "exit 1",
				"tool_parameters", `{"bash_command":"ls","description":"list"}`)},
			want: `[{"kind":"tool_action","ts":1,"data":{"tool":"Bash","phase":"result","success":false,"durationMs":12,"error":"exit 1",
				"input":{"bash_command":"ls","description":"list"},"source":"otlp"}}]`,
		},
		{
			name: "claude 2.1.328 tool result: tool_input",
			recs: []Record{rec("tool_result", 1, "tool_name", "Read", "success", "true", "duration_ms", "33", "tool_use_id", "toolu_1",
				"tool_input", `{"file_path":"/tmp/note.txt"}`, "tool_input_size_bytes", "30")},
			want: `[{"kind":"tool_action","ts":1,"data":{"tool":"Read","phase":"result","success":true,"durationMs":33,
				"input":{"file_path":"/tmp/note.txt"},"callId":"toolu_1","source":"otlp"}}]`,
		},
		{
			name: "claude tool result with unparsable fields",
			recs: []Record{rec("tool_result", 1, "tool_name", "Read", "success", "maybe", "duration_ms", "soon", "error", "", "tool_parameters", "{not json")},
			want: `[{"kind":"tool_action","ts":1,"data":{"tool":"Read","phase":"result","source":"otlp"}}]`,
		},
		{
			name: "claude user prompt",
			recs: []Record{rec("user_prompt", 1, "prompt", "fix the bug", "prompt_length", "11")},
			want: `[{"kind":"user_prompt","ts":1,"data":{"prompt":"fix the bug","promptLength":11}}]`,
		},
		{
			name: "claude user prompt without text",
			recs: []Record{rec("user_prompt", 1, "prompt_length", "11")},
			want: `[{"kind":"user_prompt","ts":1,"data":{"promptLength":11}}]`,
		},
		{
			name: "codex tool records",
			recs: []Record{
				codexRec("tool_decision", 1, "tool_name", "shell", "call_id", "call_1", "decision", "approved"),
				codexRec("tool_result", 2, "tool_name", "shell", "call_id", "call_1", "arguments", `{"command":["ls"]}`, "duration_ms", "5", "success", "true", "output", "a\nb"),
			},
			want: `[{"kind":"tool_action","ts":1,"data":{"tool":"shell","phase":"decision","decision":"approved","callId":"call_1","source":"otlp"}},
				{"kind":"tool_action","ts":2,"data":{"tool":"shell","phase":"result","success":true,"durationMs":5,"input":{"command":["ls"]},"result":"a\nb","callId":"call_1","source":"otlp"}}]`,
		},
		{
			name: "codex user prompt",
			recs: []Record{codexRec("user_prompt", 1, "prompt", "hi", "prompt_length", "2")},
			want: `[{"kind":"user_prompt","ts":1,"data":{"prompt":"hi","promptLength":2}}]`,
		},
		{
			name: "codex everything else is opaque, without user.email and user.account_id",
			recs: []Record{
				codexRec("sse_event", 1, "event.kind", "response.completed", "input_token_count", "10", "session.id", "<absent>", "prompt.id", "<absent>"),
				// A failed request: no response, no token counts to wait for.
				codexRec("api_request", 2, "http.response.status_code", "500", "session.id", "<absent>", "prompt.id", "<absent>", "event.name", "codex.api_request"),
				codexRec("tool_result", 3, "session.id", "<absent>", "prompt.id", "<absent>"), // no tool_name: opaque
			},
			want: `[{"kind":"opaque_http","ts":1,"data":{"event":"codex.sse_event","attributes":{"event.name":"sse_event","event.kind":"response.completed","input_token_count":"10","user.id":"u1"}}},
				{"kind":"opaque_http","ts":2,"data":{"event":"codex.api_request","attributes":{"event.name":"codex.api_request","http.response.status_code":"500","user.id":"u1"}}},
				{"kind":"opaque_http","ts":3,"data":{"event":"codex.tool_result","attributes":{"event.name":"tool_result","user.id":"u1"}}}]`,
		},
		{
			name: "rejected claude records",
			recs: []Record{
				rec("assistant_response", 1),
				rec("managed_settings_resolved", 1),
				rec("plugin_loaded", 1),
				rec("something_new", 1),
				rec("", 1),
				rec("api_request", 1, "input_tokens", "3"), // no model
				rec("api_request_body", 1, "body", reqJSON("x"), "event.sequence", "1"),      // no model
				rec("api_request_body", 1, "model", model, "event.sequence", "1"),            // no body
				body(1, "x", 1, "event.sequence", "first"),                                   // sequence does not parse
				rec("api_response_body", 1, "body", respJSON),                                // no request id
				rec("api_response_body", 1, "request_id", "req_1"),                           // no body
				rec("tool_result", 1, "success", "true"),                                     // no tool name
				rec("tool_decision", 1, "decision", "accept"),                                // no tool name
				{Name: "api_request", Time: at(1), Attrs: map[string]string{"model": model}}, // no agent: Claude, used
			},
			want:     evs(ex(1, false, false)),
			rejected: 13,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCorrelator(Options{Now: func() time.Time { return t0 }})
			got, rejected := c.Ingest("alice", tc.recs)
			require.JSONEq(t, tc.want, normalize(t, got))
			require.Equal(t, tc.rejected, rejected)
			require.Empty(t, c.Members())
		})
	}
}

// cx is a Codex 0.169 record of conversation conv, as its OTLP export
// names and attributes it.
func cx(name string, sec int, conv string, attrs ...string) Record {
	r := codexRec(name, sec, append([]string{"session.id", "<absent>", "prompt.id", "<absent>", "user.id", "<absent>",
		"event.name", "codex." + name, "conversation.id", conv, "model", "gpt-5", "app.version", "0.169.0"}, attrs...)...)
	return r
}

// cxAPI is a Codex api_request of status; cxSSE an SSE event of kind
// without token counts; cxTokens the response.completed that carries them.
func cxAPI(sec int, conv, status string) Record {
	return cx("api_request", sec, conv, "http.response.status_code", status, "duration_ms", "90", "attempt", "0")
}

func cxSSE(sec int, conv, kind string, attrs ...string) Record {
	return cx("sse_event", sec, conv, append([]string{"event.kind", kind, "duration_ms", "0"}, attrs...)...)
}

func cxTokens(sec int, conv, in string) Record {
	return cx("sse_event", sec, conv, "event.kind", "response.completed", "input_token_count", in, "output_token_count", "7", "ttft_ms", "12")
}

// cxRow is the opaque_http row of a Codex record: its event and attributes
// (JSON object members), with the envelope of conversation conv.
func cxRow(ts int, event, conv, attrs string) string {
	return fmt.Sprintf(`{"kind":"opaque_http","ts":%d,"data":{"event":"codex.%s","attributes":{"event.name":"codex.%s",
		"conversation.id":%q,"model":"gpt-5","app.version":"0.169.0",%s}}}`, ts, event, strings.Split(event, " ")[0], conv, attrs)
}

// callAttrs are the attributes of a 200 api_request, with the token counts
// of its response when in is not empty.
func callAttrs(status, in string) string {
	a := fmt.Sprintf(`"http.response.status_code":%q,"duration_ms":"90","attempt":"0"`, status)
	if in != "" {
		a += fmt.Sprintf(`,"input_token_count":%q,"output_token_count":"7","ttft_ms":"12"`, in)
	}
	return a
}

// TestCorrelatorCodexCalls: a Codex model call's records (its api_request,
// the SSE events of its response, the token counts) become one
// opaque_http row; what carries nothing beyond them is dropped, what does
// is kept (docs/TELEMETRY.md, "Codex records").
func TestCorrelatorCodexCalls(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "a call's records fold into one row",
			steps: []step{{ingest: []Record{
				cxAPI(1, "c1", "200"), cxSSE(1, "c1", "response.created"), cxSSE(1, "c1", "response.output_item.added"),
				cxSSE(1, "c1", "response.output_text.delta"), cxSSE(1, "c1", "response.output_item.done"),
				cxSSE(1, "c1", "response.completed"), cxTokens(2, "c1", "10"),
			}, want: evs(cxRow(1, "api_request", "c1", callAttrs("200", "10")))}},
		},
		{
			name: "the request waits across exports and a restart",
			steps: []step{
				{ingest: []Record{cxAPI(1, "c1", "200"), cxSSE(1, "c1", "response.created")}, pending: 1},
				{restore: true, pending: 1},
				{clock: 3, ingest: []Record{cxSSE(2, "c1", "response.output_item.done"), cxTokens(3, "c1", "10")},
					want: evs(cxRow(1, "api_request", "c1", callAttrs("200", "10")))},
			},
		},
		{
			name: "a failed request is a row at once, its retry folds",
			steps: []step{{ingest: []Record{cxAPI(1, "c1", "429"), cxAPI(2, "c1", "200"), cxTokens(3, "c1", "10")},
				want: evs(cxRow(1, "api_request", "c1", callAttrs("429", "")), cxRow(2, "api_request", "c1", callAttrs("200", "10")))}},
		},
		{
			name: "a request whose response brought no counts is stored alone when the next comes",
			steps: []step{
				{ingest: []Record{cxAPI(1, "c1", "200"), cxSSE(1, "c1", "response.created")}, pending: 1},
				{ingest: []Record{cxAPI(5, "c1", "200"), cxTokens(6, "c1", "10")},
					want: evs(cxRow(1, "api_request", "c1", callAttrs("200", "")), cxRow(5, "api_request", "c1", callAttrs("200", "10")))},
			},
		},
		{
			name: "conversations fold apart",
			steps: []step{{ingest: []Record{cxAPI(1, "c1", "200"), cxAPI(2, "c2", "200"), cxTokens(3, "c2", "20"), cxTokens(4, "c1", "10")},
				want: evs(cxRow(1, "api_request", "c1", callAttrs("200", "10")), cxRow(2, "api_request", "c2", callAttrs("200", "20")))}},
		},
		{
			name: "counts no request waits for are a row of their own",
			steps: []step{{ingest: []Record{cxTokens(1, "c1", "10")}, want: evs(cxRow(1, "sse_event", "c1",
				`"event.kind":"response.completed","input_token_count":"10","output_token_count":"7","ttft_ms":"12"`))}},
		},
		{
			name: "due stores a waiting request alone",
			steps: []step{
				{ingest: []Record{cxAPI(0, "c1", "200")}, pending: 1},
				{clock: 119, due: true, pending: 1},
				{clock: 120, due: true, wantFlushed: true, want: evs(cxRow(0, "api_request", "c1", callAttrs("200", "")))},
			},
		},
		{
			name: "max pending stores the oldest request alone",
			opts: Options{MaxPending: 1},
			steps: []step{
				{ingest: []Record{cxAPI(1, "c1", "200")}, pending: 1},
				{ingest: []Record{cxAPI(2, "c2", "200")}, pending: 1, want: evs(cxRow(1, "api_request", "c1", callAttrs("200", "")))},
			},
		},
		{
			name: "kept: a failure's event, an event with more to say, other records",
			steps: []step{{ingest: []Record{
				cxSSE(1, "c1", "response.failed"), cxSSE(2, "c1", "response.created", "error.message", "boom"),
				cx("turn_ttft", 3, "c1", "duration_ms", "300"), cx("conversation_starts", 4, "c1", "sandbox_policy", "read-only"),
			}, want: evs(
				cxRow(1, "sse_event", "c1", `"event.kind":"response.failed","duration_ms":"0"`),
				cxRow(2, "sse_event", "c1", `"event.kind":"response.created","duration_ms":"0","error.message":"boom"`),
				cxRow(3, "turn_ttft", "c1", `"duration_ms":"300"`),
				cxRow(4, "conversation_starts", "c1", `"sandbox_policy":"read-only"`),
			)}},
		},
		{
			name:  "dropped, not rejected: the exporter's own log lines",
			steps: []step{{ingest: []Record{{Agent: Codex, Time: at(1), Body: "flushing OTEL metrics", Attrs: map[string]string{}}}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.opts, tc.steps) })
	}
}

func TestCorrelatorDoesNotMutateRecords(t *testing.T) {
	r := codexRec("sse_event", 1)
	c := NewCorrelator(Options{})
	got, _ := c.Ingest("alice", []Record{r})
	require.Equal(t, "alice@example.com", r.Attrs["user.email"], "the caller's map is left alone")
	got[0].Data["attributes"].(map[string]string)["x"] = "y"
	require.NotContains(t, r.Attrs, "x")
}

func TestCorrelatorMembers(t *testing.T) {
	c := NewCorrelator(Options{Now: func() time.Time { return t0 }})
	c.Ingest("bob", []Record{body(1, "b", 0)})
	c.Ingest("alice", []Record{body(1, "a", 0)})
	c.Ingest("carol", []Record{acct("req_1", 0)})
	require.Equal(t, []string{"alice", "bob"}, c.Members())

	state, err := c.State("carol")
	require.NoError(t, err)
	require.Nil(t, state, "no state, no bytes")

	out := c.Due(at(120))
	require.Len(t, out, 2)
	require.Len(t, out["alice"], 1)
	require.Len(t, out["bob"], 1)
	require.Empty(t, c.Members())
}

func TestCorrelatorRestore(t *testing.T) {
	c := NewCorrelator(Options{Now: func() time.Time { return t0 }})
	c.Ingest("alice", []Record{body(1, "a", 0)})
	good, err := c.State("alice")
	require.NoError(t, err)
	tests := []struct {
		name    string
		state   string
		wantErr bool
		pending int
	}{
		{name: "good", state: string(good), pending: 1},
		{name: "empty clears", state: "", pending: 0},
		{name: "no items", state: `{"v":1,"next":3,"items":[]}`, pending: 0},
		{name: "not json", state: `{`, wantErr: true, pending: 1},
		{name: "other version", state: `{"v":2,"items":[]}`, wantErr: true, pending: 1},
		{name: "unknown kind", state: `{"v":1,"items":[{"kind":"other"}]}`, wantErr: true, pending: 1},
		{name: "body without request", state: `{"v":1,"items":[{"kind":"body","model":"m"}]}`, wantErr: true, pending: 1},
		{name: "claimed without accounting", state: `{"v":1,"items":[{"kind":"claimed","requestId":"r","bodySeen":"2026-01-02T03:04:05Z","req":{"ts":"2026-01-02T03:04:05Z"}}]}`, wantErr: true, pending: 1},
		{name: "claimed without body time", state: `{"v":1,"items":[{"kind":"claimed","requestId":"r","req":{"ts":"2026-01-02T03:04:05Z"},"acct":{"model":"m","ts":"2026-01-02T03:04:05Z"}}]}`, wantErr: true, pending: 1},
		{name: "held without request id", state: `{"v":1,"items":[{"kind":"held","resp":{}}]}`, wantErr: true, pending: 1},
		{name: "null item", state: `{"v":1,"items":[null]}`, wantErr: true, pending: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCorrelator(Options{})
			require.NoError(t, c.Restore("alice", good))
			err := c.Restore("alice", []byte(tc.state))
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.pending, c.pending("alice"))
		})
	}
}

// TestCorrelatorRestoreOverLimit: a state over MaxPending (saved under a
// larger limit) is trimmed by the next Ingest, oldest first.
func TestCorrelatorRestoreOverLimit(t *testing.T) {
	big := NewCorrelator(Options{Now: func() time.Time { return t0 }})
	big.Ingest("alice", []Record{body(1, "A", 0), body(2, "B", 0), body(3, "C", 0)})
	state, err := big.State("alice")
	require.NoError(t, err)

	small := NewCorrelator(Options{MaxPending: 1, Now: func() time.Time { return t0 }})
	require.NoError(t, small.Restore("alice", state))
	require.Equal(t, 3, small.pending("alice"))
	got, _ := small.Ingest("alice", nil)
	require.JSONEq(t, evs(ex(0, false, true, reqParts("A")), ex(0, false, true, reqParts("B"))), normalize(t, got))
	require.Equal(t, 1, small.pending("alice"))
}

func TestCorrelatorConcurrent(t *testing.T) {
	c := NewCorrelator(Options{MaxPending: 8})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			member := fmt.Sprintf("m%d", g%3)
			for i := range 50 {
				rid := fmt.Sprintf("req_%d_%d", g, i)
				c.Ingest(member, []Record{body(i, "x", 0), acct(rid, 0)})
				c.Ingest(member, []Record{resp(rid, 0), codexRec("sse_event", 0)})
				if i%10 == 0 {
					c.Due(time.Now().Add(time.Hour))
					state, err := c.State(member)
					require.NoError(t, err)
					require.NoError(t, c.Restore(member, state))
					_ = c.Members()
				}
			}
		}()
	}
	wg.Wait()
	for _, m := range c.Members() {
		require.LessOrEqual(t, c.pending(m), 8)
	}
}

// TestCorrelatorEarly: an export whose accounting record overtook the
// export carrying its body is recognised, and nothing else is.
func TestCorrelatorEarly(t *testing.T) {
	seq := func(n int) []string { return []string{"event.sequence", fmt.Sprint(n)} }
	first := []Record{body(1, "hello", 0), acct("req_1", 1, seq(2)...), resp("req_1", 2, seq(3)...)}
	tests := []struct {
		name   string
		before []Record // ingested first
		recs   []Record
		clock  int
		want   bool
	}{
		{name: "body overtaken", before: first, recs: []Record{acct("req_2", 5, seq(5)...), resp("req_2", 6, seq(6)...)}, want: true},
		{name: "next in line", before: first, recs: []Record{acct("req_2", 5, seq(4)...)}},
		{name: "the gap is filled by the export itself", before: first,
			recs: []Record{rec("tool_result", 4, append(seq(4), "tool_name", "Read")...), acct("req_2", 5, seq(5)...)}},
		{name: "its body in the export", before: first, recs: []Record{body(4, "again", 4), acct("req_2", 5, seq(7)...)}},
		{name: "its body already queued", before: append(first[:3:3], body(4, "queued", 4)), recs: []Record{acct("req_2", 5, seq(9)...)}},
		{name: "a session that sends no bodies", before: []Record{acct("req_1", 1, seq(2)...)}, recs: []Record{acct("req_2", 5, seq(9)...)}},
		{name: "another session", before: first, recs: []Record{acct("req_2", 5, append(seq(9), "session.id", "s2")...)}},
		{name: "no event.sequence", before: first, recs: []Record{acct("req_2", 5)}},
		{name: "no request id", before: first, recs: []Record{acct("req_2", 5, append(seq(9), "request_id", "<absent>")...)}},
		{name: "bodies sent too long ago", before: first, clock: int(bodyMemory / time.Second), recs: []Record{acct("req_2", 5, seq(9)...)}},
		{name: "a wide gap", before: first, recs: []Record{acct("req_2", 5, seq(1_000_000)...)}, want: true},
		{name: "codex records", before: first, recs: []Record{codexRec("api_request", 5, append(seq(9), "model", model, "request_id", "r")...)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := at(0)
			c := NewCorrelator(Options{Now: func() time.Time { return clock }})
			c.Ingest("alice", tc.before)
			clock = at(tc.clock)
			require.Equal(t, tc.want, c.Early("alice", tc.recs))
			require.False(t, c.Early("bob", tc.recs), "another member's sessions are its own")
		})
	}
}
