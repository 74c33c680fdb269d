package otlp

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
)

// Agent is the coding agent a record comes from.
type Agent string

const (
	// Claude is Claude Code: event names prefixed claude_code., and bare
	// names from any service that is not Codex.
	Claude Agent = "claude_code"
	// Codex is OpenAI Codex: event names prefixed codex., and bare names
	// from a service whose service.name contains "codex".
	Codex Agent = "codex"
)

// privateAttrs are the attributes removed from every record before
// anything else reads it: they identify the person, not the work.
var privateAttrs = []string{"user.email", "user.account_id"}

// Record is one OTLP log record, flattened with its resource.
type Record struct {
	// Name is the event name without agent prefix: "api_request",
	// "api_request_body", "tool_result", ...
	Name string
	// Agent is the agent that produced the record.
	Agent Agent
	// Time is timeUnixNano, else observedTimeUnixNano; zero when neither.
	Time time.Time
	// Attrs holds the record's attributes, every value rendered as a string
	// (numbers and booleans formatted, bytes in base64, arrays and key-value
	// lists as compact JSON); user.email and user.account_id are removed.
	Attrs map[string]string
	// Body is the log body when it is a string.
	Body string
	// Resource holds the resource attributes, rendered as Attrs are. The
	// records of one resource share it: read it, never write it.
	Resource map[string]string
}

// Records flattens every LogRecord of every ResourceLogs and ScopeLogs of
// req, in order. A record is named by its event.name attribute, else the
// LogRecord's own event_name field, else its body string. A prefixed name
// (claude_code., codex.) gives the agent; a bare one takes it from the body
// when the body is the same name prefixed (as Claude Code writes it), else
// from the service.name resource attribute (Codex when it contains "codex",
// in any case, Claude otherwise).
func Records(req *collogspb.ExportLogsServiceRequest) []Record {
	var out []Record
	for _, rl := range req.GetResourceLogs() {
		res := renderAttrs(rl.GetResource().GetAttributes())
		codexService := isCodexService(res)
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				if lr == nil {
					continue
				}
				out = append(out, record(lr, res, codexService))
			}
		}
	}
	return out
}

func record(lr *logspb.LogRecord, res map[string]string, codexService bool) Record {
	r := Record{
		Attrs:    renderAttrs(lr.GetAttributes()),
		Time:     unixNano(lr.GetTimeUnixNano()),
		Resource: res,
	}
	if r.Time.IsZero() {
		r.Time = unixNano(lr.GetObservedTimeUnixNano())
	}
	if s, ok := lr.GetBody().GetValue().(*commonpb.AnyValue_StringValue); ok {
		r.Body = noNUL(s.StringValue)
	}
	r.Name, r.Agent = nameRecord(r.Attrs, noNUL(lr.GetEventName()), r.Body, codexService)
	return r
}

// isCodexService reports whether resource attributes name a Codex service.
func isCodexService(res map[string]string) bool {
	return strings.Contains(strings.ToLower(res["service.name"]), "codex")
}

// nameRecord names a record and its agent (see Records).
func nameRecord(attrs map[string]string, eventName, body string, codexService bool) (string, Agent) {
	name := attrs["event.name"]
	if name == "" {
		name = eventName
	}
	if name == "" {
		name = body
	}
	bare, agent, ok := splitName(name)
	if ok {
		return bare, agent
	}
	if b, agent, ok := splitName(body); ok && b == name {
		return name, agent
	}
	if codexService {
		return name, Codex
	}
	return name, Claude
}

// splitName strips a known agent prefix from name, reporting whether there
// was one.
func splitName(name string) (string, Agent, bool) {
	for _, a := range []Agent{Claude, Codex} {
		if rest, ok := strings.CutPrefix(name, string(a)+"."); ok {
			return rest, a, true
		}
	}
	return name, "", false
}

// unixNano is the time of n nanoseconds since the epoch, zero for 0 and for
// values past what time.Time counts in int64 nanoseconds.
func unixNano(n uint64) time.Time {
	if n == 0 || n > math.MaxInt64 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// renderAttrs renders key-values as strings, the last of duplicate keys
// winning, without the private attributes.
func renderAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[noNUL(kv.GetKey())] = renderValue(kv.GetValue())
	}
	for _, k := range privateAttrs {
		delete(m, k)
	}
	return m
}

// renderValue renders one attribute value as a string, NUL replaced
// (noNUL) in every string it holds.
func renderValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return noNUL(x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BytesValue:
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue, *commonpb.AnyValue_KvlistValue:
		b, err := encodeJSONValue(jsonValue(v, 1))
		if err != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

// jsonValue maps an attribute value onto what encoding/json writes: a
// key-value list becomes an object (the last of duplicate keys winning),
// bytes a base64 string, a non-finite double its name as a string. Values
// nested past MaxValueDepth (only possible in a request that was not
// decoded here) become null.
func jsonValue(v *commonpb.AnyValue, depth int) any {
	if depth > MaxValueDepth {
		return nil
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return noNUL(x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		if math.IsNaN(x.DoubleValue) || math.IsInf(x.DoubleValue, 0) {
			return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		}
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue // encoding/json writes []byte as base64
	case *commonpb.AnyValue_ArrayValue:
		arr := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			arr = append(arr, jsonValue(e, depth+1))
		}
		return arr
	case *commonpb.AnyValue_KvlistValue:
		obj := make(map[string]any, len(x.KvlistValue.GetValues()))
		for _, kv := range x.KvlistValue.GetValues() {
			obj[noNUL(kv.GetKey())] = jsonValue(kv.GetValue(), depth+1)
		}
		return obj
	}
	return nil
}
