package server

import (
	"strings"
	"unicode/utf8"
)

// validText checks a text field of a request: present (non-blank) when
// required, at most limit bytes, UTF-8.
func validText(field, s string, limit int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return invalid(field, "is required")
	case len(s) > limit:
		return invalid(field, "at most %d bytes", limit)
	case !utf8.ValidString(s):
		return invalid(field, "must be UTF-8")
	}
	return nil
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

// firstErr returns the first non-nil error, so a handler can run its field
// checks in order in one statement.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
