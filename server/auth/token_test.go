package auth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/store"
)

// validBody is a canonical base64url encoding of 32 bytes.
var validBody = base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

func TestNewToken(t *testing.T) {
	plain, hash, err := auth.NewToken()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(plain, auth.TokenPrefix))
	require.Len(t, plain, len(auth.TokenPrefix)+43)
	body := strings.TrimPrefix(plain, auth.TokenPrefix)
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	require.NoError(t, err)
	require.Len(t, raw, 32)
	require.Equal(t, store.TokenHash(sha256.Sum256([]byte(plain))), hash)
	require.Equal(t, hash, auth.HashToken(plain))

	parsed, err := auth.ParseToken(plain)
	require.NoError(t, err)
	require.Equal(t, hash, parsed)

	other, otherHash, err := auth.NewToken()
	require.NoError(t, err)
	require.NotEqual(t, plain, other)
	require.NotEqual(t, hash, otherHash)
}

func TestParseToken(t *testing.T) {
	// A body whose last character carries non-zero padding bits decodes
	// under the lenient decoder to the same bytes as the canonical one.
	canonical := base64.RawURLEncoding.EncodeToString(make([]byte, 32)) // "AAA…A" (43)
	nonCanonical := canonical[:42] + "B"

	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{name: "valid", in: auth.TokenPrefix + validBody, ok: true},
		{name: "valid all zero", in: auth.TokenPrefix + canonical, ok: true},
		{name: "valid with url alphabet", in: auth.TokenPrefix + strings.Repeat("-_", 21) + "A", ok: true},
		{name: "empty", in: ""},
		{name: "prefix only", in: auth.TokenPrefix},
		{name: "missing prefix", in: validBody},
		{name: "other prefix", in: "tk_" + validBody},
		{name: "upper-case prefix", in: "SVC_" + validBody},
		{name: "one char short", in: auth.TokenPrefix + validBody[:42], ok: true},
		{name: "one char long", in: auth.TokenPrefix + validBody + "A", ok: true},
		{name: "body over 256 chars", in: auth.TokenPrefix + strings.Repeat("A", 257)},
		{name: "body of 256 chars", in: auth.TokenPrefix + strings.Repeat("A", 256), ok: true},
		{name: "std alphabet plus", in: auth.TokenPrefix + "+" + validBody[1:]},
		{name: "std alphabet slash", in: auth.TokenPrefix + "/" + validBody[1:]},
		{name: "padding", in: auth.TokenPrefix + validBody[:42] + "="},
		{name: "space inside", in: auth.TokenPrefix + validBody[:20] + " " + validBody[21:]},
		{name: "newline inside", in: auth.TokenPrefix + validBody[:20] + "\n" + validBody[21:]},
		{name: "carriage return inside", in: auth.TokenPrefix + validBody[:20] + "\r" + validBody[21:]},
		{name: "trailing newline", in: auth.TokenPrefix + validBody + "\n"},
		{name: "leading space", in: " " + auth.TokenPrefix + validBody},
		{name: "non-canonical base64 tail", in: auth.TokenPrefix + nonCanonical, ok: true},
		{name: "NUL", in: auth.TokenPrefix + validBody[:42] + "\x00"},
		{name: "NUL only", in: "\x00"},
		{name: "unicode", in: auth.TokenPrefix + validBody[:41] + "é"},
		{name: "unicode lookalike prefix", in: "ѕvc_" + validBody},
		{name: "invalid utf-8", in: auth.TokenPrefix + validBody[:42] + "\xff"},
		{name: "prefix characters inside body", in: auth.TokenPrefix + auth.TokenPrefix + validBody[:38] + "A", ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := auth.ParseToken(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, auth.ErrMalformed)
				require.Equal(t, store.TokenHash{}, h)
				return
			}
			require.NoError(t, err)
			require.Equal(t, auth.HashToken(tc.in), h)
		})
	}
}

func TestParseBearer(t *testing.T) {
	tok := auth.TokenPrefix + validBody
	tests := []struct {
		name   string
		header string
		want   string
		ok     bool
	}{
		{name: "canonical", header: "Bearer " + tok, want: tok, ok: true},
		{name: "lower-case scheme", header: "bearer " + tok, want: tok, ok: true},
		{name: "upper-case scheme", header: "BEARER " + tok, want: tok, ok: true},
		{name: "mixed-case scheme", header: "bEaReR " + tok, want: tok, ok: true},
		{name: "extra spaces before credential", header: "Bearer    " + tok, want: tok, ok: true},
		{name: "trailing spaces", header: "Bearer " + tok + "  ", want: tok, ok: true},
		{name: "opaque credential passes through", header: "Bearer abc.def.ghi", want: "abc.def.ghi", ok: true},
		{name: "empty", header: ""},
		{name: "scheme only", header: "Bearer"},
		{name: "scheme and space only", header: "Bearer "},
		{name: "scheme and spaces only", header: "Bearer    "},
		{name: "basic scheme", header: "Basic dXNlcjpwYXNz"},
		{name: "token scheme", header: "Token " + tok},
		{name: "bare token", header: tok},
		{name: "scheme prefix of longer word", header: "Bearerx " + tok},
		{name: "leading space", header: " Bearer " + tok},
		{name: "NUL", header: "\x00"},
		{name: "unicode scheme", header: "Bеarer " + tok}, // Cyrillic е
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := auth.ParseBearer(tc.header)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNewSessionID(t *testing.T) {
	id, h, err := auth.NewSessionID()
	require.NoError(t, err)
	require.Len(t, id, 43)
	require.Equal(t, store.SessionHash(sha256.Sum256([]byte(id))), h)
	parsed, err := auth.ParseSessionID(id)
	require.NoError(t, err)
	require.Equal(t, h, parsed)

	other, otherHash, err := auth.NewSessionID()
	require.NoError(t, err)
	require.NotEqual(t, id, other)
	require.NotEqual(t, h, otherHash)
}

func TestParseSessionID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{name: "valid", in: validBody, ok: true},
		{name: "empty", in: ""},
		{name: "token is not a session id", in: auth.TokenPrefix + validBody},
		{name: "short", in: validBody[:42]},
		{name: "long", in: validBody + "A"},
		{name: "padding", in: validBody[:42] + "="},
		{name: "non-canonical tail", in: validBody[:42] + "B"},
		{name: "quoted", in: `"` + validBody[:41] + `"`},
		{name: "NUL", in: validBody[:42] + "\x00"},
		{name: "unicode", in: validBody[:41] + "é"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := auth.ParseSessionID(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, auth.ErrMalformed)
				return
			}
			require.NoError(t, err)
			require.Equal(t, store.SessionHash(sha256.Sum256([]byte(tc.in))), h)
		})
	}
}

func TestSessionFromCookies(t *testing.T) {
	id := validBody
	tests := []struct {
		name  string
		lines []string
		want  string
		ok    bool
	}{
		{name: "none", lines: nil},
		{name: "empty line", lines: []string{""}},
		{name: "only session", lines: []string{"svc_session=" + id}, want: id, ok: true},
		{name: "among other cookies", lines: []string{"theme=dark; svc_session=" + id + "; lang=en"}, want: id, ok: true},
		{name: "no spaces between pairs", lines: []string{"a=1;svc_session=" + id}, want: id, ok: true},
		{name: "second header line", lines: []string{"theme=dark", "svc_session=" + id}, want: id, ok: true},
		{name: "first of two session cookies wins", lines: []string{"svc_session=first; svc_session=second"}, want: "first", ok: true},
		{name: "malformed pair before valid one", lines: []string{"bad pair; svc_session=" + id}, want: id, ok: true},
		{name: "malformed value before valid one", lines: []string{`x="unterminated; svc_session=` + id}, want: id, ok: true},
		{name: "malformed line then valid line", lines: []string{"\x00garbage", "svc_session=" + id}, want: id, ok: true},
		{name: "empty value", lines: []string{"svc_session="}},
		{name: "empty value then real one", lines: []string{"svc_session=; svc_session=" + id}, want: id, ok: true},
		{name: "empty value in malformed line", lines: []string{"bad pair; svc_session="}},
		{name: "quoted value", lines: []string{`svc_session="` + id + `"`}, want: id, ok: true},
		{name: "name is case-sensitive", lines: []string{"SVC_SESSION=" + id}},
		{name: "similar name", lines: []string{"svc_session2=" + id}},
		{name: "no equals sign", lines: []string{"svc_session"}},
		{name: "unicode elsewhere", lines: []string{"ü=ö; svc_session=" + id}, want: id, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := auth.SessionFromCookies(tc.lines)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

// parseSetCookie reads a Set-Cookie value the way a browser would.
func parseSetCookie(t *testing.T, v string) *http.Cookie {
	t.Helper()
	c, err := http.ParseSetCookie(v)
	require.NoError(t, err)
	return c
}

func TestSessionCookie(t *testing.T) {
	id := validBody
	v := auth.SessionCookie(id, 604800)
	c := parseSetCookie(t, v)
	require.Equal(t, auth.SessionCookieName, c.Name)
	require.Equal(t, id, c.Value)
	require.Equal(t, "/", c.Path)
	require.Equal(t, 604800, c.MaxAge)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.False(t, c.Secure, "the HTTP layer adds Secure over TLS only")
	require.Contains(t, v, "HttpOnly")
	require.Contains(t, v, "SameSite=Strict")
	require.Contains(t, v, "Max-Age=604800")
	require.Contains(t, v, "Path=/")

	// The browser sends back what the server set.
	got, ok := auth.SessionFromCookies([]string{c.Name + "=" + c.Value})
	require.True(t, ok)
	require.Equal(t, id, got)
}

func TestClearSessionCookie(t *testing.T) {
	v := auth.ClearSessionCookie()
	c := parseSetCookie(t, v)
	require.Equal(t, auth.SessionCookieName, c.Name)
	require.Empty(t, c.Value)
	require.Equal(t, "/", c.Path)
	require.Negative(t, c.MaxAge, "Max-Age=0 in the header, parsed as negative, deletes the cookie")
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Contains(t, v, "Max-Age=0")
}
