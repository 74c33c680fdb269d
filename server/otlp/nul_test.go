package otlp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

func TestNoNUL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"\x00", "\uFFFD"},
		{"a\x00b\x00\x00c", "a\uFFFDb\uFFFD\uFFFDc"},
		{"é\x00€", "é\uFFFD€"},
	} {
		require.Equal(t, tt.want, noNUL(tt.in), "%q", tt.in)
	}
}

// nulRequest carries a NUL in every kind of string an export has: a
// resource attribute's key and value, a record attribute's key and value,
// the event name, the body, and strings nested in an array and a
// key-value list.
func nulRequest() []byte {
	list := &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{strVal("x\x00y")}}}}
	kvl := &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("k\x00", strVal("v\x00"))}}}}
	lr := &logspb.LogRecord{
		TimeUnixNano: 1,
		EventName:    "claude_code.api_request\x00",
		Body:         strVal("b\x00dy"),
		Attributes: append(strAttrs("event.name", "claude_code.user_prompt", "prompt", "say\x00hi", "a\x00key", "v"),
			kv("list", list), kv("kvlist", kvl)),
	}
	b, err := proto.Marshal(logsRequest(strAttrs("service.name", "claude\x00code", "os\x00type", "linux"), lr))
	if err != nil {
		panic(err)
	}
	return b
}

// requireNoNUL fails when a record holds a NUL anywhere, also in a value
// rendered as JSON (an array, a key-value list).
func requireNoNUL(t testing.TB, recs []Record) {
	t.Helper()
	check := func(what, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("%s holds a NUL: %q", what, s)
		}
		var v any // decoded plainly: decodeJSONValue would replace the NUL
		if s != "" && (s[0] == '[' || s[0] == '{') && json.Unmarshal([]byte(s), &v) == nil {
			if anyNUL(v) {
				t.Fatalf("%s holds a NUL in its JSON: %q", what, s)
			}
		}
	}
	for _, r := range recs {
		check("name", r.Name)
		check("body", r.Body)
		for k, v := range r.Attrs {
			check("attribute key", k)
			check("attribute "+k, v)
		}
		for k, v := range r.Resource {
			check("resource key", k)
			check("resource "+k, v)
		}
	}
}

// Every decoder replaces NUL where it reads a string: the protobuf fast
// path, the generic protobuf path (gRPC) and OTLP/JSON.
func TestDecodersReplaceNUL(t *testing.T) {
	pb := nulRequest()
	fast, err := DecodeProtoRecords(pb)
	require.NoError(t, err)
	req, err := DecodeProto(pb)
	require.NoError(t, err)
	generic := Records(req)
	fromJSON, err := DecodeJSON(encodeOTLPJSON(t, req, false))
	require.NoError(t, err)
	for name, recs := range map[string][]Record{"fast": fast, "generic": generic, "json": Records(fromJSON)} {
		t.Run(name, func(t *testing.T) {
			require.Len(t, recs, 1)
			requireNoNUL(t, recs)
			r := recs[0]
			require.Equal(t, "say\uFFFDhi", r.Attrs["prompt"])
			require.Equal(t, "v", r.Attrs["a\uFFFDkey"])
			require.Equal(t, `["x`+"\uFFFD"+`y"]`, r.Attrs["list"])
			require.Equal(t, `{"k`+"\uFFFD"+`":"v`+"\uFFFD"+`"}`, r.Attrs["kvlist"])
			require.Equal(t, "b\uFFFDdy", r.Body)
			require.Equal(t, "claude\uFFFDcode", r.Resource["service.name"])
			require.Equal(t, "linux", r.Resource["os\uFFFDtype"])
		})
	}
	require.Equal(t, fast, generic, "the fast path reads what the generic one does")
}

// A NUL escaped inside the JSON an attribute carries (a request body, a
// tool's input) is replaced too: the stored data holds neither a NUL nor
// the \u0000 escape PostgreSQL's jsonb refuses.
func TestCorrelatedJSONHoldsNoNUL(t *testing.T) {
	c := NewCorrelator(Options{Now: func() time.Time { return at(10) }})
	events, _ := c.Ingest("alice", []Record{
		body(1, `a\u0000b`, 1),
		acct("req_1", 2),
		resp("req_1", 3, "body", strings.Replace(respJSON, `"answer"`, `"ans\u0000wer"`, 1)),
		rec("tool_result", 4, "tool_name", "Bash", "tool_parameters", `{"cmd\u0000":"x\u0000y"}`, "success", "true"),
	})
	events = append(events, c.Drain("alice")...)
	require.NotEmpty(t, events)
	var all strings.Builder
	for _, e := range events {
		b, err := e.MarshalData()
		require.NoError(t, err)
		require.NotContains(t, string(b), `\u0000`)
		require.NotContains(t, string(b), "\x00")
		all.Write(b)
	}
	for _, want := range []string{"a\uFFFDb", "ans\uFFFDwer", `"cmd` + "\uFFFD" + `":"x` + "\uFFFD" + `y"`} {
		require.Contains(t, all.String(), want)
	}
}

// Whatever an export holds, no record decoded from it holds a NUL.
func FuzzDecodedRecordsHoldNoNUL(f *testing.F) {
	addProtoSeeds(f)
	f.Add(nulRequest())
	f.Add([]byte(`{"resourceLogs":[{"resource":{"attributes":[{"key":"a\u0000","value":{"stringValue":"\u0000"}}]},"scopeLogs":[{"logRecords":[{"eventName":"x\u0000","body":{"stringValue":"b\u0000"},"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"stringValue":"\u0000"}]}}}]}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if recs, err := DecodeProtoRecords(b); err == nil {
			requireNoNUL(t, recs)
		}
		if req, err := DecodeJSON(b); err == nil {
			requireNoNUL(t, Records(req))
		}
		if v, err := decodeJSONValue(b); err == nil && anyNUL(v) {
			t.Fatalf("decoded JSON holds a NUL: %q", b)
		}
	})
}

// anyNUL reports whether a decoded JSON value holds a NUL in a string or
// a key. (decodeJSONValue replaces them: this walk is the test's own.)
func anyNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case []any:
		for _, e := range x {
			if anyNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || anyNUL(e) {
				return true
			}
		}
	}
	return false
}
