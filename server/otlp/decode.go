package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"svc/server/jsondepth"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	// MaxValueDepth is how deep attribute and body values may nest: a value
	// is at depth 1, an element of an array or key-value list at depth 2, and
	// so on. Deeper requests are refused rather than walked recursively.
	MaxValueDepth = 64

	// maxJSONDepth bounds the nesting of a JSON document as a whole. A
	// request whose values nest MaxValueDepth deep needs 262 levels (10 of
	// envelope, 4 per key-value list level), so 300 refuses nothing valid.
	maxJSONDepth = 300

	// maxMessageDepth bounds the protobuf decoder's own recursion; the
	// value depth check after decoding is the exact rule.
	maxMessageDepth = 512
)

// ErrTooDeep answers a request nested deeper than the package allows.
var ErrTooDeep = errors.New("otlp request nested too deep")

// DecodeJSON decodes an OTLP/JSON ExportLogsServiceRequest: camelCase or
// snake_case keys, 64-bit integers as strings or numbers, unknown fields
// ignored. traceId and spanId are read as OTLP/JSON writes them, in hex (not
// the base64 protojson would assume); an id that is not hex of the right
// length is an error.
func DecodeJSON(b []byte) (*collogspb.ExportLogsServiceRequest, error) {
	if err := checkJSONDepth(b); err != nil {
		return nil, err
	}
	// A document that cannot name an id field needs no rewriting: every id
	// key contains "trace" or "span", or spells them with \u escapes.
	if bytes.Contains(b, []byte("trace")) || bytes.Contains(b, []byte("span")) || bytes.Contains(b, []byte(`\u`)) {
		var err error
		if b, err = hexIDsToBase64(b); err != nil {
			return nil, err
		}
	}
	req := &collogspb.ExportLogsServiceRequest{}
	opts := protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: maxMessageDepth}
	if err := opts.Unmarshal(b, req); err != nil {
		return nil, fmt.Errorf("decode otlp json: %w", err)
	}
	if err := checkValueDepth(req); err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeProto decodes a binary protobuf ExportLogsServiceRequest.
func DecodeProto(b []byte) (*collogspb.ExportLogsServiceRequest, error) {
	req := &collogspb.ExportLogsServiceRequest{}
	opts := proto.UnmarshalOptions{RecursionLimit: maxMessageDepth}
	if err := opts.Unmarshal(b, req); err != nil {
		return nil, fmt.Errorf("decode otlp protobuf: %w", err)
	}
	if err := checkValueDepth(req); err != nil {
		return nil, err
	}
	return req, nil
}

// checkJSONDepth refuses a document whose objects and arrays nest deeper
// than maxJSONDepth, before anything is allocated for it.
func checkJSONDepth(b []byte) error {
	if jsondepth.Exceeds(b, maxJSONDepth) {
		return ErrTooDeep
	}
	return nil
}

// idFields names the hex id fields of a LogRecord, in both spellings, with
// the byte length OTLP gives each.
var idFields = map[string]int{"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8}

// hexIDsToBase64 rewrites the LogRecord id fields of an OTLP/JSON document
// from hex to base64, the encoding protojson expects for bytes. 32 hex
// characters are also valid base64, so without this they would silently
// decode to the wrong bytes.
func hexIDsToBase64(b []byte) ([]byte, error) {
	doc, err := decodeJSONValue(b)
	if err != nil {
		return nil, fmt.Errorf("decode otlp json: %w", err)
	}
	for _, rl := range objectsAt(doc, "resourceLogs", "resource_logs") {
		for _, sl := range objectsAt(rl, "scopeLogs", "scope_logs") {
			for _, lr := range objectsAt(sl, "logRecords", "log_records") {
				for key, size := range idFields {
					s, ok := lr[key].(string)
					if !ok || s == "" {
						continue // absent, null or empty; other types protojson refuses
					}
					id, err := hex.DecodeString(s)
					if err != nil || len(id) != size {
						return nil, fmt.Errorf("decode otlp json: invalid %s %q", key, s)
					}
					lr[key] = base64.StdEncoding.EncodeToString(id)
				}
			}
		}
	}
	return encodeJSONValue(doc)
}

// objectsAt returns the objects in the array v holds under either key.
func objectsAt(v any, keys ...string) []map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []map[string]any
	for _, k := range keys {
		arr, _ := m[k].([]any)
		for _, e := range arr {
			if o, ok := e.(map[string]any); ok {
				out = append(out, o)
			}
		}
	}
	return out
}

// decodeJSONValue decodes exactly one JSON value, keeping numbers as
// json.Number so re-encoding loses no precision, and with every NUL its
// strings held (as the \u0000 escape) replaced (noNUL).
func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after json value")
	}
	return noNULValue(v), nil
}

// encodeJSONValue encodes v compactly, without HTML escaping.
func encodeJSONValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// CheckDepth refuses (ErrTooDeep) a request decoded elsewhere (by gRPC)
// whose attribute or body values nest deeper than MaxValueDepth, as the
// decoders here do.
func CheckDepth(req *collogspb.ExportLogsServiceRequest) error { return checkValueDepth(req) }

// checkValueDepth refuses a request whose attribute or body values nest
// deeper than MaxValueDepth.
func checkValueDepth(req *collogspb.ExportLogsServiceRequest) error {
	for _, rl := range req.GetResourceLogs() {
		if !attrsWithin(rl.GetResource().GetAttributes()) {
			return ErrTooDeep
		}
		for _, sl := range rl.GetScopeLogs() {
			if !attrsWithin(sl.GetScope().GetAttributes()) {
				return ErrTooDeep
			}
			for _, lr := range sl.GetLogRecords() {
				if !valueWithin(lr.GetBody(), 1) || !attrsWithin(lr.GetAttributes()) {
					return ErrTooDeep
				}
			}
		}
	}
	return nil
}

func attrsWithin(kvs []*commonpb.KeyValue) bool {
	for _, kv := range kvs {
		if !valueWithin(kv.GetValue(), 1) {
			return false
		}
	}
	return true
}

// valueWithin reports whether v, at depth, nests no deeper than
// MaxValueDepth; it stops descending as soon as the limit is passed.
func valueWithin(v *commonpb.AnyValue, depth int) bool {
	if v == nil {
		return true
	}
	if depth > MaxValueDepth {
		return false
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_ArrayValue:
		for _, e := range x.ArrayValue.GetValues() {
			if !valueWithin(e, depth+1) {
				return false
			}
		}
	case *commonpb.AnyValue_KvlistValue:
		for _, kv := range x.KvlistValue.GetValues() {
			if !valueWithin(kv.GetValue(), depth+1) {
				return false
			}
		}
	}
	return true
}
