package otlp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// genericRecords is the reference DecodeProtoRecords must equal.
func genericRecords(b []byte) ([]Record, error) {
	req, err := DecodeProto(b)
	if err != nil {
		return nil, err
	}
	return Records(req), nil
}

// requireSameRecords checks DecodeProtoRecords against the generic path on
// b, and reports whether its fast path took it.
func requireSameRecords(t testing.TB, b []byte) bool {
	t.Helper()
	want, werr := genericRecords(b)
	got, gerr := DecodeProtoRecords(b)
	require.Equal(t, werr == nil, gerr == nil, "refusals agree: generic %v, fast %v", werr, gerr)
	if werr == nil {
		if len(want) == 0 {
			require.Empty(t, got)
		} else {
			require.Equal(t, want, got)
		}
	}
	_, err := decodeRequest(b)
	return err == nil
}

// captures are the real Claude Code exports, as protobuf.
func captures(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/claude-code-*.json")
	require.NoError(t, err)
	var out [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		req, err := DecodeJSON(raw)
		require.NoError(t, err)
		b, err := proto.Marshal(req)
		require.NoError(t, err)
		out = append(out, b)
	}
	require.NotEmpty(t, out)
	return out
}

func TestDecodeProtoRecords(t *testing.T) {
	for _, b := range captures(t) {
		require.True(t, requireSameRecords(t, b), "a real export takes the fast path")
	}
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		return b
	}
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	rich := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: nil,
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{
			ObservedTimeUnixNano: 5,
			Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("a", str("b"))}}}},
			Attributes: []*commonpb.KeyValue{
				kv("i", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -7}}),
				kv("d", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}),
				kv("b", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
				kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{1, 2}}}),
				kv("arr", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{str("x")}}}}),
				kv("none", nil), kv("i", str("later wins")), kv("user.email", str("x@y")),
			},
			EventName: "claude_code.user_prompt",
		}}}},
	}}}
	tests := []struct {
		name string
		b    []byte
		fast bool
	}{
		{"every value kind", marshal(rich), true},
		{"empty", nil, true},
		{"a resource given twice is merged by protobuf", twoResources(t), false},
		{"an unknown field is skipped", protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("x")), true},
		{"a known field of another wire type", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3), false},
		{"a cut message", marshal(rich)[:40], false},
		{"a record with nothing", marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{}}}}}}}), true},
	}
	// A key that is not UTF-8, written by hand since proto.Marshal refuses it.
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("\xff"))
	bad = protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), bad)
	bad = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), bad)
	bad = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), bad)
	bad = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bad)
	tests = append(tests, struct {
		name string
		b    []byte
		fast bool
	}{"a key that is not UTF-8 is refused", bad, false})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fast := requireSameRecords(t, tc.b)
			if tc.fast {
				require.True(t, fast, "taken by the fast path")
			}
		})
	}
}

func FuzzDecodeProtoRecords(f *testing.F) {
	for _, b := range captures(f) {
		f.Add(b)
	}
	addProtoSeeds(f)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00, 0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		requireSameRecords(t, b)
	})
}

// twoResources is an export whose ResourceLogs gives its resource twice,
// which protobuf merges into one.
func twoResources(t *testing.T) []byte {
	res := func(k, v string) []byte {
		b, err := proto.Marshal(&logspb.ResourceLogs{Resource: &resourcepb.Resource{Attributes: strAttrs(k, v)}})
		require.NoError(t, err)
		return b
	}
	rl := append(res("service.name", "codex"), res("other", "x")...)
	logs, err := proto.Marshal(&logspb.ResourceLogs{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "tool_result"}}}}}}})
	require.NoError(t, err)
	rl = append(rl, logs...)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rl)
}
