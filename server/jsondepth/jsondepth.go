// Package jsondepth bounds how deeply a JSON document nests, in one pass
// over its bytes and before anything is allocated for it, so a decoder
// never recurses on a hostile document. It does not validate: a document
// it lets through may still be refused by the decoder.
package jsondepth

// Exceeds reports whether the objects and arrays of b nest deeper than
// max. Brackets inside strings do not count.
func Exceeds(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > max {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}
