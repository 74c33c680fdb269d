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

// uncommon lists a field whose presence makes a request uncommon.
const uncommon protowire.Type = -1

// fields says what a decoder reads of a message: the wire type of each
// field number it reads. A listed field of another wire type, or one
// listed as uncommon, makes the request uncommon; fields not listed are
// skipped (still checked to be well formed), as protobuf skips fields it
// does not know.
type fields map[protowire.Number]protowire.Type

// walk calls fn with each field of message b that fs lists, in order.
func walk(b []byte, fs fields, fn func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		want, read := fs[num]
		if !read {
			continue
		}
		if typ != want {
			return errUncommon
		}
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}

// wireDecoder decodes one request. It interns the short strings it reads:
// the attribute keys, and the values that repeat from record to record
// (session, user and organization ids, versions, model names), are then
// allocated once per request instead of once per record, which was most
// of the decoder's allocations.
type wireDecoder struct {
	strs map[string]string
	// attrs is how many attributes the last record had: the next record's
	// map is made that large, so it does not grow (and rehash) as it fills.
	attrs int
}

// maxAttrsHint caps wireDecoder.attrs: a record kept with a map sized for
// the thousands of attributes of the record before it would hold twice
// the memory a hostile export of alternating huge and empty records
// already costs (review); real records carry a few dozen.
const maxAttrsHint = 64

// Interning bounds: a string longer than internMaxLen (prompts, bodies) is
// rarely repeated and is not kept; at most internMax are kept a request.
const (
	internMaxLen = 128
	internMax    = 1024
)

// str reads a string field as protobuf does: it must be UTF-8. A NUL is
// replaced (noNUL).
func (d *wireDecoder) str(v []byte) (string, error) {
	short := len(v) <= internMaxLen
	if short {
		// The map is keyed by the bytes read: the same bytes were valid
		// UTF-8 and gave this string before.
		if s, ok := d.strs[string(v)]; ok {
			return s, nil
		}
	}
	if !utf8.Valid(v) {
		return "", errMalformed
	}
	raw := string(v)
	s := noNUL(raw)
	if short && len(d.strs) < internMax {
		if d.strs == nil {
			d.strs = make(map[string]string, 64)
		}
		d.strs[raw] = s
	}
	return s, nil
}

// checkString checks a string field no record reads: it must be UTF-8.
func checkString(_ protowire.Number, v []byte) error {
	if !utf8.Valid(v) {
		return errMalformed
	}
	return nil
}

var (
	requestFields      = fields{1: protowire.BytesType} // resource_logs
	resourceLogsFields = fields{
		1: protowire.BytesType, // resource
		2: protowire.BytesType, // scope_logs
		3: protowire.BytesType, // schema_url
	}
	resourceFields = fields{
		1: protowire.BytesType,  // attributes
		2: protowire.VarintType, // dropped_attributes_count
		3: uncommon,             // entity_refs
	}
	scopeLogsFields = fields{
		1: protowire.BytesType, // scope
		2: protowire.BytesType, // log_records
		3: protowire.BytesType, // schema_url
	}
	scopeFields = fields{
		1: protowire.BytesType,  // name
		2: protowire.BytesType,  // version
		3: protowire.BytesType,  // attributes
		4: protowire.VarintType, // dropped_attributes_count
	}
	logRecordFields = fields{
		1:  protowire.Fixed64Type, // time_unix_nano
		2:  protowire.VarintType,  // severity_number
		3:  protowire.BytesType,   // severity_text
		5:  protowire.BytesType,   // body
		6:  protowire.BytesType,   // attributes
		7:  protowire.VarintType,  // dropped_attributes_count
		8:  protowire.Fixed32Type, // flags
		9:  protowire.BytesType,   // trace_id
		10: protowire.BytesType,   // span_id
		11: protowire.Fixed64Type, // observed_time_unix_nano
		12: protowire.BytesType,   // event_name
	}
	keyValueFields = fields{
		1: protowire.BytesType, // key
		2: protowire.BytesType, // value
		3: uncommon,            // key_strindex
	}
	anyValueFields = fields{
		1: protowire.BytesType,   // string_value
		2: protowire.VarintType,  // bool_value
		3: protowire.VarintType,  // int_value
		4: protowire.Fixed64Type, // double_value
		5: protowire.BytesType,   // array_value
		6: protowire.BytesType,   // kvlist_value
		7: protowire.BytesType,   // bytes_value
		8: uncommon,              // string_value_strindex
	}
)

func decodeRequest(b []byte) ([]Record, error) {
	var (
		out []Record
		d   wireDecoder
	)
	err := walk(b, requestFields, func(_ protowire.Number, v []byte) (err error) {
		out, err = d.resourceLogs(v, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *wireDecoder) resourceLogs(b []byte, out []Record) ([]Record, error) {
	var (
		scopes  [][]byte
		res     map[string]string
		resSeen bool
	)
	err := walk(b, resourceLogsFields, func(num protowire.Number, v []byte) (err error) {
		switch num {
		case 1:
			if resSeen {
				return errUncommon
			}
			resSeen = true
			res, err = d.resource(v)
			return err
		case 2:
			scopes = append(scopes, v)
			return nil
		default:
			return checkString(num, v)
		}
	})
	if err != nil {
		return nil, err
	}
	if !resSeen {
		res = renderAttrs(nil)
	}
	codexService := isCodexService(res)
	for _, s := range scopes {
		if out, err = d.scopeLogs(s, res, codexService, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *wireDecoder) resource(b []byte) (map[string]string, error) {
	m := map[string]string{}
	err := walk(b, resourceFields, func(num protowire.Number, v []byte) error {
		if num == 1 {
			return d.keyValue(v, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range privateAttrs {
		delete(m, k)
	}
	return m, nil
}

func (d *wireDecoder) scopeLogs(b []byte, res map[string]string, codexService bool, out []Record) ([]Record, error) {
	scopeSeen := false
	var logs [][]byte
	err := walk(b, scopeLogsFields, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			if scopeSeen {
				return errUncommon
			}
			scopeSeen = true
			return d.checkScope(v)
		case 2:
			logs = append(logs, v)
			return nil
		default:
			return checkString(num, v)
		}
	})
	if err != nil {
		return nil, err
	}
	for _, l := range logs {
		r, err := d.logRecord(l, res, codexService)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// checkScope checks an InstrumentationScope, which no record reads, as
// protobuf would decode it.
func (d *wireDecoder) checkScope(b []byte) error {
	discard := map[string]string{}
	return walk(b, scopeFields, func(num protowire.Number, v []byte) error {
		switch num {
		case 1, 2:
			return checkString(num, v)
		case 3:
			return d.keyValue(v, discard)
		}
		return nil
	})
}

func (d *wireDecoder) logRecord(b []byte, res map[string]string, codexService bool) (Record, error) {
	var (
		timeNano, observedNano uint64
		body                   string
		bodySeen               bool
		eventName              string
	)
	attrs := make(map[string]string, d.attrs)
	err := walk(b, logRecordFields, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			timeNano, _ = protowire.ConsumeFixed64(v)
		case 11:
			observedNano, _ = protowire.ConsumeFixed64(v)
		case 3:
			return checkString(num, v)
		case 12:
			s, err := d.str(v)
			if err != nil {
				return err
			}
			eventName = s
		case 5:
			if bodySeen {
				return errUncommon
			}
			bodySeen = true
			val, err := d.anyValue(v)
			if err != nil {
				return err
			}
			if val.isString {
				body = val.s
			}
		case 6:
			return d.keyValue(v, attrs)
		}
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	// A hint, capped: a small record after a huge one keeps no huge map.
	d.attrs = min(len(attrs), maxAttrsHint)
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

// keyValue reads one KeyValue into m, its value rendered as renderValue
// does; a later key wins.
func (d *wireDecoder) keyValue(b []byte, m map[string]string) error {
	var (
		key       string
		val       anyValue
		valueSeen bool
	)
	err := walk(b, keyValueFields, func(num protowire.Number, v []byte) (err error) {
		if num == 1 {
			key, err = d.str(v)
			return err
		}
		if valueSeen {
			return errUncommon
		}
		valueSeen = true
		val, err = d.anyValue(v)
		return err
	})
	if err != nil {
		return err
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

// anyValue reads an AnyValue. Scalars are read here; arrays,
// key-value lists and values that set more than one case go through
// protobuf itself, so nesting, merging and rendering are exactly the
// generic path's.
func (d *wireDecoder) anyValue(b []byte) (anyValue, error) {
	var (
		out   anyValue
		cases int
	)
	err := walk(b, anyValueFields, func(num protowire.Number, v []byte) error {
		cases++
		switch num {
		case 1:
			s, err := d.str(v)
			if err != nil {
				return err
			}
			out = anyValue{s: s, isString: true}
		case 2:
			x, _ := protowire.ConsumeVarint(v)
			out = anyValue{s: strconv.FormatBool(x != 0)}
		case 3:
			x, _ := protowire.ConsumeVarint(v)
			out = anyValue{s: strconv.FormatInt(int64(x), 10)}
		case 4:
			x, _ := protowire.ConsumeFixed64(v)
			out = anyValue{s: strconv.FormatFloat(math.Float64frombits(x), 'g', -1, 64)}
		default: // array_value, kvlist_value, bytes_value
			cases += 2 // always the generic path
		}
		return nil
	})
	if err != nil {
		return out, err
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
