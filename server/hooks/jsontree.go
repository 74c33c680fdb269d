package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// maxDepth bounds how deep a payload may nest for filters, templates and
// pretty-printing: a deeper one is treated as not JSON there.
const maxDepth = 512

// node is one JSON value of a payload, keeping object keys in their order
// (a repeated key keeps its first position and its last value, as
// encoding/json does) and the value's byte span in the source, so objects
// and arrays render as the sender wrote them, compacted.
type node struct {
	kind       byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str        string
	b          bool
	keys       []string
	vals       []*node
	elems      []*node
	start, end int
	src        []byte
}

var errTooDeep = errors.New("json nested too deep")

// parseJSON reads exactly one JSON value; ok is false for anything else.
func parseJSON(src []byte) (*node, bool) {
	if !json.Valid(src) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	n, err := parseValue(dec, src, 0)
	if err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return n, true
}

// valueStart is where the value after offset off begins: past the
// whitespace, ':' and ',' that separate it from what came before.
func valueStart(src []byte, off int) int {
	for off < len(src) {
		switch src[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
		default:
			return off
		}
	}
	return off
}

func parseValue(dec *json.Decoder, src []byte, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	start := valueStart(src, int(dec.InputOffset()))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	n := &node{start: start, src: src}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = 'o'
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(dec, src, depth+1)
				if err != nil {
					return nil, err
				}
				if i, ok := index[k]; ok {
					n.vals[i] = v
					continue
				}
				index[k] = len(n.keys)
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
		case '[':
			n.kind = 'a'
			for dec.More() {
				v, err := parseValue(dec, src, depth+1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
			}
		default:
			return nil, errors.New("unexpected delimiter")
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.kind, n.str = 's', t
	case json.Number:
		n.kind, n.str = 'n', t.String()
	case bool:
		n.kind, n.b = 'b', t
	case nil:
		n.kind = 'z'
	}
	n.end = int(dec.InputOffset())
	return n, nil
}

// field is the value of key k of an object node.
func (n *node) field(k string) *node {
	for i := len(n.keys) - 1; i >= 0; i-- {
		if n.keys[i] == k {
			return n.vals[i]
		}
	}
	return nil
}

// lookup follows a dotted path: a segment names an object key, or on an
// array a decimal index (no sign, no leading zeros). nil when missing.
func (n *node) lookup(path []string) *node {
	cur := n
	for _, seg := range path {
		if cur == nil {
			return nil
		}
		switch cur.kind {
		case 'o':
			cur = cur.field(seg)
		case 'a':
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(cur.elems) || strconv.Itoa(i) != seg {
				return nil
			}
			cur = cur.elems[i]
		default:
			return nil
		}
	}
	return cur
}

// compact is the node's source text without insignificant whitespace.
func (n *node) compact() string {
	var b bytes.Buffer
	if err := json.Compact(&b, n.src[n.start:n.end]); err != nil {
		return string(n.src[n.start:n.end])
	}
	return b.String()
}

// text is how a value reads inside a template: a string raw, a number as
// written, true/false, null as empty, objects and arrays as compact JSON.
func (n *node) text() string {
	switch n.kind {
	case 's', 'n':
		return n.str
	case 'b':
		return strconv.FormatBool(n.b)
	case 'z':
		return ""
	default:
		return n.compact()
	}
}

// jsonEqual is JSON equality: same type, numbers by numeric value (1 ==
// 1.0 == 1e0), strings after unescaping, arrays element-wise in order,
// objects by the same key set with equal values.
func jsonEqual(a, b *node) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case 's':
		return a.str == b.str
	case 'n':
		return numberEqual(a.str, b.str)
	case 'b':
		return a.b == b.b
	case 'z':
		return true
	case 'a':
		if len(a.elems) != len(b.elems) {
			return false
		}
		for i := range a.elems {
			if !jsonEqual(a.elems[i], b.elems[i]) {
				return false
			}
		}
		return true
	default:
		if len(a.keys) != len(b.keys) {
			return false
		}
		for i, k := range a.keys {
			bv := b.field(k)
			if bv == nil || !jsonEqual(a.vals[i], bv) {
				return false
			}
		}
		return true
	}
}

// numberEqual compares two JSON number texts by value, exactly for
// integers and to 256 bits of precision otherwise.
func numberEqual(x, y string) bool {
	if x == y {
		return true
	}
	if !strings.ContainsAny(x, ".eE") && !strings.ContainsAny(y, ".eE") {
		// Integers: compare digits, ignoring a "-0" vs "0" difference.
		nx, ny := strings.TrimPrefix(x, "-"), strings.TrimPrefix(y, "-")
		if nx == "0" && ny == "0" {
			return true
		}
		return false
	}
	fx, _, errx := big.ParseFloat(x, 10, 256, big.ToNearestEven)
	fy, _, erry := big.ParseFloat(y, 10, 256, big.ToNearestEven)
	if errx != nil || erry != nil {
		return false
	}
	return fx.Cmp(fy) == 0
}
