package toolcall

import (
	"encoding/json"
	"sort"
	"strings"

	"svc/redact"
)

// redacted replaces a secret wherever Redact finds one.
const redacted = "[REDACTED]"

// redactValue is Redact (toolcall.go) with the empty secrets dropped.
func redactValue(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		return redactString(x, secrets...)
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[redactString(k, secrets...)] = redactValue(e, secrets)
		}
		return out
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, secrets)
		}
		return out
	default:
		return v
	}
}

// redactString replaces every occurrence of each non-empty secret in s in
// one pass, the longest secret first where several match at one place (so
// one secret inside another is replaced whole, and "[REDACTED]" itself is
// never rewritten).
func redactString(s string, secrets ...string) string {
	var live []string
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			live = append(live, sec)
		}
	}
	switch len(live) {
	case 0:
		return s
	case 1:
		return strings.ReplaceAll(s, live[0], redacted)
	}
	sort.SliceStable(live, func(i, j int) bool { return len(live[i]) > len(live[j]) })
	pairs := make([]string, 0, 2*len(live))
	for _, sec := range live {
		pairs = append(pairs, sec, redacted)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// redactEchoes redacts a tool source's credential from text an upstream
// (or an error about it) wrote: the secret as it is, whatever its length
// (redactString), then through the one redaction engine with
// redact.Options.Echoes: its base64 (standard and URL), hex, reversed and
// case-changed forms, behind JSON escapes or percent-encoding, split
// across JSON string values, and any svc bearer token (docs/TOOLCALL.md,
// "Encoded echoes of the credential").
func redactEchoes(s, secret string) string {
	s = redactRaw(s, secret)
	return redact.NewWith(redact.Options{Echoes: true}, secret).String(s)
}

// redactRaw is redactString of one secret for text that may be JSON: a
// match that starts inside a backslash escape (the hex digits of \u0030,
// the n of \n) takes the escape with it, so that JSON text stays JSON
// (half an escape is not) and the secret still goes.
func redactRaw(s, secret string) string {
	if secret == "" || !strings.Contains(s, secret) {
		return s
	}
	var b strings.Builder
	last := 0 // s[:last] is written
	for {
		k := strings.Index(s[last:], secret)
		if k < 0 {
			break
		}
		start := last + k
		b.WriteString(s[last:max(escapeStart(s, start), last)])
		b.WriteString(redacted)
		last = start + len(secret)
	}
	b.WriteString(s[last:])
	return b.String()
}

// escapeStart is the index of the backslash opening the JSON escape that
// s[p] lies inside, or p when it lies in none. An escape is \ and one
// character, or \u and four; a backslash opens one when an even number of
// backslashes comes before it.
func escapeStart(s string, p int) int {
	j := strings.LastIndexByte(s[max(p-5, 0):p], '\\')
	if j < 0 {
		return p
	}
	j += max(p-5, 0)
	run := 0
	for q := j; q >= 0 && s[q] == '\\'; q-- {
		run++
	}
	if run%2 == 0 {
		return p // s[j] closes an escaped backslash
	}
	end := j + 2
	if j+1 < len(s) && s[j+1] == 'u' {
		end = j + 6
	}
	if p < end {
		return j
	}
	return p
}

// redactJSON redacts secret from a JSON document an upstream wrote, as
// redactEchoes does (the engine keeps JSON text JSON, a match in a
// string redacted inside it), then from its decoded strings and keys;
// the document comes back compact, as marshalJSON writes it.
func redactJSON(raw []byte, secret string) ([]byte, error) {
	d := json.NewDecoder(strings.NewReader(redactEchoes(string(raw), secret)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return marshalJSON(Redact(v, secret))
}
