package runner

import (
	"encoding/json"
	"sort"
	"strings"

	"svc/redact"
)

// Redacted replaces every secret value in what the runner uploads (spec:
// Activity).
const Redacted = redact.Redacted

// maxUploadField caps the redacted JSON of a tool input or result in one
// tool_action: past it the field holds the JSON text cut to this size and
// <field>Truncated is set (as the broker does for its own tool actions).
const maxUploadField = 64 << 10

// Redactor replaces secret values (the member's secrets and its token) by
// Redacted inside JSON values: as they are, and through the broker's
// engine (svc/redact) in their base64, percent-encoded and numeric forms,
// and every svc_ token, the same rules as the broker's ingest.
type Redactor struct {
	values []string // longest first, so a secret holding another goes whole
	eng    *redact.Redactor
}

// NewRedactor redacts the given values; empty ones are ignored.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, v := range values {
		if v != "" && !seen[v] {
			seen[v] = true
			r.values = append(r.values, v)
		}
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	r.eng = redact.New(r.values...)
	return r
}

// String redacts one string. Values shorter than the engine's
// redact.MinSecretLen are still replaced where they occur as they are:
// the runner always did, and a credential handed to it is redacted
// whatever its length.
func (r *Redactor) String(s string) string {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return r.eng.String(s)
}

// JSON redacts every string (object keys included) of a JSON value. The
// value is decoded first, so a secret is found whatever its JSON escaping.
// Not JSON: the text itself is redacted and returned as a JSON string.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	var v any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		out, _ := json.Marshal(r.String(string(raw)))
		return out
	}
	out, err := json.Marshal(r.walk(v))
	if err != nil {
		out, _ = json.Marshal(Redacted)
	}
	return out
}

func (r *Redactor) walk(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.walk(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.walk(e)
		}
		return out
	case json.Number:
		// A numeric secret written as a JSON number.
		if r.eng.String(x.String()) != x.String() {
			return Redacted
		}
	}
	return v
}

// ToolAction is the data of the tool_action the runner uploads for a tool
// result from the agent's post-tool hook: tool name, redacted input and
// redacted result, each capped.
func (r *Redactor) ToolAction(e Event) map[string]any {
	d := map[string]any{"tool": r.String(e.Tool), "phase": "result", "source": "runner"}
	put := func(key string, raw json.RawMessage) {
		if raw == nil {
			return
		}
		red := r.JSON(raw)
		if len(red) > maxUploadField {
			d[key] = cut(string(red), maxUploadField)
			d[key+"Truncated"] = true
			return
		}
		d[key] = red
	}
	put("input", e.ToolInput)
	put("result", e.ToolResult)
	return d
}
