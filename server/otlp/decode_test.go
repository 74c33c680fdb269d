package otlp

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	traceHex = "5b8efff798038103d269b633813fc60c"
	spanHex  = "eee19b7ec3c1b174"
)

// nested returns an attribute value nested depth levels deep, alternating
// arrays and key-value lists.
func nested(depth int) *commonpb.AnyValue {
	v := strVal("leaf")
	for i := 1; i < depth; i++ {
		if i%2 == 0 {
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{v}}}}
		} else {
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("k", v)}}}}
		}
	}
	return v
}

func nestedRequest(depth int) *collogspb.ExportLogsServiceRequest {
	return logsRequest(nil, &logspb.LogRecord{Attributes: []*commonpb.KeyValue{kv("deep", nested(depth))}})
}

func TestDecodeJSON(t *testing.T) {
	trace, _ := hex.DecodeString(traceHex)
	span, _ := hex.DecodeString(spanHex)
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, req *collogspb.ExportLogsServiceRequest)
	}{
		{
			name: "camel case, int64 as string, hex ids",
			in: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1763900000123000000",
				"traceId":"` + traceHex + `","spanId":"` + spanHex + `","body":{"stringValue":"claude_code.api_request"},
				"attributes":[{"key":"n","value":{"intValue":"7"}}]}]}]}]}`,
			check: func(t *testing.T, req *collogspb.ExportLogsServiceRequest) {
				lr := req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0]
				require.Equal(t, uint64(1763900000123000000), lr.GetTimeUnixNano())
				require.Equal(t, trace, lr.GetTraceId())
				require.Equal(t, span, lr.GetSpanId())
				require.Equal(t, int64(7), lr.GetAttributes()[0].GetValue().GetIntValue())
			},
		},
		{
			name: "snake case, int64 as number, unknown fields",
			in: `{"resource_logs":[{"unknown":{"x":[1,2]},"scope_logs":[{"log_records":[{"time_unix_nano":1763900000123000000,
				"trace_id":"` + traceHex + `","span_id":"` + spanHex + `","severity_number":9,"future_field":true,
				"attributes":[{"key":"n","value":{"int_value":7}}]}]}]}]}`,
			check: func(t *testing.T, req *collogspb.ExportLogsServiceRequest) {
				lr := req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0]
				require.Equal(t, uint64(1763900000123000000), lr.GetTimeUnixNano())
				require.Equal(t, trace, lr.GetTraceId())
				require.Equal(t, span, lr.GetSpanId())
				require.Equal(t, int64(7), lr.GetAttributes()[0].GetValue().GetIntValue())
				require.Equal(t, logspb.SeverityNumber_SEVERITY_NUMBER_INFO, lr.GetSeverityNumber())
			},
		},
		{
			name: "id key spelled with unicode escapes is still hex",
			in:   `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"\u0074raceId":"` + traceHex + `"}]}]}]}`,
			check: func(t *testing.T, req *collogspb.ExportLogsServiceRequest) {
				require.Equal(t, trace, req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0].GetTraceId())
			},
		},
		{
			name: "empty ids",
			in:   `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"","spanId":null}]}]}]}`,
			check: func(t *testing.T, req *collogspb.ExportLogsServiceRequest) {
				require.Empty(t, req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0].GetTraceId())
			},
		},
		{name: "empty object", in: `{}`, check: func(t *testing.T, req *collogspb.ExportLogsServiceRequest) { require.Empty(t, req.GetResourceLogs()) }},
		{name: "invalid hex trace id", in: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"zz8efff798038103d269b633813fc60c"}]}]}]}`, wantErr: "invalid traceId"},
		{name: "base64 trace id", in: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"W47/95gDgQPSabYzgT/GDA=="}]}]}]}`, wantErr: "invalid traceId"},
		{name: "short span id", in: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"spanId":"eee1"}]}]}]}`, wantErr: "invalid spanId"},
		{name: "snake invalid span id", in: `{"resource_logs":[{"scope_logs":[{"log_records":[{"span_id":"xyz"}]}]}]}`, wantErr: "invalid span_id"},
		{name: "empty input", in: ``, wantErr: "decode otlp json"},
		{name: "not an object", in: `[1]`, wantErr: "decode otlp json"},
		{name: "trailing data with ids", in: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"` + traceHex + `"}]}]}]} {}`, wantErr: "trailing data"},
		{name: "trailing data", in: `{} {}`, wantErr: "decode otlp json"},
		{name: "wrong type", in: `{"resourceLogs":{"a":1}}`, wantErr: "decode otlp json"},
		{name: "raw nesting too deep", in: strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), wantErr: ErrTooDeep.Error()},
		{name: "brackets inside strings do not count", in: `{"x":"` + strings.Repeat("[", 1000) + `"}`, check: func(t *testing.T, req *collogspb.ExportLogsServiceRequest) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeJSON([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Nil(t, req)
				return
			}
			require.NoError(t, err)
			tc.check(t, req)
		})
	}
}

// TestDecodeJSONHexTrap shows the trap DecodeJSON avoids: protojson alone
// reads a 32-character hex id as base64, without error, into wrong bytes.
func TestDecodeJSONHexTrap(t *testing.T) {
	in := []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"` + traceHex + `","spanId":"` + spanHex + `"}]}]}]}`)
	want, _ := hex.DecodeString(traceHex)

	naive := &collogspb.ExportLogsServiceRequest{}
	require.NoError(t, protojson.Unmarshal(in, naive))
	naiveID := naive.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0].GetTraceId()
	require.NotEqual(t, want, naiveID)
	require.Len(t, naiveID, 24)

	req, err := DecodeJSON(in)
	require.NoError(t, err)
	require.Equal(t, want, req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0].GetTraceId())
}

func TestDecodeDepth(t *testing.T) {
	tests := []struct {
		name    string
		depth   int
		wantErr bool
	}{
		{name: "flat", depth: 1},
		{name: "at the limit", depth: MaxValueDepth},
		{name: "past the limit", depth: MaxValueDepth + 1, wantErr: true},
		{name: "far past the limit", depth: 150, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := nestedRequest(tc.depth)
			pb, err := proto.Marshal(req)
			require.NoError(t, err)
			for _, enc := range []struct {
				name   string
				decode func([]byte) (*collogspb.ExportLogsServiceRequest, error)
				in     []byte
			}{
				{name: "proto", decode: DecodeProto, in: pb},
				{name: "json", decode: DecodeJSON, in: encodeOTLPJSON(t, req, false)},
				{name: "json snake", decode: DecodeJSON, in: encodeOTLPJSON(t, req, true)},
			} {
				got, err := enc.decode(enc.in)
				if tc.wantErr {
					require.ErrorIs(t, err, ErrTooDeep, enc.name)
					continue
				}
				require.NoError(t, err, enc.name)
				require.True(t, proto.Equal(req, got), enc.name)
			}
		})
	}
}

func TestDecodeProtoErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{name: "truncated field", in: []byte{0x0a, 0x05, 0x01}},
		{name: "invalid wire type", in: []byte{0x0f}},
		{name: "invalid utf-8 string", in: mustMarshalRaw(t)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeProto(tc.in)
			require.ErrorContains(t, err, "decode otlp protobuf")
		})
	}
	req, err := DecodeProto(nil)
	require.NoError(t, err, "an empty body is an empty request")
	require.Empty(t, req.GetResourceLogs())
}

// mustMarshalRaw returns a request whose attribute key is invalid UTF-8.
func mustMarshalRaw(t *testing.T) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{}.Marshal(logsRequest(strAttrs("k", "v")))
	require.NoError(t, err)
	i := strings.Index(string(b), "k")
	b[i] = 0xff
	return b
}

// samplePayload is one Claude Code export, in OTLP/JSON as the exporter
// writes it, and the same request built in Go.
const samplePayload = `{"resourceLogs":[{"resource":{"attributes":[
  {"key":"service.name","value":{"stringValue":"claude-code"}},
  {"key":"host.arch","value":{"stringValue":"amd64"}}]},
 "scopeLogs":[{"scope":{"name":"com.anthropic.claude_code.events","version":"2.1.328"},
  "logRecords":[
   {"timeUnixNano":"1763900000100000000","observedTimeUnixNano":"1763900000100000000",
    "traceId":"` + traceHex + `","spanId":"` + spanHex + `",
    "body":{"stringValue":"claude_code.api_request"},
    "attributes":[
     {"key":"event.name","value":{"stringValue":"api_request"}},
     {"key":"event.sequence","value":{"stringValue":"3"}},
     {"key":"user.email","value":{"stringValue":"a@example.com"}},
     {"key":"model","value":{"stringValue":"claude-sonnet-4-5"}},
     {"key":"input_tokens","value":{"intValue":"10"}},
     {"key":"cost_usd","value":{"doubleValue":0.0012}},
     {"key":"cached","value":{"boolValue":false}},
     {"key":"tags","value":{"arrayValue":{"values":[{"stringValue":"a"},{"intValue":"2"}]}}}]},
   {"observedTimeUnixNano":"1763900000200000000","severityNumber":"SEVERITY_NUMBER_INFO",
    "body":{"stringValue":"claude_code.user_prompt"},
    "attributes":[{"key":"event.name","value":{"stringValue":"user_prompt"}},
     {"key":"prompt_length","value":{"stringValue":"5"}}]}]}]}]}`

func sampleRequest() *collogspb.ExportLogsServiceRequest {
	trace, _ := hex.DecodeString(traceHex)
	span, _ := hex.DecodeString(spanHex)
	req := logsRequest(strAttrs("service.name", "claude-code", "host.arch", "amd64"),
		&logspb.LogRecord{
			TimeUnixNano: 1763900000100000000, ObservedTimeUnixNano: 1763900000100000000,
			TraceId: trace, SpanId: span,
			Body: strVal("claude_code.api_request"),
			Attributes: append(strAttrs("event.name", "api_request", "event.sequence", "3", "user.email", "a@example.com", "model", "claude-sonnet-4-5"),
				kv("input_tokens", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 10}}),
				kv("cost_usd", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.0012}}),
				kv("cached", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}}),
				kv("tags", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{
					strVal("a"), {Value: &commonpb.AnyValue_IntValue{IntValue: 2}},
				}}}})),
		},
		&logspb.LogRecord{
			ObservedTimeUnixNano: 1763900000200000000, SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO,
			Body:       strVal("claude_code.user_prompt"),
			Attributes: strAttrs("event.name", "user_prompt", "prompt_length", "5"),
		})
	req.ResourceLogs[0].ScopeLogs[0].Scope.Version = "2.1.328"
	return req
}

// TestDecodeSamePayload decodes one payload as JSON (hand-written and
// re-encoded, both key spellings) and as protobuf: same request, same
// records.
func TestDecodeSamePayload(t *testing.T) {
	want := sampleRequest()
	pb, err := proto.Marshal(want)
	require.NoError(t, err)
	inputs := []struct {
		name   string
		decode func([]byte) (*collogspb.ExportLogsServiceRequest, error)
		in     []byte
	}{
		{name: "hand-written json", decode: DecodeJSON, in: []byte(samplePayload)},
		{name: "encoded json", decode: DecodeJSON, in: encodeOTLPJSON(t, want, false)},
		{name: "encoded json snake case", decode: DecodeJSON, in: encodeOTLPJSON(t, want, true)},
		{name: "protobuf", decode: DecodeProto, in: pb},
	}
	wantRecords := []Record{
		{
			Name: "api_request", Agent: Claude, Time: time.Unix(0, 1763900000100000000).UTC(),
			Attrs: map[string]string{
				"event.name": "api_request", "event.sequence": "3", "model": "claude-sonnet-4-5",
				"input_tokens": "10", "cost_usd": "0.0012", "cached": "false", "tags": `["a",2]`,
			},
			Body:     "claude_code.api_request",
			Resource: map[string]string{"service.name": "claude-code", "host.arch": "amd64"},
		},
		{
			Name: "user_prompt", Agent: Claude, Time: time.Unix(0, 1763900000200000000).UTC(),
			Attrs:    map[string]string{"event.name": "user_prompt", "prompt_length": "5"},
			Body:     "claude_code.user_prompt",
			Resource: map[string]string{"service.name": "claude-code", "host.arch": "amd64"},
		},
	}
	for _, tc := range inputs {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.decode(tc.in)
			require.NoError(t, err)
			require.True(t, proto.Equal(want, got), "decoded %v", got)
			require.Equal(t, wantRecords, Records(got))
		})
	}
}
