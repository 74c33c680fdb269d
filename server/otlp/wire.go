package otlp

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// errUncommon makes DecodeProtoRecords hand a request to the generic path:
// it holds something exporters do not send (a singular message given twice,
// which protobuf merges; a field with another wire type than its own; a
// field of the dictionary encodings), whose exact protobuf semantics only
// the generic decoder has.
var errUncommon = errors.New("otlp: uncommon encoding")

// DecodeProtoRecords decodes a binary protobuf ExportLogsServiceRequest
// straight into its Records: the same records, and the same refusals, as
// Records(DecodeProto(b)), without building the request's messages first,
// which is most of ingest's allocation. What it does not read itself
// (attribute values that are arrays or key-value lists, and uncommon
// encodings) goes through the generic decoder.
func DecodeProtoRecords(b []byte) ([]Record, error) {
	recs, err := decodeRequest(b)
	if errors.Is(err, errUncommon) {
		req, err := DecodeProto(b)
		if err != nil {
			return nil, err
		}
		return Records(req), nil
	}
	if err != nil {
		return nil, fmt.Errorf("decode otlp protobuf: %w", err)
	}
	return recs, nil
}

// errMalformed is a request protobuf cannot decode.
var errMalformed = errors.New("malformed protobuf")

// field reads one field: its number, wire type and, for a length-delimited
// field, its bytes; n is how much of b it took.
func field(b []byte) (num protowire.Number, typ protowire.Type, val []byte, n int, err error) {
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, 0, errMalformed
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, nil, 0, errMalformed
	}
	if typ == protowire.BytesType {
		v, _ := protowire.ConsumeBytes(b[n:])
		val = v
	} else {
		val = b[n : n+m]
	}
	return num, typ, val, n + m, nil
}

// want checks a known field's wire type; another is uncommon.
func want(typ, known protowire.Type) error {
	if typ != known {
		return errUncommon
	}
	return nil
}

// utf8String reads a string field as protobuf does: it must be UTF-8.
func utf8String(v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", errMalformed
	}
	return string(v), nil
}

func decodeRequest(b []byte) ([]Record, error) {
	var out []Record
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		if num != 1 {
			continue // unknown to the request too
		}
		if err := want(typ, protowire.BytesType); err != nil {
			return nil, err
		}
		if out, err = decodeResourceLogs(v, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeResourceLogs(b []byte, out []Record) ([]Record, error) {
	var (
		scopes      [][]byte
		res         map[string]string
		resSeen     bool
		hasResource bool
	)
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		switch num {
		case 1: // resource
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			if resSeen {
				return nil, errUncommon
			}
			resSeen, hasResource = true, true
			if res, err = decodeResource(v); err != nil {
				return nil, err
			}
		case 2: // scope_logs
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			scopes = append(scopes, v)
		case 3: // schema_url
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			if _, err := utf8String(v); err != nil {
				return nil, err
			}
		}
	}
	if !hasResource {
		res = renderAttrs(nil)
	}
	codexService := isCodexService(res)
	for _, s := range scopes {
		var err error
		if out, err = decodeScopeLogs(s, res, codexService, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeResource(b []byte) (map[string]string, error) {
	m := map[string]string{}
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		switch num {
		case 1: // attributes
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			if err := decodeKeyValue(v, m); err != nil {
				return nil, err
			}
		case 2: // dropped_attributes_count
			if err := want(typ, protowire.VarintType); err != nil {
				return nil, err
			}
		case 3: // entity_refs
			return nil, errUncommon
		}
	}
	for _, k := range privateAttrs {
		delete(m, k)
	}
	return m, nil
}

func decodeScopeLogs(b []byte, res map[string]string, codexService bool, out []Record) ([]Record, error) {
	scopeSeen := false
	var logs [][]byte
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		switch num {
		case 1: // scope
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			if scopeSeen {
				return nil, errUncommon
			}
			scopeSeen = true
			if err := checkScope(v); err != nil {
				return nil, err
			}
		case 2: // log_records
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			logs = append(logs, v)
		case 3: // schema_url
			if err := want(typ, protowire.BytesType); err != nil {
				return nil, err
			}
			if _, err := utf8String(v); err != nil {
				return nil, err
			}
		}
	}
	for _, l := range logs {
		r, err := decodeLogRecord(l, res, codexService)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// checkScope checks an InstrumentationScope, which no record reads, as
// protobuf would decode it.
func checkScope(b []byte) error {
	discard := map[string]string{}
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch num {
		case 1, 2: // name, version
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			if _, err := utf8String(v); err != nil {
				return err
			}
		case 3: // attributes
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			if err := decodeKeyValue(v, discard); err != nil {
				return err
			}
		case 4: // dropped_attributes_count
			if err := want(typ, protowire.VarintType); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeLogRecord(b []byte, res map[string]string, codexService bool) (Record, error) {
	var (
		timeNano, observedNano uint64
		body                   string
		bodySeen               bool
		eventName              string
	)
	attrs := map[string]string{}
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return Record{}, err
		}
		b = b[n:]
		switch num {
		case 1, 11: // time_unix_nano, observed_time_unix_nano
			if err := want(typ, protowire.Fixed64Type); err != nil {
				return Record{}, err
			}
			t, _ := protowire.ConsumeFixed64(v)
			if num == 1 {
				timeNano = t
			} else {
				observedNano = t
			}
		case 2, 7: // severity_number, dropped_attributes_count
			if err := want(typ, protowire.VarintType); err != nil {
				return Record{}, err
			}
		case 3, 12: // severity_text, event_name
			if err := want(typ, protowire.BytesType); err != nil {
				return Record{}, err
			}
			s, err := utf8String(v)
			if err != nil {
				return Record{}, err
			}
			if num == 12 {
				eventName = s
			}
		case 5: // body
			if err := want(typ, protowire.BytesType); err != nil {
				return Record{}, err
			}
			if bodySeen {
				return Record{}, errUncommon
			}
			bodySeen = true
			val, err := decodeAnyValue(v)
			if err != nil {
				return Record{}, err
			}
			if val.isString {
				body = val.s
			}
		case 6: // attributes
			if err := want(typ, protowire.BytesType); err != nil {
				return Record{}, err
			}
			if err := decodeKeyValue(v, attrs); err != nil {
				return Record{}, err
			}
		case 8: // flags
			if err := want(typ, protowire.Fixed32Type); err != nil {
				return Record{}, err
			}
		case 9, 10: // trace_id, span_id
			if err := want(typ, protowire.BytesType); err != nil {
				return Record{}, err
			}
		}
	}
	for _, k := range privateAttrs {
		delete(attrs, k)
	}
	r := Record{Attrs: attrs, Time: unixNano(timeNano), Body: body, Resource: res}
	if r.Time.IsZero() {
		r.Time = unixNano(observedNano)
	}
	r.Name, r.Agent = nameRecord(attrs, eventName, body, codexService)
	return r, nil
}

// decodeKeyValue reads one KeyValue into m, its value rendered as
// renderValue does; a later key wins.
func decodeKeyValue(b []byte, m map[string]string) error {
	var (
		key       string
		val       anyValue
		valueSeen bool
	)
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch num {
		case 1: // key
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			if key, err = utf8String(v); err != nil {
				return err
			}
		case 2: // value
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			if valueSeen {
				return errUncommon
			}
			valueSeen = true
			if val, err = decodeAnyValue(v); err != nil {
				return err
			}
		case 3: // key_strindex
			return errUncommon
		}
	}
	m[key] = val.s
	return nil
}

// anyValue is a decoded attribute value: s as renderValue renders it, and
// whether it was a string.
type anyValue struct {
	s        string
	isString bool
}

// decodeAnyValue reads an AnyValue. Scalars are read here; arrays,
// key-value lists and values that set more than one case go through
// protobuf itself, so nesting, merging and rendering are exactly the
// generic path's.
func decodeAnyValue(b []byte) (anyValue, error) {
	var (
		out   anyValue
		cases int
	)
	for rest := b; len(rest) > 0; {
		num, typ, v, n, err := field(rest)
		if err != nil {
			return out, err
		}
		rest = rest[n:]
		switch num {
		case 1: // string_value
			if err := want(typ, protowire.BytesType); err != nil {
				return out, err
			}
			s, err := utf8String(v)
			if err != nil {
				return out, err
			}
			out = anyValue{s: s, isString: true}
		case 2: // bool_value
			if err := want(typ, protowire.VarintType); err != nil {
				return out, err
			}
			x, _ := protowire.ConsumeVarint(v)
			out = anyValue{s: strconv.FormatBool(x != 0)}
		case 3: // int_value
			if err := want(typ, protowire.VarintType); err != nil {
				return out, err
			}
			x, _ := protowire.ConsumeVarint(v)
			out = anyValue{s: strconv.FormatInt(int64(x), 10)}
		case 4: // double_value
			if err := want(typ, protowire.Fixed64Type); err != nil {
				return out, err
			}
			x, _ := protowire.ConsumeFixed64(v)
			out = anyValue{s: strconv.FormatFloat(math.Float64frombits(x), 'g', -1, 64)}
		case 5, 6, 7: // array_value, kvlist_value, bytes_value
			if err := want(typ, protowire.BytesType); err != nil {
				return out, err
			}
			cases += 2 // always the generic path
		case 8: // string_value_strindex
			return out, errUncommon
		default:
			continue
		}
		cases++
	}
	if cases <= 1 {
		return out, nil
	}
	v := &commonpb.AnyValue{}
	if err := (proto.UnmarshalOptions{RecursionLimit: maxMessageDepth}).Unmarshal(b, v); err != nil {
		return out, err
	}
	if !valueWithin(v, 1) {
		return out, ErrTooDeep
	}
	_, isString := v.GetValue().(*commonpb.AnyValue_StringValue)
	return anyValue{s: renderValue(v), isString: isString}, nil
}
