package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"svc/server/jsondepth"
)

// MaxContent caps one delivery's rendered content: 16 KiB, a quarter of
// MaxMessage, so a coalesced message shows at least the newest three
// deliveries whole.
const MaxContent = 16 << 10

// Limits of a template.
const (
	// MaxTemplate bounds a template's text.
	MaxTemplate = 8 << 10
	// MaxPlaceholders bounds the placeholders of one template.
	MaxPlaceholders = 64
)

// cutMarker ends content that was cut at MaxContent.
var cutMarker = fmt.Sprintf("\n[… cut: the content was longer than %d bytes]", MaxContent)

// The template grammar (docs/HOOKS-PROVIDERS.md):
//
//	placeholder = "{{" *SP "payload" *( "." segment ) *SP "}}"
//	segment     = 1*( any character but ".", "{", "}", space or control )
//
// {{payload}} alone is the whole payload as compact JSON. "{{" that does
// not open a placeholder and "}}" that does not close one are errors:
// there is no escape (as in tool bindings, docs/TOOLCALL.md).

// tpart is a piece of a template: static text, or a placeholder's path
// (ph true; an empty path is the whole payload).
type tpart struct {
	text string
	path []string
	ph   bool
}

// ValidateTemplate checks a template at save time: at most MaxTemplate
// bytes of UTF-8 without control characters but tab and newline, at most
// MaxPlaceholders well-formed placeholders. The error is an
// *InvalidError with Field "template".
func ValidateTemplate(t string) error {
	_, err := parseTemplate(t)
	return err
}

func parseTemplate(t string) ([]tpart, error) {
	bad := func(format string, args ...any) error {
		return &InvalidError{Field: "template", Message: fmt.Sprintf(format, args...)}
	}
	if len(t) > MaxTemplate {
		return nil, bad("longer than %d bytes", MaxTemplate)
	}
	if !utf8.ValidString(t) {
		return nil, bad("not valid UTF-8")
	}
	for _, r := range t {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return nil, bad("has a control character")
		}
	}
	var parts []tpart
	n := 0
	rest := t
	for rest != "" {
		open := strings.Index(rest, "{{")
		closing := strings.Index(rest, "}}")
		if open < 0 {
			if closing >= 0 {
				return nil, bad("%q without a matching %q", "}}", "{{")
			}
			parts = append(parts, tpart{text: rest})
			break
		}
		if closing >= 0 && closing < open {
			return nil, bad("%q without a matching %q", "}}", "{{")
		}
		if open > 0 {
			parts = append(parts, tpart{text: rest[:open]})
		}
		rest = rest[open+2:]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return nil, bad("unterminated placeholder %q", clip("{{"+rest, 40))
		}
		path, err := placeholderPath(rest[:end])
		if err != nil {
			return nil, bad("placeholder %q: %v (want {{payload.<dotted.path>}})", clip("{{"+rest[:end]+"}}", 60), err)
		}
		if n++; n > MaxPlaceholders {
			return nil, bad("more than %d placeholders", MaxPlaceholders)
		}
		parts = append(parts, tpart{path: path, ph: true})
		rest = rest[end+2:]
	}
	return parts, nil
}

func placeholderPath(inner string) ([]string, error) {
	s := strings.Trim(inner, " ")
	if strings.ContainsAny(s, "{}") {
		return nil, fmt.Errorf("nested braces")
	}
	if s == "payload" {
		return nil, nil
	}
	p, ok := strings.CutPrefix(s, "payload.")
	if !ok {
		return nil, fmt.Errorf("unknown placeholder")
	}
	segs, err := splitPath(p)
	if err != nil {
		return nil, err
	}
	for _, seg := range segs {
		for _, r := range seg {
			if unicode.IsSpace(r) {
				return nil, fmt.Errorf("space in the path")
			}
		}
	}
	return segs, nil
}

// Content renders one delivery's content: with a template,
// {{payload.<dot.path>}} substituted (numeric segments index arrays;
// missing → empty; null → empty; objects/arrays → compact JSON as the
// sender ordered them; strings raw; numbers as written); without, the
// payload pretty-printed (non-JSON: the body as text, invalid UTF-8
// replaced). A template that does not validate renders as if there were
// none. The result is valid UTF-8 capped at MaxContent bytes on a rune
// boundary, ending with a marker saying it was cut when it was.
func Content(template string, payload []byte) string {
	if template != "" {
		if parts, err := parseTemplate(template); err == nil {
			return renderTemplate(parts, payload)
		}
	}
	return pretty(payload)
}

// capped collects at most MaxContent+1 bytes, remembering whether more
// was offered, so a template repeating a huge value costs no more than
// the cap.
type capped struct {
	b    strings.Builder
	over bool
}

func (c *capped) WriteString(s string) {
	room := MaxContent + 1 - c.b.Len()
	if len(s) > room {
		s, c.over = s[:max(room, 0)], true
	}
	c.b.WriteString(s)
}

func (c *capped) String() string {
	return capContent(strings.ToValidUTF8(c.b.String(), "\uFFFD"), c.over)
}

func renderTemplate(parts []tpart, payload []byte) string {
	root, _ := parseJSON(payload) // nil when not JSON: every placeholder is missing
	var c capped
	for _, p := range parts {
		if c.over {
			break
		}
		if !p.ph {
			c.WriteString(p.text)
			continue
		}
		if root == nil {
			continue
		}
		if v := root.lookup(p.path); v != nil {
			c.WriteString(v.text())
		}
	}
	return c.String()
}

// pretty is the payload indented by two spaces (key order and number
// text kept, as json.Indent writes it), or the body as text when it is
// not JSON or nests deeper than maxDepth (as for filters and templates).
//
// The indentation is written into the cap, never past it: json.Indent of
// deeply nested arrays grows with the square of the depth (a 20 KB body
// of 9999 nested arrays made hundreds of MiB before the cut), so the
// depth is bounded first and indenting stops once the cap is full
// (docs/HOOKS.md, "Pretty-printing within the cap").
func pretty(payload []byte) string {
	if !jsondepth.Exceeds(payload, maxDepth) && json.Valid(payload) {
		return indentCapped(bytes.TrimSpace(payload))
	}
	var c capped
	c.WriteString(string(payload[:min(len(payload), MaxContent+utf8.UTFMax)]))
	if len(payload) > MaxContent+utf8.UTFMax {
		c.over = true
	}
	return c.String()
}

// indentCapped writes what json.Indent(dst, src, "", "  ") would, for a
// valid JSON document src, but at most MaxContent+1 bytes of it: the
// rest is only known to exist, which is all the cut needs.
func indentCapped(src []byte) string {
	const limit = MaxContent + 1
	out := make([]byte, 0, min(limit, 2*len(src)+64))
	over := false
	// put appends b, or what fits of it; false once the cap is full.
	put := func(b ...byte) bool {
		if room := limit - len(out); len(b) > room {
			out, over = append(out, b[:room]...), true
			return false
		}
		out = append(out, b...)
		return true
	}
	newline := func(depth int) bool {
		if !put('\n') {
			return false
		}
		for range depth {
			if !put(' ', ' ') {
				return false
			}
		}
		return true
	}
	needIndent, depth := false, 0
	inString, escaped := false, false
scan:
	for _, c := range src {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			if !put(c) {
				break scan
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if needIndent && c != '}' && c != ']' {
			needIndent = false
			depth++
			if !newline(depth) {
				break scan
			}
		}
		ok := true
		switch c {
		case '{', '[':
			// Delayed, so that an empty object or array stays {} or [].
			needIndent = true
			ok = put(c)
		case ',':
			ok = put(c) && newline(depth)
		case ':':
			ok = put(c, ' ')
		case '}', ']':
			if needIndent {
				needIndent = false
			} else {
				depth--
				ok = newline(depth)
			}
			ok = ok && put(c)
		case '"':
			inString = true
			ok = put(c)
		default:
			ok = put(c)
		}
		if !ok {
			break scan
		}
	}
	cp := capped{over: over}
	cp.b.Write(out)
	return cp.String()
}

// capContent cuts s to MaxContent bytes on a rune boundary, marking the
// cut, when it is longer or more was left out (over).
func capContent(s string, over bool) string {
	if len(s) <= MaxContent && !over {
		return s
	}
	return truncateUTF8(s, MaxContent-len(cutMarker)) + cutMarker
}

// truncateUTF8 shortens s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
