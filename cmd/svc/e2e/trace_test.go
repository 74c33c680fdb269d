package e2e

// End-to-end tests of GenAI inference records, objective markers, objective
// traces and usage (docs/TELEMETRY.md "GenAI inference records", "Traces
// and usage"; the shapes in proto/svc/v1/activity.proto), over REST and
// native gRPC.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
)

// thinkingMarker is in every thinking and reasoning block of the fixtures:
// no answer may ever carry it.
const thinkingMarker = "THINK-7f3a9c"

// genaiFixture is one inference of one provider API and the record it
// maps to (besides id, member and ts).
type genaiFixture struct {
	name      string
	req, resp string
	want      string // JSON of provider, model, responseId, usage, the message arrays and the tools
}

var responsesFixture = genaiFixture{
	name: "openai responses",
	req: `{
  "model": "gpt-5-codex",
  "instructions": "You are Codex.",
  "input": [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the test."}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "THINK-7f3a9c summary"}],
     "content": [{"type": "reasoning_text", "text": "THINK-7f3a9c"}], "encrypted_content": "gAAAAB-THINK-7f3a9c"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"go\",\"test\"]}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
  ],
  "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
  "reasoning": {"effort": "medium", "summary": "auto"},
  "include": ["reasoning.encrypted_content"],
  "stream": true
}`,
	resp: `{
  "id": "resp_e2e_1", "object": "response", "created_at": 1756310554, "status": "completed", "model": "gpt-5-codex",
  "output": [
    {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "THINK-7f3a9c"}], "encrypted_content": "THINK-7f3a9c"},
    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Tests pass.", "annotations": []}]}
  ],
  "usage": {"input_tokens": 500, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 60, "output_tokens_details": {"reasoning_tokens": 40}, "total_tokens": 560}
}`,
	want: `{
  "provider": "openai", "model": "gpt-5-codex", "responseId": "resp_e2e_1",
  "usage": {"inputTokens": 400, "outputTokens": 60, "cacheReadTokens": 100, "cacheCreationTokens": 0},
  "systemInstructions": [{"type": "text", "content": "You are Codex."}],
  "inputMessages": [
    {"role": "user", "parts": [{"type": "text", "content": "Fix the test."}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "shell", "arguments": {"command": ["go", "test"]}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "ok"}]}
  ],
  "outputMessages": [{"role": "assistant", "parts": [{"type": "text", "content": "Tests pass."}], "finishReason": "stop"}],
  "toolDefinitions": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
}`,
}

var chatFixture = genaiFixture{
	name: "openai chat completions",
	req: `{
  "model": "gpt-4.1",
  "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": null, "reasoning_content": "THINK-7f3a9c", "tool_calls": [
      {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_w", "content": "18C"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
}`,
	resp: `{
  "id": "chatcmpl-e2e", "object": "chat.completion", "created": 1741569952, "model": "gpt-4.1-2025-04-14",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "It is 18°C.", "refusal": null, "reasoning_content": "THINK-7f3a9c"}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160, "prompt_tokens_details": {"cached_tokens": 64}, "completion_tokens_details": {"reasoning_tokens": 16}}
}`,
	want: `{
  "provider": "openai", "model": "gpt-4.1-2025-04-14", "responseId": "chatcmpl-e2e",
  "usage": {"inputTokens": 56, "outputTokens": 40, "cacheReadTokens": 64, "cacheCreationTokens": 0},
  "systemInstructions": [{"type": "text", "content": "You are helpful."}],
  "inputMessages": [
    {"role": "user", "parts": [{"type": "text", "content": "What's the weather in Paris?"}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_w", "response": "18C"}]}
  ],
  "outputMessages": [{"role": "assistant", "parts": [{"type": "text", "content": "It is 18°C."}], "finishReason": "stop"}],
  "toolDefinitions": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
}`,
}

var anthropicFixture = genaiFixture{
	name: "anthropic messages",
	req: `{
  "model": "claude-sonnet-4-5",
  "max_tokens": 32000,
  "thinking": {"type": "enabled", "budget_tokens": 10000},
  "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
  "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
  "messages": [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "THINK-7f3a9c the user wants ls", "signature": "EqQBCkgIARABGAIiQ"},
      {"type": "redacted_thinking", "data": "THINK-7f3a9c"},
      {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
    ]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.go"}]}
  ]
}`,
	resp: `{
  "id": "msg_e2e_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "THINK-7f3a9c done", "signature": "EqQBCkgIARABGAIiQ"},
    {"type": "text", "text": "a.go is there."}
  ],
  "stop_reason": "end_turn", "stop_sequence": null,
  "usage": {"input_tokens": 12, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000, "output_tokens": 85}
}`,
	want: `{
  "provider": "anthropic", "model": "claude-sonnet-4-5-20250929", "responseId": "msg_e2e_1",
  "usage": {"inputTokens": 12, "outputTokens": 85, "cacheReadTokens": 4000, "cacheCreationTokens": 300},
  "systemInstructions": [{"type": "text", "content": "You are Claude Code."}],
  "inputMessages": [
    {"role": "user", "parts": [{"type": "text", "content": "List the files."}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "toolu_01", "name": "Bash", "arguments": {"command": "ls"}}]},
    {"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_01", "response": "a.go"}]}
  ],
  "outputMessages": [{"role": "assistant", "parts": [{"type": "text", "content": "a.go is there."}], "finishReason": "end_turn"}],
  "toolDefinitions": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}]
}`,
}

var genaiFixtures = []genaiFixture{responsesFixture, chatFixture, anthropicFixture}

// genaiBody is the upload {ts?, request, response} of f; ts 0 leaves ts out.
func genaiBody(t testing.TB, ts int64, f genaiFixture) []byte {
	t.Helper()
	return genaiBodyOf(t, ts, f.req, f.resp)
}

func genaiBodyOf(t testing.TB, ts int64, req, resp string) []byte {
	t.Helper()
	b := genaiRaw(ts, req, resp)
	require.True(t, json.Valid(b), "fixture body is JSON: %s", b)
	return b
}

// genaiRaw is the upload {ts?, request, response}; ts 0 leaves ts out.
func genaiRaw(ts int64, req, resp string) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	if ts != 0 {
		fmt.Fprintf(&b, `"ts": %d, `, ts)
	}
	fmt.Fprintf(&b, `"request": %s, "response": %s}`, req, resp)
	return b.Bytes()
}

// genaiRecordFields are the keys of a GenAI record (proto/svc/v1); api, the
// member's id and label and the computed cost are the broker's additions
// (proto GenAiRecord).
var genaiRecordFields = []string{"api", "costComputed", "costUsd", "id", "inputMessages", "member", "memberDeleted", "memberDeletedAt", "memberId",
	"model", "outputMessages", "provider", "responseId", "systemInstructions", "toolDefinitions", "ts", "usage"}

// genaiArrays are the content arrays a summary leaves out: the messages
// and the tools the request offered.
var genaiArrays = []string{"inputMessages", "outputMessages", "systemInstructions", "toolDefinitions"}

// requireClean asserts an answer carries no thinking content and no
// raw-body pointer: no key naming raw bytes or their hash.
func requireClean(t testing.TB, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NotContains(t, string(b), thinkingMarker, "thinking and reasoning content is never stored or answered")
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case obj:
			for k, e := range x {
				lk := strings.ToLower(k)
				require.False(t, strings.Contains(lk, "raw") || strings.Contains(lk, "sha") || strings.Contains(lk, "blob"),
					"a raw-body pointer crossed the wire: %s.%s", at, k)
				walk(e, at+"."+k)
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(v, "$")
}

// requireGenAIRecord asserts the record shape (full, or a summary) and
// returns it.
func requireGenAIRecord(t testing.TB, rec obj, summary bool) obj {
	t.Helper()
	require.NotNil(t, rec, "record")
	requireClean(t, rec)
	for k := range rec {
		require.Contains(t, genaiRecordFields, k, "unexpected GenAI record field %q: %v", k, rec)
	}
	req := []string{"id", "member", "model", "provider", "responseId", "ts", "usage"}
	if !summary {
		req = append(req, genaiArrays...)
	}
	for _, k := range req {
		require.Contains(t, rec, k, "GenAI record lacks %q: %v", k, rec)
	}
	if summary {
		for _, k := range genaiArrays {
			require.True(t, isUnset(rec, k), "a summary has no %s: %v", k, rec)
		}
	}
	id, _ := rec["id"].(string)
	require.NotEmpty(t, id)
	actWhole(t, rec["ts"], "ts")
	u, ok := rec["usage"].(obj)
	require.True(t, ok, "usage is an object: %v", rec)
	for _, k := range []string{"inputTokens", "outputTokens", "cacheReadTokens", "cacheCreationTokens"} {
		actWhole(t, u[k], "usage."+k)
	}
	return rec
}

// recordView is the part of a record a fixture predicts.
func recordView(rec obj) obj {
	u, _ := rec["usage"].(obj)
	return obj{
		"provider": rec["provider"], "model": rec["model"], "responseId": rec["responseId"],
		"usage": obj{
			"inputTokens": u["inputTokens"], "outputTokens": u["outputTokens"],
			"cacheReadTokens": u["cacheReadTokens"], "cacheCreationTokens": u["cacheCreationTokens"],
		},
		"systemInstructions": rec["systemInstructions"], "inputMessages": rec["inputMessages"], "outputMessages": rec["outputMessages"],
		"toolDefinitions": rec["toolDefinitions"],
	}
}

// summaryOf is a full record without its content arrays.
func summaryOf(rec obj) obj {
	out := obj{}
	for k, v := range rec {
		if !slices.Contains(genaiArrays, k) {
			out[k] = v
		}
	}
	return out
}

// uploadGenAI uploads body into name's records as c: over REST the raw
// POST /members/:name/genai, over gRPC UploadGenAi with the bytes.
func uploadGenAI(t testing.TB, p *proc, d driver, c cred, name string, body []byte) result {
	t.Helper()
	var r result
	if transportOf(d) == "grpc" {
		r = d.call(t, c, "UploadGenAi", obj{"name": name, "body": base64.StdEncoding.EncodeToString(body)})
	} else {
		var opts []reqOpt
		if c.authorization != "" {
			opts = append(opts, withAuthorization(c.authorization))
		}
		r = restResult(t, p.do(t, http.MethodPost, "/members/"+url.PathEscape(name)+"/genai", body, opts...))
	}
	if r.body != nil {
		requireClean(t, r.body)
	}
	return r
}

// mustUploadGenAI uploads and returns the {inference} record.
func mustUploadGenAI(t testing.TB, p *proc, d driver, c cred, name string, body []byte) obj {
	t.Helper()
	r := uploadGenAI(t, p, d, c, name, body)
	require.Empty(t, r.code, "GenAI upload into %s", name)
	require.Equal(t, []string{"inference"}, keys(r.body))
	rec := requireGenAIRecord(t, r.body["inference"].(obj), false)
	require.Equal(t, name, rec["member"])
	return rec
}

// listGenAI lists name's records as c with the query fields.
func listGenAI(t testing.TB, d driver, c cred, name string, q obj) []obj {
	t.Helper()
	req := obj{"name": name}
	for k, v := range q {
		req[k] = v
	}
	b := mustCall(t, d, c, "ListGenAi", req)
	requireClean(t, b)
	require.Equal(t, []string{"inferences"}, keys(b))
	recs := listOf(t, b, "inferences")
	for i, r := range recs {
		requireGenAIRecord(t, r, q["view"] == "summary")
		require.Equal(t, name, r["member"])
		if i > 0 {
			require.LessOrEqual(t, recs[i-1]["ts"].(float64), r["ts"].(float64), "oldest first")
		}
	}
	return recs
}

// genaiIDs lists the records' ids.
func genaiIDs(recs []obj) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r["id"].(string))
	}
	return out
}

// TestGenAIRecords covers POST/GET /members/:name/genai and
// GET /members/:name/genai/:id (and their gRPC methods) on one broker.
func TestGenAIRecords(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			d := tr.connect(t, p)
			n := func(s string) string { return s + "-" + tr.name }

			t.Run("each provider API maps onto the GenAI shapes", func(t *testing.T) {
				name := n("providers")
				c := bearer(createMember(t, d, admin, name))
				base := actNow() - time.Hour.Milliseconds()
				var recs []obj
				for i, f := range genaiFixtures {
					t.Run(f.name, func(t *testing.T) {
						rec := mustUploadGenAI(t, p, d, c, name, genaiBody(t, base+int64(i), f))
						require.Equal(t, float64(base+int64(i)), rec["ts"], "ts is the capture time uploaded")
						var want obj
						require.NoError(t, json.Unmarshal([]byte(f.want), &want))
						require.Equal(t, want, recordView(rec))
						got := mustCall(t, d, c, "GetGenAi", obj{"name": name, "id": rec["id"]})
						requireClean(t, got)
						require.Equal(t, obj{"inference": rec}, got, "get by id answers the record uploaded")
						recs = append(recs, rec)
					})
				}
				require.Equal(t, recs, listGenAI(t, d, c, name, nil), "the list holds each, oldest first")
				ids := genaiIDs(recs)
				require.Len(t, ids, len(genaiFixtures))
				slices.Sort(ids)
				require.Len(t, slices.Compact(ids), len(genaiFixtures), "ids are distinct")
			})

			t.Run("absent ts is the capture time now", func(t *testing.T) {
				name := n("genai-nots")
				c := bearer(createMember(t, d, admin, name))
				before := actNow()
				rec := mustUploadGenAI(t, p, d, c, name, genaiBody(t, 0, chatFixture))
				after := actNow()
				ts := actWhole(t, rec["ts"], "ts")
				require.GreaterOrEqual(t, ts, before-1000)
				require.LessOrEqual(t, ts, after+1000)
			})

			t.Run("identical uploads are two records", func(t *testing.T) {
				name := n("genai-twice")
				c := bearer(createMember(t, d, admin, name))
				body := genaiBody(t, actNow()-1000, anthropicFixture)
				first := mustUploadGenAI(t, p, d, c, name, body)
				second := mustUploadGenAI(t, p, d, c, name, body)
				require.NotEqual(t, first["id"], second["id"])
				delete(first, "id")
				delete(second, "id")
				require.Equal(t, first, second, "the same inference, stored twice")
				require.Len(t, listGenAI(t, d, c, name, nil), 2)
			})

			t.Run("list: oldest first, range, limit, summary", func(t *testing.T) {
				name := n("genai-list")
				c := bearer(createMember(t, d, admin, name))
				base := actNow() - time.Hour.Milliseconds()
				byTS := map[int64]obj{}
				for i, off := range []int64{3000, 1000, 2000, 0} {
					byTS[off] = mustUploadGenAI(t, p, d, c, name, genaiBody(t, base+off, genaiFixtures[i%len(genaiFixtures)]))
				}
				at := func(offs ...int64) []obj {
					out := []obj{}
					for _, o := range offs {
						out = append(out, byTS[o])
					}
					return out
				}
				tests := []struct {
					name string
					q    obj
					want []obj
				}{
					{name: "everything", q: nil, want: at(0, 1000, 2000, 3000)},
					{name: "from is inclusive", q: obj{"from": actMS(base + 1000)}, want: at(1000, 2000, 3000)},
					{name: "to is inclusive", q: obj{"to": actMS(base + 2000)}, want: at(0, 1000, 2000)},
					{name: "from equals to", q: obj{"from": actMS(base + 1000), "to": actMS(base + 1000)}, want: at(1000)},
					{name: "an empty range", q: obj{"from": actMS(base + 1), "to": actMS(base + 999)}, want: at()},
					{name: "limit keeps the oldest", q: obj{"limit": 2}, want: at(0, 1000)},
					{name: "limit within a range", q: obj{"from": actMS(base + 1000), "limit": 1}, want: at(1000)},
					{name: "limit above 1000", q: obj{"limit": 5000}, want: at(0, 1000, 2000, 3000)},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						require.Equal(t, tc.want, listGenAI(t, d, c, name, tc.q))
						q := obj{"view": "summary"}
						for k, v := range tc.q {
							q[k] = v
						}
						var want []obj
						for _, r := range tc.want {
							want = append(want, summaryOf(r))
						}
						if want == nil {
							want = []obj{}
						}
						require.Equal(t, want, listGenAI(t, d, c, name, q), "view=summary: every field but the three arrays")
					})
				}
			})

			t.Run("absent and foreign ids are the same 404", func(t *testing.T) {
				owner, peer, reader := n("genai-owner"), n("genai-peer"), n("genai-reader")
				ownerC := bearer(createMember(t, d, admin, owner))
				peerC := bearer(createMember(t, d, admin, peer))
				readerC := bearer(createMember(t, d, admin, reader, "activity.read"))
				rec := mustUploadGenAI(t, p, d, ownerC, owner, genaiBody(t, 0, anthropicFixture))
				peerRec := mustUploadGenAI(t, p, d, peerC, peer, genaiBody(t, 0, responsesFixture))
				id := rec["id"].(string)

				absent := mustFail(t, d, peerC, "GetGenAi", obj{"name": peer, "id": "00000000-0000-4000-8000-000000000000"}, "not_found")
				foreign := mustFail(t, d, peerC, "GetGenAi", obj{"name": peer, "id": id}, "not_found")
				require.Equal(t, absent.code, foreign.code)
				mustFail(t, d, readerC, "GetGenAi", obj{"name": reader, "id": id}, "not_found")
				mustFail(t, d, ownerC, "GetGenAi", obj{"name": owner, "id": peerRec["id"]}, "not_found")

				// Reading another member's records needs activity.read.
				mustFail(t, d, peerC, "GetGenAi", obj{"name": owner, "id": id}, "forbidden")
				mustFail(t, d, peerC, "ListGenAi", obj{"name": owner}, "forbidden")
				require.Equal(t, obj{"inference": rec}, mustCall(t, d, readerC, "GetGenAi", obj{"name": owner, "id": id}))
				require.Equal(t, []obj{rec}, listGenAI(t, d, readerC, owner, nil))
				require.Equal(t, []obj{rec}, listGenAI(t, d, admin, owner, nil))
				mustFail(t, d, readerC, "ListGenAi", obj{"name": n("genai-ghost")}, "not_found")
				mustFail(t, d, anonymous, "ListGenAi", obj{"name": owner}, "unauthenticated")
			})

			t.Run("refusals store nothing", func(t *testing.T) {
				name, other := n("genai-refused"), n("genai-refused-other")
				tok := createMember(t, d, admin, name)
				otherTok := createMember(t, d, admin, other, "activity.read")
				mustUploadGenAI(t, p, d, bearer(tok), name, genaiBody(t, 0, chatFixture))
				mine := listGenAI(t, d, bearer(tok), name, nil)
				theirs := listGenAI(t, d, bearer(otherTok), other, nil)
				a, c, r := anthropicFixture, chatFixture, responsesFixture
				tests := []struct {
					name string
					as   string // "" is no credential
					path string
					body []byte
					code string
				}{
					{name: "another member's path", as: other, path: name, body: genaiBody(t, 0, a), code: "forbidden"},
					{name: "admin's write to another", as: "admin", path: name, body: genaiBody(t, 0, a), code: "forbidden"},
					{name: "no credential", path: name, body: genaiBody(t, 0, a), code: "unauthenticated"},
					{name: "malformed JSON", as: name, path: name, body: []byte(`{"request": {"model": "x"}, "response": `), code: "bad_request"},
					{name: "an empty body", as: name, path: name, body: []byte{}, code: "bad_request"},
					{name: "a JSON array", as: name, path: name, body: []byte(`[]`), code: "bad_request"},
					{name: "request missing", as: name, path: name, body: []byte(`{"response": ` + c.resp + `}`), code: "bad_request"},
					{name: "response missing", as: name, path: name, body: []byte(`{"request": ` + c.req + `}`), code: "bad_request"},
					{name: "request not an object", as: name, path: name, body: genaiBodyOf(t, 0, `"hello"`, c.resp), code: "bad_request"},
					{name: "response an array", as: name, path: name, body: genaiBodyOf(t, 0, c.req, `[]`), code: "bad_request"},
					{name: "ts a string", as: name, path: name, body: []byte(`{"ts": "1763900000123", "request": ` + c.req + `, "response": ` + c.resp + `}`), code: "bad_request"},
					{name: "ts negative", as: name, path: name, body: genaiBody(t, -1, c), code: "bad_request"},
					{name: "ts fractional", as: name, path: name, body: []byte(`{"ts": 1.5, "request": ` + c.req + `, "response": ` + c.resp + `}`), code: "bad_request"},
					{name: "a response of no provider", as: name, path: name, body: genaiBodyOf(t, 0, c.req, `{"id": "x", "model": "m"}`), code: "bad_request"},
					{name: "anthropic request, chat response", as: name, path: name, body: genaiBodyOf(t, 0, a.req, c.resp), code: "bad_request"},
					{name: "chat request, anthropic response", as: name, path: name, body: genaiBodyOf(t, 0, c.req, a.resp), code: "bad_request"},
					{name: "responses request, anthropic response", as: name, path: name, body: genaiBodyOf(t, 0, r.req, a.resp), code: "bad_request"},
					{name: "anthropic request, responses response", as: name, path: name, body: genaiBodyOf(t, 0, a.req, r.resp), code: "bad_request"},
					{name: "chat request, responses response", as: name, path: name, body: genaiBodyOf(t, 0, c.req, r.resp), code: "bad_request"},
					{name: "responses request, chat response", as: name, path: name, body: genaiBodyOf(t, 0, r.req, c.resp), code: "bad_request"},
				}
				toks := map[string]string{name: tok, other: otherTok, "admin": tokenOf(admin)}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						cr := anonymous
						if tc.as != "" {
							cr = bearer(toks[tc.as])
						}
						res := uploadGenAI(t, p, d, cr, tc.path, tc.body)
						require.Equal(t, tc.code, res.code, "answer %v", res.body)
						require.Equal(t, mine, listGenAI(t, d, bearer(tok), name, nil), "a refused upload stores nothing")
						require.Equal(t, theirs, listGenAI(t, d, bearer(otherTok), other, nil), "a refused upload stores nothing")
					})
				}
			})
		})
	}

	t.Run("size limits", func(t *testing.T) {
		t.Parallel()
		d := restDriver{p}
		name := "genai-size"
		tok := createMember(t, d, admin, name)
		c := bearer(tok)
		// padded makes a valid upload of exactly size bytes: unknown
		// top-level keys are ignored.
		padded := func(size int) []byte {
			body := genaiBody(t, 0, responsesFixture)
			head := []byte(`{"pad": "`)
			tail := append([]byte(`", `), body[1:]...)
			pad := size - len(head) - len(tail)
			require.Positive(t, pad)
			out := make([]byte, 0, size)
			out = append(out, head...)
			out = append(out, bytes.Repeat([]byte("x"), pad)...)
			out = append(out, tail...)
			require.Len(t, out, size)
			return out
		}
		const limit = 16 << 20

		t.Run("over 16 MiB is 413, nothing stored", func(t *testing.T) {
			before := listGenAI(t, d, c, name, nil)
			body := padded(limit + 1)
			r := p.do(t, http.MethodPost, "/members/"+name+"/genai", body, withBearer(tok))
			requireRESTError(t, r, "payload_too_large")
			// Without a declared length the cap still holds.
			r = p.do(t, http.MethodPost, "/members/"+name+"/genai", io.MultiReader(bytes.NewReader(body)), withBearer(tok))
			requireRESTError(t, r, "payload_too_large")
			_, err := apiv1.NewActivityClient(p.grpcConn(t)).UploadGenAi(grpcCtx(t, tok), &apiv1.UploadGenAiRequest{Name: name, Body: body})
			require.Equal(t, codes.ResourceExhausted, status.Code(err), "gRPC: %v", err)
			require.Equal(t, before, listGenAI(t, d, c, name, nil))
		})

		// The accepted large uploads run side by side, each member its own.
		own := func(t *testing.T, suffix string) (string, cred) {
			t.Helper()
			t.Parallel()
			tok := createMember(t, d, admin, name+"-"+suffix)
			return tok, bearer(tok)
		}

		t.Run("exactly 16 MiB is accepted over REST", func(t *testing.T) {
			_, c := own(t, "16")
			rec := mustUploadGenAI(t, p, d, c, name+"-16", padded(limit))
			require.Equal(t, "resp_e2e_1", rec["responseId"])
		})

		t.Run("a record over gRPC's 4 MiB default reads back over REST", func(t *testing.T) {
			// REST reads go through the gateway's in-process gRPC hop.
			_, c := own(t, "read")
			big := strings.Repeat("y", 4<<20+256<<10)
			req := fmt.Sprintf(`{"model": "gpt-4.1", "messages": [{"role": "user", "content": %q}]}`, big)
			rec := mustUploadGenAI(t, p, d, c, name+"-read", genaiBodyOf(t, 0, req, actChatResp("chatcmpl-big", "gpt-4.1", 1, 1)))
			got := mustCall(t, d, c, "GetGenAi", obj{"name": name + "-read", "id": rec["id"]})["inference"].(obj)
			require.Equal(t, rec, got)
			msgs := listOf(t, got, "inputMessages")
			require.Len(t, msgs, 1)
			require.Equal(t, big, listOf(t, msgs[0], "parts")[0]["content"])
		})

		t.Run("gRPC takes the uploads REST takes", func(t *testing.T) {
			// TELEMETRY.md: uploads up to 16 MiB, and gRPC serves "the same
			// operations"; 6 MiB is over gRPC's default 4 MiB message cap.
			tok, _ := own(t, "grpc")
			resp, err := apiv1.NewActivityClient(p.grpcConn(t)).UploadGenAi(grpcCtx(t, tok), &apiv1.UploadGenAiRequest{Name: name + "-grpc", Body: padded(6 << 20)})
			require.NoError(t, err, "a 6 MiB inference upload over gRPC")
			require.Equal(t, "resp_e2e_1", resp.GetInference().GetResponseId())
		})
	})
}

// actMS is an epoch-ms time as a JSON request value.
func actMS(v int64) float64 { return float64(v) }

// grpcCtx is a bounded context carrying the bearer token.
func grpcCtx(t testing.TB, tok string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*callTimeout)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// --- Objective markers, traces and usage --------------------------------------

// traceRowFields are the keys of one trace row.
var traceRowFields = []string{"activity", "inference", "member", "memberDeleted", "memberDeletedAt", "memberId", "ts"}

// traceLabeler names trace rows: uploaded rows by data.label, markers by
// kind, member and reason, inference records by the label given at upload.
type traceLabeler struct {
	recs map[string]string // record id → label
}

func (l *traceLabeler) rowLabel(t testing.TB, row obj) string {
	t.Helper()
	for k := range row {
		require.Contains(t, traceRowFields, k, "unexpected trace row field %q: %v", k, row)
	}
	member, _ := row["member"].(string)
	require.NotEmpty(t, member, "a trace row names its member: %v", row)
	var parts []string
	if a, ok := row["activity"].(obj); ok {
		requireActivityRow(t, a)
		require.Equal(t, member, a["member"])
		data := a["data"].(obj)
		switch {
		case data["label"] != nil:
			parts = append(parts, data["label"].(string))
		case a["kind"] == "objective_close":
			parts = append(parts, fmt.Sprintf("close:%s:%s", member, data["reason"]))
		default:
			parts = append(parts, fmt.Sprintf("%s:%s", strings.TrimPrefix(a["kind"].(string), "objective_"), member))
		}
	}
	if g, ok := row["inference"].(obj); ok {
		requireGenAIRecord(t, g, false)
		require.Equal(t, member, g["member"])
		label, ok := l.recs[g["id"].(string)]
		require.True(t, ok, "an inference record of the test: %v", g)
		parts = append(parts, label)
	}
	require.NotEmpty(t, parts, "a trace row holds an activity row or an inference record: %v", row)
	return strings.Join(parts, "+")
}

// trace fetches the objective's trace as c and returns its row labels,
// checking the order (oldest first).
func (l *traceLabeler) trace(t testing.TB, d driver, c cred, id string) []string {
	t.Helper()
	b := mustCall(t, d, c, "GetObjectiveTrace", obj{"id": id})
	requireClean(t, b)
	rows := listOf(t, b, "rows")
	out := []string{}
	var last float64
	for _, r := range rows {
		out = append(out, l.rowLabel(t, r))
		ts := rowTS(t, r)
		require.GreaterOrEqual(t, ts, last, "trace rows are oldest first: %v", out)
		last = ts
	}
	return out
}

// rowTS is a trace row's time: its activity row's, else its record's.
func rowTS(t testing.TB, r obj) float64 {
	t.Helper()
	if a, ok := r["activity"].(obj); ok {
		return a["ts"].(float64)
	}
	return r["inference"].(obj)["ts"].(float64)
}

// upload uploads a GenAI record and remembers its label.
func (l *traceLabeler) upload(t testing.TB, p *proc, d driver, c cred, name, label string, ts int64, req, resp string) obj {
	t.Helper()
	rec := mustUploadGenAI(t, p, d, c, name, genaiBodyOf(t, ts, req, resp))
	l.recs[rec["id"].(string)] = label
	return rec
}

// usageOf fetches {usage, models, members} and returns the six sums of
// usage, costUsd the part the agents reported: what the price table adds
// is TestUsageCosts's to check.
func usageOf(t testing.TB, d driver, c cred, op string, req obj) obj {
	t.Helper()
	b := mustCall(t, d, c, op, req)
	require.Equal(t, []string{"members", "models", "usage"}, keys(b), "usage answer: %v", b)
	u := b["usage"].(obj)
	require.Equal(t, []string{"cacheCreationTokens", "cacheReadTokens", "costComputedUsd", "costUsd", "exchanges", "inputTokens", "outputTokens", "unpricedExchanges"}, keys(u))
	u["costUsd"] = math.Round((u["costUsd"].(float64)-u["costComputedUsd"].(float64))*1e12) / 1e12
	delete(u, "costComputedUsd")
	delete(u, "unpricedExchanges")
	return u
}

// actUsage is an expected {usage} object.
func actUsage(in, out, cacheRead, cacheCreation int, cost float64, exchanges int) obj {
	return obj{
		"inputTokens": float64(in), "outputTokens": float64(out), "cacheReadTokens": float64(cacheRead),
		"cacheCreationTokens": float64(cacheCreation), "costUsd": cost, "exchanges": float64(exchanges),
	}
}

// actExchange is llm_exchange data with a label, model, usage and cost.
func actExchange(label, model, responseID string, durationMs, in, out, cacheRead, cacheCreation int, cost float64) obj {
	d := obj{
		"label": label, "model": model, "durationMs": durationMs, "costUsd": cost, "source": "runner",
		"usage": obj{"inputTokens": in, "outputTokens": out, "cacheReadTokens": cacheRead, "cacheCreationTokens": cacheCreation},
	}
	if responseID != "" {
		d["responseId"] = responseID
	}
	return d
}

// actChatResp is a minimal Chat Completions response of model.
func actChatResp(id, model string, in, out int) string {
	return fmt.Sprintf(`{"id": %q, "object": "chat.completion", "model": %q,
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": %d, "completion_tokens": %d}}`, id, model, in, out)
}

// actAnthropicResp is a minimal Anthropic Messages response.
func actAnthropicResp(id, model string, in, out int) string {
	return fmt.Sprintf(`{"id": %q, "type": "message", "role": "assistant", "model": %q,
  "content": [{"type": "thinking", "thinking": "THINK-7f3a9c", "signature": "s"}, {"type": "text", "text": "done"}],
  "stop_reason": "end_turn", "usage": {"input_tokens": %d, "output_tokens": %d}}`, id, model, in, out)
}

const (
	chatReqMin      = `{"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}`
	anthropicReqMin = `{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}`
)

// TestObjectiveTraceAndUsage covers the objective markers objectives
// write, GET /objectives/:id/trace, GET /objectives/:id/usage and
// GET /members/:name/usage, over REST and gRPC on one broker.
func TestObjectiveTraceAndUsage(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			d := tr.connect(t, p)
			n := func(s string) string { return s + "-" + tr.name }
			create := func(t *testing.T, title, assignee string) obj {
				t.Helper()
				o := mustCall(t, d, admin, "CreateObjective", obj{"title": title, "outcome": "done well", "assignee": assignee})
				require.Equal(t, assignee, o["assignee"])
				return o
			}
			markers := func(t *testing.T, name string) []obj {
				t.Helper()
				rows := mustList(t, p, d, admin, name, actQuery{kinds: []string{"objective_open", "objective_close"}})
				slices.Reverse(rows)
				return rows
			}
			requireMarker := func(t *testing.T, row obj, kind string, o obj, reason string, ts any) {
				t.Helper()
				require.Equal(t, kind, row["kind"])
				require.Equal(t, o["id"], row["objectiveId"])
				data := obj{"objectiveId": o["id"], "title": o["title"]}
				if reason != "" {
					data["reason"] = reason
				}
				require.Equal(t, data, row["data"])
				require.Equal(t, ts, row["ts"])
			}

			t.Run("objective changes write markers", func(t *testing.T) {
				m1, m2 := n("mark-1"), n("mark-2")
				m1Tok := createMember(t, d, admin, m1)
				m2Tok := createMember(t, d, admin, m2)
				live := openActivity(t, p, tr.name, m2Tok, m2, "", false)

				o1 := create(t, "Mark one", m1)
				rows := markers(t, m1)
				require.Len(t, rows, 1)
				requireMarker(t, rows[0], "objective_open", o1, "", o1["createdAt"])

				done := mustCall(t, d, bearer(m1Tok), "CompleteObjective", obj{"id": o1["id"], "result": "shipped"})
				rows = markers(t, m1)
				require.Len(t, rows, 2)
				requireMarker(t, rows[1], "objective_close", o1, "done", done["completedAt"])

				o2 := create(t, "Mark two", m1)
				cancelled := mustCall(t, d, admin, "CancelObjective", obj{"id": o2["id"], "reason": "not needed"})
				rows = markers(t, m1)
				require.Len(t, rows, 4)
				requireMarker(t, rows[2], "objective_open", o2, "", o2["createdAt"])
				requireMarker(t, rows[3], "objective_close", o2, "cancelled", cancelled["updatedAt"])

				o3 := create(t, "Mark three", m1)
				moved := mustCall(t, d, admin, "ReassignObjective", obj{"id": o3["id"], "to": m2})
				rows = markers(t, m1)
				require.Len(t, rows, 6)
				requireMarker(t, rows[4], "objective_open", o3, "", o3["createdAt"])
				requireMarker(t, rows[5], "objective_close", o3, "reassigned", moved["updatedAt"])
				rows = markers(t, m2)
				require.Len(t, rows, 1)
				requireMarker(t, rows[0], "objective_open", o3, "", moved["updatedAt"])
				// The new assignee's live stream carries its marker.
				require.Equal(t, rows[0], live.next(t))

				done3 := mustCall(t, d, bearer(m2Tok), "CompleteObjective", obj{"id": o3["id"], "result": "ok"})
				rows = markers(t, m2)
				require.Len(t, rows, 2)
				requireMarker(t, rows[1], "objective_close", o3, "done", done3["completedAt"])
				require.Equal(t, rows[1], live.next(t))
				require.Len(t, markers(t, m1), 6, "the former assignee gets nothing more")
			})

			t.Run("a trace is the activity inside the holding", func(t *testing.T) {
				holder, outsider := n("held"), n("held-outsider")
				tok := bearer(createMember(t, d, admin, holder))
				outC := bearer(createMember(t, d, admin, outsider))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace one", holder)
				id := o["id"].(string)
				t0 := int64(o["createdAt"].(float64))

				mustUpload(t, d, tok, holder, actEv("tool_action", t0-60_000, obj{"label": "before"}))
				l.upload(t, p, d, tok, holder, "g-before", t0-60_000, chatReqMin, actChatResp("c-before", "gpt-4.1", 5, 5))
				mustUpload(t, d, tok, holder, actEv("tool_action", 0, obj{"label": "inside-1"}), actEv("user_prompt", 0, obj{"label": "inside-2"}))
				mustUpload(t, d, outC, outsider, actEv("tool_action", 0, obj{"label": "someone else"}))
				l.upload(t, p, d, tok, holder, "g-inside", 0, chatReqMin, actChatResp("c-inside", "gpt-4.1", 5, 5))
				done := mustCall(t, d, tok, "CompleteObjective", obj{"id": id, "result": "done"})
				t1 := int64(done["completedAt"].(float64))
				mustUpload(t, d, tok, holder, actEv("tool_action", t1+60_000, obj{"label": "after"}))
				l.upload(t, p, d, tok, holder, "g-after", t1+60_000, chatReqMin, actChatResp("c-after", "gpt-4.1", 5, 5))
				mustUpload(t, d, tok, holder, actEv("tool_action", t0, obj{"label": "at open"}), actEv("tool_action", t1, obj{"label": "at close"}))

				got := l.trace(t, d, admin, id)
				require.ElementsMatch(t, []string{
					"open:" + holder, "at open", "inside-1", "inside-2", "g-inside", "close:" + holder + ":done", "at close",
				}, got, "from the open marker to the close marker, both inclusive")
				require.Equal(t, "open:"+holder, got[0])
				require.Less(t, slices.Index(got, "inside-1"), slices.Index(got, "inside-2"))
				// The holder itself, without activity.read, sees its own work.
				require.Equal(t, got, l.trace(t, d, tok, id))
				mustFail(t, d, outC, "GetObjectiveTrace", obj{"id": id}, "forbidden")
				mustFail(t, d, outC, "GetObjectiveUsage", obj{"id": id}, "forbidden")
				mustFail(t, d, admin, "GetObjectiveTrace", obj{"id": "00000000-0000-4000-8000-000000000000"}, "not_found")
				mustFail(t, d, admin, "GetObjectiveUsage", obj{"id": "00000000-0000-4000-8000-000000000000"}, "not_found")
				mustFail(t, d, anonymous, "GetObjectiveTrace", obj{"id": id}, "unauthenticated")
			})

			t.Run("reassignment makes the trace the union of both holdings", func(t *testing.T) {
				first, second, outsider, reader := n("first"), n("second"), n("union-outsider"), n("union-reader")
				firstC := bearer(createMember(t, d, admin, first))
				secondC := bearer(createMember(t, d, admin, second))
				outC := bearer(createMember(t, d, admin, outsider))
				readerC := bearer(createMember(t, d, admin, reader, "activity.read"))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace two", first)
				id := o["id"].(string)
				t0 := int64(o["createdAt"].(float64))

				mustUpload(t, d, firstC, first, actEvObj("llm_exchange", 0, id, actExchange("first-inside", "gpt-4.1", "", 10, 1, 2, 3, 4, 0.5)))
				mustUpload(t, d, secondC, second, actEv("tool_action", t0-1000, obj{"label": "second-before"}))
				moved := mustCall(t, d, admin, "ReassignObjective", obj{"id": id, "to": second})
				tMoved := int64(moved["updatedAt"].(float64))
				mustUpload(t, d, firstC, first, actEv("tool_action", tMoved+60_000, obj{"label": "first-after"}))
				mustUpload(t, d, secondC, second, actEvObj("llm_exchange", 0, id, actExchange("second-inside", "gpt-4.1", "", 10, 10, 20, 30, 40, 0.25)))
				mustUpload(t, d, secondC, second, actEv("tool_action", tMoved+600_000, obj{"label": "second-future"}))

				firstPart := []string{"open:" + first, "first-inside", "close:" + first + ":reassigned"}
				secondPart := []string{"open:" + second, "second-inside"}
				all := l.trace(t, d, admin, id)
				require.ElementsMatch(t, append(slices.Clone(firstPart), secondPart...), all)
				require.Equal(t, all, l.trace(t, d, readerC, id), "activity.read sees every holding")
				require.Equal(t, secondPart, l.trace(t, d, secondC, id), "the assignee sees only its own holding")
				require.Equal(t, firstPart, l.trace(t, d, firstC, id), "a former holder sees only its own holding")
				mustFail(t, d, outC, "GetObjectiveTrace", obj{"id": id}, "forbidden")

				// Usage follows the same gates: every holding, or one's own.
				require.Equal(t, actUsage(11, 22, 33, 44, 0.75, 2), usageOf(t, d, admin, "GetObjectiveUsage", obj{"id": id}))
				require.Equal(t, actUsage(11, 22, 33, 44, 0.75, 2), usageOf(t, d, readerC, "GetObjectiveUsage", obj{"id": id}))
				require.Equal(t, actUsage(10, 20, 30, 40, 0.25, 1), usageOf(t, d, secondC, "GetObjectiveUsage", obj{"id": id}))
				require.Equal(t, actUsage(1, 2, 3, 4, 0.5, 1), usageOf(t, d, firstC, "GetObjectiveUsage", obj{"id": id}))
				mustFail(t, d, outC, "GetObjectiveUsage", obj{"id": id}, "forbidden")
			})

			t.Run("joins and usage", func(t *testing.T) {
				holder, outsider := n("joined"), n("joined-outsider")
				tok := bearer(createMember(t, d, admin, holder))
				outC := bearer(createMember(t, d, admin, outsider))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace three", holder)
				id := o["id"].(string)
				// The runner's own open marker ten minutes back widens the
				// holding: [base, now] while the objective is live.
				base := int64(o["createdAt"].(float64)) - 600_000
				mustUpload(t, d, tok, holder, actEvObj("objective_open", base, id, obj{"objectiveId": id, "title": "Trace three", "label": "runner-open"}))

				mustUpload(t, d, tok, holder,
					actEvObj("llm_exchange", base-60_000, id, actExchange("x-before", "claude-sonnet-4-5", "msg_before", 100, 1000, 1000, 1000, 1000, 8)),
					actEvObj("llm_exchange", base+10_000, id, actExchange("x1", "claude-sonnet-4-5", "msg_join1", 800, 10, 20, 30, 40, 0.5)),
					actEvObj("llm_exchange", base+20_000, id, actExchange("x2", "claude-sonnet-4-5", "msg_join2", 800, 1, 2, 3, 4, 0.25)),
					actEvObj("llm_exchange", base+30_000, id, actExchange("x-unmatched", "claude-sonnet-4-5", "msg_nothing", 800, 100, 200, 0, 0, 0.125)),
					actEvObj("tool_action", base+40_000, id, obj{"label": "tool", "tool": "Bash", "phase": "result"}),
					actEvObj("llm_exchange", actNow()+600_000, id, actExchange("x-after", "claude-sonnet-4-5", "msg_after", 100, 1000, 1000, 1000, 1000, 8)),
				)
				// g1 joins x1 by responseId; g2, captured just before the
				// holding, still joins x2; g-alone has no exchange; the
				// records before and after the holding are not in it.
				l.upload(t, p, d, tok, holder, "g1", base+10_500, anthropicReqMin, actAnthropicResp("msg_join1", "claude-sonnet-4-5", 10, 20))
				l.upload(t, p, d, tok, holder, "g2", base-5_000, anthropicReqMin, actAnthropicResp("msg_join2", "claude-sonnet-4-5", 1, 2))
				l.upload(t, p, d, tok, holder, "g-alone", base+100_000, responsesFixture.req, responsesFixture.resp)
				l.upload(t, p, d, tok, holder, "g-before", base-60_000, chatReqMin, actChatResp("c-before", "gpt-4o", 7, 7))

				got := l.trace(t, d, admin, id)
				require.Equal(t, []string{"runner-open", "x1+g1", "x2+g2", "x-unmatched", "tool", "g-alone", "open:" + holder}, got)
				require.Equal(t, got, l.trace(t, d, tok, id), "the assignee sees its own holding")

				// Usage: x1, x2, x-unmatched from their data; g1 and g2 ride
				// on their exchanges; g-alone (400/60/100/0) counts alone.
				want := actUsage(10+1+100+400, 20+2+200+60, 30+3+100, 40+4, 0.5+0.25+0.125, 4)
				require.Equal(t, want, usageOf(t, d, admin, "GetObjectiveUsage", obj{"id": id}))
				require.Equal(t, want, usageOf(t, d, tok, "GetObjectiveUsage", obj{"id": id}), "the assignee reads its objective's usage")
				mustFail(t, d, outC, "GetObjectiveUsage", obj{"id": id}, "forbidden")

				// A member's usage over a range sums the same way.
				now := actNow()
				require.Equal(t, want, usageOf(t, d, tok, "GetUsage", obj{"name": holder, "from": actMS(base), "to": actMS(now)}))
				require.Equal(t, actUsage(10, 20, 30, 40, 0.5, 1), usageOf(t, d, tok, "GetUsage", obj{"name": holder, "from": actMS(base + 10_000), "to": actMS(base + 10_000)}),
					"from and to are inclusive")
				require.Equal(t, actUsage(0, 0, 0, 0, 0, 0), usageOf(t, d, tok, "GetUsage", obj{"name": holder, "from": actMS(base + 41_000), "to": actMS(base + 99_999)}))
				// Everything: x-before and x-after (1000s, 8 each) and
				// g-before (chat: 7 in, 7 out) too.
				require.Equal(t, actUsage(511+2000+7, 282+2000+7, 133+2000, 44+2000, 0.875+16, 4+3),
					usageOf(t, d, admin, "GetUsage", obj{"name": holder}))
				mustFail(t, d, outC, "GetUsage", obj{"name": holder}, "forbidden")
				mustFail(t, d, admin, "GetUsage", obj{"name": n("usage-ghost")}, "not_found")
			})

			t.Run("an exchange without responseId joins a record of its window", func(t *testing.T) {
				holder := n("windowed")
				tok := bearer(createMember(t, d, admin, holder))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace four", holder)
				id := o["id"].(string)
				base := int64(o["createdAt"].(float64)) - 600_000
				mustUpload(t, d, tok, holder, actEvObj("objective_open", base, id, obj{"objectiveId": id, "title": "Trace four", "label": "runner-open"}))
				xTS := base + 200_000
				mustUpload(t, d, tok, holder,
					actEvObj("llm_exchange", xTS, id, actExchange("x-window", "gpt-4.1", "", 3000, 7, 8, 0, 0, 0.25)),
					actEvObj("llm_exchange", base+300_000, id, actExchange("x-lonely", "gpt-4.1", "", 0, 1, 1, 0, 0, 0.125)),
				)
				// In the window [ts - durationMs - 2 s, ts + 2 s], same model.
				l.upload(t, p, d, tok, holder, "g-window", xTS-4_000, chatReqMin, actChatResp("chatcmpl-win", "gpt-4.1", 50, 5))
				// Inside the window but another model; just outside it.
				l.upload(t, p, d, tok, holder, "g-other-model", xTS+500, chatReqMin, actChatResp("chatcmpl-other", "gpt-4o", 60, 6))
				l.upload(t, p, d, tok, holder, "g-late", xTS+2_500, chatReqMin, actChatResp("chatcmpl-late", "gpt-4.1", 70, 7))

				got := l.trace(t, d, admin, id)
				require.Equal(t, []string{"runner-open", "x-window+g-window", "g-other-model", "g-late", "x-lonely", "open:" + holder}, got)

				// g-window is carried by x-window: its tokens are the
				// exchange's, counted once.
				want := actUsage(7+1+60+70, 8+1+6+7, 0, 0, 0.375, 4)
				assert.Equal(t, want, usageOf(t, d, admin, "GetObjectiveUsage", obj{"id": id}),
					"usage counts the GenAI records no exchange carries, and a record joined by its window is carried")
				assert.Equal(t, want, usageOf(t, d, admin, "GetUsage", obj{"name": holder, "from": actMS(base), "to": actMS(actNow())}),
					"a member's usage counts a window-joined record once")
			})

			t.Run("a record whose exchange lies outside the holding stands and counts alone", func(t *testing.T) {
				holder := n("edge")
				tok := bearer(createMember(t, d, admin, holder))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace five", holder)
				id := o["id"].(string)
				base := int64(o["createdAt"].(float64)) - 600_000
				mustUpload(t, d, tok, holder,
					actEvObj("objective_open", base, id, obj{"objectiveId": id, "title": "Trace five", "label": "runner-open"}),
					actEvObj("llm_exchange", base-60_000, id, actExchange("x-outside", "claude-sonnet-4-5", "msg_edge", 500, 5, 5, 0, 0, 0.5)))
				l.upload(t, p, d, tok, holder, "g-inside", base+50_000, anthropicReqMin, actAnthropicResp("msg_edge", "claude-sonnet-4-5", 11, 13))

				got := l.trace(t, d, admin, id)
				require.Equal(t, []string{"runner-open", "g-inside", "open:" + holder}, got,
					"the exchange is outside the holding: the record is a row of its own")
				// The objective's usage sums its trace: the record no exchange
				// of the trace carries counts.
				want := actUsage(11, 13, 0, 0, 0, 1)
				assert.Equal(t, want, usageOf(t, d, admin, "GetObjectiveUsage", obj{"id": id}),
					"usage of a trace whose only inference is a record standing alone")
				assert.Equal(t, want, usageOf(t, d, admin, "GetUsage", obj{"name": holder, "from": actMS(base), "to": actMS(actNow())}),
					"a member's usage over a range holding the record but not its exchange")
			})

			t.Run("runner markers split a holding", func(t *testing.T) {
				holder := n("split")
				tok := bearer(createMember(t, d, admin, holder))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace six", holder)
				id := o["id"].(string)
				base := int64(o["createdAt"].(float64)) - 600_000
				marker := func(kind string, ts int64, label, reason string) obj {
					data := obj{"objectiveId": id, "title": "Trace six", "label": label}
					if reason != "" {
						data["reason"] = reason
					}
					return actEvObj(kind, ts, id, data)
				}
				mustUpload(t, d, tok, holder,
					marker("objective_open", base, "runner-open", ""),
					actEv("tool_action", base+50_000, obj{"label": "r-50"}),
					marker("objective_close", base+100_000, "runner-close", "runner_shutdown"),
					actEv("tool_action", base+150_000, obj{"label": "r-150"}),
					marker("objective_open", base+200_000, "runner-open-2", ""),
					actEv("tool_action", base+250_000, obj{"label": "r-250"}),
				)
				require.Equal(t, []string{"runner-open", "r-50", "runner-close", "runner-open-2", "r-250", "open:" + holder},
					l.trace(t, d, admin, id), "runner_shutdown closes the holding until the next open")
			})

			t.Run("reassigned back: one member, two holdings", func(t *testing.T) {
				a, b := n("back-a"), n("back-b")
				aC := bearer(createMember(t, d, admin, a))
				bC := bearer(createMember(t, d, admin, b))
				l := &traceLabeler{recs: map[string]string{}}
				o := create(t, "Trace seven", a)
				id := o["id"].(string)
				mustUpload(t, d, aC, a, actEv("tool_action", 0, obj{"label": "a-first"}))
				moved := mustCall(t, d, admin, "ReassignObjective", obj{"id": id, "to": b})
				t1 := int64(moved["updatedAt"].(float64))
				// The clock passes t1 + 2 ms, so the second reassignment is
				// later than a row stamped t1 + 1.
				require.Eventually(t, func() bool { return actNow() >= t1+3 }, time.Second, time.Millisecond)
				mustUpload(t, d, aC, a, actEv("tool_action", t1+1, obj{"label": "a-between"}))
				mustUpload(t, d, bC, b, actEv("tool_action", 0, obj{"label": "b-inside"}))
				back := mustCall(t, d, admin, "ReassignObjective", obj{"id": id, "to": a})
				require.Greater(t, back["updatedAt"].(float64), float64(t1+1))
				mustUpload(t, d, aC, a, actEv("tool_action", 0, obj{"label": "a-second"}))

				aPart := []string{"open:" + a, "a-first", "close:" + a + ":reassigned", "open:" + a, "a-second"}
				bPart := []string{"open:" + b, "b-inside", "close:" + b + ":reassigned"}
				require.ElementsMatch(t, append(slices.Clone(aPart), bPart...), l.trace(t, d, admin, id))
				require.Equal(t, aPart, l.trace(t, d, aC, id), "the assignee's two holdings, not the time between")
				require.Equal(t, bPart, l.trace(t, d, bC, id))
			})
		})
	}
}
