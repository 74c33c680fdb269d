package hooks

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Filter ops (docs/HOOKS.md, Resources: filters).
const (
	OpEq       = "eq"
	OpNe       = "ne"
	OpIn       = "in"
	OpExists   = "exists"
	OpContains = "contains"
)

// Limits of filters and paths.
const (
	// MaxFilters bounds an endpoint's rule list (ValidateFilters).
	MaxFilters = 32
	// MaxPath bounds a filter or template path in bytes.
	MaxPath = 256
	// MaxPathSegments bounds a path's depth.
	MaxPathSegments = 32
	// MaxFilterValue bounds a rule's value in bytes.
	MaxFilterValue = 8 << 10
)

// Filter is one drop rule (eq/ne: JSON equality; in: value is an
// array holding the payload value; exists: value true = path present,
// false = absent; contains: substring of a string or element of an array).
//
// Path is dotted; a numeric segment indexes an array. Beyond those
// rules: a missing path holds for ne (absent is unequal to anything)
// and for exists:false, and fails every other op; exists with no value
// means true; null is present (exists holds, eq null holds).
type Filter struct {
	Path  string          `json:"path"`
	Op    string          `json:"op"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Validate checks a rule at save time. The error is an *InvalidError
// whose Field is "path", "op" or "value".
func (f Filter) Validate() error {
	if _, err := splitPath(f.Path); err != nil {
		return &InvalidError{Field: "path", Message: err.Error()}
	}
	if len(f.Value) > MaxFilterValue {
		return invalid("value", "longer than %d bytes", MaxFilterValue)
	}
	var v *node
	if len(f.Value) > 0 {
		var ok bool
		if v, ok = parseJSON(f.Value); !ok {
			return invalid("value", "not one JSON value")
		}
	}
	switch f.Op {
	case OpEq, OpNe, OpContains:
		if v == nil {
			return invalid("value", "required with op %s", f.Op)
		}
	case OpIn:
		if v == nil || v.kind != 'a' {
			return invalid("value", "op in wants an array of the values that pass")
		}
	case OpExists:
		if v != nil && v.kind != 'b' {
			return invalid("value", "op exists wants true (present) or false (absent)")
		}
	case "":
		return invalid("op", "required: one of eq, ne, in, exists, contains")
	default:
		return invalid("op", "unknown op %q: want one of eq, ne, in, exists, contains", clip(f.Op, 40))
	}
	return nil
}

// ValidateFilters checks an endpoint's whole rule list: at most
// MaxFilters rules, each valid. The error is an *InvalidError whose Field
// is "filters" or "filters[i].<field>".
func ValidateFilters(filters []Filter) error {
	if len(filters) > MaxFilters {
		return invalid("filters", "more than %d rules", MaxFilters)
	}
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			ie := err.(*InvalidError)
			return &InvalidError{Field: fmt.Sprintf("filters[%d].%s", i, ie.Field), Message: ie.Message}
		}
	}
	return nil
}

// splitPath reads a dotted path: 1 to MaxPathSegments non-empty segments
// of valid UTF-8 without control characters, at most MaxPath bytes.
func splitPath(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("required: a dotted path such as pull_request.state")
	}
	if len(p) > MaxPath {
		return nil, fmt.Errorf("longer than %d bytes", MaxPath)
	}
	if !utf8.ValidString(p) {
		return nil, fmt.Errorf("not valid UTF-8")
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return nil, fmt.Errorf("has a control character")
		}
	}
	segs := strings.Split(p, ".")
	if len(segs) > MaxPathSegments {
		return nil, fmt.Errorf("deeper than %d segments", MaxPathSegments)
	}
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("empty segment in %q", clip(p, 60))
		}
	}
	return segs, nil
}

// Match reports whether payload passes every rule (AND). A payload that is
// not JSON (or nests deeper than 512 levels) passes only an empty rule
// list. A rule that does not validate fails: a drop rule that cannot be
// read drops.
func Match(filters []Filter, payload []byte) bool {
	if len(filters) == 0 {
		return true
	}
	root, ok := parseJSON(payload)
	if !ok {
		return false
	}
	for _, f := range filters {
		if !holds(f, root) {
			return false
		}
	}
	return true
}

func holds(f Filter, root *node) bool {
	if f.Validate() != nil {
		return false
	}
	segs, _ := splitPath(f.Path)
	got := root.lookup(segs)
	var want *node
	if len(f.Value) > 0 {
		want, _ = parseJSON(f.Value)
	}
	switch f.Op {
	case OpEq:
		return got != nil && jsonEqual(got, want)
	case OpNe:
		return got == nil || !jsonEqual(got, want)
	case OpIn:
		if got == nil {
			return false
		}
		for _, e := range want.elems {
			if jsonEqual(got, e) {
				return true
			}
		}
		return false
	case OpExists:
		present := want == nil || want.b
		return (got != nil) == present
	case OpContains:
		if got == nil {
			return false
		}
		switch got.kind {
		case 's':
			return want.kind == 's' && strings.Contains(got.str, want.str)
		case 'a':
			for _, e := range got.elems {
				if jsonEqual(e, want) {
					return true
				}
			}
		}
		return false
	}
	return false
}
