package e2e

// End-to-end tests of activity streams (docs/TELEMETRY.md: Activity,
// Routes, Retention; the shapes in proto/svc/v1/activity.proto):
// uploads and lists over REST and native gRPC, the live stream over SSE and
// gRPC, durability across kill -9 and `svc activity prune`. Inference
// records, traces and usage are in trace_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"UploadActivity":    {http.MethodPost, "/members/{name}/activity", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.UploadActivity)},
		"ListActivity":      {http.MethodGet, "/members/{name}/activity", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.ListActivity)},
		"UploadGenAi":       {http.MethodPost, "/members/{name}/genai", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.UploadGenAi)},
		"ListGenAi":         {http.MethodGet, "/members/{name}/genai", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.ListGenAi)},
		"GetGenAi":          {http.MethodGet, "/members/{name}/genai/{id}", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.GetGenAi)},
		"GetUsage":          {http.MethodGet, "/members/{name}/usage", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.GetUsage)},
		"GetObjectiveTrace": {http.MethodGet, "/objectives/{id}/trace", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.GetObjectiveTrace)},
		"GetObjectiveUsage": {http.MethodGet, "/objectives/{id}/usage", http.StatusOK, "", unaryOn(apiv1.NewActivityClient, apiv1.ActivityClient.GetObjectiveUsage)},
	} {
		rpcs[name] = spec
	}
	queryOps["ListGenAi"] = true
	queryOps["GetUsage"] = true
}

// activityKindList is every activity kind (docs/TELEMETRY.md, Activity).
var activityKindList = []string{"llm_exchange", "tool_action", "objective_open", "objective_close", "user_prompt", "opaque_http"}

// activityRowFields are the keys an ActivityRow may carry (proto/svc/v1),
// and the member's id and whether it was deleted (docs/DECISIONS.md, "A
// deleted member's data stays its own").
var activityRowFields = []string{"data", "id", "kind", "member", "memberDeleted", "memberDeletedAt", "memberId", "objectiveId", "ts"}

// actNow is the local wall clock in epoch ms: the broker child reads the
// same clock.
func actNow() int64 { return time.Now().UnixMilli() }

// actJSON renders v through JSON, so Go literals compare with decoded
// answers (numbers as float64, nested maps as obj).
func actJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// actWhole asserts a JSON number holding an integer and returns it.
func actWhole(t testing.TB, v any, what string) int64 {
	t.Helper()
	f, ok := v.(float64)
	require.True(t, ok, "%s is a JSON number, got %#v", what, v)
	require.Equal(t, math.Trunc(f), f, "%s is whole", what)
	return int64(f)
}

// requireActivityRow asserts the ActivityRow shape (proto/svc/v1; absent
// or null optional values: docs/DECISIONS.md, Wire) and
// returns the row.
func requireActivityRow(t testing.TB, row obj) obj {
	t.Helper()
	for k := range row {
		require.Contains(t, activityRowFields, k, "unexpected ActivityRow field %q: %v", k, row)
	}
	for _, k := range []string{"id", "member", "kind", "ts", "data"} {
		require.Contains(t, row, k, "ActivityRow lacks %q: %v", k, row)
	}
	require.Positive(t, actWhole(t, row["id"], "id"), "row ids are positive")
	require.GreaterOrEqual(t, actWhole(t, row["ts"], "ts"), int64(0))
	require.Contains(t, activityKindList, row["kind"])
	m, _ := row["member"].(string)
	require.NotEmpty(t, m, "member: %v", row)
	_, ok := row["data"].(obj)
	require.True(t, ok, "data is an object: %v", row)
	if !isUnset(row, "objectiveId") {
		s, _ := row["objectiveId"].(string)
		require.NotEmpty(t, s, "objectiveId is a non-empty string when set: %v", row)
	}
	return row
}

// rowID is an activity row's id.
func rowID(t testing.TB, row obj) int64 { return actWhole(t, row["id"], "id") }

// rowIDs lists the rows' ids in order.
func rowIDs(t testing.TB, rows []obj) []int64 {
	t.Helper()
	out := make([]int64, 0, len(rows))
	for _, r := range rows {
		out = append(out, rowID(t, r))
	}
	return out
}

// actEv is one uploaded ActivityEvent; ts 0 leaves it out (the broker stamps
// now).
func actEv(kind string, ts int64, data obj) obj {
	e := obj{"kind": kind, "data": data}
	if ts != 0 {
		e["ts"] = ts
	}
	return e
}

// actEvObj is actEv with an objectiveId.
func actEvObj(kind string, ts int64, objectiveID string, data obj) obj {
	e := actEv(kind, ts, data)
	e["objectiveId"] = objectiveID
	return e
}

// mustUpload uploads events into name's stream as c and requires
// {accepted: len(events)}.
func mustUpload(t testing.TB, d driver, c cred, name string, events ...obj) {
	t.Helper()
	b := mustCall(t, d, c, "UploadActivity", obj{"name": name, "events": events})
	require.Equal(t, []string{"accepted"}, keys(b), "upload answer: %v", b)
	require.Equal(t, float64(len(events)), b["accepted"], "accepted counts the events")
}

// actQuery is a list query: from, to, limit (nil: absent) and kind values
// (each one query parameter, possibly comma-separated).
type actQuery struct {
	from, to *int64
	limit    *int
	kinds    []string
	// rawQuery, when set, is the REST query string as is (REST only).
	rawQuery string
}

func actI64(v int64) *int64 { return &v }
func actIntp(v int) *int    { return &v }

// listActivity lists name's rows as c with q over d's transport and returns
// the outcome: REST renders kind as repeated parameters.
func listActivity(t testing.TB, p *proc, d driver, c cred, name string, q actQuery) result {
	t.Helper()
	if transportOf(d) == "grpc" {
		require.Empty(t, q.rawQuery, "a raw query is REST only")
		req := obj{"name": name}
		if q.from != nil {
			req["from"] = *q.from
		}
		if q.to != nil {
			req["to"] = *q.to
		}
		if q.limit != nil {
			req["limit"] = *q.limit
		}
		if q.kinds != nil {
			req["kind"] = q.kinds
		}
		return d.call(t, c, "ListActivity", req)
	}
	v := url.Values{}
	if q.from != nil {
		v.Set("from", strconv.FormatInt(*q.from, 10))
	}
	if q.to != nil {
		v.Set("to", strconv.FormatInt(*q.to, 10))
	}
	if q.limit != nil {
		v.Set("limit", strconv.Itoa(*q.limit))
	}
	for _, k := range q.kinds {
		v.Add("kind", k)
	}
	path := "/members/" + url.PathEscape(name) + "/activity"
	switch {
	case q.rawQuery != "":
		path += "?" + q.rawQuery
	case len(v) > 0:
		path += "?" + v.Encode()
	}
	opts := []reqOpt{}
	if c.authorization != "" {
		opts = append(opts, withAuthorization(c.authorization))
	}
	if c.session != "" {
		opts = append(opts, withSession(c.session))
	}
	return restResult(t, p.do(t, http.MethodGet, path, nil, opts...))
}

// restResult turns a raw REST answer into a result, asserting the error
// shape of a refusal.
func restResult(t testing.TB, r httpResp) result {
	t.Helper()
	require.Equal(t, "1", r.header.Get("X-SVC-Protocol"), "every response carries the protocol header")
	if r.status >= 200 && r.status < 300 {
		require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
		require.NotNil(t, r.body, "a JSON object: %s", r.raw)
		return result{body: r.body}
	}
	code, _ := r.body["error"].(string)
	requireRESTError(t, r, code)
	return result{code: code}
}

// mustList lists name's rows and checks each row's shape, newest first.
func mustList(t testing.TB, p *proc, d driver, c cred, name string, q actQuery) []obj {
	t.Helper()
	r := listActivity(t, p, d, c, name, q)
	require.Empty(t, r.code, "list %s's activity", name)
	require.Equal(t, []string{"activity"}, keys(r.body), "list answer: %v", r.body)
	rows := listOf(t, r.body, "activity")
	for i, row := range rows {
		requireActivityRow(t, row)
		require.Equal(t, name, row["member"], "a member's list holds its rows only")
		if i > 0 {
			prev, cur := rows[i-1], row
			require.GreaterOrEqual(t, prev["ts"].(float64), cur["ts"].(float64), "newest first: %v", rows)
			if prev["ts"] == cur["ts"] {
				require.Greater(t, rowID(t, prev), rowID(t, cur), "rows of one ms: newest first by id")
			}
		}
	}
	return rows
}

// listAll is every row of name (at most 1,000), newest first.
func listAll(t testing.TB, p *proc, d driver, c cred, name string) []obj {
	t.Helper()
	return mustList(t, p, d, c, name, actQuery{})
}

// uploadRaw posts body as is to POST /members/<name>/activity.
func uploadRaw(t testing.TB, p *proc, tok, name string, body []byte) httpResp {
	t.Helper()
	return p.do(t, http.MethodPost, "/members/"+url.PathEscape(name)+"/activity", body, withBearer(tok))
}

// actTokenID is the id of name's only token.
func actTokenID(t testing.TB, d driver, admin cred, name string) string {
	t.Helper()
	toks := listOf(t, mustCall(t, d, admin, "ListTokens", obj{"name": name}), "tokens")
	require.Len(t, toks, 1, "%s has one token", name)
	return toks[0]["id"].(string)
}

// --- Upload and list --------------------------------------------------------

// TestActivityUploadAndList covers POST and GET /members/:name/activity and
// their gRPC methods on one broker, each transport with its own members:
// shapes, order, filters, limits, refusals that store nothing, and gates.
func TestActivityUploadAndList(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			d := tr.connect(t, p)
			n := func(s string) string { return s + "-" + tr.name }

			t.Run("each kind is stored as uploaded", func(t *testing.T) {
				name := n("kinds")
				tok := bearer(createMember(t, d, admin, name))
				base := actNow() - time.Hour.Milliseconds()
				oid := "obj-" + name
				datas := map[string]obj{
					"llm_exchange": {
						"model": "claude-sonnet-4-5", "requestId": "req_1", "responseId": "msg_1",
						"system":   []any{obj{"type": "text", "text": "You are Claude Code."}},
						"messages": []any{obj{"role": "user", "content": "hi"}},
						"tools":    []any{"Bash", "Read"}, "content": []any{obj{"type": "text", "text": "hello"}},
						"stopReason": "end_turn",
						"usage":      obj{"inputTokens": 10, "outputTokens": 20, "cacheReadTokens": 0, "cacheCreationTokens": 0},
						"costUsd":    0.0012, "durationMs": 830, "truncated": false, "requestOnly": false, "source": "runner",
						"nested": obj{"a": []any{1, 2.5, obj{"b": nil}, "x"}},
					},
					"tool_action":     {"tool": "Bash", "phase": "result", "success": true, "durationMs": 12, "input": obj{"command": "ls"}, "result": "a.go", "source": "runner"},
					"objective_open":  {"objectiveId": oid, "title": "Ship it"},
					"objective_close": {"objectiveId": oid, "title": "Ship it", "reason": "runner_shutdown"},
					"user_prompt":     {"prompt": "fix the test", "promptLength": 12},
					"opaque_http":     {"event": "codex.sse_event", "attributes": obj{"event.kind": "response.completed", "input_token_count": "12"}},
				}
				var events []obj
				for i, kind := range activityKindList {
					e := actEv(kind, base+int64(i)*1000, datas[kind])
					if kind == "objective_open" || kind == "objective_close" || kind == "llm_exchange" {
						e["objectiveId"] = oid
					}
					events = append(events, e)
				}
				mustUpload(t, d, tok, name, events...)
				rows := listAll(t, p, d, tok, name)
				require.Len(t, rows, len(events))
				slices.Reverse(rows) // oldest first, as uploaded
				for i, row := range rows {
					e := events[i]
					require.Equal(t, name, row["member"])
					require.Equal(t, e["kind"], row["kind"])
					require.Equal(t, float64(e["ts"].(int64)), row["ts"], "ts is epoch ms as uploaded")
					require.Equal(t, actJSON(t, e["data"]), row["data"], "data as uploaded (%s)", e["kind"])
					if oid, ok := e["objectiveId"]; ok {
						require.Equal(t, oid, row["objectiveId"])
					} else {
						require.True(t, isUnset(row, "objectiveId"), "objectiveId only when given: %v", row)
					}
					if i > 0 {
						require.Greater(t, rowID(t, row), rowID(t, rows[i-1]), "ids increase in commit order")
					}
				}
				// A second upload's ids come after the first's.
				mustUpload(t, d, tok, name, actEv("tool_action", base-1, obj{"tool": "Read"}))
				all := listAll(t, p, d, tok, name)
				oldest := all[len(all)-1]
				require.Equal(t, float64(base-1), oldest["ts"], "listed by ts, not by id")
				require.Greater(t, rowID(t, oldest), slices.Max(rowIDs(t, rows)), "a later commit has a larger id")
			})

			t.Run("absent ts is now", func(t *testing.T) {
				name := n("nots")
				tok := bearer(createMember(t, d, admin, name))
				before := actNow()
				mustUpload(t, d, tok, name, actEv("user_prompt", 0, obj{"promptLength": 3}))
				after := actNow()
				rows := listAll(t, p, d, tok, name)
				require.Len(t, rows, 1)
				ts := actWhole(t, rows[0]["ts"], "ts")
				require.GreaterOrEqual(t, ts, before-1000, "stamped now")
				require.LessOrEqual(t, ts, after+1000, "stamped now")
			})

			t.Run("500 events in one upload", func(t *testing.T) {
				name := n("many")
				tok := bearer(createMember(t, d, admin, name))
				base := actNow() - time.Hour.Milliseconds()
				events := make([]obj, 500)
				for i := range events {
					events[i] = actEv("tool_action", base+int64(i), obj{"tool": "Bash", "i": i})
				}
				mustUpload(t, d, tok, name, events...)
				rows := listAll(t, p, d, tok, name)
				require.Len(t, rows, 500)
				require.Equal(t, float64(499), rows[0]["data"].(obj)["i"])
				require.Equal(t, float64(0), rows[499]["data"].(obj)["i"])
			})

			t.Run("refusals store nothing", func(t *testing.T) {
				name, other := n("refused"), n("refused-other")
				tok := createMember(t, d, admin, name)
				otherTok := createMember(t, d, admin, other)
				base := actNow() - time.Hour.Milliseconds()
				mustUpload(t, d, bearer(tok), name, actEv("tool_action", base, obj{"tool": "Bash"}))
				mustUpload(t, d, bearer(otherTok), other, actEv("tool_action", base, obj{"tool": "Read"}))
				mine, theirs := listAll(t, p, d, bearer(tok), name), listAll(t, p, d, bearer(otherTok), other)

				good := actEv("tool_action", base+1, obj{"tool": "Edit"})
				many := func(k int) []obj {
					out := make([]obj, k)
					for i := range out {
						out[i] = actEv("tool_action", base+int64(i), obj{"i": i})
					}
					return out
				}
				big := obj{"blob": strings.Repeat("x", 1<<20+1024)}
				tests := []struct {
					name     string
					as       string // token of
					path     string // stream written
					events   any    // the events value; nil leaves it out
					raw      string // REST only: the body as is
					restOnly bool
					streamed bool // REST: events sent without a declared length
					code     string
				}{
					{name: "another member's path", as: other, path: name, events: []obj{good}, code: "forbidden"},
					{name: "an activity.read holder's write to another", as: "admin", path: name, events: []obj{good}, code: "forbidden"},
					{name: "zero events", as: name, path: name, events: []obj{}, code: "bad_request"},
					{name: "no events field", as: name, path: name, code: "bad_request"},
					{name: "501 events", as: name, path: name, events: many(501), code: "bad_request"},
					{name: "unknown kind", as: name, path: name, events: []obj{actEv("llm_request", base, obj{})}, code: "bad_request"},
					{name: "empty kind", as: name, path: name, events: []obj{actEv("", base, obj{})}, code: "bad_request"},
					{name: "kind in another case", as: name, path: name, events: []obj{actEv("Tool_Action", base, obj{})}, code: "bad_request"},
					{name: "data missing", as: name, path: name, events: []obj{{"kind": "tool_action", "ts": base}}, code: "bad_request"},
					{name: "data null", as: name, path: name, raw: `{"events":[{"kind":"tool_action","data":null}]}`, code: "bad_request"},
					{name: "data a string", as: name, path: name, raw: `{"events":[{"kind":"tool_action","data":"x"}]}`, restOnly: true, code: "bad_request"},
					{name: "data an array", as: name, path: name, raw: `{"events":[{"kind":"tool_action","data":[1]}]}`, restOnly: true, code: "bad_request"},
					{name: "data a number", as: name, path: name, raw: `{"events":[{"kind":"tool_action","data":1}]}`, restOnly: true, code: "bad_request"},
					{name: "objective_open without objectiveId", as: name, path: name, events: []obj{actEv("objective_open", base, obj{"title": "t"})}, code: "bad_request"},
					{name: "objective_close without objectiveId", as: name, path: name, events: []obj{actEv("objective_close", base, obj{"reason": "done"})}, code: "bad_request"},
					{name: "objective_close with an unknown reason", as: name, path: name, events: []obj{actEvObj("objective_close", base, "o1", obj{"reason": "finished"})}, code: "bad_request"},
					{name: "objective_close with a reason in another case", as: name, path: name, events: []obj{actEvObj("objective_close", base, "o1", obj{"reason": "Done"})}, code: "bad_request"},
					{name: "objective_close without a reason", as: name, path: name, events: []obj{actEvObj("objective_close", base, "o1", obj{"title": "t"})}, code: "bad_request"},
					{name: "objective_close with a numeric reason", as: name, path: name, events: []obj{actEvObj("objective_close", base, "o1", obj{"reason": 1})}, code: "bad_request"},
					{name: "an empty objectiveId", as: name, path: name, events: []obj{actEvObj("tool_action", base, "", obj{})}, code: "bad_request"},
					{name: "a negative ts", as: name, path: name, events: []obj{actEv("tool_action", -5, obj{})}, code: "bad_request"},
					{name: "one bad event among good ones", as: name, path: name, events: []obj{good, good, actEv("nope", base, obj{}), good}, code: "bad_request"},
					{name: "malformed JSON", as: name, path: name, raw: `{"events":[{"kind":"tool_action","data":{}}`, restOnly: true, code: "bad_request"},
					{name: "not a JSON object", as: name, path: name, raw: `[1,2]`, restOnly: true, code: "bad_request"},
					{name: "a body over 1 MiB", as: name, path: name, events: []obj{actEv("tool_action", base, big)}, code: "payload_too_large"},
					{name: "a body over 1 MiB without a declared length", as: name, path: name, events: []obj{actEv("tool_action", base, big)}, restOnly: true, streamed: true, code: "payload_too_large"},
				}
				toks := map[string]string{name: tok, other: otherTok, "admin": tokenOf(admin)}
				for _, tc := range tests {
					if tc.restOnly && transportOf(d) != "rest" {
						continue // a body gRPC cannot carry
					}
					t.Run(tc.name, func(t *testing.T) {
						c := bearer(toks[tc.as])
						switch {
						case tc.streamed:
							body, err := json.Marshal(obj{"events": tc.events})
							require.NoError(t, err)
							r := p.do(t, http.MethodPost, "/members/"+url.PathEscape(tc.path)+"/activity",
								io.MultiReader(bytes.NewReader(body)), withBearer(toks[tc.as]))
							requireRESTError(t, r, tc.code)
						case tc.raw != "" && transportOf(d) == "rest":
							r := uploadRaw(t, p, toks[tc.as], tc.path, []byte(tc.raw))
							requireRESTError(t, r, tc.code)
						case tc.raw != "":
							var req obj
							require.NoError(t, json.Unmarshal([]byte(tc.raw), &req))
							req["name"] = tc.path
							mustFail(t, d, c, "UploadActivity", req, tc.code)
						default:
							req := obj{"name": tc.path}
							if tc.events != nil {
								req["events"] = tc.events
							}
							mustFail(t, d, c, "UploadActivity", req, tc.code)
						}
						require.Equal(t, mine, listAll(t, p, d, bearer(tok), name), "a refused upload stores nothing")
						require.Equal(t, theirs, listAll(t, p, d, bearer(otherTok), other), "a refused upload stores nothing")
					})
				}
			})

			t.Run("list filters", func(t *testing.T) {
				name := n("filters")
				tok := bearer(createMember(t, d, admin, name))
				base := actNow() - time.Hour.Milliseconds()
				events := []obj{
					actEv("tool_action", base, obj{"n": 0}),
					actEv("llm_exchange", base+1000, obj{"n": 1}),
					actEv("user_prompt", base+2000, obj{"n": 2}),
					actEv("opaque_http", base+3000, obj{"n": 3}),
					actEv("tool_action", base+4000, obj{"n": 4}),
					actEvObj("objective_open", base+5000, "o-"+name, obj{"n": 5}),
					actEvObj("objective_close", base+6000, "o-"+name, obj{"n": 6, "reason": "done"}),
					actEv("llm_exchange", base+6000, obj{"n": 7}),
				}
				mustUpload(t, d, tok, name, events...)
				tests := []struct {
					name string
					q    actQuery
					want []int // data.n, in answer order
				}{
					{name: "everything, newest first, ties by id", q: actQuery{}, want: []int{7, 6, 5, 4, 3, 2, 1, 0}},
					{name: "from is inclusive", q: actQuery{from: actI64(base + 2000)}, want: []int{7, 6, 5, 4, 3, 2}},
					{name: "to is inclusive", q: actQuery{to: actI64(base + 2000)}, want: []int{2, 1, 0}},
					{name: "from and to", q: actQuery{from: actI64(base + 1000), to: actI64(base + 4000)}, want: []int{4, 3, 2, 1}},
					{name: "from equals to", q: actQuery{from: actI64(base + 6000), to: actI64(base + 6000)}, want: []int{7, 6}},
					{name: "an empty range", q: actQuery{from: actI64(base + 500), to: actI64(base + 900)}, want: []int{}},
					{name: "kind tool_action", q: actQuery{kinds: []string{"tool_action"}}, want: []int{4, 0}},
					{name: "kind user_prompt", q: actQuery{kinds: []string{"user_prompt"}}, want: []int{2}},
					{name: "kind repeated", q: actQuery{kinds: []string{"tool_action", "user_prompt"}}, want: []int{4, 2, 0}},
					{name: "kind comma-separated", q: actQuery{kinds: []string{"tool_action,user_prompt"}}, want: []int{4, 2, 0}},
					{name: "kind repeated and comma-separated", q: actQuery{kinds: []string{"llm_exchange,objective_close", "opaque_http"}}, want: []int{7, 6, 3, 1}},
					{name: "kind markers", q: actQuery{kinds: []string{"objective_open,objective_close"}}, want: []int{6, 5}},
					{name: "kind and range", q: actQuery{kinds: []string{"llm_exchange"}, to: actI64(base + 5999)}, want: []int{1}},
					{name: "limit 1", q: actQuery{limit: actIntp(1)}, want: []int{7}},
					{name: "limit 3", q: actQuery{limit: actIntp(3)}, want: []int{7, 6, 5}},
					{name: "limit with kind", q: actQuery{limit: actIntp(1), kinds: []string{"tool_action"}}, want: []int{4}},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						got := []int{}
						for _, row := range mustList(t, p, d, tok, name, tc.q) {
							got = append(got, int(row["data"].(obj)["n"].(float64)))
						}
						require.Equal(t, tc.want, got)
					})
				}
				refused := []struct {
					name string
					q    actQuery
				}{
					{name: "unknown kind", q: actQuery{kinds: []string{"bogus"}}},
					{name: "unknown kind in a comma list", q: actQuery{kinds: []string{"tool_action,bogus"}}},
					{name: "unknown kind repeated", q: actQuery{kinds: []string{"tool_action", "llm_request"}}},
					{name: "limit 0", q: actQuery{limit: actIntp(0)}},
					{name: "negative limit", q: actQuery{limit: actIntp(-1)}},
				}
				if transportOf(d) == "rest" {
					refused = append(refused,
						struct {
							name string
							q    actQuery
						}{name: "from not a number", q: actQuery{rawQuery: "from=yesterday"}},
						struct {
							name string
							q    actQuery
						}{name: "limit not a number", q: actQuery{rawQuery: "limit=ten"}},
					)
				}
				for _, tc := range refused {
					t.Run("refused: "+tc.name, func(t *testing.T) {
						r := listActivity(t, p, d, tok, name, tc.q)
						require.Equal(t, "bad_request", r.code, "body %v", r.body)
					})
				}
			})

			t.Run("limit clamps at 1000", func(t *testing.T) {
				name := n("clamp")
				tok := bearer(createMember(t, d, admin, name))
				base := actNow() - time.Hour.Milliseconds()
				for u := range 3 {
					events := make([]obj, 500)
					for i := range events {
						k := u*500 + i
						events[i] = actEv("tool_action", base+int64(k), obj{"k": k})
					}
					mustUpload(t, d, tok, name, events...)
				}
				for _, tc := range []struct {
					name  string
					limit *int
					want  int
				}{
					{"default", nil, 1000},
					{"above 1000", actIntp(5000), 1000},
					{"exactly 1000", actIntp(1000), 1000},
					{"999", actIntp(999), 999},
				} {
					t.Run(tc.name, func(t *testing.T) {
						rows := mustList(t, p, d, tok, name, actQuery{limit: tc.limit})
						require.Len(t, rows, tc.want)
						require.Equal(t, float64(1499), rows[0]["data"].(obj)["k"], "the newest rows")
						require.Equal(t, float64(1500-tc.want), rows[len(rows)-1]["data"].(obj)["k"])
					})
				}
			})

			t.Run("gates", func(t *testing.T) {
				owner, peer, reader := n("gate-owner"), n("gate-peer"), n("gate-reader")
				ownerTok := bearer(createMember(t, d, admin, owner))
				peerTok := bearer(createMember(t, d, admin, peer))
				readerTok := bearer(createMember(t, d, admin, reader, "activity.read"))
				mustUpload(t, d, ownerTok, owner, actEv("tool_action", 0, obj{"tool": "Bash"}))
				own := listAll(t, p, d, ownerTok, owner)
				require.Len(t, own, 1)
				require.Equal(t, own, listAll(t, p, d, readerTok, owner), "activity.read reads anyone's")
				require.Equal(t, own, listAll(t, p, d, admin, owner), "admin holds activity.read")
				require.Equal(t, "forbidden", listActivity(t, p, d, peerTok, owner, actQuery{}).code, "another member's stream needs activity.read")
				require.Equal(t, "not_found", listActivity(t, p, d, readerTok, n("ghost"), actQuery{}).code, "an unknown member")
				require.Equal(t, "not_found", listActivity(t, p, d, admin, n("ghost"), actQuery{}).code, "an unknown member")
				require.Equal(t, "unauthenticated", listActivity(t, p, d, anonymous, owner, actQuery{}).code)
				mustFail(t, d, anonymous, "UploadActivity", obj{"name": owner, "events": []obj{actEv("tool_action", 0, obj{})}}, "unauthenticated")
				mustFail(t, d, readerTok, "UploadActivity", obj{"name": owner, "events": []obj{actEv("tool_action", 0, obj{})}}, "forbidden")
				require.Equal(t, own, listAll(t, p, d, ownerTok, owner), "refused uploads store nothing")

				// A session cookie is a credential of its member too.
				sess := sessionCred(login(t, d, enroll(t, d, admin, owner)))
				mustUpload(t, d, sess, owner, actEv("user_prompt", 0, obj{"promptLength": 1}))
				require.Len(t, listAll(t, p, d, sess, owner), 2)
			})
		})
	}
}

// --- Live streams -------------------------------------------------------------

// activityPath is the SSE route of name's activity.
func activityPath(name string) string { return "/members/" + url.PathEscape(name) + "/activity/stream" }

// activitySSE opens name's activity stream with tok (plus query, e.g.
// "?lastEventId=3") and requires the ready event first.
func (p *proc) activitySSE(t testing.TB, tok, name, query string, opts ...reqOpt) *sseStream {
	t.Helper()
	s := p.openSSE(t, activityPath(name)+query, sseOpts{}, append([]reqOpt{withBearer(tok)}, opts...)...)
	require.Equal(t, "no-cache", s.resp.Header.Get("Cache-Control"))
	s.requireReady(t, name)
	return s
}

// nextActivity reads the next event and requires an activity frame: id: the
// row id, event: activity, one data: line holding the row.
func (s *sseStream) nextActivity(t testing.TB) obj {
	t.Helper()
	e := s.next(t)
	require.Equal(t, "activity", e.event, "frame %q", e.lines)
	require.Len(t, e.data, 1, "a row is one data: line: %q", e.lines)
	var row obj
	require.NoError(t, json.Unmarshal([]byte(e.data[0]), &row), "data %q", e.data[0])
	requireActivityRow(t, row)
	require.Equal(t, strconv.FormatInt(rowID(t, row), 10), e.id, "the SSE id is the row id")
	return row
}

// activityGRPC is an open Activity.StreamActivity call.
type activityGRPC struct {
	events chan *apiv1.StreamActivityResponse
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

// streamActivityGRPC starts StreamActivity with the credential and returns
// the stream and the first Recv's outcome: the ready event or the error.
func (p *proc) streamActivityGRPC(t testing.TB, c cred, name, lastID string) (*activityGRPC, *apiv1.StreamActivityResponse, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if c.authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", c.authorization)
	}
	call, err := apiv1.NewActivityClient(p.grpcConn(t)).StreamActivity(ctx, &apiv1.StreamActivityRequest{Name: name, LastId: lastID})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	type first struct {
		r   *apiv1.StreamActivityResponse
		err error
	}
	firstC := make(chan first, 1)
	go func() {
		r, err := call.Recv()
		firstC <- first{r, err}
	}()
	var f first
	select {
	case f = <-firstC:
	case <-time.After(streamWait):
		cancel()
		t.Fatalf("StreamActivity: nothing within %s", streamWait)
	}
	if f.err != nil {
		cancel()
		return nil, nil, f.err
	}
	s := &activityGRPC{events: make(chan *apiv1.StreamActivityResponse), cancel: cancel}
	go func() {
		for {
			r, err := call.Recv()
			if err == nil {
				select {
				case s.events <- r:
					continue
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			close(s.events)
			return
		}
	}()
	return s, f.r, nil
}

// mustStreamActivity opens StreamActivity and requires ready naming name.
func (p *proc) mustStreamActivity(t testing.TB, c cred, name, lastID string) *activityGRPC {
	t.Helper()
	s, ready, err := p.streamActivityGRPC(t, c, name, lastID)
	require.NoError(t, err, "StreamActivity %s", name)
	require.NotNil(t, ready.GetReady(), "the first event is ready: %v", ready)
	require.Equal(t, name, ready.GetReady().GetMember())
	return s
}

// nextRow returns the next row within streamWait, rendered as REST renders
// it.
func (s *activityGRPC) nextRow(t testing.TB) obj {
	t.Helper()
	select {
	case r, ok := <-s.events:
		if !ok {
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			t.Fatalf("StreamActivity ended: %v", err)
		}
		row := r.GetRow()
		require.NotNil(t, row, "want a row, got %v", r)
		raw, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(row)
		require.NoError(t, err)
		var o obj
		require.NoError(t, json.Unmarshal(raw, &o))
		return requireActivityRow(t, o)
	case <-time.After(streamWait):
		t.Fatalf("no StreamActivity event within %s", streamWait)
	}
	return nil
}

// endErr waits (bounded) for the stream to end and returns its error.
func (s *activityGRPC) endErr(t testing.TB) error {
	t.Helper()
	deadline := time.After(streamWait)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.err
			}
		case <-deadline:
			t.Fatalf("StreamActivity still open after %s", streamWait)
		}
	}
}

// activityReader reads rows off one live activity stream of either
// transport.
type activityReader interface {
	next(t testing.TB) obj
}

type sseRows struct{ s *sseStream }

func (r sseRows) next(t testing.TB) obj { t.Helper(); return r.s.nextActivity(t) }

type grpcRows struct{ s *activityGRPC }

func (r grpcRows) next(t testing.TB) obj { t.Helper(); return r.s.nextRow(t) }

// openActivity opens name's activity stream as tok over transport ("rest"
// is SSE), resuming after lastID when it is not "", the SSE resume given in
// the header or, with viaQuery, in ?lastEventId=.
func openActivity(t testing.TB, p *proc, transport, tok, name, lastID string, viaQuery bool) activityReader {
	t.Helper()
	if transport == "grpc" {
		return grpcRows{p.mustStreamActivity(t, bearer(tok), name, lastID)}
	}
	switch {
	case lastID == "":
		return sseRows{p.activitySSE(t, tok, name, "")}
	case viaQuery:
		return sseRows{p.activitySSE(t, tok, name, "?lastEventId="+url.QueryEscape(lastID))}
	default:
		return sseRows{p.activitySSE(t, tok, name, "", withHeader("Last-Event-ID", lastID))}
	}
}

// requireRows reads len(want) rows and requires them to be want, in order.
func requireRows(t testing.TB, s activityReader, want ...obj) {
	t.Helper()
	for i, w := range want {
		got := s.next(t)
		require.Equal(t, w, got, "row %d of %d", i+1, len(want))
	}
}

// TestActivityStreams covers the live activity stream: SSE
// GET /members/:name/activity/stream and gRPC StreamActivity, resume,
// gates, and streams ended by a revoked credential or a dropped
// activity.read.
func TestActivityStreams(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}

	// upload uploads one event into name's stream and returns its row.
	upload := func(t *testing.T, tok, name string, data obj) obj {
		t.Helper()
		mustUpload(t, d, bearer(tok), name, actEv("tool_action", 0, data))
		rows := mustList(t, p, d, bearer(tok), name, actQuery{limit: actIntp(1)})
		require.Equal(t, actJSON(t, data), rows[0]["data"])
		return rows[0]
	}

	for _, transport := range []string{"rest", "grpc"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			n := func(s string) string { return s + "-" + transport }

			t.Run("live rows", func(t *testing.T) {
				name := n("live")
				tok := createMember(t, d, admin, name)
				s := openActivity(t, p, transport, tok, name, "", false)
				mustUpload(t, d, bearer(tok), name,
					actEv("tool_action", 0, obj{"tool": "Bash"}),
					actEvObj("llm_exchange", 1763900000123, "o-1", obj{"model": "m", "usage": obj{"inputTokens": 1}}))
				rows := listAll(t, p, d, bearer(tok), name)
				require.Len(t, rows, 2)
				slices.SortFunc(rows, func(a, b obj) int { return int(rowID(t, a) - rowID(t, b)) })
				requireRows(t, s, rows...) // in commit order, whatever their ts
				r3 := upload(t, tok, name, obj{"tool": "Read"})
				requireRows(t, s, r3)
			})

			t.Run("resume replays exactly the later rows, then goes live", func(t *testing.T) {
				name, other := n("resume"), n("resume-other")
				tok := createMember(t, d, admin, name)
				otherTok := createMember(t, d, admin, other)
				a := upload(t, tok, name, obj{"r": "a"})
				b := upload(t, tok, name, obj{"r": "b"})
				upload(t, otherTok, other, obj{"r": "not mine"})
				c := upload(t, tok, name, obj{"r": "c"})
				aID := strconv.FormatInt(rowID(t, a), 10)

				viaHeader := openActivity(t, p, transport, tok, name, aID, false)
				requireRows(t, viaHeader, b, c)
				dRow := upload(t, tok, name, obj{"r": "d"})
				requireRows(t, viaHeader, dRow)

				var viaQuery activityReader
				if transport == "rest" {
					viaQuery = openActivity(t, p, transport, tok, name, aID, true)
					requireRows(t, viaQuery, b, c, dRow)
				}
				fromZero := openActivity(t, p, transport, tok, name, "0", false)
				requireRows(t, fromZero, a, b, c, dRow)
				atNewest := openActivity(t, p, transport, tok, name, strconv.FormatInt(rowID(t, dRow), 10), false)

				// Each goes live with nothing lost and nothing twice: the
				// next row after the replay is the new one.
				e := upload(t, tok, name, obj{"r": "e"})
				f := upload(t, tok, name, obj{"r": "f"})
				for _, s := range []activityReader{viaHeader, viaQuery, fromZero, atNewest} {
					if s != nil {
						requireRows(t, s, e, f)
					}
				}
			})

			t.Run("resume while rows are being committed: none lost, none twice", func(t *testing.T) {
				name, other := n("busy"), n("busy-other")
				tok := createMember(t, d, admin, name)
				otherTok := createMember(t, d, admin, other)
				from := upload(t, tok, name, obj{"i": -1})
				fromID := strconv.FormatInt(rowID(t, from), 10)
				const total = 120
				started := make(chan struct{})
				errs := make(chan error, 1)
				go func() {
					var err error
					for i := range total {
						if i == total/3 {
							close(started)
						}
						// The other member's rows take ids in between.
						if err = restUploadActivity(p, otherTok, other, []obj{actEv("tool_action", 0, obj{"i": i})}); err != nil {
							break
						}
						if err = restUploadActivity(p, tok, name, []obj{actEv("tool_action", 0, obj{"i": i})}); err != nil {
							break
						}
					}
					if err != nil {
						select {
						case <-started:
						default:
							close(started)
						}
					}
					errs <- err
				}()
				<-started
				s := openActivity(t, p, transport, tok, name, fromID, false)
				got := make([]obj, 0, total)
				for len(got) < total {
					got = append(got, s.next(t))
				}
				select {
				case err := <-errs:
					require.NoError(t, err, "uploads")
				case <-time.After(streamWait):
					t.Fatal("uploads did not finish")
				}
				want := mustList(t, p, d, bearer(tok), name, actQuery{})
				slices.SortFunc(want, func(a, b obj) int { return int(rowID(t, a) - rowID(t, b)) })
				require.Equal(t, want[1:], got, "every row after the resume id, in commit order, once each")
				last := upload(t, tok, name, obj{"i": "last"})
				requireRows(t, s, last)
			})

			t.Run("an activity.read holder watches another member", func(t *testing.T) {
				name, watcher := n("watched"), n("watcher")
				tok := createMember(t, d, admin, name)
				wTok := createMember(t, d, admin, watcher, "activity.read")
				first := upload(t, tok, name, obj{"r": 1})
				live := openActivity(t, p, transport, wTok, name, "", false)
				resumed := openActivity(t, p, transport, wTok, name, "0", false)
				requireRows(t, resumed, first)
				second := upload(t, tok, name, obj{"r": 2})
				requireRows(t, live, second)
				requireRows(t, resumed, second)
			})

			t.Run("refused", func(t *testing.T) {
				name, peer, reader := n("closed"), n("closed-peer"), n("closed-reader")
				createMember(t, d, admin, name)
				peerTok := createMember(t, d, admin, peer)
				readerTok := createMember(t, d, admin, reader, "activity.read")
				tests := []struct {
					name   string
					tok    string
					member string
					lastID string
					code   string
				}{
					{name: "without activity.read", tok: peerTok, member: name, code: "forbidden"},
					{name: "without activity.read, resuming", tok: peerTok, member: name, lastID: "0", code: "forbidden"},
					{name: "an unknown member", tok: readerTok, member: n("ghost"), code: "not_found"},
					{name: "no credential", member: name, code: "unauthenticated"},
					{name: "a malformed resume id", tok: readerTok, member: name, lastID: "x1", code: "bad_request"},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						if transport == "grpc" {
							c := anonymous
							if tc.tok != "" {
								c = bearer(tc.tok)
							}
							_, _, err := p.streamActivityGRPC(t, c, tc.member, tc.lastID)
							requireGRPCError(t, err, tc.code)
							return
						}
						var opts []reqOpt
						if tc.tok != "" {
							opts = append(opts, withBearer(tc.tok))
						}
						if tc.lastID != "" {
							opts = append(opts, withHeader("Last-Event-ID", tc.lastID))
						}
						p.sseFail(t, activityPath(tc.member), tc.code, opts...)
					})
				}
			})
		})
	}

	t.Run("a revoked token ends the streams opened with it", func(t *testing.T) {
		t.Parallel()
		name, watcher := "revoked", "revoked-watcher"
		tok := createMember(t, d, admin, name)
		wTok := createMember(t, d, admin, watcher, "activity.read")
		ownSSE := p.activitySSE(t, tok, name, "")
		ownGRPC := p.mustStreamActivity(t, bearer(tok), name, "")
		wSSE := p.activitySSE(t, wTok, name, "")
		wGRPC := p.mustStreamActivity(t, bearer(wTok), name, "")

		// Rotation revokes the token the member's own streams hold.
		rot := mustCall(t, d, admin, "RotateToken", obj{"name": name})
		ownSSE.requireEnds(t)
		require.Error(t, ownGRPC.endErr(t))
		// The watcher's streams are untouched and see the new token's rows.
		row := upload(t, rot["token"].(string), name, obj{"after": "rotation"})
		require.Equal(t, row, wSSE.nextActivity(t))
		require.Equal(t, row, wGRPC.nextRow(t))

		// Revoking the watcher's token ends its streams on the other member.
		mustCall(t, d, admin, "RevokeToken", obj{"name": watcher, "id": actTokenID(t, d, admin, watcher)})
		wSSE.requireEnds(t)
		require.Error(t, wGRPC.endErr(t))
		p.sseFail(t, activityPath(name), "unauthenticated", withBearer(wTok))
	})

	t.Run("dropping activity.read ends a watcher's streams", func(t *testing.T) {
		t.Parallel()
		name, watcher := "demoted-watched", "demoted"
		tok := createMember(t, d, admin, name)
		wTok := createMember(t, d, admin, watcher, "activity.read", "objectives.create")
		own := p.activitySSE(t, tok, name, "")
		wSSE := p.activitySSE(t, wTok, name, "")
		wGRPC := p.mustStreamActivity(t, bearer(wTok), name, "")
		first := upload(t, tok, name, obj{"n": 1})
		require.Equal(t, first, wSSE.nextActivity(t))
		require.Equal(t, first, wGRPC.nextRow(t))
		require.Equal(t, first, own.nextActivity(t))

		// An update that keeps activity.read keeps the streams.
		mustCall(t, d, admin, "UpdateMember", obj{"name": watcher, "permissions": []string{"activity.read"}})
		kept := upload(t, tok, name, obj{"n": "kept"})
		require.Equal(t, kept, wSSE.nextActivity(t))
		require.Equal(t, kept, wGRPC.nextRow(t))
		require.Equal(t, kept, own.nextActivity(t))

		mustCall(t, d, admin, "UpdateMember", obj{"name": watcher, "permissions": []string{"objectives.create"}})
		wSSE.requireEnds(t)
		require.Error(t, wGRPC.endErr(t))
		p.sseFail(t, activityPath(name), "forbidden", withBearer(wTok))
		_, _, err := p.streamActivityGRPC(t, bearer(wTok), name, "")
		requireGRPCError(t, err, "forbidden")
		// The watched member's own stream goes on.
		second := upload(t, tok, name, obj{"n": 2})
		require.Equal(t, second, own.nextActivity(t))
	})
}

// restUploadActivity uploads over REST without a testing.TB, for load
// goroutines.
func restUploadActivity(p *proc, tok, name string, events []obj) error {
	body, err := json.Marshal(obj{"events": events})
	if err != nil {
		return err
	}
	_, err = restPost(p, tok, "/members/"+url.PathEscape(name)+"/activity", body)
	return err
}

// restPost posts body as JSON and returns the answer's JSON object; any
// status but 200 is an error.
func restPost(p *proc, tok, path string, body []byte) (obj, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, raw)
	}
	var out obj
	return out, json.Unmarshal(raw, &out)
}

// --- Durability and retention ----------------------------------------------

// TestActivityDurableAcrossKill9: activity and inference uploads answered
// 2xx are on disk: kill -9 and a restart on the same files keep them, and
// row ids go on increasing.
func TestActivityDurableAcrossKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	admin := bearer(p.adminToken(t))
	rest := restDriver{p}
	tok := createMember(t, rest, admin, "durable")
	c := bearer(tok)
	base := actNow() - time.Minute.Milliseconds()

	mustUpload(t, rest, c, "durable", actEv("tool_action", base, obj{"via": "rest"}), actEv("user_prompt", base+1, obj{"promptLength": 4}))
	mustUpload(t, grpcDriver{p.grpcConn(t)}, c, "durable", actEvObj("llm_exchange", base+2, "o-durable", obj{"via": "grpc", "model": "m"}))
	rec := mustUploadGenAI(t, p, rest, c, "durable", genaiBody(t, base+3, anthropicFixture))
	recGRPC := mustUploadGenAI(t, p, grpcDriver{p.grpcConn(t)}, c, "durable", genaiBody(t, base+4, chatFixture))
	rows := listAll(t, p, rest, c, "durable")
	require.Len(t, rows, 3)

	p.kill(t)
	p2 := p.restart(t)
	rest2 := restDriver{p2}
	require.Equal(t, rows, listAll(t, p2, rest2, c, "durable"), "every acknowledged row survives kill -9")
	require.Equal(t, rec, mustCall(t, rest2, c, "GetGenAi", obj{"name": "durable", "id": rec["id"]})["inference"])
	require.Equal(t, recGRPC, mustCall(t, rest2, c, "GetGenAi", obj{"name": "durable", "id": recGRPC["id"]})["inference"])
	require.Len(t, listOf(t, mustCall(t, rest2, c, "ListGenAi", obj{"name": "durable"}), "inferences"), 2)

	mustUpload(t, rest2, c, "durable", actEv("tool_action", 0, obj{"after": "restart"}))
	after := mustList(t, p2, rest2, c, "durable", actQuery{limit: actIntp(1)})
	require.Greater(t, rowID(t, after[0]), slices.Max(rowIDs(t, rows)), "ids never repeat after a restart")

	t.Run("under load", func(t *testing.T) {
		activityKill9UnderLoad(t, p2, admin)
	})
}

// activityKill9UnderLoad uploads activity (REST and gRPC) and inference
// records from several goroutines, kills the broker mid-load, and requires
// every upload it acknowledged to be there after a restart.
func activityKill9UnderLoad(t *testing.T, p *proc, admin cred) {
	rest := restDriver{p}
	const workers = 4
	toks := make([]string, workers)
	for w := range workers {
		toks[w] = createMember(t, rest, admin, fmt.Sprintf("load-%d", w))
	}
	// The load's own gRPC connection: p.kill closes the harness's first.
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ac := apiv1.NewActivityClient(conn)
	base := actNow() - time.Hour.Milliseconds()

	var mu sync.Mutex
	acked := map[string]bool{}    // "w/k" of every acknowledged event
	ackedRecs := map[string]int{} // record id → worker
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("load-%d", w)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				// Two events per upload, each with its own ts; every third
				// upload is an inference record instead.
				k0, k1 := 2*n, 2*n+1
				var err error
				var recID string
				switch {
				case n%3 == 2 && w%2 == 0:
					var out obj
					out, err = restPost(p, toks[w], "/members/"+name+"/genai",
						genaiRaw(base+int64(k0), chatReqMin, actChatResp(fmt.Sprintf("chatcmpl-%d-%d", w, n), "gpt-4.1", 1, 1)))
					if err == nil {
						inf, _ := out["inference"].(obj)
						recID, _ = inf["id"].(string)
					}
				case n%3 == 2:
					var r *apiv1.UploadGenAiResponse
					ctx, cancel := loadCtx(toks[w])
					r, err = ac.UploadGenAi(ctx, &apiv1.UploadGenAiRequest{Name: name,
						Body: genaiRaw(base+int64(k0), chatReqMin, actChatResp(fmt.Sprintf("chatcmpl-%d-%d", w, n), "gpt-4.1", 1, 1))})
					cancel()
					if err == nil {
						recID = r.GetInference().GetId()
					}
				case w%2 == 0:
					err = restUploadActivity(p, toks[w], name, []obj{
						actEv("tool_action", base+int64(k0), obj{"k": k0}), actEv("tool_action", base+int64(k1), obj{"k": k1})})
				default:
					evs := make([]*apiv1.ActivityEventInput, 2)
					for i, k := range []int{k0, k1} {
						data, serr := structpb.NewStruct(map[string]any{"k": k})
						if serr != nil {
							return
						}
						ts := float64(base + int64(k))
						evs[i] = &apiv1.ActivityEventInput{Kind: "tool_action", Ts: &ts, Data: data}
					}
					ctx, cancel := loadCtx(toks[w])
					_, err = ac.UploadActivity(ctx, &apiv1.UploadActivityRequest{Name: name, Events: evs})
					cancel()
				}
				if err != nil {
					return
				}
				mu.Lock()
				if n%3 == 2 {
					ackedRecs[recID] = w
				} else {
					acked[fmt.Sprintf("%d/%d", w, k0)] = true
					acked[fmt.Sprintf("%d/%d", w, k1)] = true
				}
				mu.Unlock()
			}
		})
	}
	loadStart := time.Now()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200 && len(ackedRecs) >= 20 && time.Since(loadStart) >= 500*time.Millisecond
	}, callTimeout, 10*time.Millisecond, "the load gets under way")
	p.kill(t)
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(callTimeout + time.Second):
		t.Fatal("uploaders did not stop after the kill")
	}
	t.Logf("%d events and %d inference records acknowledged before kill -9", len(acked), len(ackedRecs))

	p2 := p.restart(t)
	d := restDriver{p2}
	found := map[string]bool{}
	foundRecs := map[string]bool{}
	for w := range workers {
		name := fmt.Sprintf("load-%d", w)
		c := bearer(toks[w])
		// Page back by ts: every event has a ts of its own.
		var to *int64
		for {
			rows := mustList(t, p2, d, c, name, actQuery{to: to})
			for _, r := range rows {
				found[fmt.Sprintf("%d/%v", w, r["data"].(obj)["k"])] = true
			}
			if len(rows) < 1000 {
				break
			}
			to = actI64(actWhole(t, rows[len(rows)-1]["ts"], "ts") - 1)
		}
		from := 0.0
		for {
			recs := listGenAI(t, d, c, name, obj{"from": from})
			for _, r := range recs {
				foundRecs[r["id"].(string)] = true
			}
			if len(recs) < 1000 {
				break
			}
			from = recs[len(recs)-1]["ts"].(float64) + 1
		}
	}
	for k := range acked {
		require.True(t, found[k], "acknowledged event %s is lost", k)
	}
	for id, w := range ackedRecs {
		require.True(t, foundRecs[id], "acknowledged inference record %s of load-%d is lost", id, w)
	}
}

// loadCtx is a bounded context with the bearer token, for load goroutines.
func loadCtx(tok string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), cancel
}

var pruneLineRE = regexp.MustCompile(`^deleted ([0-9]+) activity rows, ([0-9]+) inference records, ([0-9]+) raw uploads, ([0-9]+) correlation states\n$`)

// TestActivityPrune: `svc activity prune --older-than 1d --yes` deletes
// the activity rows and inference records older than a day (by event
// time), prints the counts, and keeps the newer ones; ids are not reused.
func TestActivityPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "svc.db")
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: dbPath})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	tokA := bearer(createMember(t, d, admin, "pruned-a"))
	tokB := bearer(createMember(t, d, admin, "pruned-b"))
	now := actNow()
	day := 24 * time.Hour.Milliseconds()

	// New rows first, old ones last: the highest ids are pruned.
	mustUpload(t, d, tokA, "pruned-a",
		actEv("tool_action", now-time.Hour.Milliseconds(), obj{"keep": "a1"}),
		actEv("tool_action", now-day+time.Hour.Milliseconds(), obj{"keep": "a2"}))
	mustUpload(t, d, tokB, "pruned-b", actEv("user_prompt", now-2*time.Hour.Milliseconds(), obj{"keep": "b1"}))
	keepRec := mustUploadGenAI(t, p, d, tokA, "pruned-a", genaiBody(t, now-time.Hour.Milliseconds(), responsesFixture))
	mustUpload(t, d, tokA, "pruned-a",
		actEv("tool_action", now-3*day, obj{"drop": "a3"}),
		actEv("llm_exchange", now-day-time.Hour.Milliseconds(), obj{"drop": "a4"}))
	mustUpload(t, d, tokB, "pruned-b", actEv("opaque_http", now-10*day, obj{"drop": "b2"}))
	mustUploadGenAI(t, p, d, tokA, "pruned-a", genaiBody(t, now-2*day, anthropicFixture))
	mustUploadGenAI(t, p, d, tokB, "pruned-b", genaiBody(t, now-5*day, chatFixture))
	maxID := slices.Max(append(rowIDs(t, listAll(t, p, d, tokA, "pruned-a")), rowIDs(t, listAll(t, p, d, tokB, "pruned-b"))...))
	p.mustStop(t)

	code, stdout, stderr := runSvc(t, []string{"activity", "prune", "--older-than", "1d", "--yes", "--db-path", dbPath}, nil, nil)
	require.Zero(t, code, "stdout %q stderr %q", stdout, stderr)
	m := pruneLineRE.FindStringSubmatch(stdout)
	require.NotNil(t, m, "the counts line: %q", stdout)
	require.Equal(t, "3", m[1], "old activity rows deleted: %q", stdout)
	require.Equal(t, "2", m[2], "old inference records deleted: %q", stdout)
	require.Equal(t, "2", m[3], "their raw uploads, referenced by nothing else, deleted: %q", stdout)

	p2 := p.restart(t)
	d2 := restDriver{p2}
	keptData := func(c cred, name string) []string {
		var out []string
		for _, r := range listAll(t, p2, d2, c, name) {
			out = append(out, fmt.Sprint(r["data"].(obj)["keep"]))
		}
		return out
	}
	require.Equal(t, []string{"a1", "a2"}, keptData(tokA, "pruned-a"))
	require.Equal(t, []string{"b1"}, keptData(tokB, "pruned-b"))
	recs := listOf(t, mustCall(t, d2, tokA, "ListGenAi", obj{"name": "pruned-a"}), "inferences")
	require.Equal(t, []obj{keepRec}, recs, "the newer inference record stays")
	require.Empty(t, listOf(t, mustCall(t, d2, tokB, "ListGenAi", obj{"name": "pruned-b"}), "inferences"))

	mustUpload(t, d2, tokA, "pruned-a", actEv("tool_action", 0, obj{"keep": "a5"}))
	newest := mustList(t, p2, d2, tokA, "pruned-a", actQuery{limit: actIntp(1)})
	require.Greater(t, rowID(t, newest[0]), maxID, "ids are never reused, also after a prune")

	// A second prune finds nothing more.
	p2.mustStop(t)
	code, stdout, stderr = runSvc(t, []string{"activity", "prune", "--older-than", "1d", "--yes", "--db-path", dbPath}, nil, nil)
	require.Zero(t, code, "stderr %q", stderr)
	require.Equal(t, "deleted 0 activity rows, 0 inference records, 0 raw uploads, 0 correlation states\n", stdout)
}
