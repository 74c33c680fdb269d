package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// MaxDedupeKey bounds a dedupe key as stored: a longer header value, or
// one with bytes that are not printable ASCII, is stored as
// "sha256:<hex>" of the trimmed value (71 bytes), so distinct values never
// collide the way truncating them would.
const MaxDedupeKey = 128

// DedupeKey is the value of the configured dedupe header, trimmed and
// bounded (empty when absent or no header configured). A repeated header
// counts by its first value.
func DedupeKey(h http.Header, header string) string {
	if header == "" {
		return ""
	}
	v := strings.TrimSpace(h.Get(header))
	if v == "" {
		return ""
	}
	if len(v) <= MaxDedupeKey && printableASCII(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
