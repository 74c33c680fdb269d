package main

import (
	"bytes"
	"fmt"
	"strconv"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// A generated session's records as OTLP exports, encoded once per encoding
// with a hole where each session sent puts its id (telsession.go).

// otlpEncoding is a session's exports in one encoding, ready to send.
type otlpEncoding struct {
	name, contentType string
	reqs              [sessionParts]otlpRequest
}

// otlpRequest is one export of a session: its encoded template and where
// the hole is in it.
type otlpRequest struct {
	body    []byte
	holes   []int
	records int
	unused  int // records svc answers as not used
}

func newEncoding(name, contentType string, recs []telRecord, encode func([]telRecord) []byte) *otlpEncoding {
	e := &otlpEncoding{name: name, contentType: contentType}
	for p := range e.reqs {
		part := recs[p*otlpBatch : (p+1)*otlpBatch]
		rq := otlpRequest{body: encode(part), records: len(part)}
		for _, r := range part {
			if !svcUses(r.name) {
				rq.unused++
			}
		}
		for i := 0; ; {
			j := bytes.Index(rq.body[i:], []byte(sessionHole))
			if j < 0 {
				break
			}
			rq.holes = append(rq.holes, i+j)
			i += j + len(sessionHole)
		}
		e.reqs[p] = rq
	}
	return e
}

// meanKB is the mean size of the encoding's exports in KB.
func (e *otlpEncoding) meanKB() float64 {
	n := 0
	for _, rq := range e.reqs {
		n += len(rq.body)
	}
	return float64(n) / float64(len(e.reqs)) / 1e3
}

// instance is the export with session's 12 hex digits in every hole.
func (r otlpRequest) instance(session uint64) []byte {
	var id [len(sessionHole)]byte
	for i := len(id) - 1; i >= 0; i-- {
		id[i] = "0123456789abcdef"[session&15]
		session >>= 4
	}
	b := bytes.Clone(r.body)
	for _, at := range r.holes {
		copy(b[at:], id[:])
	}
	return b
}

// encodeOTLPProto encodes records as one binary ExportLogsServiceRequest.
func encodeOTLPProto(recs []telRecord) []byte {
	lrs := make([]*logspb.LogRecord, len(recs))
	for i, r := range recs {
		ns := uint64(r.at.UnixNano())
		lrs[i] = &logspb.LogRecord{
			TimeUnixNano: ns, ObservedTimeUnixNano: ns,
			Body:       &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "claude_code." + r.name}},
			Attributes: protoAttrs(r.attrs),
		}
	}
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{Attributes: protoAttrs(claudeResource)},
		ScopeLogs: []*logspb.ScopeLogs{{
			Scope:      &commonpb.InstrumentationScope{Name: "com.anthropic.claude_code.events", Version: claudeVersion},
			LogRecords: lrs,
		}},
	}}}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err) // a request we built
	}
	return b
}

func protoAttrs(attrs []attr) []*commonpb.KeyValue {
	kvs := make([]*commonpb.KeyValue, len(attrs))
	for i, a := range attrs {
		v := &commonpb.AnyValue{}
		switch x := a.val.(type) {
		case string:
			v.Value = &commonpb.AnyValue_StringValue{StringValue: x}
		case int64:
			v.Value = &commonpb.AnyValue_IntValue{IntValue: x}
		case float64:
			v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: x}
		case bool:
			v.Value = &commonpb.AnyValue_BoolValue{BoolValue: x}
		case []any:
			v.Value = &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{}}
		default:
			panic(fmt.Sprintf("attribute %s: %T", a.key, a.val))
		}
		kvs[i] = &commonpb.KeyValue{Key: a.key, Value: v}
	}
	return kvs
}

// encodeOTLPJSON encodes records as one OTLP/JSON ExportLogsServiceRequest
// shaped as Claude Code's JavaScript exporter writes it (integers as
// numbers, times as strings).
func encodeOTLPJSON(recs []telRecord) []byte {
	b := []byte(`{"resourceLogs":[{"resource":{"attributes":`)
	b = appendJSONAttrs(b, claudeResource)
	b = append(b, `,"droppedAttributesCount":0},"scopeLogs":[{"scope":{"name":"com.anthropic.claude_code.events","version":"`+claudeVersion+`"},"logRecords":[`...)
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		ns := strconv.FormatInt(r.at.UnixNano(), 10)
		b = append(b, `{"timeUnixNano":"`+ns+`","observedTimeUnixNano":"`+ns+`","body":{"stringValue":"claude_code.`+r.name+`"},"attributes":`...)
		b = appendJSONAttrs(b, r.attrs)
		b = append(b, `,"droppedAttributesCount":0}`...)
	}
	return append(b, `]}]}]}`...)
}

func appendJSONAttrs(b []byte, attrs []attr) []byte {
	b = append(b, '[')
	for i, a := range attrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`+marshalCompact(a.key)+`,"value":{`...)
		switch x := a.val.(type) {
		case string:
			b = append(b, `"stringValue":`+marshalCompact(x)...)
		case int64:
			b = append(b, `"intValue":`+strconv.FormatInt(x, 10)...)
		case float64:
			b = append(b, `"doubleValue":`+strconv.FormatFloat(x, 'g', -1, 64)...)
		case bool:
			b = append(b, `"boolValue":`+strconv.FormatBool(x)...)
		case []any:
			b = append(b, `"arrayValue":{"values":[]}`...)
		default:
			panic(fmt.Sprintf("attribute %s: %T", a.key, a.val))
		}
		b = append(b, "}}"...)
	}
	return append(b, ']')
}
