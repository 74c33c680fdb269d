package genai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"svc/server/jsondepth"
	"unicode/utf8"
)

// obj is a decoded JSON object whose values stay raw. Unlike decoding into
// a struct, keys match exactly (encoding/json folds case for struct
// fields), and for a repeated key the last one wins.
type obj map[string]json.RawMessage

// invalid returns an error wrapping ErrInvalid that names where (a JSON
// path) and what.
func invalid(p, what string) error {
	if p == "" {
		return fmt.Errorf("%w: %s", ErrInvalid, what)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, p, what)
}

// at names element i of the array at p.
func at(p string, i int) string { return p + "[" + strconv.Itoa(i) + "]" }

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// trimSpace trims JSON whitespace.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// kindOf returns the first byte of a JSON value: '{', '[', '"', 'n', 't',
// 'f', or the first byte of a number; 0 when raw is empty.
func kindOf(raw []byte) byte {
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// isNull reports an absent value or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = trimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// checkDepth refuses JSON nested deeper than MaxDepth. It does not
// validate; invalid JSON is refused by the decoder afterwards.
func checkDepth(b []byte, p string) error {
	if jsondepth.Exceeds(b, MaxDepth) {
		return invalid(p, fmt.Sprintf("JSON nested deeper than %d levels", MaxDepth))
	}
	return nil
}

// asObj decodes a JSON object.
func asObj(raw json.RawMessage, p string) (obj, error) {
	if kindOf(raw) != '{' {
		return nil, invalid(p, "not an object")
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, invalid(p, "not a JSON object")
	}
	return o, nil
}

// asArr decodes a JSON array.
func asArr(raw json.RawMessage, p string) ([]json.RawMessage, error) {
	if kindOf(raw) != '[' {
		return nil, invalid(p, "not an array")
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, invalid(p, "not a JSON array")
	}
	return a, nil
}

// asStr decodes a JSON string; invalid UTF-8 becomes U+FFFD.
func asStr(raw json.RawMessage, p string) (string, error) {
	raw = trimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", invalid(p, "not a string")
	}
	// The fast path, for most strings: raw comes from a decoded document,
	// so it is valid JSON, and with no escapes its content is its bytes.
	if len(raw) >= 2 && raw[len(raw)-1] == '"' {
		if in := raw[1 : len(raw)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			return string(in), nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(p, "not a JSON string")
	}
	return s, nil
}

// asInt decodes a JSON number written as an integer that fits int64.
func asInt(raw json.RawMessage, p string) (int64, error) {
	if c := kindOf(raw); c != '-' && (c < '0' || c > '9') {
		return 0, invalid(p, "not a number")
	}
	n, err := strconv.ParseInt(string(trimSpace(raw)), 10, 64)
	if err != nil {
		return 0, invalid(p, "not an integer")
	}
	return n, nil
}

// has reports whether key is present and not null.
func (o obj) has(key string) bool { return !isNull(o[key]) }

// str returns the string at key; "" when absent or null.
func (o obj) str(key, p string) (string, error) {
	v := o[key]
	if isNull(v) {
		return "", nil
	}
	return asStr(v, join(p, key))
}

// arr returns the array at key; nil when absent or null.
func (o obj) arr(key, p string) ([]json.RawMessage, error) {
	v := o[key]
	if isNull(v) {
		return nil, nil
	}
	return asArr(v, join(p, key))
}

// obj returns the object at key; nil when absent or null.
func (o obj) obj(key, p string) (obj, error) {
	v := o[key]
	if isNull(v) {
		return nil, nil
	}
	return asObj(v, join(p, key))
}

// count returns the token count at key: 0 when absent or null, else a
// non-negative integer.
func (o obj) count(key, p string) (int64, error) {
	v := o[key]
	if isNull(v) {
		return 0, nil
	}
	n, err := asInt(v, join(p, key))
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, invalid(join(p, key), "negative")
	}
	return n, nil
}

// thought reports an object that is thinking or reasoning: it is never
// read.
func (o obj) thought() bool {
	t, err := asStr(o["type"], "")
	return err == nil && thoughtTypes[t]
}

// forbid refuses keys that belong to another provider's shape.
func (o obj) forbid(p, api string, keys ...string) error {
	for _, k := range keys {
		if o.has(k) {
			return invalid(join(p, k), "not a field of "+api)
		}
	}
	return nil
}

// join names key of the object at p.
func join(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

// thoughtTypes are the block, item and part types of thinking and
// reasoning, in every provider.
var thoughtTypes = map[string]bool{
	"thinking":          true, // Anthropic
	"redacted_thinking": true, // Anthropic
	"reasoning":         true, // OpenAI Responses item
	"reasoning_text":    true, // OpenAI Responses reasoning content
	"summary_text":      true, // OpenAI Responses reasoning summary
}

// jsonString encodes s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// arguments maps a tool call's arguments: an object string is parsed,
// another string stays a JSON string, any other value is kept (compacted,
// invalid UTF-8 replaced).
func arguments(raw json.RawMessage, p string) (json.RawMessage, error) {
	switch kindOf(raw) {
	case 0, 'n':
		if isNull(raw) {
			return nil, nil
		}
	case '"':
		s, err := asStr(raw, p)
		if err != nil {
			return nil, err
		}
		if t := strings.TrimLeft(s, " \t\r\n"); strings.HasPrefix(t, "{") && checkDepth([]byte(t), "") == nil && json.Valid([]byte(t)) {
			return compact([]byte(t), p)
		}
		return jsonString(s), nil
	}
	return compact(raw, p)
}

// compact compacts valid JSON and replaces invalid UTF-8 (which JSON can
// only hold inside strings) with U+FFFD, so the result marshals cleanly.
func compact(raw []byte, p string) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, invalid(p, "not JSON")
	}
	return bytes.ToValidUTF8(b.Bytes(), []byte("\uFFFD")), nil
}

// quote quotes a value for an error message, cut to 40 bytes: it may be
// hostile and errors get logged.
func quote(s string) string {
	if len(s) > 40 {
		s = strings.ToValidUTF8(s[:40], "") + "…"
	}
	return strconv.Quote(s)
}
