package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// addProtoSeeds seeds f with the sample export and exports nested at and
// past the value depth limit, as binary protobuf.
func addProtoSeeds(f *testing.F) {
	for _, req := range []proto.Message{sampleRequest(), nestedRequest(MaxValueDepth), nestedRequest(MaxValueDepth + 1)} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// encodeOTLPJSON writes req as OTLP/JSON: protojson, with the LogRecord ids
// in hex as OTLP/JSON requires. snake selects the proto field names.
func encodeOTLPJSON(tb testing.TB, req *collogspb.ExportLogsServiceRequest, snake bool) []byte {
	tb.Helper()
	b, err := protojson.MarshalOptions{UseProtoNames: snake}.Marshal(req)
	if err != nil {
		tb.Fatalf("marshal: %v", err)
	}
	doc, err := decodeJSONValue(b)
	if err != nil {
		tb.Fatalf("redecode: %v", err)
	}
	for _, rl := range objectsAt(doc, "resourceLogs", "resource_logs") {
		for _, sl := range objectsAt(rl, "scopeLogs", "scope_logs") {
			for _, lr := range objectsAt(sl, "logRecords", "log_records") {
				for key := range idFields {
					if s, ok := lr[key].(string); ok {
						id, err := base64.StdEncoding.DecodeString(s)
						if err != nil {
							tb.Fatalf("id: %v", err)
						}
						lr[key] = hex.EncodeToString(id)
					}
				}
			}
		}
	}
	out, err := encodeJSONValue(doc)
	if err != nil {
		tb.Fatalf("encode: %v", err)
	}
	return out
}

func strVal(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

// strAttrs makes string attributes from key, value pairs.
func strAttrs(pairs ...string) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, kv(pairs[i], strVal(pairs[i+1])))
	}
	return out
}

// request wraps log records in one resource (with resAttrs) and one scope.
func logsRequest(resAttrs []*commonpb.KeyValue, recs ...*logspb.LogRecord) *collogspb.ExportLogsServiceRequest {
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: resAttrs},
		ScopeLogs: []*logspb.ScopeLogs{{Scope: &commonpb.InstrumentationScope{Name: "com.anthropic.claude_code.events"}, LogRecords: recs}},
	}}}
}
