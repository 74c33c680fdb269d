package otlp

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MarshalData encodes the event's data as encoding/json would (keys
// sorted, no HTML escaping), without its reflection and without
// re-validating the raw JSON it holds (which this package produced and
// checked itself): ingest encodes every row, so this is on its hot path.
func (e Event) MarshalData() ([]byte, error) {
	return appendValue(make([]byte, 0, dataSizeHint(e.Data)), e.Data)
}

// dataSizeHint guesses an encoding's size from its raw parts.
func dataSizeHint(m map[string]any) int {
	n := 256
	for _, v := range m {
		if r, ok := v.(json.RawMessage); ok {
			n += len(r)
		}
	}
	return n
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		return appendFloat(b, x)
	case json.RawMessage:
		if len(x) == 0 {
			return append(b, "null"...), nil
		}
		return append(b, x...), nil
	case []string:
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		return append(b, ']'), nil
	case map[string]string:
		b = append(b, '{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			b = appendString(b, x[k])
		}
		return append(b, '}'), nil
	case map[string]any:
		b = append(b, '{')
		var err error
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			if b, err = appendValue(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	default:
		enc, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return append(b, enc...), nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendFloat writes f as encoding/json does.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("otlp: unsupported number %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string as encoding/json does without
// HTML escaping: invalid UTF-8 becomes U+FFFD, U+2028 and U+2029 are
// escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
