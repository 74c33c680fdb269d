package otlp

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
)

func TestRecordsNaming(t *testing.T) {
	claudeRes := strAttrs("service.name", "claude-code")
	codexRes := strAttrs("service.name", "Codex_CLI_rs")
	tests := []struct {
		name      string
		res       []*commonpb.KeyValue
		lr        *logspb.LogRecord
		wantName  string
		wantAgent Agent
	}{
		{name: "bare event.name, claude service", res: claudeRes, lr: &logspb.LogRecord{Attributes: strAttrs("event.name", "api_request")}, wantName: "api_request", wantAgent: Claude},
		{name: "bare event.name, codex service any case", res: codexRes, lr: &logspb.LogRecord{Attributes: strAttrs("event.name", "tool_result")}, wantName: "tool_result", wantAgent: Codex},
		{name: "bare event.name, no resource", lr: &logspb.LogRecord{Attributes: strAttrs("event.name", "user_prompt")}, wantName: "user_prompt", wantAgent: Claude},
		{name: "claude prefix wins over codex service", res: codexRes, lr: &logspb.LogRecord{Attributes: strAttrs("event.name", "claude_code.api_request")}, wantName: "api_request", wantAgent: Claude},
		{name: "codex prefix", res: claudeRes, lr: &logspb.LogRecord{Attributes: strAttrs("event.name", "codex.sse_event")}, wantName: "sse_event", wantAgent: Codex},
		{name: "bare name, prefixed body of the same name", res: codexRes, lr: &logspb.LogRecord{Body: strVal("claude_code.api_request"), Attributes: strAttrs("event.name", "api_request")}, wantName: "api_request", wantAgent: Claude},
		{name: "bare name, prefixed body of another name", res: codexRes, lr: &logspb.LogRecord{Body: strVal("claude_code.other"), Attributes: strAttrs("event.name", "api_request")}, wantName: "api_request", wantAgent: Codex},
		{name: "event_name field", lr: &logspb.LogRecord{EventName: "codex.api_request", Body: strVal("x")}, wantName: "api_request", wantAgent: Codex},
		{name: "attribute before field", lr: &logspb.LogRecord{EventName: "codex.api_request", Attributes: strAttrs("event.name", "claude_code.tool_result")}, wantName: "tool_result", wantAgent: Claude},
		{name: "body fallback", res: codexRes, lr: &logspb.LogRecord{Body: strVal("codex.websocket_request")}, wantName: "websocket_request", wantAgent: Codex},
		{name: "bare body fallback", res: codexRes, lr: &logspb.LogRecord{Body: strVal("conversation_starts")}, wantName: "conversation_starts", wantAgent: Codex},
		{name: "nothing", lr: &logspb.LogRecord{}, wantName: "", wantAgent: Claude},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := Records(logsRequest(tc.res, tc.lr))
			require.Len(t, recs, 1)
			require.Equal(t, tc.wantName, recs[0].Name)
			require.Equal(t, tc.wantAgent, recs[0].Agent)
		})
	}
}

func TestRecordsTime(t *testing.T) {
	tests := []struct {
		name string
		lr   *logspb.LogRecord
		want time.Time
	}{
		{name: "time", lr: &logspb.LogRecord{TimeUnixNano: 2_000_000_000, ObservedTimeUnixNano: 3_000_000_000}, want: time.Unix(2, 0).UTC()},
		{name: "observed", lr: &logspb.LogRecord{ObservedTimeUnixNano: 3_000_000_000}, want: time.Unix(3, 0).UTC()},
		{name: "neither", lr: &logspb.LogRecord{}},
		{name: "past int64", lr: &logspb.LogRecord{TimeUnixNano: math.MaxUint64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := Records(logsRequest(nil, tc.lr))
			require.Len(t, recs, 1)
			require.Equal(t, tc.want, recs[0].Time)
		})
	}
}

func TestRecordsRendering(t *testing.T) {
	i := func(n int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
	}
	d := func(f float64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
	}
	arr := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	kvl := func(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
	}
	tests := []struct {
		name string
		v    *commonpb.AnyValue
		want string
	}{
		{name: "string", v: strVal("x <y>"), want: "x <y>"},
		{name: "int", v: i(-42), want: "-42"},
		{name: "double", v: d(0.5), want: "0.5"},
		{name: "big double", v: d(1e21), want: "1e+21"},
		{name: "nan", v: d(math.NaN()), want: "NaN"},
		{name: "bool", v: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}, want: "true"},
		{name: "bytes", v: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{1, 2, 255}}}, want: "AQL/"},
		{name: "empty value", v: &commonpb.AnyValue{}, want: ""},
		{name: "nil value", v: nil, want: ""},
		{name: "array", v: arr(strVal("a"), i(1), d(1.5), d(math.Inf(1)), nil, &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{1}}}), want: `["a",1,1.5,"+Inf",null,"AQ=="]`},
		{name: "kvlist", v: kvl(kv("b", i(1)), kv("a", arr(strVal("<x>"))), kv("b", i(2))), want: `{"a":["<x>"],"b":2}`},
		{name: "empty array", v: arr(), want: `[]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := Records(logsRequest(nil, &logspb.LogRecord{Attributes: []*commonpb.KeyValue{kv("v", tc.v)}}))
			require.Equal(t, tc.want, recs[0].Attrs["v"])
		})
	}
}

// TestRecordsRenderingDepth: a value nested past MaxValueDepth (possible
// only in a request not decoded here) is cut to null, not walked.
func TestRecordsRenderingDepth(t *testing.T) {
	for _, depth := range []int{MaxValueDepth, MaxValueDepth + 1, 10 * MaxValueDepth} {
		recs := Records(nestedRequest(depth))
		got := recs[0].Attrs["deep"]
		v, err := decodeJSONValue([]byte(got))
		require.NoError(t, err)
		levels := 0
		for v != nil {
			levels++
			switch x := v.(type) {
			case []any:
				v = x[0]
			case map[string]any:
				v = x["k"]
			default:
				v = nil
			}
		}
		require.Equal(t, min(depth, MaxValueDepth), levels, "depth %d", depth)
		require.Equal(t, depth <= MaxValueDepth, strings.Contains(got, "leaf"), "depth %d", depth)
	}
}

func TestRecordsBodyAndPrivacy(t *testing.T) {
	req := logsRequest(strAttrs("service.name", "codex", "user.email", "r@example.com", "user.account_id", "acc"),
		&logspb.LogRecord{Body: strVal("codex.sse_event"), Attributes: strAttrs("user.email", "a@example.com", "user.account_id", "1", "user.id", "u")},
		&logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 3}}},
	)
	recs := Records(req)
	require.Len(t, recs, 2)
	require.Equal(t, map[string]string{"user.id": "u"}, recs[0].Attrs)
	require.Equal(t, map[string]string{"service.name": "codex"}, recs[0].Resource)
	require.Equal(t, "codex.sse_event", recs[0].Body)
	require.Empty(t, recs[1].Body, "a non-string body is not a body string")
	require.Equal(t, recs[0].Resource, recs[1].Resource, "records of one resource share its attributes")
}

func TestRecordsShape(t *testing.T) {
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		nil,
		{ScopeLogs: []*logspb.ScopeLogs{nil, {LogRecords: []*logspb.LogRecord{nil, {Body: strVal("a")}, {Body: strVal("b")}}}}},
		{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: strVal("c")}}}}},
	}}
	var names []string
	for _, r := range Records(req) {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"a", "b", "c"}, names)
	require.Empty(t, Records(nil))
}
