package toolcall

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The template grammar (docs/TOOLCALL.md):
//
//	template = "{{" *SP "args" 1*( "." segment ) *SP "}}"
//	segment  = 1*( ALPHA / DIGIT / "_" / "-" )
//
// A segment names an object key; on an array it is a decimal index
// ({{args.items.0.id}}). "{{" that does not open a template and "}}" that
// does not close one are errors: there is no escape.

// maxTemplateSegments bounds a template's path.
const maxTemplateSegments = 32

// part is one piece of a templated string: static text, or a template's
// path (Path non-nil).
type part struct {
	Text string
	Path []string
}

// parseTemplated splits s into static text and templates. The error names
// what is wrong, without the field (the caller adds it).
func parseTemplated(s string) ([]part, error) {
	var parts []part
	rest := s
	for {
		open := strings.Index(rest, "{{")
		close := strings.Index(rest, "}}")
		if open < 0 {
			if close >= 0 {
				return nil, fmt.Errorf("%q without a matching %q", "}}", "{{")
			}
			if rest != "" {
				parts = append(parts, part{Text: rest})
			}
			return parts, nil
		}
		if close >= 0 && close < open {
			return nil, fmt.Errorf("%q without a matching %q", "}}", "{{")
		}
		if open > 0 {
			parts = append(parts, part{Text: rest[:open]})
		}
		rest = rest[open+2:]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return nil, fmt.Errorf("unterminated template %q", clip("{{"+rest, 40))
		}
		inner := rest[:end]
		path, err := parseTemplatePath(inner)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{Path: path})
		rest = rest[end+2:]
	}
}

func parseTemplatePath(inner string) ([]string, error) {
	bad := func(why string) error {
		return fmt.Errorf("template %q: %s (want {{args.<name>[.<name or index>...]}})", clip("{{"+inner+"}}", 60), why)
	}
	t := strings.Trim(inner, " ")
	if strings.ContainsAny(t, "{}") {
		return nil, bad("nested braces")
	}
	if !strings.HasPrefix(t, "args.") {
		return nil, bad("unknown template")
	}
	segs := strings.Split(t[len("args."):], ".")
	if len(segs) > maxTemplateSegments {
		return nil, bad("path too deep")
	}
	for _, seg := range segs {
		if seg == "" {
			return nil, bad("empty path segment")
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return nil, bad(fmt.Sprintf("character %q in the path", c))
			}
		}
	}
	return segs, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// absent reports whether path starts at an optional argument (declared
// in the tool's inputSchema but not required) that args leaves out: it
// then renders empty (docs/TOOLCALL.md, Optional arguments).
func absent(args map[string]any, path []string, optional map[string]bool) bool {
	if !optional[path[0]] {
		return false
	}
	_, ok := args[path[0]]
	return !ok
}

// lookup resolves a template path in args. A missing key, an index out of
// range or a step into a scalar is an *InvalidError naming the path.
func lookup(args map[string]any, path []string) (any, error) {
	var cur any = args
	for i, seg := range path {
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[seg]
			if !ok {
				return nil, missing(path[:i+1])
			}
			cur = x
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(v) || strconv.Itoa(n) != seg {
				return nil, missing(path[:i+1])
			}
			cur = v[n]
		default:
			return nil, missing(path[:i+1])
		}
	}
	return cur, nil
}

func missing(path []string) error {
	return &InvalidError{Field: "args." + strings.Join(path, "."), Message: "missing: the binding uses this argument"}
}

// stringForm is how an argument reads inside a longer string: a string as
// itself, null as "", anything else as its compact JSON text.
func stringForm(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		return x.String(), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("not a JSON number")
		}
		b, _ := json.Marshal(x)
		return string(b), nil
	}
	b, err := marshalJSON(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// render substitutes args into parts; enc encodes each substituted value.
// An absent optional argument renders empty; optional is nil where every
// argument must be there (the URL's path).
func render(parts []part, args map[string]any, optional map[string]bool, enc func(string) string) (string, error) {
	var b strings.Builder
	for _, p := range parts {
		if p.Path == nil {
			b.WriteString(p.Text)
			continue
		}
		if absent(args, p.Path, optional) {
			continue
		}
		v, err := lookup(args, p.Path)
		if err != nil {
			return "", err
		}
		s, err := stringForm(v)
		if err != nil {
			return "", &InvalidError{Field: "args." + strings.Join(p.Path, "."), Message: err.Error()}
		}
		if enc != nil {
			s = enc(s)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// OptionalArgs names the arguments inputSchema declares in "properties"
// but not in "required", sorted. A schema without properties (such as {})
// declares none: every argument a binding uses stays required.
func OptionalArgs(inputSchema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []json.RawMessage          `json:"required"`
	}
	if json.Unmarshal(inputSchema, &s) != nil {
		return nil
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		var name string
		if json.Unmarshal(r, &name) == nil {
			required[name] = true
		}
	}
	var out []string
	for name := range s.Properties {
		if !required[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// marshalJSON is json.Marshal without HTML escaping.
func marshalJSON(v any) ([]byte, error) {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}
