package auth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/store"
)

func FuzzParseToken(f *testing.F) {
	tok, _, err := auth.NewToken()
	require.NoError(f, err)
	for _, s := range []string{
		"", "\x00", auth.TokenPrefix, tok, tok + "\n", " " + tok, tok[:len(tok)-1],
		tok[:len(tok)-1] + "B", auth.TokenPrefix + strings.Repeat("A", 43),
		auth.TokenPrefix + strings.Repeat("A", 42) + "=", "svc_ü" + strings.Repeat("A", 41),
		"Bearer " + tok, strings.TrimPrefix(tok, auth.TokenPrefix),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := auth.ParseToken(s)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrMalformed)
			require.Equal(t, store.TokenHash{}, h)
			return
		}
		require.True(t, strings.HasPrefix(s, auth.TokenPrefix))
		body := strings.TrimPrefix(s, auth.TokenPrefix)
		require.NotEmpty(t, body)
		require.LessOrEqual(t, len(body), 256)
		require.Equal(t, auth.HashToken(s), h)
		require.Equal(t, store.TokenHash(sha256.Sum256([]byte(s))), h)
		for _, c := range body {
			require.True(t, c == '-' || c == '_' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z'), "body char %q", c)
		}

		// Idempotent.
		h2, err := auth.ParseToken(s)
		require.NoError(t, err)
		require.Equal(t, h, h2)
	})
}

func FuzzParseBearer(f *testing.F) {
	tok, _, err := auth.NewToken()
	require.NoError(f, err)
	for _, s := range []string{
		"", "\x00", "Bearer", "Bearer ", "Bearer  ", "Bearer " + tok, "bearer " + tok,
		"Bearer   " + tok + " ", "Basic abc", " Bearer x", "Bearer\t" + tok, "Bеarer x", "Bearer \x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		cred, ok := auth.ParseBearer(header)
		if !ok {
			require.Empty(t, cred)
			return
		}
		require.NotEmpty(t, cred)
		require.Equal(t, strings.TrimSpace(cred), cred)
		scheme, _, found := strings.Cut(header, " ")
		require.True(t, found)
		require.True(t, strings.EqualFold(scheme, "bearer"))
		require.True(t, strings.HasSuffix(strings.TrimSpace(header), cred))

		// Re-wrapping the credential in a canonical header gives it back.
		again, ok := auth.ParseBearer("Bearer " + cred)
		require.True(t, ok)
		require.Equal(t, cred, again)
	})
}

func FuzzSessionFromCookies(f *testing.F) {
	id, _, err := auth.NewSessionID()
	require.NoError(f, err)
	seeds := [][2]string{
		{"", ""},
		{"\x00", "svc_session=" + id},
		{"svc_session=" + id, ""},
		{"svc_session=", ""},
		{"a=1; svc_session=" + id, "b=2"},
		{"bad pair; svc_session=" + id, ""},
		{`x="open; svc_session=` + id, ""},
		{"svc_session=\"\"", "svc_session=;"},
		{"ü=ö", "svc_session=ö"},
		{";;;=;", "svc_session== "},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		v, ok := auth.SessionFromCookies([]string{a, b})
		if !ok {
			require.Empty(t, v)
		} else {
			require.NotEmpty(t, v)
		}
		// Deterministic.
		v2, ok2 := auth.SessionFromCookies([]string{a, b})
		require.Equal(t, ok, ok2)
		require.Equal(t, v, v2)
		// A later line never overrides a session found on an earlier one.
		if v1, ok1 := auth.SessionFromCookies([]string{a}); ok1 {
			require.True(t, ok)
			require.Equal(t, v1, v)
		}
	})
}

func FuzzParseSessionID(f *testing.F) {
	id, _, err := auth.NewSessionID()
	require.NoError(f, err)
	for _, s := range []string{
		"", "\x00", id, id + "=", id[:42], id[:42] + "B", auth.TokenPrefix + id, strings.Repeat("é", 21) + "A",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := auth.ParseSessionID(s)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrMalformed)
			require.Equal(t, store.SessionHash{}, h)
			return
		}
		require.Len(t, s, 43)
		require.Equal(t, store.SessionHash(sha256.Sum256([]byte(s))), h)
		raw, err := base64.RawURLEncoding.DecodeString(s)
		require.NoError(t, err)
		require.Equal(t, s, base64.RawURLEncoding.EncodeToString(raw))
		// A valid session id survives a round trip through the cookie it
		// is sent in.
		got, ok := auth.SessionFromCookies([]string{auth.SessionCookieName + "=" + s})
		require.True(t, ok)
		require.Equal(t, s, got)
	})
}
