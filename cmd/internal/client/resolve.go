package client

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// DefaultURL is the broker a client talks to when neither --url nor SVC_URL
// names one: the default address of `svc serve` (docs/CLIENT.md).
const DefaultURL = "http://127.0.0.1:7433"

// Environment variables of the client (docs/CLIENT.md).
const (
	EnvURL   = "SVC_URL"
	EnvToken = "SVC_TOKEN"
)

// ResolveURL picks the broker URL: flag, else $SVC_URL, else DefaultURL. The
// URL is returned exactly as given (the token cache matches it exactly);
// it must be http or https with a host and no query or fragment.
func ResolveURL(flag string, getenv func(string) string) (string, error) {
	raw := flag
	if raw == "" {
		raw = getenv(EnvURL)
	}
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("broker URL %q: want http(s)://host[:port]", raw)
	}
	return raw, nil
}

// ErrNoToken is returned when no credential is found anywhere.
var ErrNoToken = errors.New("no token: run `svc login`, set SVC_TOKEN or pass --token")

// TokenSource says where a resolved token came from.
type TokenSource string

const (
	SourceFlag  TokenSource = "--token"
	SourceEnv   TokenSource = EnvToken
	SourceCache TokenSource = "token cache"
)

// ResolveToken applies the credential order of docs/CLIENT.md: the --token flag,
// then $SVC_TOKEN, then the cache entry for exactly brokerURL. The cache is
// only read when the first two are empty, so a corrupt cache does not break
// an explicit token.
func ResolveToken(flag string, getenv func(string) string, brokerURL string) (string, TokenSource, error) {
	if t := strings.TrimSpace(flag); t != "" {
		return checkToken(t, SourceFlag)
	}
	if t := strings.TrimSpace(getenv(EnvToken)); t != "" {
		return checkToken(t, SourceEnv)
	}
	path, err := CachePath(getenv)
	if err != nil {
		return "", "", err
	}
	c, err := LoadCache(path)
	if err != nil {
		return "", "", err
	}
	if t, ok := c.Lookup(brokerURL); ok {
		return checkToken(t, SourceCache)
	}
	return "", "", fmt.Errorf("%w (no cache entry for %s in %s)", ErrNoToken, brokerURL, path)
}

// maxTokenLen bounds a token before it is sent in a header.
const maxTokenLen = 4096

// checkToken refuses a token that cannot travel in an Authorization header
// (control characters, spaces, non-ASCII, oversize). The error names where
// the token came from, never the token.
func checkToken(t string, src TokenSource) (string, TokenSource, error) {
	if len(t) > maxTokenLen {
		return "", "", fmt.Errorf("the token from %s is longer than %d bytes", src, maxTokenLen)
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return "", "", fmt.Errorf("the token from %s has a space, control or non-ASCII character", src)
		}
	}
	return t, src, nil
}
