package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"svc/store"
)

// TokenPrefix starts every bearer token plaintext.
const TokenPrefix = "svc_"

// secretLen is the length of the base64url (no padding) encoding of 32 random
// bytes, the body of tokens and session ids.
const secretLen = 43

// ErrMalformed means a presented credential does not have the expected
// shape. It is never more specific, so a probe learns nothing.
var ErrMalformed = errors.New("malformed credential")

// NewToken mints a bearer token: svc_ + base64url of 32 random bytes. Only the
// returned hash may be stored.
func NewToken() (plaintext string, hash store.TokenHash, err error) {
	body, err := randomSecret()
	if err != nil {
		return "", hash, err
	}
	plaintext = TokenPrefix + body
	return plaintext, HashToken(plaintext), nil
}

// HashToken returns the SHA-256 of a token plaintext.
func HashToken(plaintext string) store.TokenHash {
	return sha256.Sum256([]byte(plaintext))
}

// maxTokenBody bounds the part after the prefix of a presented token.
const maxTokenBody = 256

// ParseToken checks a presented token's shape and returns its hash. Tokens
// svc mints are svc_ + 43 base64url characters, but any svc_ + 1 to 256
// base64url characters is accepted, so an operator may seed a config with
// a token of their own making (only its hash is kept either way). The hash is
// then found by an indexed exact lookup, so no plaintext is compared.
func ParseToken(s string) (store.TokenHash, error) {
	body, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(body) == 0 || len(body) > maxTokenBody || !isBase64URL(body) {
		return store.TokenHash{}, ErrMalformed
	}
	return HashToken(s), nil
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ParseBearer extracts the credential from an Authorization header value.
func ParseBearer(header string) (string, bool) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}

func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// validSecret accepts exactly the canonical base64url encoding of 32 bytes.
func validSecret(s string) bool {
	if len(s) != secretLen {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}

// SessionCookieName is the session cookie.
const SessionCookieName = "svc_session"

// NewSessionID returns a session cookie value and its hash; only the hash is
// stored.
func NewSessionID() (string, store.SessionHash, error) {
	id, err := randomSecret()
	if err != nil {
		return "", store.SessionHash{}, err
	}
	return id, sha256.Sum256([]byte(id)), nil
}

// ParseSessionID checks a session id's shape and returns its hash.
func ParseSessionID(id string) (store.SessionHash, error) {
	if !validSecret(id) {
		return store.SessionHash{}, ErrMalformed
	}
	return sha256.Sum256([]byte(id)), nil
}

// SessionFromCookies returns the svc_session value from Cookie header lines.
func SessionFromCookies(lines []string) (string, bool) {
	for _, line := range lines {
		cookies, err := http.ParseCookie(line)
		if err != nil {
			// One malformed pair must not hide a valid session cookie.
			for _, part := range strings.Split(line, ";") {
				name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
				if ok && name == SessionCookieName && val != "" {
					return val, true
				}
			}
			continue
		}
		for _, c := range cookies {
			if c.Name == SessionCookieName && c.Value != "" {
				return c.Value, true
			}
		}
	}
	return "", false
}

// SessionCookie renders the Set-Cookie value of a session. The HTTP layer
// appends Secure when the request came over TLS.
func SessionCookie(id string, maxAgeSeconds int) string {
	c := &http.Cookie{
		Name:     SessionCookieName,
		Value:    id,
		Path:     "/",
		MaxAge:   maxAgeSeconds,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	}
	return c.String()
}

// ClearSessionCookie renders the Set-Cookie value that deletes the cookie.
func ClearSessionCookie() string {
	c := &http.Cookie{
		Name:     SessionCookieName,
		Value:    "",
		Path:     "/",
		MaxAge:   -1,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	}
	return c.String()
}
