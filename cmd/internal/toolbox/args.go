package toolbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// Field types of a tool's input.
const (
	tString  = "string"
	tInteger = "integer"
	tBoolean = "boolean"
	tObject  = "object"
	tStrings = "array-of-strings"
	tObjects = "array-of-objects"
)

// maxArgsBytes bounds one call's arguments: fs_write carries a file as
// base64, the largest input of the toolbox.
const maxArgsBytes = 48 << 20

// maxListItems bounds every list argument (attachments, watchers, targets,
// bindings): the broker caps objective attachments at 64.
const maxListItems = 256

// field is one input field of a static tool. The JSON schema shown to the
// agent and the validation the handler runs are both derived from it, so
// they cannot disagree.
type field struct {
	name     string
	typ      string
	desc     string
	required bool
	enum     []string
}

// args are a call's validated arguments.
type args struct {
	tool string
	m    map[string]json.RawMessage
}

// toolError is a failure shown to the agent as the tool result's one text
// block.
type toolError string

func (e toolError) Error() string { return string(e) }

func errorf(format string, a ...any) error { return toolError(fmt.Sprintf(format, a...)) }

// parseArgs validates raw against fields, in field order, and returns the
// arguments. The texts are the spec's: "<TOOL>: <FIELD> is required" for a
// missing, null or empty required field, "<TOOL>: invalid <FIELD> '<V>'"
// for a value outside an enum (so "invalid status '<S>'").
func parseArgs(tool string, fields []field, raw json.RawMessage) (*args, error) {
	a := &args{tool: tool, m: map[string]json.RawMessage{}}
	if len(raw) > maxArgsBytes {
		return nil, errorf("%s: arguments are larger than %d bytes", tool, maxArgsBytes)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if raw[0] != '{' || json.Unmarshal(raw, &a.m) != nil {
			return nil, errorf("%s: arguments must be a JSON object", tool)
		}
	}
	known := make(map[string]bool, len(fields))
	for _, f := range fields {
		known[f.name] = true
	}
	var unknown []string
	for k := range a.m {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, errorf("%s: unknown field '%s'", tool, clip(unknown[0], 64))
	}
	for _, f := range fields {
		v, ok := a.m[f.name]
		if !ok || bytes.Equal(v, []byte("null")) {
			delete(a.m, f.name)
			if f.required {
				return nil, errorf("%s: %s is required", tool, f.name)
			}
			continue
		}
		if err := checkType(tool, f, v); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func checkType(tool string, f field, v json.RawMessage) error {
	bad := func(want string) error { return errorf("%s: %s must be %s", tool, f.name, want) }
	switch f.typ {
	case tString:
		var s string
		if json.Unmarshal(v, &s) != nil {
			return bad("a string")
		}
		if s == "" && f.required {
			return errorf("%s: %s is required", tool, f.name)
		}
		if len(f.enum) > 0 && !slices.Contains(f.enum, s) {
			return errorf("%s: invalid %s '%s'", tool, f.name, clip(s, 64))
		}
	case tInteger:
		var n float64
		if json.Unmarshal(v, &n) != nil || n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return bad("an integer")
		}
	case tBoolean:
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return bad("true or false")
		}
	case tObject:
		var o map[string]json.RawMessage
		if json.Unmarshal(v, &o) != nil || o == nil {
			return bad("an object")
		}
	case tStrings:
		var l []string
		if json.Unmarshal(v, &l) != nil {
			return bad("a list of strings")
		}
		if len(l) > maxListItems {
			return errorf("%s: %s has more than %d items", tool, f.name, maxListItems)
		}
		if f.required && len(l) == 0 {
			return errorf("%s: %s is required", tool, f.name)
		}
	case tObjects:
		var l []map[string]json.RawMessage
		if json.Unmarshal(v, &l) != nil || slices.ContainsFunc(l, func(o map[string]json.RawMessage) bool { return o == nil }) {
			return bad("a list of objects")
		}
		if len(l) > maxListItems {
			return errorf("%s: %s has more than %d items", tool, f.name, maxListItems)
		}
	default:
		return fmt.Errorf("toolbox: field %s of %s has unknown type %q", f.name, tool, f.typ)
	}
	return nil
}

// clip bounds a value echoed in an error text and removes its control
// characters, so the text stays one short line.
func clip(s string, n int) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		if len(out) == n {
			return string(out) + "…"
		}
		out = append(out, r)
	}
	return string(out)
}

func (a *args) has(name string) bool { _, ok := a.m[name]; return ok }

func (a *args) str(name string) string {
	var s string
	_ = json.Unmarshal(a.m[name], &s)
	return s
}

func (a *args) strs(name string) []string {
	var l []string
	_ = json.Unmarshal(a.m[name], &l)
	return l
}

func (a *args) boolean(name string) bool {
	var b bool
	_ = json.Unmarshal(a.m[name], &b)
	return b
}

func (a *args) integer(name string) int64 {
	var n float64
	_ = json.Unmarshal(a.m[name], &n)
	return int64(n)
}

func (a *args) raw(name string) json.RawMessage { return a.m[name] }

// schema is the JSON Schema of fields: an object whose properties are the
// fields, required the required ones, and nothing else allowed.
func schema(fields []field) map[string]any {
	props := map[string]any{}
	req := []string{}
	for _, f := range fields {
		p := map[string]any{}
		switch f.typ {
		case tStrings:
			p["type"] = "array"
			p["items"] = map[string]any{"type": "string"}
		case tObjects:
			p["type"] = "array"
			p["items"] = map[string]any{"type": "object"}
		default:
			p["type"] = f.typ
		}
		if f.desc != "" {
			p["description"] = f.desc
		}
		if len(f.enum) > 0 {
			p["enum"] = f.enum
		}
		props[f.name] = p
		if f.required {
			req = append(req, f.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}
