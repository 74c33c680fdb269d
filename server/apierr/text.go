package apierr

import (
	"strings"
	"unicode/utf8"
)

// ValidText checks a text field of a request: present (non-blank) when
// required, at most limit bytes, UTF-8 without NUL (PostgreSQL's text
// cannot hold it, so one such field would fail every write committed with
// it; no text a person or agent writes holds one).
func ValidText(field, s string, limit int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return Invalid(field, "is required")
	case len(s) > limit:
		return Invalid(field, "at most %d bytes", limit)
	case !utf8.ValidString(s):
		return Invalid(field, "must be UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return Invalid(field, "must not contain NUL")
	}
	return nil
}

// TruncateUTF8 shortens s to at most n bytes without splitting a rune.
func TruncateUTF8(s string, n int) string {
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

// FirstErr returns the first non-nil error, so a handler can run its field
// checks in order in one statement.
func FirstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
