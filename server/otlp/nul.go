package otlp

import "strings"

// nulReplacement stands for a NUL (U+0000) in a telemetry string: the
// Unicode replacement character, as for bytes that are not UTF-8.
// PostgreSQL's text cannot hold a NUL, nor its jsonb the \u0000 escape,
// and an exporter should not lose a whole batch for one attribute, so a
// NUL is replaced where a string is read, in every decoder, and nothing
// downstream sees one (docs/DECISIONS.md, "Text fields hold no NUL").
const nulReplacement = "\uFFFD"

// noNUL returns s with every NUL replaced by nulReplacement.
func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", nulReplacement)
}

// noNULValue replaces NUL in every string and key of a value decoded
// from JSON (decodeJSONValue), in place where it can.
func noNULValue(v any) any {
	switch x := v.(type) {
	case string:
		return noNUL(x)
	case []any:
		for i, e := range x {
			x[i] = noNULValue(e)
		}
	case map[string]any:
		var renamed map[string]any
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 {
				if renamed == nil {
					renamed = map[string]any{}
				}
				renamed[k] = e
				continue
			}
			x[k] = noNULValue(e)
		}
		// Renamed after the walk: keys added while ranging may or may
		// not be visited. A renamed key meeting an existing one keeps
		// the later in key order, as duplicate keys do.
		for k, e := range renamed {
			delete(x, k)
			x[noNUL(k)] = noNULValue(e)
		}
	}
	return v
}
