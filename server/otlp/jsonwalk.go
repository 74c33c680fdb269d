package otlp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// DecodeJSONRecords decodes an OTLP/JSON ExportLogsServiceRequest straight
// into its Records: the same records, and the same refusals with the same
// errors, as Records(DecodeJSON(b)). The generic path reads the document
// up to three times (a depth scan, a rewrite of the hex ids through
// encoding/json, then protojson building every message), which was half
// of JSON ingest's CPU. A walker reads the shape exporters send in one
// pass; anything it is not certain of (a field it does not know, null, a
// duplicate key, an escape it does not take, a number in an unusual form,
// a value that is an array, a key-value list or bytes, and every error)
// hands the whole document to the generic path, so what is accepted,
// refused and stored stays that path's.
func DecodeJSONRecords(b []byte) ([]Record, error) {
	if recs, ok := walkJSONRequest(b); ok {
		return recs, nil
	}
	req, err := DecodeJSON(b)
	if err != nil {
		return nil, err
	}
	return Records(req), nil
}

// errJSONUncommon stops the walker: the generic path decides.
var errJSONUncommon = errors.New("otlp: json the walker does not take")

// walkJSONRequest is the walker; ok false means the generic path decides.
func walkJSONRequest(b []byte) (recs []Record, ok bool) {
	// Every document the walker takes is valid UTF-8 with no NUL: then the
	// generic path's rewrite (which replaces both) changes nothing protojson
	// reads.
	if !utf8.Valid(b) || bytes.Contains(b, []byte(`\u0000`)) {
		return nil, false
	}
	w := &jwalker{b: b}
	out := []Record{}
	err := w.object(func(f int) error {
		if f != jfResourceLogs {
			return errJSONUncommon
		}
		return w.array(func() error {
			var err error
			out, err = w.resourceLogs(out)
			return err
		})
	}, requestKeys)
	if err != nil {
		return nil, false
	}
	w.ws()
	if w.i != len(w.b) {
		return nil, false
	}
	if len(out) == 0 {
		// Records of an empty request is nil.
		out = nil
	}
	return out, true
}

// Field indexes: the JSON name and the proto name of a field map to the
// same index, so a field given twice in either spelling is a duplicate
// (which protojson refuses).
const (
	jfResourceLogs = iota
	jfResource
	jfScopeLogs
	jfSchemaURL
	jfAttributes
	jfDropped
	jfScope
	jfLogRecords
	jfName
	jfVersion
	jfTime
	jfObserved
	jfSeverityNumber
	jfSeverityText
	jfBody
	jfFlags
	jfTraceID
	jfSpanID
	jfEventName
	jfKey
	jfValue
	jfString
	jfBool
	jfInt
	jfDouble
	jfOtherValue // arrayValue, kvlistValue, bytesValue: protojson decodes them
)

type jkeys map[string]int

var (
	requestKeys      = jkeys{"resourceLogs": jfResourceLogs, "resource_logs": jfResourceLogs}
	resourceLogsKeys = jkeys{"resource": jfResource, "scopeLogs": jfScopeLogs, "scope_logs": jfScopeLogs,
		"schemaUrl": jfSchemaURL, "schema_url": jfSchemaURL}
	resourceKeys  = jkeys{"attributes": jfAttributes, "droppedAttributesCount": jfDropped, "dropped_attributes_count": jfDropped}
	scopeLogsKeys = jkeys{"scope": jfScope, "logRecords": jfLogRecords, "log_records": jfLogRecords,
		"schemaUrl": jfSchemaURL, "schema_url": jfSchemaURL}
	scopeKeys = jkeys{"name": jfName, "version": jfVersion, "attributes": jfAttributes,
		"droppedAttributesCount": jfDropped, "dropped_attributes_count": jfDropped}
	logRecordKeys = jkeys{
		"timeUnixNano": jfTime, "time_unix_nano": jfTime,
		"observedTimeUnixNano": jfObserved, "observed_time_unix_nano": jfObserved,
		"severityNumber": jfSeverityNumber, "severity_number": jfSeverityNumber,
		"severityText": jfSeverityText, "severity_text": jfSeverityText,
		"body": jfBody, "attributes": jfAttributes,
		"droppedAttributesCount": jfDropped, "dropped_attributes_count": jfDropped,
		"flags": jfFlags, "traceId": jfTraceID, "trace_id": jfTraceID, "spanId": jfSpanID, "span_id": jfSpanID,
		"eventName": jfEventName, "event_name": jfEventName,
	}
	keyValueKeys = jkeys{"key": jfKey, "value": jfValue}
	anyValueKeys = jkeys{
		"stringValue": jfString, "string_value": jfString,
		"boolValue": jfBool, "bool_value": jfBool,
		"intValue": jfInt, "int_value": jfInt,
		"doubleValue": jfDouble, "double_value": jfDouble,
		"arrayValue": jfOtherValue, "array_value": jfOtherValue,
		"kvlistValue": jfOtherValue, "kvlist_value": jfOtherValue,
		"bytesValue": jfOtherValue, "bytes_value": jfOtherValue,
	}
)

// jwalker reads one JSON document; every method returns errJSONUncommon
// for anything it does not take.
type jwalker struct {
	b []byte
	i int
}

func (w *jwalker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// next skips whitespace and reports the next byte (0 at the end).
func (w *jwalker) next() byte {
	w.ws()
	if w.i >= len(w.b) {
		return 0
	}
	return w.b[w.i]
}

func (w *jwalker) expect(c byte) error {
	if w.next() != c {
		return errJSONUncommon
	}
	w.i++
	return nil
}

// object reads an object whose keys must all be in keys, each at most
// once, calling fn with each key's field index to read its value.
func (w *jwalker) object(fn func(f int) error, keys jkeys) error {
	if err := w.expect('{'); err != nil {
		return err
	}
	if w.next() == '}' {
		w.i++
		return nil
	}
	var seen uint64
	for {
		f, ok, err := w.key(keys)
		if err != nil {
			return err
		}
		if !ok || seen&(1<<f) != 0 {
			return errJSONUncommon
		}
		seen |= 1 << f
		if err := w.expect(':'); err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		switch w.next() {
		case ',':
			w.i++
		case '}':
			w.i++
			return nil
		default:
			return errJSONUncommon
		}
	}
}

// array reads an array, calling fn to read each element.
func (w *jwalker) array(fn func() error) error {
	if err := w.expect('['); err != nil {
		return err
	}
	if w.next() == ']' {
		w.i++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch w.next() {
		case ',':
			w.i++
		case ']':
			w.i++
			return nil
		default:
			return errJSONUncommon
		}
	}
}

// key reads an object's key and looks it up in keys; a key without
// escapes is looked up in place, without a copy.
func (w *jwalker) key(keys jkeys) (int, bool, error) {
	if w.next() != '"' {
		return 0, false, errJSONUncommon
	}
	if end := bytes.IndexByte(w.b[w.i+1:], '"'); end >= 0 {
		raw := w.b[w.i+1 : w.i+1+end]
		if bytes.IndexByte(raw, '\\') < 0 && !hasControl(raw) {
			w.i += end + 2
			f, ok := keys[string(raw)]
			return f, ok, nil
		}
	}
	k, err := w.str()
	if err != nil {
		return 0, false, err
	}
	f, ok := keys[k]
	return f, ok, nil
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// skipStr reads a string no record keeps, copying nothing when it has no
// escapes.
func (w *jwalker) skipStr() error {
	if w.next() != '"' {
		return errJSONUncommon
	}
	if end := bytes.IndexByte(w.b[w.i+1:], '"'); end >= 0 {
		raw := w.b[w.i+1 : w.i+1+end]
		if bytes.IndexByte(raw, '\\') < 0 && !hasControl(raw) {
			w.i += end + 2
			return nil
		}
	}
	_, err := w.str()
	return err
}

// str reads a string. It takes the simple escapes and \u escapes outside
// the surrogates (and not NUL, refused up front); control characters are
// invalid JSON.
func (w *jwalker) str() (string, error) {
	if w.next() != '"' {
		return "", errJSONUncommon
	}
	w.i++
	end := bytes.IndexByte(w.b[w.i:], '"')
	if end < 0 {
		return "", errJSONUncommon
	}
	raw := w.b[w.i : w.i+end]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return w.escaped()
	}
	if hasControl(raw) {
		return "", errJSONUncommon
	}
	w.i += end + 1
	return string(raw), nil
}

// escaped reads the rest of a string that has an escape, from w.i just
// past its opening quote, copying the runs between escapes whole.
func (w *jwalker) escaped() (string, error) {
	var buf []byte
	for {
		// The next quote or backslash, whichever comes first: two
		// IndexByte scans (vectorised) beat one IndexAny (a byte loop).
		rest := w.b[w.i:]
		j := bytes.IndexByte(rest, '\\')
		if j < 0 {
			j = len(rest)
		}
		if q := bytes.IndexByte(rest[:j], '"'); q >= 0 {
			j = q
		}
		if j == len(rest) {
			return "", errJSONUncommon
		}
		run := w.b[w.i : w.i+j]
		if hasControl(run) {
			return "", errJSONUncommon
		}
		if buf == nil {
			buf = make([]byte, 0, j+64)
		}
		buf = append(buf, run...)
		w.i += j
		if w.b[w.i] == '"' {
			w.i++
			return string(buf), nil
		}
		if w.i+1 >= len(w.b) {
			return "", errJSONUncommon
		}
		e := w.b[w.i+1]
		w.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			if w.i+4 > len(w.b) {
				return "", errJSONUncommon
			}
			var r rune
			for _, h := range w.b[w.i : w.i+4] {
				d, ok := hexDigit(h)
				if !ok {
					return "", errJSONUncommon
				}
				r = r<<4 | d
			}
			if r == 0 || (r >= 0xD800 && r <= 0xDFFF) {
				return "", errJSONUncommon // NUL and surrogates: the generic path
			}
			buf = utf8.AppendRune(buf, r)
			w.i += 4
		default:
			return "", errJSONUncommon
		}
	}
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// number reads a JSON number literal as it is written.
func (w *jwalker) number() (string, error) {
	w.ws()
	start := w.i
	if w.i < len(w.b) && w.b[w.i] == '-' {
		w.i++
	}
	digits := func() int {
		n := 0
		for w.i < len(w.b) && '0' <= w.b[w.i] && w.b[w.i] <= '9' {
			w.i++
			n++
		}
		return n
	}
	intStart := w.i
	if n := digits(); n == 0 || (n > 1 && w.b[intStart] == '0') {
		return "", errJSONUncommon
	}
	if w.i < len(w.b) && w.b[w.i] == '.' {
		w.i++
		if digits() == 0 {
			return "", errJSONUncommon
		}
	}
	if w.i < len(w.b) && (w.b[w.i] == 'e' || w.b[w.i] == 'E') {
		w.i++
		if w.i < len(w.b) && (w.b[w.i] == '+' || w.b[w.i] == '-') {
			w.i++
		}
		if digits() == 0 {
			return "", errJSONUncommon
		}
	}
	return string(w.b[start:w.i]), nil
}

// plainInt reports whether s is an integer written plainly: digits, no
// leading zero, a minus sign only when signed and not on zero.
func plainInt(s string, signed bool) bool {
	if signed && len(s) > 1 && s[0] == '-' {
		s = s[1:]
		if s == "0" {
			return false
		}
	}
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// integer reads an integer given as a number or, when quoted is true, as a
// string too (OTLP/JSON writes 64-bit integers either way), in plain form
// only, within bits (signed or not).
func (w *jwalker) integer(quoted, signed bool, bits int) (uint64, int64, error) {
	var s string
	var err error
	if w.next() == '"' {
		if !quoted {
			return 0, 0, errJSONUncommon
		}
		s, err = w.str()
	} else {
		s, err = w.number()
	}
	if err != nil || !plainInt(s, signed) {
		return 0, 0, errJSONUncommon
	}
	if signed {
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return 0, 0, errJSONUncommon
		}
		return 0, n, nil
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, 0, errJSONUncommon
	}
	return n, 0, nil
}

// skipValue passes over any JSON value, strings read as str reads them.
// It is called for what an attribute's value holds, ten levels into the
// document; with at most 280 levels more the document stays within the
// generic path's depth limit (maxJSONDepth), and values nested deeper
// than MaxValueDepth still fit (four levels per key-value list).
func (w *jwalker) skipValue(depth int) error {
	if depth > 280 {
		return errJSONUncommon
	}
	switch c := w.next(); {
	case c == '{':
		w.i++
		if w.next() == '}' {
			w.i++
			return nil
		}
		for {
			if _, err := w.str(); err != nil {
				return err
			}
			if err := w.expect(':'); err != nil {
				return err
			}
			if err := w.skipValue(depth + 1); err != nil {
				return err
			}
			switch w.next() {
			case ',':
				w.i++
			case '}':
				w.i++
				return nil
			default:
				return errJSONUncommon
			}
		}
	case c == '[':
		return w.array(func() error { return w.skipValue(depth + 1) })
	case c == '"':
		_, err := w.str()
		return err
	case c == '-' || ('0' <= c && c <= '9'):
		_, err := w.number()
		return err
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	}
	return errJSONUncommon // null included: the generic path decides
}

func (w *jwalker) literal(lit string) error {
	if !bytes.HasPrefix(w.b[w.i:], []byte(lit)) {
		return errJSONUncommon
	}
	w.i += len(lit)
	return nil
}

// bool reads true or false.
func (w *jwalker) bool() (bool, error) {
	switch w.next() {
	case 't':
		return true, w.literal("true")
	case 'f':
		return false, w.literal("false")
	}
	return false, errJSONUncommon
}

// resourceLogs reads one ResourceLogs, appending its records to out.
func (w *jwalker) resourceLogs(out []Record) ([]Record, error) {
	first := len(out)
	var (
		res        map[string]string
		eventNames []string
	)
	err := w.object(func(f int) error {
		switch f {
		case jfResource:
			m := map[string]string{}
			if err := w.object(func(f int) error {
				switch f {
				case jfAttributes:
					return w.attributes(m)
				default: // droppedAttributesCount
					_, _, err := w.integer(false, false, 32)
					return err
				}
			}, resourceKeys); err != nil {
				return err
			}
			res = m
			return nil
		case jfScopeLogs:
			return w.array(func() error {
				return w.object(func(f int) error {
					switch f {
					case jfScope:
						return w.scope()
					case jfLogRecords:
						return w.array(func() error {
							r, name, err := w.logRecord()
							out = append(out, r)
							eventNames = append(eventNames, name)
							return err
						})
					default: // schemaUrl
						return w.skipStr()
					}
				}, scopeLogsKeys)
			})
		default: // schemaUrl
			return w.skipStr()
		}
	}, resourceLogsKeys)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = map[string]string{}
	}
	for _, k := range privateAttrs {
		delete(res, k)
	}
	codexService := isCodexService(res)
	for i := first; i < len(out); i++ {
		r := &out[i]
		r.Resource = res
		r.Name, r.Agent = nameRecord(r.Attrs, eventNames[i-first], r.Body, codexService)
	}
	return out, nil
}

// scope reads an InstrumentationScope, which no record reads.
func (w *jwalker) scope() error {
	discard := map[string]string{}
	return w.object(func(f int) error {
		switch f {
		case jfName, jfVersion:
			return w.skipStr()
		case jfAttributes:
			return w.attributes(discard)
		default: // droppedAttributesCount
			_, _, err := w.integer(false, false, 32)
			return err
		}
	}, scopeKeys)
}

// logRecord reads one LogRecord; Resource, Name and Agent are set by the
// caller, which knows the resource once its object has been read.
func (w *jwalker) logRecord() (Record, string, error) {
	var (
		timeNano, observedNano uint64
		eventName              string
		r                      = Record{Attrs: map[string]string{}}
	)
	err := w.object(func(f int) error {
		var err error
		switch f {
		case jfTime:
			timeNano, _, err = w.integer(true, false, 64)
		case jfObserved:
			observedNano, _, err = w.integer(true, false, 64)
		case jfSeverityNumber:
			if w.next() != '"' {
				_, _, err = w.integer(false, true, 32)
				break
			}
			// By name: one the enum defines, as protojson looks it up.
			var name string
			if name, err = w.str(); err == nil {
				if _, ok := logspb.SeverityNumber_value[name]; !ok {
					err = errJSONUncommon
				}
			}
		case jfFlags, jfDropped:
			_, _, err = w.integer(false, false, 32)
		case jfSeverityText:
			err = w.skipStr()
		case jfEventName:
			eventName, err = w.str()
		case jfTraceID, jfSpanID:
			size := 16
			if f == jfSpanID {
				size = 8
			}
			var s string
			if s, err = w.str(); err == nil && s != "" {
				if id, herr := hex.DecodeString(s); herr != nil || len(id) != size {
					err = errJSONUncommon
				}
			}
		case jfBody:
			var v anyValue
			if v, err = w.anyValue(); err == nil && v.isString {
				r.Body = v.s
			}
		case jfAttributes:
			err = w.attributes(r.Attrs)
		}
		return err
	}, logRecordKeys)
	if err != nil {
		return Record{}, "", err
	}
	for _, k := range privateAttrs {
		delete(r.Attrs, k)
	}
	r.Time = unixNano(timeNano)
	if r.Time.IsZero() {
		r.Time = unixNano(observedNano)
	}
	return r, eventName, nil
}

// attributes reads an array of KeyValue into m, a later key winning.
func (w *jwalker) attributes(m map[string]string) error {
	return w.array(func() error {
		var (
			key string
			val anyValue
		)
		err := w.object(func(f int) error {
			var err error
			if f == jfKey {
				key, err = w.str()
			} else {
				val, err = w.anyValue()
			}
			return err
		}, keyValueKeys)
		if err != nil {
			return err
		}
		m[key] = val.s
		return nil
	})
}

// anyValue reads an AnyValue, rendered as renderValue renders it. Scalars
// in their plain JSON forms are read here; an array, a key-value list or
// bytes is decoded by protojson from the value's own text (the same
// message protojson builds within the whole request), nesting checked as
// the generic path checks it.
func (w *jwalker) anyValue() (anyValue, error) {
	w.ws()
	start := w.i
	var (
		out   anyValue
		cases int
		other bool
	)
	err := w.object(func(f int) error {
		cases++
		var err error
		switch f {
		case jfString:
			var s string
			s, err = w.str()
			out = anyValue{s: s, isString: true}
		case jfBool:
			var x bool
			x, err = w.bool()
			out = anyValue{s: strconv.FormatBool(x)}
		case jfInt:
			var n int64
			_, n, err = w.integer(true, true, 64)
			out = anyValue{s: strconv.FormatInt(n, 10)}
		case jfDouble:
			var s string
			if w.next() == '"' {
				return errJSONUncommon // "NaN", "Infinity" and numbers as strings
			}
			if s, err = w.number(); err == nil {
				var x float64
				if x, err = strconv.ParseFloat(s, 64); err != nil || math.IsInf(x, 0) {
					return errJSONUncommon
				}
				out = anyValue{s: strconv.FormatFloat(x, 'g', -1, 64)}
			}
		default:
			other = true
			err = w.skipValue(1)
		}
		return err
	}, anyValueKeys)
	if err != nil {
		return anyValue{}, err
	}
	if cases > 1 {
		return anyValue{}, errJSONUncommon // protojson refuses two cases of a oneof
	}
	if !other {
		return out, nil
	}
	v := &commonpb.AnyValue{}
	opts := protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: maxMessageDepth}
	if err := opts.Unmarshal(w.b[start:w.i], v); err != nil || !valueWithin(v, 1) {
		return anyValue{}, errJSONUncommon
	}
	_, isString := v.GetValue().(*commonpb.AnyValue_StringValue)
	return anyValue{s: renderValue(v), isString: isString}, nil
}
