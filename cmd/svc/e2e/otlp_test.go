package e2e

// End-to-end tests of OTLP log ingest (docs/TELEMETRY.md "OTLP logs",
// correlation included): exports built
// with the OTLP protobuf types are sent to a broker child as OTLP/HTTP JSON
// and protobuf, with and without gzip, and over the gRPC LogsService on the
// same address; the tests read what the broker made of them from
// GET /members/:name/activity.
//
// Every export is answered only once its rows are committed, so rows are
// read right after the answer, without waiting; only the flush timer is
// awaited.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	otLogsPath    = "/otlp/v1/logs"
	otMetricsPath = "/otlp/v1/metrics"
	otCTJSON      = "application/json"
	otCTProtobuf  = "application/x-protobuf"
	// otMaxBody is the documented cap of an OTLP/HTTP body, as sent and
	// once decompressed.
	otMaxBody = 16 << 20
	// otMaxPending is the documented bound of one member's waiting
	// records.
	otMaxPending = 256

	otAgentClaude = "claude_code"
	otAgentCodex  = "codex"

	// otSecret marks content that must never be stored: thinking text
	// and the private Codex attributes.
	otSecret    = "SVC-OTLP-SECRET"
	otEmail     = "alice-private@example.com"
	otAccountID = "acct-private-4711"
)

// --- Records --------------------------------------------------------------

// otRec is one agent log record before it is named: its agent, its bare
// event name, its time and its attributes (without event.name).
type otRec struct {
	agent string
	name  string
	at    time.Time
	attrs []*commonpb.KeyValue
}

func otStr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func otInt(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func otFloat(k string, v float64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
}

func otBool(k string, v bool) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}}
}

// otJSON encodes v compactly without HTML escaping, as a body attribute
// holds it.
func otJSON(t testing.TB, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return strings.TrimSuffix(buf.String(), "\n")
}

// otClaudeAttrs are the attributes Claude Code puts on every record.
func otClaudeAttrs(session string, seq int64) []*commonpb.KeyValue {
	return []*commonpb.KeyValue{
		otStr("user.id", "1911080d166e5e9d"), otStr("session.id", session),
		otBool("anthropic.custom_base_url", true), otStr("terminal.type", "dumb"), otInt("event.sequence", seq),
		otStr("user.email", otEmail), otStr("user.account_id", otAccountID),
	}
}

// otReqBody is an api_request_body record of model carrying body (a JSON
// request, or any string for a truncated one).
func otReqBody(at time.Time, session string, seq int64, model, body string) otRec {
	return otRec{agent: otAgentClaude, name: "api_request_body", at: at, attrs: append(otClaudeAttrs(session, seq),
		otStr("body", body), otInt("body_length", int64(len(body))), otStr("model", model), otStr("query_source", "sdk"))}
}

// otUsage is the token counts, cost and duration of one accounting record.
type otUsage struct {
	in, out, cacheRead, cacheCreation int64
	cost                              float64
	durationMs                        int64
}

// otAcct is an api_request (accounting) record.
func otAcct(at time.Time, session string, seq int64, model, requestID string, u otUsage) otRec {
	return otRec{agent: otAgentClaude, name: "api_request", at: at, attrs: append(otClaudeAttrs(session, seq),
		otStr("model", model), otInt("input_tokens", u.in), otInt("output_tokens", u.out),
		otInt("cache_read_tokens", u.cacheRead), otInt("cache_creation_tokens", u.cacheCreation),
		otFloat("cost_usd", u.cost), otInt("duration_ms", u.durationMs), otInt("ttft_ms", 15),
		otStr("request_id", requestID), otStr("speed", "normal"))}
}

// otRespBody is an api_response_body record of requestID carrying body.
func otRespBody(at time.Time, session string, seq int64, model, requestID, body string) otRec {
	return otRec{agent: otAgentClaude, name: "api_response_body", at: at, attrs: append(otClaudeAttrs(session, seq),
		otStr("body", body), otInt("body_length", int64(len(body))), otStr("model", model), otStr("request_id", requestID))}
}

// otOtherRec is a record of a name svc does not use.
func otOtherRec(at time.Time, session string, seq int64, name string) otRec {
	return otRec{agent: otAgentClaude, name: name, at: at, attrs: append(otClaudeAttrs(session, seq), otStr("plugin.name", "x"))}
}

// otAnthropicRequest is an Anthropic Messages request body.
func otAnthropicRequest(t testing.TB, model string, system, messages any, tools ...string) string {
	t.Helper()
	req := obj{"model": model, "max_tokens": 1024, "stream": true, "messages": messages,
		"thinking": obj{"type": "enabled", "budget_tokens": 1024}, "metadata": obj{"user_id": "u"}}
	if system != nil {
		req["system"] = system
	}
	if tools != nil {
		list := []obj{}
		for _, name := range tools {
			list = append(list, obj{"name": name, "description": name + " tool", "input_schema": obj{"type": "object"}})
		}
		req["tools"] = list
	}
	return otJSON(t, req)
}

// otAnthropicResponse is an assembled Anthropic Messages response body.
func otAnthropicResponse(t testing.TB, model, id string, content any, stop string, u otUsage) string {
	t.Helper()
	return otJSON(t, obj{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": obj{"input_tokens": u.in, "output_tokens": u.out,
			"cache_read_input_tokens": u.cacheRead, "cache_creation_input_tokens": u.cacheCreation}})
}

// otUsageData is the llm_exchange usage object of u.
func otUsageData(u otUsage) obj {
	return obj{"inputTokens": u.in, "outputTokens": u.out, "cacheReadTokens": u.cacheRead, "cacheCreationTokens": u.cacheCreation}
}

// --- Naming ---------------------------------------------------------------

// otNaming is one way a producer names its records (docs/TELEMETRY.md,
// OTLP logs): the
// event.name attribute prefixed or bare, or only the body string.
type otNaming struct {
	name string
	// eventName is the event.name attribute of a record, "" for none.
	eventName func(agent, name string) string
	// body is the log body string, "" for none.
	body func(agent, name string) string
}

var otNamings = []otNaming{
	{name: "prefixed",
		eventName: func(agent, name string) string { return agent + "." + name },
		body:      func(string, string) string { return "" }},
	{name: "bare",
		eventName: func(_, name string) string { return name },
		body:      func(string, string) string { return "" }},
	{name: "body-only",
		eventName: func(string, string) string { return "" },
		body:      func(agent, name string) string { return agent + "." + name }},
	// As Claude Code writes them: bare event.name, prefixed body.
	{name: "claude-code",
		eventName: func(_, name string) string { return name },
		body:      func(agent, name string) string { return agent + "." + name }},
}

// otResource is the resource of an agent's records: Codex's service name
// is what names a bare Codex record.
func otResource(agent string) *resourcepb.Resource {
	switch agent {
	case otAgentCodex:
		return &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			otStr("service.name", "codex_cli_rs"), otStr("service.version", "0.99.0"),
			otStr("user.email", otEmail), otStr("user.account_id", otAccountID)}}
	default:
		return &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			otStr("service.name", "claude-code"), otStr("service.version", "2.1.328"), otStr("os.type", "linux")}}
	}
}

// otLogsReq builds one export of recs named by n: one ResourceLogs per agent,
// in the order the agents first appear, records in their order.
func otLogsReq(n otNaming, recs ...otRec) *collogspb.ExportLogsServiceRequest {
	req := &collogspb.ExportLogsServiceRequest{}
	byAgent := map[string]*logspb.ScopeLogs{}
	for _, r := range recs {
		sl := byAgent[r.agent]
		if sl == nil {
			scope := "com.anthropic.claude_code.events"
			if r.agent == otAgentCodex {
				scope = "codex_otel"
			}
			sl = &logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Name: scope, Version: "1"}}
			byAgent[r.agent] = sl
			req.ResourceLogs = append(req.ResourceLogs, &logspb.ResourceLogs{Resource: otResource(r.agent), ScopeLogs: []*logspb.ScopeLogs{sl}})
		}
		ts := uint64(r.at.UnixNano())
		lr := &logspb.LogRecord{TimeUnixNano: ts, ObservedTimeUnixNano: ts, SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO}
		if en := n.eventName(r.agent, r.name); en != "" {
			lr.Attributes = append(lr.Attributes, otStr("event.name", en))
		}
		lr.Attributes = append(lr.Attributes, r.attrs...)
		if b := n.body(r.agent, r.name); b != "" {
			lr.Body = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: b}}
		}
		sl.LogRecords = append(sl.LogRecords, lr)
	}
	return req
}

// --- Transports -----------------------------------------------------------

// otTransport sends one export of a member and returns how many records
// the broker reported it could not use, after checking the answer's shape.
type otTransport struct {
	name   string
	export func(t testing.TB, p *proc, tok string, req *collogspb.ExportLogsServiceRequest) int64
}

var otTransports = []otTransport{
	{name: "json", export: otHTTPExport(otCTJSON, false)},
	{name: "json-gzip", export: otHTTPExport(otCTJSON, true)},
	{name: "protobuf", export: otHTTPExport(otCTProtobuf, false)},
	{name: "protobuf-gzip", export: otHTTPExport(otCTProtobuf, true)},
	{name: "grpc", export: otGRPCExport},
}

func otGzip(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// otEncode encodes req as ct: OTLP/JSON (protojson; the requests here
// carry no trace or span ids, whose hex encoding protojson would not write)
// or binary protobuf.
func otEncode(t testing.TB, ct string, req proto.Message) []byte {
	t.Helper()
	var b []byte
	var err error
	if ct == otCTJSON {
		b, err = protojson.Marshal(req)
	} else {
		b, err = proto.Marshal(req)
	}
	require.NoError(t, err)
	return b
}

// otPost posts raw bytes to an OTLP route with the given content type
// and encoding ("" sends no Content-Encoding).
func otPost(t testing.TB, p *proc, path, ct, encoding string, body any, opts ...reqOpt) httpResp {
	t.Helper()
	// setHeader (fs_test.go) removes the header for "".
	all := []reqOpt{setHeader("Content-Type", ct)}
	if encoding != "" {
		all = append(all, setHeader("Content-Encoding", encoding))
	}
	return p.do(t, http.MethodPost, path, body, append(all, opts...)...)
}

func otHTTPExport(ct string, gz bool) func(t testing.TB, p *proc, tok string, req *collogspb.ExportLogsServiceRequest) int64 {
	return func(t testing.TB, p *proc, tok string, req *collogspb.ExportLogsServiceRequest) int64 {
		t.Helper()
		b, enc := otEncode(t, ct, req), ""
		if gz {
			b, enc = otGzip(t, b), "gzip"
		}
		r := otPost(t, p, otLogsPath, ct, enc, b, withBearer(tok))
		return otRequireExportOK(t, ct, r)
	}
}

// otRequireExportOK checks a 2xx answer to a logs export in the request's
// encoding and returns its rejected count: a JSON body is {} or
// {"partialSuccess": {"rejectedLogRecords": N, ...}} with N a JSON number; a
// protobuf body is an ExportLogsServiceResponse.
func otRequireExportOK(t testing.TB, ct string, r httpResp) int64 {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "export answer: %s", r.raw)
	mt := strings.TrimSpace(strings.Split(r.header.Get("Content-Type"), ";")[0])
	require.Equal(t, ct, mt, "the answer is in the request's encoding")
	if ct == otCTProtobuf {
		var resp collogspb.ExportLogsServiceResponse
		require.NoError(t, proto.Unmarshal(r.raw, &resp), "answer %q", r.raw)
		ps := resp.GetPartialSuccess()
		if ps == nil {
			return 0
		}
		require.Positive(t, ps.GetRejectedLogRecords(), "a partialSuccess is only sent for rejected records: %v", ps)
		require.NotEmpty(t, ps.GetErrorMessage())
		return ps.GetRejectedLogRecords()
	}
	dec := json.NewDecoder(bytes.NewReader(r.raw))
	dec.UseNumber()
	var body map[string]any
	require.NoError(t, dec.Decode(&body), "answer %q", r.raw)
	ps, ok := body["partialSuccess"]
	if !ok {
		require.Empty(t, body, "a full success is {}: %s", r.raw)
		return 0
	}
	require.Len(t, body, 1, "answer %s", r.raw)
	psObj, ok := ps.(map[string]any)
	require.True(t, ok, "partialSuccess is an object: %s", r.raw)
	n, ok := psObj["rejectedLogRecords"].(json.Number)
	require.True(t, ok, "rejectedLogRecords is a JSON number, never a string: %s", r.raw)
	count, err := n.Int64()
	require.NoError(t, err, "rejectedLogRecords is an integer: %s", r.raw)
	require.Positive(t, count, "a partialSuccess is only sent for rejected records: %s", r.raw)
	return count
}

// otGRPCCtx is a bounded context carrying the bearer token as gRPC metadata.
func otGRPCCtx(t testing.TB, kv ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func otGRPCExport(t testing.TB, p *proc, tok string, req *collogspb.ExportLogsServiceRequest) int64 {
	t.Helper()
	resp, err := collogspb.NewLogsServiceClient(p.grpcConn(t)).Export(otGRPCCtx(t, "authorization", "Bearer "+tok), req)
	require.NoError(t, err)
	ps := resp.GetPartialSuccess()
	if ps == nil {
		return 0
	}
	require.Positive(t, ps.GetRejectedLogRecords(), "a partialSuccess is only sent for rejected records: %v", ps)
	return ps.GetRejectedLogRecords()
}

// --- Activity -------------------------------------------------------------

// otRows lists member's rows (newest first) as the member itself,
// of the given kinds (all when none), and returns them with the raw body.
func otRows(t testing.TB, p *proc, tok, member string, kinds ...string) ([]obj, []byte) {
	t.Helper()
	q := url.Values{}
	for _, k := range kinds {
		q.Add("kind", k)
	}
	path := "/members/" + member + "/activity"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	r := p.do(t, http.MethodGet, path, nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "list activity: %s", r.raw)
	require.NotNil(t, r.body, "list activity: %s", r.raw)
	rows := listOf(t, r.body, "activity")
	for i, row := range rows {
		require.Equal(t, member, row["member"], "row %v", row)
		require.IsType(t, float64(0), row["id"], "row ids are numbers")
		require.IsType(t, float64(0), row["ts"], "times are numbers")
		require.NotContains(t, row, "objectiveId", "OTLP rows carry no objective")
		if i > 0 {
			require.Less(t, row["id"].(float64), rows[i-1]["id"].(float64), "newest first")
		}
	}
	return rows, r.raw
}

// otExchanges lists member's llm_exchange rows, oldest first.
func otExchanges(t testing.TB, p *proc, tok, member string) []obj {
	t.Helper()
	rows, _ := otRows(t, p, tok, member, "llm_exchange")
	slices.Reverse(rows)
	return rows
}

// otData returns row's data object.
func otData(t testing.TB, row obj) obj {
	t.Helper()
	d, ok := row["data"].(obj)
	require.True(t, ok, "row data is an object: %v", row)
	return d
}

// otRequireData asserts row's data equals want as JSON.
func otRequireData(t testing.TB, want obj, row obj, msgAndArgs ...any) {
	t.Helper()
	require.JSONEq(t, otJSON(t, want), otJSON(t, otData(t, row)), msgAndArgs...)
}

// otRequireDataHas asserts row's data holds each key of want with its value
// (as JSON).
func otRequireDataHas(t testing.TB, want obj, row obj) {
	t.Helper()
	d := otData(t, row)
	for k, v := range want {
		require.Contains(t, d, k, "row %v", row)
		require.JSONEq(t, otJSON(t, v), otJSON(t, d[k]), "data.%s of %v", k, row)
	}
}

// otExchangeBy returns the llm_exchange of requestID, requiring one.
func otExchangeBy(t testing.TB, rows []obj, requestID string) obj {
	t.Helper()
	var found []obj
	for _, r := range rows {
		if otData(t, r)["requestId"] == requestID {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "one llm_exchange of %s in %v", requestID, rows)
	return found[0]
}

// otRequireNoSecrets asserts nothing stored for member carries thinking
// text or the private attributes.
func otRequireNoSecrets(t testing.TB, p *proc, tok, member string) {
	t.Helper()
	_, raw := otRows(t, p, tok, member)
	for _, s := range []string{otSecret, otEmail, otAccountID, "user.email", "user.account_id", `"thinking"`, `"redacted_thinking"`} {
		require.NotContains(t, string(raw), s, "stored activity of %s", member)
	}
}

// otCountKinds counts rows by kind.
func otCountKinds(t testing.TB, rows []obj) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range rows {
		out[r["kind"].(string)]++
	}
	return out
}

// otTick is how often otAwait polls.
const otTick = 50 * time.Millisecond

// otAwait polls cond every otTick until it holds, failing the test after
// wait. Unlike require.Eventually it calls cond on the test's goroutine,
// so cond may use the require helpers, and never outlives the test.
func otAwait(t testing.TB, wait time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", wait, msg)
		}
		time.Sleep(otTick)
	}
}

// otMS is t in epoch milliseconds, as rows carry times.
func otMS(t time.Time) float64 { return float64(t.UnixMilli()) }

// --- Ingest ----------------------------------------------------------------

// TestOTLPLogsIngest runs the correlation scenario over every transport
// and every naming of the records, each against its own member of one
// broker, then replays real Claude Code exports over every transport.
func TestOTLPLogsIngest(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	for _, tr := range otTransports {
		for _, n := range otNamings {
			member := "ing-" + tr.name + "-" + n.name
			tok := createMember(t, restDriver{p}, admin, member)
			t.Run(tr.name+"/"+n.name, func(t *testing.T) {
				t.Parallel()
				otScenario(t, p, tok, member, tr, n)
			})
		}
	}
	for _, tr := range otTransports {
		member := "replay-" + tr.name
		tok := createMember(t, restDriver{p}, admin, member)
		t.Run("replay/"+tr.name, func(t *testing.T) {
			t.Parallel()
			otReplay(t, p, tok, member, tr)
		})
	}
	t.Run("hand-written OTLP/JSON", func(t *testing.T) {
		// As OTLP/JSON exporters write it: hex trace and span ids, 64-bit
		// integers as strings or numbers, enums as numbers.
		t.Parallel()
		const m = "ing-handwritten"
		tok := createMember(t, restDriver{p}, admin, m)
		at := time.Now().Truncate(time.Millisecond)
		doc := fmt.Sprintf(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"claude-code"}}]},
			"scopeLogs":[{"scope":{"name":"com.anthropic.claude_code.events"},"logRecords":[{
			"timeUnixNano":"%d","observedTimeUnixNano":%d,"severityNumber":9,"flags":1,
			"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
			"body":{"stringValue":"claude_code.user_prompt"},
			"attributes":[{"key":"event.name","value":{"stringValue":"user_prompt"}},
				{"key":"event.sequence","value":{"intValue":4}},{"key":"prompt_length","value":{"intValue":"5"}},
				{"key":"prompt","value":{"stringValue":"hello"}}]}]}]}]}`, at.UnixNano(), at.UnixNano())
		require.Zero(t, otRequireExportOK(t, otCTJSON, otPost(t, p, otLogsPath, otCTJSON, "", []byte(doc), withBearer(tok))))
		rows, _ := otRows(t, p, tok, m)
		require.Len(t, rows, 1)
		require.Equal(t, "user_prompt", rows[0]["kind"])
		require.Equal(t, otMS(at), rows[0]["ts"])
		otRequireData(t, obj{"prompt": "hello", "promptLength": 5}, rows[0])
	})
	t.Run("content type parameters", func(t *testing.T) {
		t.Parallel()
		tok := createMember(t, restDriver{p}, admin, "ing-charset")
		at := time.Now().Truncate(time.Millisecond)
		req := otLogsReq(otNamings[0], otRec{agent: otAgentClaude, name: "user_prompt", at: at, attrs: []*commonpb.KeyValue{otStr("prompt", "hi"), otStr("prompt_length", "2")}})
		r := otPost(t, p, otLogsPath, otCTJSON+"; charset=utf-8", "", otEncode(t, otCTJSON, req), withBearer(tok))
		require.Zero(t, otRequireExportOK(t, otCTJSON, r))
		rows, _ := otRows(t, p, tok, "ing-charset")
		require.Len(t, rows, 1)
		otRequireData(t, obj{"prompt": "hi", "promptLength": 2}, rows[0])
	})
}

// otScenario is the correlation scenario of one member over one
// transport and one naming.
func otScenario(t *testing.T, p *proc, tok, member string, tr otTransport, n otNaming) {
	const (
		sess  = "f183e5f1-7219-4ca9-a9fb-0909bf841433"
		model = "claude-sonnet-4-5"
	)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	export := func(recs ...otRec) int64 { t.Helper(); return tr.export(t, p, tok, otLogsReq(n, recs...)) }
	system := []obj{{"type": "text", "text": "You are terse."}}
	textMsgs := func(s string) []obj { return []obj{{"role": "user", "content": s}} }
	textContent := func(s string) []obj { return []obj{{"type": "text", "text": s}} }
	want := 0 // llm_exchange rows so far

	t.Run("triple in one export", func(t *testing.T) {
		u := otUsage{in: 10, out: 20, cacheRead: 747, cacheCreation: 250, cost: 0.0020674, durationMs: 830}
		rej := export(
			otOtherRec(at(0), sess, 0, "plugin_loaded"),
			otReqBody(at(1), sess, 1, model, otAnthropicRequest(t, model, system, textMsgs("say A"), "Bash", "Read")),
			otAcct(at(2), sess, 2, model, "req_A", u),
			otRespBody(at(3), sess, 3, model, "req_A", otAnthropicResponse(t, model, "msg_A", textContent("A"), "end_turn", u)),
		)
		require.EqualValues(t, 1, rej, "the record of an unknown name is counted as rejected")
		want++
		rows := otExchanges(t, p, tok, member)
		require.Len(t, rows, want)
		require.Equal(t, otMS(at(2)), rows[0]["ts"], "an exchange is timed by its accounting record")
		otRequireData(t, obj{
			"model": model, "requestId": "req_A", "responseId": "msg_A",
			"system": system, "messages": textMsgs("say A"), "tools": []string{"Bash", "Read"},
			"content": textContent("A"), "stopReason": "end_turn", "usage": otUsageData(u),
			"costUsd": 0.0020674, "durationMs": 830, "truncated": false, "requestOnly": false, "source": "otlp",
		}, rows[0])
	})

	t.Run("unusable records are counted", func(t *testing.T) {
		before, _ := otRows(t, p, tok, member)
		bad := func(name string, sec int, attrs ...*commonpb.KeyValue) otRec {
			return otRec{agent: otAgentClaude, name: name, at: at(sec), attrs: append(attrs, otStr("session.id", sess))}
		}
		rej := export(
			bad("api_request_body", 5, otStr("event.sequence", "soon"), otStr("model", model), otStr("body", "{}")),
			bad("api_request_body", 5, otStr("body", "{}")),                                 // no model
			bad("api_request", 6, otStr("request_id", "req_bad"), otInt("input_tokens", 1)), // no model
			bad("api_response_body", 7, otStr("model", model), otStr("body", "{}")),         // no request_id
			bad("tool_decision", 8, otStr("decision", "accept")),                            // no tool_name
			bad("assistant_response", 9, otStr("response", "hi")),
		)
		require.EqualValues(t, 6, rej)
		after, _ := otRows(t, p, tok, member)
		require.Equal(t, before, after, "records svc cannot use store nothing")
	})

	t.Run("split across exports", func(t *testing.T) {
		u := otUsage{in: 7, out: 10, cacheRead: 807, cacheCreation: 270, cost: 0.0017394, durationMs: 10}
		require.Zero(t, export(otReqBody(at(10), sess, 10, model, otAnthropicRequest(t, model, system, textMsgs("say B"), "Read"))))
		require.Len(t, otExchanges(t, p, tok, member), want, "a body alone waits")
		require.Zero(t, export(otAcct(at(11), sess, 11, model, "req_B", u)))
		require.Len(t, otExchanges(t, p, tok, member), want, "a claimed body waits for its response")
		require.Zero(t, export(otRespBody(at(12), sess, 12, model, "req_B", otAnthropicResponse(t, model, "msg_B", textContent("B"), "end_turn", u))))
		want++
		rows := otExchanges(t, p, tok, member)
		require.Len(t, rows, want, "the response completes the exchange kept across exports")
		otRequireData(t, obj{
			"model": model, "requestId": "req_B", "responseId": "msg_B",
			"system": system, "messages": textMsgs("say B"), "tools": []string{"Read"},
			"content": textContent("B"), "stopReason": "end_turn", "usage": otUsageData(u),
			"costUsd": 0.0017394, "durationMs": 10, "truncated": false, "requestOnly": false, "source": "otlp",
		}, otExchangeBy(t, rows, "req_B"))
	})

	t.Run("bodies claimed in event.sequence order", func(t *testing.T) {
		const m2 = "claude-haiku-4-5"
		u := otUsage{in: 1, out: 2, cost: 0.0001, durationMs: 5}
		// The later body (sequence 21) arrives first.
		require.Zero(t, export(otReqBody(at(20), sess, 21, m2, otAnthropicRequest(t, m2, nil, textMsgs("second")))))
		require.Zero(t, export(otReqBody(at(21), sess, 20, m2, otAnthropicRequest(t, m2, nil, textMsgs("first")))))
		require.Zero(t, export(otAcct(at(22), sess, 22, m2, "req_C1", u),
			otRespBody(at(23), sess, 23, m2, "req_C1", otAnthropicResponse(t, m2, "msg_C1", textContent("1"), "end_turn", u))))
		want++
		rows := otExchanges(t, p, tok, member)
		require.Len(t, rows, want)
		otRequireDataHas(t, obj{"model": m2, "messages": textMsgs("first"), "responseId": "msg_C1"}, otExchangeBy(t, rows, "req_C1"))
		require.Zero(t, export(otAcct(at(24), sess, 24, m2, "req_C2", u),
			otRespBody(at(25), sess, 25, m2, "req_C2", otAnthropicResponse(t, m2, "msg_C2", textContent("2"), "end_turn", u))))
		want++
		rows = otExchanges(t, p, tok, member)
		require.Len(t, rows, want)
		otRequireDataHas(t, obj{"model": m2, "messages": textMsgs("second"), "responseId": "msg_C2"}, otExchangeBy(t, rows, "req_C2"))
	})

	t.Run("accounting without a body", func(t *testing.T) {
		const m3 = "claude-opus-4-1"
		u := otUsage{in: 100, out: 50, cacheRead: 3, cacheCreation: 4, cost: 0.5, durationMs: 1200}
		require.Zero(t, export(otAcct(at(30), sess, 30, m3, "req_D", u)))
		want++
		rows := otExchanges(t, p, tok, member)
		require.Len(t, rows, want, "an accounting record alone is an exchange at once")
		row := otExchangeBy(t, rows, "req_D")
		require.Equal(t, otMS(at(30)), row["ts"])
		otRequireData(t, obj{"model": m3, "requestId": "req_D", "usage": otUsageData(u), "costUsd": 0.5, "durationMs": 1200,
			"truncated": false, "requestOnly": false, "source": "otlp"}, row)
	})

	t.Run("tool actions and prompts", func(t *testing.T) {
		require.Zero(t, export(
			otRec{agent: otAgentClaude, name: "user_prompt", at: at(40), attrs: append(otClaudeAttrs(sess, 40),
				otStr("prompt", "list the files"), otStr("prompt_length", "14"), otStr("prompt.id", "p1"))},
			otRec{agent: otAgentClaude, name: "tool_decision", at: at(41), attrs: append(otClaudeAttrs(sess, 41),
				otStr("decision", "accept"), otStr("source", "config"), otStr("tool_name", "Bash"), otStr("tool_use_id", "toolu_1"))},
			otRec{agent: otAgentClaude, name: "tool_result", at: at(42), attrs: append(otClaudeAttrs(sess, 42),
				otStr("tool_name", "Bash"), otStr("tool_use_id", "toolu_1"), otStr("success", "true"), otInt("duration_ms", 33),
				otStr("tool_input", `{"command":"ls"}`), otInt("tool_result_size_bytes", 27))},
			otRec{agent: otAgentClaude, name: "tool_result", at: at(43), attrs: append(otClaudeAttrs(sess, 43),
				otStr("tool_name", "Read"), otStr("success", "false"), otInt("duration_ms", 2), otStr("error", "no such file"))},
		))
		prompts, _ := otRows(t, p, tok, member, "user_prompt")
		require.Len(t, prompts, 1)
		require.Equal(t, otMS(at(40)), prompts[0]["ts"])
		otRequireData(t, obj{"prompt": "list the files", "promptLength": 14}, prompts[0])
		tools, _ := otRows(t, p, tok, member, "tool_action")
		require.Len(t, tools, 3)
		slices.Reverse(tools)
		require.Equal(t, otMS(at(41)), tools[0]["ts"])
		otRequireDataHas(t, obj{"tool": "Bash", "phase": "decision", "decision": "accept", "source": "otlp"}, tools[0])
		otRequireDataHas(t, obj{"tool": "Bash", "phase": "result", "success": true, "durationMs": 33,
			"input": obj{"command": "ls"}, "source": "otlp"}, tools[1])
		otRequireDataHas(t, obj{"tool": "Read", "phase": "result", "success": false, "durationMs": 2,
			"error": "no such file", "source": "otlp"}, tools[2])
		for _, r := range tools[:2] {
			require.NotContains(t, otData(t, r), "error")
		}
	})

	t.Run("thinking is never stored", func(t *testing.T) {
		u := otUsage{in: 5, out: 6, cost: 0.001, durationMs: 50}
		msgs := []obj{
			{"role": "user", "content": "think first"},
			{"role": "assistant", "content": []obj{
				{"type": "thinking", "thinking": otSecret + "-1", "signature": otSecret + "-sig"},
				{"type": "text", "text": "earlier answer"},
			}},
			{"role": "assistant", "content": []obj{{"type": "redacted_thinking", "data": otSecret + "-2"}}},
			{"role": "user", "content": "again"},
		}
		content := []obj{
			{"type": "thinking", "thinking": otSecret + "-3", "signature": otSecret + "-sig"},
			{"type": "redacted_thinking", "data": otSecret + "-4"},
			{"type": "text", "text": "final answer"},
		}
		require.Zero(t, export(
			otReqBody(at(50), sess, 50, model, otAnthropicRequest(t, model, system, msgs)),
			otAcct(at(51), sess, 51, model, "req_F", u),
			otRespBody(at(52), sess, 52, model, "req_F", otAnthropicResponse(t, model, "msg_F", content, "end_turn", u)),
		))
		want++
		rows := otExchanges(t, p, tok, member)
		require.Len(t, rows, want)
		otRequireDataHas(t, obj{
			"messages": []obj{
				{"role": "user", "content": "think first"},
				{"role": "assistant", "content": []obj{{"type": "text", "text": "earlier answer"}}},
				{"role": "assistant", "content": []obj{}},
				{"role": "user", "content": "again"},
			},
			"content": textContent("final answer"), "responseId": "msg_F",
		}, otExchangeBy(t, rows, "req_F"))
		otRequireNoSecrets(t, p, tok, member)
	})

	t.Run("truncated body", func(t *testing.T) {
		const m4 = "claude-sonnet-4-6"
		u := otUsage{in: 60000, out: 12, cost: 0.2, durationMs: 900}
		cut := otAnthropicRequest(t, m4, system, textMsgs(strings.Repeat("long ", 200)), "Bash")[:400]
		require.Zero(t, export(
			otReqBody(at(60), sess, 60, m4, cut),
			otAcct(at(61), sess, 61, m4, "req_G", u),
			otRespBody(at(62), sess, 62, m4, "req_G", otAnthropicResponse(t, m4, "msg_G", textContent("G"), "end_turn", u)),
		))
		want++
		rows := otExchanges(t, p, tok, member)
		require.Len(t, rows, want)
		row := otExchangeBy(t, rows, "req_G")
		otRequireDataHas(t, obj{"model": m4, "truncated": true, "requestOnly": false, "responseId": "msg_G"}, row)
		for _, k := range []string{"system", "messages", "tools"} {
			require.NotContains(t, otData(t, row), k, "a truncated body gives the model only")
		}
	})

	t.Run("codex records", func(t *testing.T) {
		private := []*commonpb.KeyValue{otStr("user.email", otEmail), otStr("user.account_id", otAccountID),
			otStr("conversation.id", "conv-1"), otStr("app.version", "0.99.0")}
		codex := func(name string, sec int, attrs ...*commonpb.KeyValue) otRec {
			return otRec{agent: otAgentCodex, name: name, at: at(sec), attrs: append(slices.Clone(private), attrs...)}
		}
		require.Zero(t, export(
			codex("user_prompt", 70, otStr("prompt", "fix it"), otInt("prompt_length", 6)),
			codex("api_request", 71, otStr("model", "gpt-5-codex"), otInt("http.response.status_code", 200), otInt("duration_ms", 300)),
			codex("sse_event", 72, otStr("event.kind", "response.completed"), otInt("input_token_count", 10), otInt("output_token_count", 5)),
			codex("tool_decision", 73, otStr("tool_name", "shell"), otStr("call_id", "call_1"), otStr("decision", "approved")),
			codex("tool_result", 74, otStr("tool_name", "shell"), otStr("call_id", "call_1"), otStr("arguments", `{"command":["ls"]}`),
				otInt("duration_ms", 12), otStr("success", "true"), otStr("output", "a\nb")),
			codex("rate_limits", 75, otStr("model", "gpt-5-codex"), otFloat("primary.used_percent", 12.5)),
		), "Codex records are all stored")
		// The API request and its response's token counts are one row
		// (docs/TELEMETRY.md, "Codex records").
		rows, _ := otRows(t, p, tok, member, "opaque_http")
		require.Len(t, rows, 2)
		slices.Reverse(rows)
		for i, w := range []struct {
			event string
			sec   int
		}{{"codex.api_request", 71}, {"codex.rate_limits", 75}} {
			d := otData(t, rows[i])
			require.Equal(t, w.event, d["event"])
			require.Equal(t, otMS(at(w.sec)), rows[i]["ts"])
			attrs, ok := d["attributes"].(obj)
			require.True(t, ok, "attributes: %v", d)
			require.Equal(t, "conv-1", attrs["conversation.id"])
			require.NotContains(t, attrs, "user.email")
			require.NotContains(t, attrs, "user.account_id")
		}
		call := otData(t, rows[0])["attributes"].(obj)
		require.Equal(t, "gpt-5-codex", call["model"])
		require.Equal(t, "200", call["http.response.status_code"])
		require.Equal(t, "10", call["input_token_count"])
		require.Equal(t, "5", call["output_token_count"])
		require.NotContains(t, call, "event.kind")

		tools, _ := otRows(t, p, tok, member, "tool_action")
		slices.Reverse(tools)
		require.Len(t, tools, 5, "3 Claude tool actions and 2 Codex ones")
		otRequireDataHas(t, obj{"tool": "shell", "phase": "decision", "decision": "approved", "source": "otlp"}, tools[3])
		otRequireDataHas(t, obj{"tool": "shell", "phase": "result", "success": true, "durationMs": 12,
			"input": obj{"command": []string{"ls"}}, "result": "a\nb", "source": "otlp"}, tools[4])
		prompts, _ := otRows(t, p, tok, member, "user_prompt")
		require.Len(t, prompts, 2)
		otRequireData(t, obj{"prompt": "fix it", "promptLength": 6}, prompts[0])
		otRequireNoSecrets(t, p, tok, member)
	})

	t.Run("totals", func(t *testing.T) {
		rows, _ := otRows(t, p, tok, member)
		require.Equal(t, map[string]int{"llm_exchange": want, "tool_action": 5, "user_prompt": 2, "opaque_http": 2}, otCountKinds(t, rows))
		for _, r := range rows {
			if r["kind"] == "llm_exchange" {
				require.Equal(t, false, otData(t, r)["requestOnly"], "no body waited long enough to be flushed: %v", r)
			}
		}
	})
}

// otTestdata are real Claude Code 2.1.328 exports (OTLP/JSON), one
// member's, in order.
var otTestdata = []struct {
	file     string
	rejected int64 // records of names svc does not use
}{
	{"claude-code-2.1.328-1.json", 4}, // managed_settings_resolved, plugin_loaded ×3
	{"claude-code-2.1.328-2.json", 1}, // assistant_response
}

// otReplay sends the captured exports over tr: as captured for
// OTLP/JSON, re-encoded otherwise.
func otReplay(t *testing.T, p *proc, tok, member string, tr otTransport) {
	for _, f := range otTestdata {
		raw, err := os.ReadFile(filepath.Join("..", "..", "..", "server", "otlp", "testdata", f.file))
		require.NoError(t, err)
		var rej int64
		if tr.name == "json" {
			rej = otRequireExportOK(t, otCTJSON, otPost(t, p, otLogsPath, otCTJSON, "", raw, withBearer(tok)))
		} else {
			req := &collogspb.ExportLogsServiceRequest{}
			require.NoError(t, protojson.Unmarshal(raw, req))
			rej = tr.export(t, p, tok, req)
		}
		require.Equal(t, f.rejected, rej, "%s", f.file)
	}
	rows, _ := otRows(t, p, tok, member)
	require.Equal(t, map[string]int{"llm_exchange": 2, "tool_action": 2, "user_prompt": 1}, otCountKinds(t, rows))
	ex := otExchanges(t, p, tok, member)
	want := []struct {
		requestID, responseID, stop string
		u                           otUsage
	}{
		{"req_stub_1", "msg_stub_1", "tool_use", otUsage{in: 22, out: 29, cacheRead: 747, cacheCreation: 250, cost: 0.0020674, durationMs: 84}},
		{"req_stub_2", "msg_stub_2", "end_turn", otUsage{in: 7, out: 10, cacheRead: 807, cacheCreation: 270, cost: 0.0017394, durationMs: 10}},
	}
	for i, w := range want {
		d := otData(t, ex[i])
		otRequireDataHas(t, obj{"model": "claude-opus-5-5", "requestId": w.requestID, "responseId": w.responseID,
			"stopReason": w.stop, "usage": otUsageData(w.u), "costUsd": w.u.cost, "durationMs": w.u.durationMs,
			"tools": []string{"DeferredToolPlaceholder", "Read"}, "truncated": false, "requestOnly": false, "source": "otlp"}, ex[i])
		msgs, ok := d["messages"].([]any)
		require.True(t, ok, "messages: %v", d)
		require.NotEmpty(t, msgs)
		require.Contains(t, otJSON(t, msgs[0]), "AGENTTEST-HTTP-JSON", "the prompt is the first message")
		require.NotEmpty(t, d["system"])
		require.NotEmpty(t, d["content"])
	}
	require.Contains(t, otJSON(t, otData(t, ex[1])["content"]), "The note says the sky is green today.")
	prompts, _ := otRows(t, p, tok, member, "user_prompt")
	otRequireData(t, obj{"prompt": "Read note.txt and tell me what it says. AGENTTEST-HTTP-JSON", "promptLength": 59}, prompts[0])
	tools, _ := otRows(t, p, tok, member, "tool_action")
	slices.Reverse(tools)
	otRequireDataHas(t, obj{"tool": "Read", "phase": "decision", "decision": "accept", "source": "otlp"}, tools[0])
	otRequireDataHas(t, obj{"tool": "Read", "phase": "result", "success": true, "durationMs": 33, "source": "otlp"}, tools[1])
	otRequireNoSecrets(t, p, tok, member)
}

// --- Refusals ---------------------------------------------------------------

// otPadTo pads a JSON document with trailing spaces to n bytes.
func otPadTo(t testing.TB, b []byte, n int) []byte {
	t.Helper()
	require.LessOrEqual(t, len(b), n)
	return append(slices.Clone(b), bytes.Repeat([]byte(" "), n-len(b))...)
}

// otDeepValue is an attribute value nested depth levels deep.
func otDeepValue(depth int) *commonpb.AnyValue {
	v := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "leaf"}}
	for range depth - 1 {
		v = &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
			Values: []*commonpb.KeyValue{{Key: "k", Value: v}}}}}
	}
	return v
}

// otPromptExport is a valid export of one user_prompt record: what each
// refused request would have stored.
func otPromptExport(at time.Time, prompt string, extra ...*commonpb.KeyValue) *collogspb.ExportLogsServiceRequest {
	return otLogsReq(otNamings[0], otRec{agent: otAgentClaude, name: "user_prompt", at: at,
		attrs: append([]*commonpb.KeyValue{otStr("prompt", prompt), otInt("prompt_length", int64(len(prompt)))}, extra...)})
}

// TestOTLPRefusals sends bad exports, each refused with the {error,
// message} body and its status, and none storing anything; the metrics
// route accepts and discards.
func TestOTLPRefusals(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	const member = "rex"
	tok := createMember(t, d, admin, member)
	// A session of the same member: the OTLP routes take bearer tokens only.
	session := login(t, d, enroll(t, d, admin, member))

	at := time.Now().Truncate(time.Millisecond)
	valid := otPromptExport(at, "would be stored")
	validJSON := otEncode(t, otCTJSON, valid)
	validPB := otEncode(t, otCTProtobuf, valid)
	gz := otGzip(t, validJSON)
	badCRC := slices.Clone(gz)
	badCRC[len(badCRC)-8] ^= 0xff
	// A valid gzip header, then a deflate block of the reserved type.
	badDeflate := append(slices.Clone(gz[:10]), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0)
	over := otPadTo(t, validJSON, otMaxBody+1)
	deep := otEncode(t, otCTJSON, otPromptExport(at, "deep", &commonpb.KeyValue{Key: "nested", Value: otDeepValue(70)}))
	mine := withBearer(tok)

	cases := []struct {
		name, ct, enc string
		body          any
		opts          []reqOpt
		code          string
	}{
		{name: "malformed JSON", ct: otCTJSON, body: validJSON[:len(validJSON)/2], code: "bad_request"},
		{name: "JSON of the wrong shape", ct: otCTJSON, body: []byte(`{"resourceLogs":"nope"}`), code: "bad_request"},
		{name: "JSON array", ct: otCTJSON, body: []byte(`[` + string(validJSON) + `]`), code: "bad_request"},
		{name: "JSON with trailing data", ct: otCTJSON, body: append(slices.Clone(validJSON), []byte(`{}`)...), code: "bad_request"},
		{name: "JSON nested too deep", ct: otCTJSON, body: deep, code: "bad_request"},
		{name: "JSON trace id not hex", ct: otCTJSON, body: []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"zz8efff798038103d269b633813fc60c",` +
			`"body":{"stringValue":"claude_code.user_prompt"},"attributes":[{"key":"prompt","value":{"stringValue":"x"}}]}]}]}]}`), code: "bad_request"},
		{name: "empty JSON body", ct: otCTJSON, body: []byte{}, code: "bad_request"},
		{name: "malformed protobuf", ct: otCTProtobuf, body: append(slices.Clone(validPB), 0xff, 0xff, 0xff), code: "bad_request"},
		{name: "protobuf cut short", ct: otCTProtobuf, body: validPB[:len(validPB)-3], code: "bad_request"},
		{name: "JSON labelled protobuf", ct: otCTProtobuf, body: validJSON, code: "bad_request"},
		{name: "protobuf labelled JSON", ct: otCTJSON, body: validPB, code: "bad_request"},
		{name: "text/plain", ct: "text/plain", body: validJSON, code: "bad_request"},
		{name: "no Content-Type", ct: "", body: validJSON, code: "bad_request"},
		{name: "form Content-Type", ct: "application/x-www-form-urlencoded", body: validJSON, code: "bad_request"},
		{name: "gzip declared, body plain", ct: otCTJSON, enc: "gzip", body: validJSON, code: "bad_request"},
		{name: "gzip cut short", ct: otCTJSON, enc: "gzip", body: gz[:len(gz)/2], code: "bad_request"},
		{name: "gzip with a bad checksum", ct: otCTJSON, enc: "gzip", body: badCRC, code: "bad_request"},
		{name: "gzip with corrupt deflate data", ct: otCTJSON, enc: "gzip", body: badDeflate, code: "bad_request"},
		{name: "unsupported encoding", ct: otCTJSON, enc: "br", body: validJSON, code: "bad_request"},
		{name: "over 16 MiB declared", ct: otCTJSON, body: over, code: "payload_too_large"},
		{name: "over 16 MiB streamed", ct: otCTJSON, body: io.MultiReader(bytes.NewReader(over[:1<<20]), bytes.NewReader(over[1<<20:])), code: "payload_too_large"},
		{name: "gzip bomb past 16 MiB", ct: otCTJSON, enc: "gzip", body: otGzip(t, over), code: "payload_too_large"},
		{name: "protobuf gzip bomb past 16 MiB", ct: otCTProtobuf, enc: "gzip", body: otGzip(t, otEncode(t, otCTProtobuf,
			otPromptExport(at, strings.Repeat("x", otMaxBody)))), code: "payload_too_large"},
		{name: "no credential", ct: otCTJSON, body: validJSON, opts: []reqOpt{}, code: "unauthenticated"},
		{name: "unknown token", ct: otCTJSON, body: validJSON, opts: []reqOpt{withBearer(randomToken(t))}, code: "unauthenticated"},
		{name: "session cookie", ct: otCTJSON, body: validJSON, opts: []reqOpt{withSession(session)}, code: "unauthenticated"},
		{name: "session cookie, protobuf", ct: otCTProtobuf, body: validPB, opts: []reqOpt{withSession(session)}, code: "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts == nil {
				opts = []reqOpt{mine}
			}
			r := otPost(t, p, otLogsPath, tc.ct, tc.enc, tc.body, opts...)
			requireRESTError(t, r, tc.code)
			rows, _ := otRows(t, p, tok, member)
			require.Empty(t, rows, "a refused export stores nothing")
		})
	}

	t.Run("grpc", func(t *testing.T) {
		logs := collogspb.NewLogsServiceClient(p.grpcConn(t))
		_, err := logs.Export(otGRPCCtx(t), valid)
		requireGRPCError(t, err, "unauthenticated")
		_, err = logs.Export(otGRPCCtx(t, "authorization", "Bearer "+randomToken(t)), valid)
		requireGRPCError(t, err, "unauthenticated")
		_, err = logs.Export(otGRPCCtx(t, "cookie", "svc_session="+session), valid)
		requireGRPCError(t, err, "unauthenticated")
		_, err = logs.Export(otGRPCCtx(t, "authorization", "Bearer "+tok), otPromptExport(at, "deep", &commonpb.KeyValue{Key: "nested", Value: otDeepValue(70)}))
		requireGRPCError(t, err, "bad_request")
		rows, _ := otRows(t, p, tok, member)
		require.Empty(t, rows)
	})

	t.Run("metrics are accepted and discarded", func(t *testing.T) {
		metrics := &colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
			Resource: otResource(otAgentClaude),
			ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
				Name: "claude_code.token.usage", Unit: "tokens",
				Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA,
					DataPoints: []*metricspb.NumberDataPoint{{TimeUnixNano: uint64(at.UnixNano()), Value: &metricspb.NumberDataPoint_AsInt{AsInt: 42},
						Attributes: []*commonpb.KeyValue{otStr("type", "input"), otStr("model", "claude-sonnet-4-5")}}}}},
			}}}},
		}}}
		mJSON, mPB := otEncode(t, otCTJSON, metrics), otEncode(t, otCTProtobuf, metrics)
		for _, c := range []struct {
			name, ct, enc string
			body          []byte
		}{
			{"json", otCTJSON, "", mJSON},
			{"json-gzip", otCTJSON, "gzip", otGzip(t, mJSON)},
			{"protobuf", otCTProtobuf, "", mPB},
			{"protobuf-gzip", otCTProtobuf, "gzip", otGzip(t, mPB)},
		} {
			r := otPost(t, p, otMetricsPath, c.ct, c.enc, c.body, mine)
			require.Equal(t, http.StatusOK, r.status, "%s: %s", c.name, r.raw)
			require.Equal(t, c.ct, r.header.Get("Content-Type"), c.name)
			if c.ct == otCTJSON {
				require.JSONEq(t, `{}`, string(r.raw), c.name)
			} else {
				require.NoError(t, proto.Unmarshal(r.raw, &colmetricspb.ExportMetricsServiceResponse{}), c.name)
			}
		}
		_, err := colmetricspb.NewMetricsServiceClient(p.grpcConn(t)).Export(otGRPCCtx(t, "authorization", "Bearer "+tok), metrics)
		require.NoError(t, err)
		_, err = colmetricspb.NewMetricsServiceClient(p.grpcConn(t)).Export(otGRPCCtx(t), metrics)
		requireGRPCError(t, err, "unauthenticated")
		requireRESTError(t, otPost(t, p, otMetricsPath, otCTJSON, "", mJSON), "unauthenticated")
		requireRESTError(t, otPost(t, p, otMetricsPath, otCTJSON, "", mJSON, withSession(session)), "unauthenticated")
		requireRESTError(t, otPost(t, p, otMetricsPath, "text/plain", "", mJSON, mine), "bad_request")
		requireRESTError(t, otPost(t, p, otMetricsPath, otCTProtobuf, "", append(slices.Clone(mPB), 0xff, 0xff), mine), "bad_request")
		requireRESTError(t, otPost(t, p, otMetricsPath, otCTJSON, "", otPadTo(t, mJSON, otMaxBody+1), mine), "payload_too_large")
		rows, _ := otRows(t, p, tok, member)
		require.Empty(t, rows, "metrics are discarded")
	})

	// The member's route works: the empty lists above were refusals.
	require.Zero(t, otRequireExportOK(t, otCTJSON, otPost(t, p, otLogsPath, otCTJSON, "", validJSON, mine)))
	rows, _ := otRows(t, p, tok, member)
	require.Len(t, rows, 1)
	otRequireData(t, obj{"prompt": "would be stored", "promptLength": 15}, rows[0])

	t.Run("exactly 16 MiB is accepted", func(t *testing.T) {
		const m = "rex-cap"
		capTok := createMember(t, d, admin, m)
		full := otPadTo(t, validJSON, otMaxBody)
		require.Zero(t, otRequireExportOK(t, otCTJSON, otPost(t, p, otLogsPath, otCTJSON, "", full, withBearer(capTok))))
		require.Zero(t, otRequireExportOK(t, otCTJSON, otPost(t, p, otLogsPath, otCTJSON, "gzip", otGzip(t, full), withBearer(capTok))))
		rows, _ := otRows(t, p, capTok, m, "user_prompt")
		require.Len(t, rows, 2)
	})
}

// --- Flush timer -----------------------------------------------------------

// TestOTLPFlushTimer runs a broker that flushes waiting records after 1 s
// (SVC_OTLP_FLUSH_AFTER) and requires each to be stored alone, by the
// timer, without any further export.
func TestOTLPFlushTimer(t *testing.T) {
	t.Parallel()
	const flushAfter = time.Second
	p := mustStartSvc(t, procOpts{env: []string{"SVC_OTLP_FLUSH_AFTER=" + flushAfter.String()}})
	admin := bearer(p.adminToken(t))
	const (
		sess  = "sess-flush"
		model = "claude-sonnet-4-5"
	)
	system := []obj{{"type": "text", "text": "sys"}}
	msgs := []obj{{"role": "user", "content": "never answered"}}
	u := otUsage{in: 3, out: 4, cacheRead: 5, cacheCreation: 6, cost: 0.25, durationMs: 70}
	cases := []struct {
		name string
		recs func(at time.Time) []otRec
		ts   int // the row's time: the record of this index
		want obj
	}{
		{
			name: "unclaimed body is request-only",
			recs: func(at time.Time) []otRec {
				return []otRec{otReqBody(at, sess, 1, model, otAnthropicRequest(t, model, system, msgs, "Bash"))}
			},
			want: obj{"model": model, "system": system, "messages": msgs, "tools": []string{"Bash"},
				"truncated": false, "requestOnly": true, "source": "otlp"},
		},
		{
			name: "unclaimed truncated body is model only",
			recs: func(at time.Time) []otRec {
				return []otRec{otReqBody(at, sess, 1, model, otAnthropicRequest(t, model, system, msgs, "Bash")[:50])}
			},
			want: obj{"model": model, "truncated": true, "requestOnly": true, "source": "otlp"},
		},
		{
			name: "claimed body without response",
			recs: func(at time.Time) []otRec {
				return []otRec{
					otReqBody(at, sess, 1, model, otAnthropicRequest(t, model, system, msgs)),
					otAcct(at.Add(time.Second), sess, 2, model, "req_lost", u),
				}
			},
			ts: 1,
			want: obj{"model": model, "requestId": "req_lost", "system": system, "messages": msgs,
				"usage": otUsageData(u), "costUsd": 0.25, "durationMs": 70,
				"truncated": false, "requestOnly": false, "source": "otlp"},
		},
	}
	for i, tc := range cases {
		member := fmt.Sprintf("flush-%d", i)
		tok := createMember(t, restDriver{p}, admin, member)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
			recs := tc.recs(at)
			sent := time.Now()
			require.Zero(t, otHTTPExport(otCTJSON, false)(t, p, tok, otLogsReq(otNamings[3], recs...)))
			// Read before the timer could have run, nothing is stored yet.
			if rows := otExchanges(t, p, tok, member); time.Since(sent) < flushAfter {
				require.Empty(t, rows, "waiting records are not stored at once")
			}
			var rows []obj
			otAwait(t, 15*time.Second, func() bool {
				rows = otExchanges(t, p, tok, member)
				return len(rows) > 0
			}, "the timer stores the waiting record without another export")
			require.GreaterOrEqual(t, time.Since(sent), flushAfter, "not before its time")
			require.Len(t, rows, 1)
			require.Equal(t, otMS(recs[tc.ts].at), rows[0]["ts"])
			otRequireData(t, tc.want, rows[0])
			for end := time.Now().Add(4 * flushAfter / 10); time.Now().Before(end); time.Sleep(otTick) {
				require.Len(t, otExchanges(t, p, tok, member), 1, "a flushed record is stored once")
			}
		})
	}
}

// --- Durability ------------------------------------------------------------

// TestOTLPStateSurvivesKill9 acknowledges an exchange and records still
// waiting for their partners, kills the broker with SIGKILL, and requires
// after a restart on the same files that the exchange is still listed and
// the waiting records pair with those sent after the restart.
func TestOTLPStateSurvivesKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	admin := bearer(p.adminToken(t))
	const member, sess = "dora", "sess-dora"
	tok := createMember(t, restDriver{p}, admin, member)
	const mA, mB, mC, mD = "claude-a", "claude-b", "claude-c", "claude-d"
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	u := func(n int64) otUsage {
		return otUsage{in: n, out: n + 1, cacheRead: n + 2, cacheCreation: n + 3, cost: float64(n) / 100, durationMs: n * 10}
	}
	msgs := func(s string) []obj {
		return []obj{
			{"role": "user", "content": s},
			{"role": "assistant", "content": []obj{{"type": "thinking", "thinking": otSecret + "-" + s, "signature": "sig"}, {"type": "text", "text": "ok"}}},
		}
	}
	stripped := func(s string) []obj {
		return []obj{{"role": "user", "content": s}, {"role": "assistant", "content": []obj{{"type": "text", "text": "ok"}}}}
	}
	content := func(s string) []obj {
		return []obj{{"type": "thinking", "thinking": otSecret + "-answer", "signature": "sig"}, {"type": "text", "text": s}}
	}
	resp := func(sec int, model, id, text string, n int64) otRec {
		return otRespBody(at(sec), sess, int64(sec), model, id, otAnthropicResponse(t, model, "msg"+strings.TrimPrefix(id, "req"), content(text), "end_turn", u(n)))
	}
	body := func(sec int, model, text string) otRec {
		return otReqBody(at(sec), sess, int64(sec), model, otAnthropicRequest(t, model, nil, msgs(text)))
	}
	before := func(recs ...otRec) {
		t.Helper()
		require.Zero(t, otHTTPExport(otCTJSON, false)(t, p, tok, otLogsReq(otNamings[3], recs...)))
	}

	// Completed and acknowledged before the kill.
	before(body(1, mD, "done"), otAcct(at(2), sess, 2, mD, "req_done", u(1)), resp(3, mD, "req_done", "done!", 1))
	listed := otExchanges(t, p, tok, member)
	require.Len(t, listed, 1)
	// Waiting, each in its own way, acknowledged before the kill: a body no
	// accounting claimed, a claimed body waiting for its response, and a
	// response waiting for its accounting (its body queued).
	before(body(10, mA, "alpha"))
	before(body(20, mB, "beta"), otAcct(at(21), sess, 21, mB, "req_b", u(20)))
	before(body(30, mC, "gamma"), resp(32, mC, "req_c", "gamma!", 30))
	require.Len(t, otExchanges(t, p, tok, member), 1, "nothing else is complete yet")

	p.kill(t)
	var files []string
	if storeOf(p.opts) == storePostgres {
		requirePGLacks(t, p.opts, otSecret, otEmail, otAccountID)
	} else {
		var err error
		files, err = filepath.Glob(filepath.Join(dir, "svc.db*"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, s := range []string{otSecret, otEmail, otAccountID} {
			require.False(t, bytes.Contains(b, []byte(s)), "%s holds %q: thinking and private attributes never reach the store", f, s)
		}
	}

	p2 := p.restart(t)
	after := otExchanges(t, p2, tok, member)
	require.Equal(t, listed, after, "the exchange acknowledged before the kill is listed as it was")

	export := func(recs ...otRec) {
		t.Helper()
		require.Zero(t, otGRPCExport(t, p2, tok, otLogsReq(otNamings[0], recs...)))
	}
	export(otAcct(at(11), sess, 11, mA, "req_a", u(10)), resp(12, mA, "req_a", "alpha!", 10))
	export(resp(22, mB, "req_b", "beta!", 20))
	export(otAcct(at(31), sess, 31, mC, "req_c", u(30)))

	rows := otExchanges(t, p2, tok, member)
	require.Len(t, rows, 4, "every waiting record paired after the restart: %v", rows)
	require.Greater(t, rows[1]["id"], rows[0]["id"], "row ids go on after the restart")
	for _, w := range []struct {
		requestID, model, text string
		n                      int64
	}{
		{"req_done", mD, "done", 1},
		{"req_a", mA, "alpha", 10},
		{"req_b", mB, "beta", 20},
		{"req_c", mC, "gamma", 30},
	} {
		otRequireData(t, obj{"model": w.model, "requestId": w.requestID, "responseId": "msg" + strings.TrimPrefix(w.requestID, "req"),
			"messages": stripped(w.text), "content": []obj{{"type": "text", "text": w.text + "!"}}, "stopReason": "end_turn",
			"usage": otUsageData(u(w.n)), "costUsd": float64(w.n) / 100, "durationMs": w.n * 10,
			"truncated": false, "requestOnly": false, "source": "otlp"}, otExchangeBy(t, rows, w.requestID), w.requestID)
	}
	otRequireNoSecrets(t, p2, tok, member)
}

// --- Bounds -----------------------------------------------------------------

// TestOTLPPendingIsBounded sends one member more unclaimed bodies than the
// correlation state holds: the oldest are stored as request-only
// exchanges, and the broker keeps answering and correlating.
func TestOTLPPendingIsBounded(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	const model = "claude-flood"
	text := func(i int) string { return fmt.Sprintf("body-%03d", i) }
	flood := func(t *testing.T, tok string, from, n int, content func(i int) string) {
		t.Helper()
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		recs := make([]otRec, 0, n)
		for i := from; i < from+n; i++ {
			recs = append(recs, otReqBody(base.Add(time.Duration(i)*time.Millisecond), "sess-flood", int64(i), model,
				otAnthropicRequest(t, model, nil, []obj{{"role": "user", "content": content(i)}})))
		}
		require.Zero(t, otHTTPExport(otCTProtobuf, true)(t, p, tok, otLogsReq(otNamings[3], recs...)))
	}
	// flushed returns the request-only rows' first message contents, oldest
	// first, requiring each to be a request-only exchange of the model.
	flushed := func(t *testing.T, tok, member string) []string {
		t.Helper()
		var out []string
		for _, r := range otExchanges(t, p, tok, member) {
			d := otData(t, r)
			require.Equal(t, true, d["requestOnly"], "only request-only rows: %v", d)
			require.Equal(t, model, d["model"])
			require.NotContains(t, d, "requestId")
			msgs, ok := d["messages"].([]any)
			require.True(t, ok, "%v", d)
			out = append(out, msgs[0].(obj)["content"].(string))
		}
		return out
	}

	t.Run("records", func(t *testing.T) {
		t.Parallel()
		const member, total = "gus", 300
		tok := createMember(t, restDriver{p}, admin, member)
		for from := 0; from < total; from += 100 {
			flood(t, tok, from, 100, text)
			want := max(0, from+100-otMaxPending)
			require.Len(t, flushed(t, tok, member), want, "after %d bodies", from+100)
		}
		var oldest []string
		for i := range total - otMaxPending {
			oldest = append(oldest, text(i))
		}
		require.Equal(t, oldest, flushed(t, tok, member), "the oldest bodies are flushed first")

		require.Equal(t, http.StatusOK, p.do(t, http.MethodGet, "/healthz", nil).status)
		u := otUsage{in: 1, out: 1, cost: 0.01, durationMs: 1}
		at := time.Now().Truncate(time.Millisecond)
		require.Zero(t, otGRPCExport(t, p, tok, otLogsReq(otNamings[0],
			otAcct(at, "sess-flood", 1000, model, "req_after", u),
			otRespBody(at, "sess-flood", 1001, model, "req_after", otAnthropicResponse(t, model, "msg_after", []obj{{"type": "text", "text": "ok"}}, "end_turn", u)))))
		row := otExchangeBy(t, otExchanges(t, p, tok, member), "req_after")
		otRequireDataHas(t, obj{"requestOnly": false, "responseId": "msg_after",
			"messages": []obj{{"role": "user", "content": text(total - otMaxPending)}}}, row)
	})

	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		// 90 bodies of 200 KB each: the state keeps at most 16 MiB of them
		// (server/otlp DefaultMaxBytes) however few they are.
		const member, perExport, exportsN, size = "hal", 30, 3, 200_000
		tok := createMember(t, restDriver{p}, admin, member)
		big := func(i int) string { return text(i) + strings.Repeat("x", size) }
		for e := range exportsN {
			flood(t, tok, e*perExport, perExport, big)
		}
		got := flushed(t, tok, member)
		t.Logf("%d of %d bodies of %d bytes flushed by the byte bound", len(got), perExport*exportsN, size)
		require.NotEmpty(t, got, "%d bodies of %d bytes are more than a member's state holds", perExport*exportsN, size)
		require.Less(t, len(got), perExport*exportsN)
		for i, c := range got {
			require.Equal(t, big(i), c, "the oldest bodies are flushed first")
		}
		require.Equal(t, http.StatusOK, p.do(t, http.MethodGet, "/healthz", nil).status)
	})
}

// TestOTLPLargeExportOnEveryTransport sends one export of 6 MB (30 raw
// bodies of 200 KB, well under the 16 MiB cap of docs/TELEMETRY.md; an
// exporter batching 100 of Claude Code's ~60 KB bodies sends as much) over every
// transport: the gRPC LogsService is "the same service" and takes what
// OTLP/HTTP takes.
func TestOTLPLargeExportOnEveryTransport(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	const model, n, size = "claude-big", 30, 200_000
	for _, tr := range otTransports {
		member := "large-" + tr.name
		tok := createMember(t, restDriver{p}, admin, member)
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			recs := make([]otRec, 0, n+2)
			for i := range n {
				recs = append(recs, otReqBody(at, "sess-big", int64(i), model,
					otAnthropicRequest(t, model, nil, []obj{{"role": "user", "content": fmt.Sprintf("%03d%s", i, strings.Repeat("x", size))}})))
			}
			u := otUsage{in: 1, out: 1, cost: 0.01, durationMs: 1}
			recs = append(recs, otAcct(at, "sess-big", n, model, "req_big", u),
				otRespBody(at, "sess-big", n+1, model, "req_big", otAnthropicResponse(t, model, "msg_big", []obj{{"type": "text", "text": "ok"}}, "end_turn", u)))
			req := otLogsReq(otNamings[3], recs...)
			require.Greater(t, proto.Size(req), 5<<20)
			require.Zero(t, tr.export(t, p, tok, req))
			row := otExchangeBy(t, otExchanges(t, p, tok, member), "req_big")
			otRequireDataHas(t, obj{"responseId": "msg_big", "requestOnly": false}, row)
			require.True(t, strings.HasPrefix(otData(t, row)["messages"].([]any)[0].(obj)["content"].(string), "000"))
		})
	}
}
