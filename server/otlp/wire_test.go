package otlp

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// rawExport is an export of one resource and scope holding records, each
// with the attributes given as key, string value pairs of raw bytes
// (proto.Marshal refuses strings that are not UTF-8).
func rawExport(records ...[][2][]byte) []byte {
	var scope []byte
	for _, attrs := range records {
		var rec []byte
		for _, a := range attrs {
			val := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), a[1])
			kv := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), a[0])
			kv = protowire.AppendBytes(protowire.AppendTag(kv, 2, protowire.BytesType), val)
			rec = protowire.AppendBytes(protowire.AppendTag(rec, 6, protowire.BytesType), kv)
		}
		scope = protowire.AppendBytes(protowire.AppendTag(scope, 2, protowire.BytesType), rec)
	}
	rl := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), scope)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rl)
}

// TestDecodeProtoRecordsInterning: the strings the decoder keeps for the
// rest of a request read as they did the first time, and a string is
// checked (UTF-8, NUL) as if it were read for the first time whenever its
// bytes were not kept.
func TestDecodeProtoRecordsInterning(t *testing.T) {
	attr := func(k, v string) [2][]byte { return [2][]byte{[]byte(k), []byte(v)} }
	rec := func(as ...[2][]byte) [][2][]byte { return as }
	long := strings.Repeat("x", internMaxLen)
	var many [][][2][]byte
	for i := range internMax + 10 {
		many = append(many, rec(attr("event.name", "e"), attr("k", strconv.Itoa(i))))
	}
	many = append(many, rec(attr("k", "0")), rec(attr("k", strconv.Itoa(internMax+5))))
	tests := []struct {
		name   string
		b      []byte
		refuse bool
	}{
		{"a repeated key and value with a NUL", rawExport(rec(attr("k\x00", "v\x00")), rec(attr("k\x00", "v\x00")), rec(attr("k\x00", "v\x00"))), false},
		{"a value that was a key", rawExport(rec(attr("x", "x"), attr("y", "x")), rec(attr("x", "y"))), false},
		{"valid bytes, then invalid ones of the same length", rawExport(rec(attr("ab", "ab")), rec(attr("\xff\xfe", "ab"))), true},
		{"an invalid value repeated", rawExport(rec(attr("a", "\xff")), rec(attr("a", "\xff"))), true},
		{"an invalid value after it was kept valid", rawExport(rec(attr("a", "ok")), rec(attr("a", "o\xff"))), true},
		{"strings at and past the length kept, repeated", rawExport(
			rec(attr(long, long), attr(long+"y", long+"y\x00")), rec(attr(long, long), attr(long+"y", long+"y\x00"))), false},
		{"more strings than are kept", rawExport(many...), false},
		{"a record with many attributes, then one with few", rawExport(
			rec(attr("a", "1"), attr("b", "2"), attr("c", "3"), attr("d", "4"), attr("e", "5")), rec(attr("a", "6")), rec()), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, requireSameRecords(t, tc.b) != tc.refuse, "taken by the fast path when it decodes")
			_, err := DecodeProtoRecords(tc.b)
			require.Equal(t, tc.refuse, err != nil, "refused: %v", err)
		})
	}
}

// TestDecodeProtoRecordsAllocs bounds the allocations of decoding the real
// exports: a string per distinct key and value of a request, not one per
// key and value of every record (42 a record before interning).
func TestDecodeProtoRecordsAllocs(t *testing.T) {
	docs := captures(t)
	records := 0
	for _, d := range docs {
		recs, err := DecodeProtoRecords(d)
		require.NoError(t, err)
		records += len(recs)
	}
	allocs := testing.AllocsPerRun(20, func() {
		for _, d := range docs {
			if _, err := DecodeProtoRecords(d); err != nil {
				t.Fatal(err)
			}
		}
	})
	perRecord := allocs / float64(records)
	t.Logf("%.1f allocations a record (%d records)", perRecord, records)
	require.LessOrEqual(t, perRecord, 25.0)
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

// BenchmarkDecodeProtoRecords decodes the real Claude Code exports as
// protobuf, reporting the time and allocations per record beside the
// usual per-pass figures: as they were sent (two exports, 14 records),
// and joined into one export of 98 records, the size of svcload's
// batches (a request given twice is one request with the records of
// both).
func BenchmarkDecodeProtoRecords(b *testing.B) {
	docs := captures(b)
	b.Run("exports=2", func(b *testing.B) { benchRecords(b, docs, DecodeProtoRecords) })
	var joined []byte
	for range 7 {
		for _, d := range docs {
			joined = append(joined, d...)
		}
	}
	b.Run("exports=1", func(b *testing.B) { benchRecords(b, [][]byte{joined}, DecodeProtoRecords) })
}

// benchRecords decodes every doc once per pass and reports the wall and
// CPU time and the allocations per decoded record.
func benchRecords(b *testing.B, docs [][]byte, decode func([]byte) ([]Record, error)) {
	size, records := 0, 0
	for _, d := range docs {
		size += len(d)
		recs, err := decode(d)
		require.NoError(b, err)
		records += len(recs)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := processCPU(b)
	for b.Loop() {
		for _, d := range docs {
			if _, err := decode(d); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := processCPU(b) - cpu0
	runtime.ReadMemStats(&ms1)
	n := float64(b.N * records)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
	// On a shared machine the wall time follows what the scheduler gives;
	// the process's CPU (GC included) is what decoding costs.
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/record")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/record")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAttrsHintCapped: the size hint a record leaves for the next one's
// map is capped, so an empty record after one of thousands of attributes
// does not keep a map sized for thousands (an export alternating the two
// kept twice the memory of the same records grouped; review).
func TestAttrsHintCapped(t *testing.T) {
	for _, n := range []int{0, 1, maxAttrsHint, maxAttrsHint + 1, 2000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var rec [][2][]byte
			for i := range n {
				rec = append(rec, [2][]byte{[]byte("k" + strconv.Itoa(i)), []byte("v")})
			}
			var d wireDecoder
			b := rawExport(rec)
			err := walk(b, requestFields, func(_ protowire.Number, v []byte) (err error) {
				_, err = d.resourceLogs(v, nil)
				return err
			})
			require.NoError(t, err)
			require.Equal(t, min(n, maxAttrsHint), d.attrs)
		})
	}
}
