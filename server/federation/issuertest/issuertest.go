// Package issuertest is a local JWT issuer for tests: RS256 and ES256 keys
// made with go-jose, a JWKS served by httptest whose keys can be rotated,
// and signed tokens.
package issuertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Key is a signing key with its kid and algorithm.
type Key struct {
	KID  string
	Alg  jose.SignatureAlgorithm
	Priv any // *rsa.PrivateKey or *ecdsa.PrivateKey
}

// Public returns the key's public JWK.
func (k *Key) Public() jose.JSONWebKey {
	var pub any
	switch p := k.Priv.(type) {
	case *rsa.PrivateKey:
		pub = &p.PublicKey
	case *ecdsa.PrivateKey:
		pub = &p.PublicKey
	}
	return jose.JSONWebKey{Key: pub, KeyID: k.KID, Algorithm: string(k.Alg), Use: "sig"}
}

// NewRSAKey returns a 2048-bit RS256 key named kid.
func NewRSAKey(tb testing.TB, kid string) *Key {
	tb.Helper()
	p, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	return &Key{KID: kid, Alg: jose.RS256, Priv: p}
}

// NewECKey returns a P-256 ES256 key named kid.
func NewECKey(tb testing.TB, kid string) *Key {
	tb.Helper()
	p, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &Key{KID: kid, Alg: jose.ES256, Priv: p}
}

// Issuer serves a JWKS of its published keys and signs tokens.
type Issuer struct {
	Srv      *httptest.Server
	Name     string // the iss claim
	Audience string // the default aud claim
	mu       sync.Mutex
	keys     []*Key
	fetches  atomic.Int64
}

// New starts an issuer publishing keys, closed at cleanup.
func New(tb testing.TB, keys ...*Key) *Issuer {
	tb.Helper()
	is := &Issuer{Name: "https://platform.example/", Audience: "svc-team", keys: keys}
	is.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(is.JWKS())
	}))
	tb.Cleanup(is.Srv.Close)
	return is
}

// JWKSURL is the URL of the served JWKS.
func (is *Issuer) JWKSURL() string { return is.Srv.URL + "/.well-known/jwks.json" }

// JWKS returns the published key set.
func (is *Issuer) JWKS() jose.JSONWebKeySet {
	is.mu.Lock()
	defer is.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, k := range is.keys {
		set.Keys = append(set.Keys, k.Public())
	}
	return set
}

// Publish replaces the published keys.
func (is *Issuer) Publish(keys ...*Key) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

// Fetches counts the JWKS requests served.
func (is *Issuer) Fetches() int64 { return is.fetches.Load() }

// Claims returns good claims for sub: this issuer, its audience, issued
// now, expiring in an hour.
func (is *Issuer) Claims(sub string, now time.Time) jwt.Claims {
	return jwt.Claims{
		Issuer: is.Name, Audience: jwt.Audience{is.Audience}, Subject: sub,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
	}
}

// Sign signs claims (any JSON-marshalable value) with k under its kid.
func Sign(tb testing.TB, k *Key, claims any) string {
	tb.Helper()
	return SignAs(tb, k.Alg, k.KID, k.Priv, claims)
}

// SignAs signs claims with key under alg, naming kid in the header.
func SignAs(tb testing.TB, alg jose.SignatureAlgorithm, kid string, key any, claims any) string {
	tb.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
