package federation

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Verification bounds.
const (
	// MaxTokenBytes bounds a presented JWT: platform tokens carry a few
	// claims; anything this large is not one.
	MaxTokenBytes = 8 << 10
	// Leeway is the clock skew allowed on exp, nbf and iat between the
	// platform and the broker.
	Leeway = 30 * time.Second
	// MaxJWKSBytes bounds a JWKS document: a handful of public keys is a
	// few KiB.
	MaxJWKSBytes = 256 << 10
	// maxKeys bounds the keys taken from one JWKS document.
	maxKeys = 64
	// minRSABits refuses RSA keys too short to trust.
	minRSABits = 2048
)

// DefaultMaxLifetime is the furthest in the future a token's exp may lie
// when it is presented: nothing revokes a JWT (the broker stores none), so
// its exp is the only bound on a stolen one (docs/FEDERATION.md, "Token
// lifetime"). Platforms mint short tokens and refresh them; a day is far
// past any of theirs.
const DefaultMaxLifetime = 24 * time.Hour

// Refresh defaults.
const (
	// DefaultMinRefresh is the least time between two JWKS fetches: a flood
	// of tokens naming unknown kids costs the JWKS URL one request per
	// interval, not one per token.
	DefaultMinRefresh = 30 * time.Second
	// DefaultMaxKeyAge is how long fetched keys are used before they are
	// fetched again, so a key the platform removed stops working without a
	// restart.
	DefaultMaxKeyAge = 10 * time.Minute
	// DefaultFetchTimeout bounds one JWKS fetch. The gRPC preauth tap may
	// wait on it, on the connection's reader, so it is short.
	DefaultFetchTimeout = 5 * time.Second
)

// algorithms are the only signature algorithms a token may name: asymmetric
// ones. "none" and the HMAC family never parse (a platform shares no secret
// with the broker, and an HMAC check keyed with a public key's bytes is the
// classic key-confusion forgery).
var algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// ErrInvalid is wrapped by every refusal of a token.
var ErrInvalid = errors.New("federation token refused")

// ErrNotConfigured means no federation is configured: every JWT is refused.
var ErrNotConfigured = fmt.Errorf("%w: federation is not configured", ErrInvalid)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Config is the jwt block: whose tokens are accepted.
type Config struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	JWKSURL  string `json:"jwksUrl"`
}

// maxConfigField bounds each field of a Config.
const maxConfigField = 2048

// Validate checks that every field is set and the JWKS URL is an absolute
// http or https URL.
func (c Config) Validate() error {
	for _, f := range []struct{ name, v string }{{"issuer", c.Issuer}, {"audience", c.Audience}, {"jwksUrl", c.JWKSURL}} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("%s is required", f.name)
		}
		if len(f.v) > maxConfigField {
			return fmt.Errorf("%s is longer than %d bytes", f.name, maxConfigField)
		}
		if strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%s holds control characters", f.name)
		}
	}
	return ValidateURL(c.JWKSURL)
}

// ValidateURL checks that s is an absolute http or https URL with a host
// and no credentials or fragment.
func ValidateURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must be an http or https URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("must name a host")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return errors.New("must not carry a fragment")
	}
	return nil
}

// Claims are what a verified token says.
type Claims struct {
	// Subject is the sub claim: the member's name.
	Subject string
	// Expiry is the exp claim.
	Expiry time.Time
}

// Options configure a Verifier.
type Options struct {
	// Client fetches the JWKS; it must be the egress client.
	Client *http.Client
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// MinRefresh, MaxKeyAge and FetchTimeout default to the Default
	// constants when zero.
	MinRefresh   time.Duration
	MaxKeyAge    time.Duration
	FetchTimeout time.Duration
	// MaxLifetime is DefaultMaxLifetime when zero.
	MaxLifetime time.Duration
	Log         *slog.Logger
}

// Verifier verifies tokens against the current Config. The config is
// swapped atomically (SetConfig), so a bind applies to the next request.
type Verifier struct {
	client       *http.Client
	now          func() time.Time
	minRefresh   time.Duration
	maxKeyAge    time.Duration
	fetchTimeout time.Duration
	maxLifetime  time.Duration
	log          *slog.Logger
	cur          atomic.Pointer[keyring]
}

// New returns a Verifier with no config: every token is refused until
// SetConfig.
func New(o Options) *Verifier {
	v := &Verifier{client: o.Client, now: o.Now, minRefresh: o.MinRefresh, maxKeyAge: o.MaxKeyAge, fetchTimeout: o.FetchTimeout, maxLifetime: o.MaxLifetime, log: o.Log}
	if v.client == nil {
		v.client = http.DefaultClient
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.minRefresh <= 0 {
		v.minRefresh = DefaultMinRefresh
	}
	if v.maxKeyAge <= 0 {
		v.maxKeyAge = DefaultMaxKeyAge
	}
	if v.fetchTimeout <= 0 {
		v.fetchTimeout = DefaultFetchTimeout
	}
	if v.maxLifetime <= 0 {
		v.maxLifetime = DefaultMaxLifetime
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	return v
}

// SetConfig makes c the config of the next verification; nil refuses every
// token. A config equal to the current one keeps the fetched keys; another
// starts with none.
func (v *Verifier) SetConfig(c *Config) {
	if c == nil {
		v.cur.Store(nil)
		return
	}
	if r := v.cur.Load(); r != nil && r.cfg == *c {
		return
	}
	v.cur.Store(&keyring{cfg: *c})
}

// Config returns the current config, nil when none.
func (v *Verifier) Config() *Config {
	r := v.cur.Load()
	if r == nil {
		return nil
	}
	c := r.cfg
	return &c
}

// LooksLikeJWT reports whether s has the shape of a compact JWS: three
// non-empty base64url segments (the signature may not be empty: an
// unsigned token is no credential).
func LooksLikeJWT(s string) bool {
	if len(s) > MaxTokenBytes {
		return false
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.ContainsFunc(p, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) {
			return false
		}
	}
	return true
}

// Verify checks token: an asymmetric signature by a key of the configured
// JWKS that fits the token's alg, the configured issuer and audience, an
// exp in the future (with Leeway) and at most the maximum lifetime away,
// nbf and iat not in the future, and a subject. Every refusal wraps ErrInvalid.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	r := v.cur.Load()
	if r == nil {
		return Claims{}, ErrNotConfigured
	}
	if !LooksLikeJWT(token) {
		return Claims{}, invalid("not a compact JWS")
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return Claims{}, invalid("unparsable or unsupported algorithm")
	}
	if len(tok.Headers) != 1 {
		return Claims{}, invalid("exactly one signature is required")
	}
	h := tok.Headers[0]
	if h.KeyID == "" {
		return Claims{}, invalid("no kid in the header")
	}
	key, err := v.key(ctx, r, h.KeyID, jose.SignatureAlgorithm(h.Algorithm))
	if err != nil {
		return Claims{}, err
	}
	var c jwt.Claims
	if err := tok.Claims(key, &c); err != nil {
		return Claims{}, invalid("bad signature")
	}
	if c.Expiry == nil {
		return Claims{}, invalid("no exp claim")
	}
	if c.Issuer != r.cfg.Issuer {
		return Claims{}, invalid("wrong issuer")
	}
	if !c.Audience.Contains(r.cfg.Audience) {
		return Claims{}, invalid("wrong audience")
	}
	now := v.now()
	if err := c.ValidateWithLeeway(jwt.Expected{Time: now}, Leeway); err != nil {
		return Claims{}, invalid("%v", err)
	}
	if c.Expiry.Time().After(now.Add(v.maxLifetime + Leeway)) {
		return Claims{}, invalid("exp is more than %s away", v.maxLifetime)
	}
	if c.Subject == "" {
		return Claims{}, invalid("no sub claim")
	}
	return Claims{Subject: c.Subject, Expiry: c.Expiry.Time()}, nil
}

// keyring is one config with the keys fetched from its JWKS URL.
type keyring struct {
	cfg Config
	// fetchMu serializes fetches: concurrent misses wait for one fetch and
	// then use its result.
	fetchMu sync.Mutex
	state   atomic.Pointer[keyState]
}

// keyState is one fetch's outcome.
type keyState struct {
	keys      []jose.JSONWebKey
	fetchedAt time.Time // last successful fetch
	attemptAt time.Time // last fetch, successful or not
}

// key finds the public key named kid that fits alg, fetching the JWKS when
// none was fetched, when the keys are older than MaxKeyAge, or when kid is
// unknown, at most once per MinRefresh.
func (v *Verifier) key(ctx context.Context, r *keyring, kid string, alg jose.SignatureAlgorithm) (any, error) {
	st := r.state.Load()
	if st == nil || v.now().Sub(st.fetchedAt) >= v.maxKeyAge || !hasKID(st.keys, kid) {
		v.refresh(ctx, r, st)
		st = r.state.Load()
	}
	if st == nil || !hasKID(st.keys, kid) {
		return nil, invalid("unknown kid")
	}
	for _, k := range st.keys {
		if k.KeyID == kid && fits(k, alg) {
			return k.Key, nil
		}
	}
	return nil, invalid("algorithm %s does not fit key %q", alg, kid)
}

func hasKID(keys []jose.JSONWebKey, kid string) bool {
	for _, k := range keys {
		if k.KeyID == kid {
			return true
		}
	}
	return false
}

// refresh fetches the JWKS unless another caller did since seen was read,
// or the last attempt was less than MinRefresh ago. A failed fetch keeps
// the keys there were.
func (v *Verifier) refresh(ctx context.Context, r *keyring, seen *keyState) {
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	cur := r.state.Load()
	if cur != seen {
		return // refreshed while this caller waited
	}
	now := v.now()
	if cur != nil && now.Sub(cur.attemptAt) < v.minRefresh {
		return
	}
	// The fetch outlives the caller: a client that hangs up must not turn
	// a refresh into a failure that the rate limit then holds.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.fetchTimeout)
	defer cancel()
	keys, err := v.fetch(fctx, r.cfg.JWKSURL)
	next := &keyState{attemptAt: now}
	if err != nil {
		v.log.WarnContext(ctx, "jwks fetch failed", "url", r.cfg.JWKSURL, "err", err)
		if cur != nil {
			next.keys, next.fetchedAt = cur.keys, cur.fetchedAt
		}
	} else {
		next.keys, next.fetchedAt = keys, now
	}
	r.state.Store(next)
}

// fetch reads the JWKS at u: 200, at most MaxJWKSBytes, the public
// signature keys it holds (private, symmetric and unsupported keys are
// skipped).
func (v *Verifier) fetch(ctx context.Context, u string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks answered %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("jwks is over %d bytes", MaxJWKSBytes)
	}
	return ParseJWKS(b)
}

// ParseJWKS reads a JWKS document's public signature keys. Entries that are
// not usable public keys (private or symmetric material, unknown types,
// use other than sig, short RSA) are skipped; a document that is not a
// JWKS is an error.
func ParseJWKS(b []byte) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	if doc.Keys == nil {
		return nil, errors.New("jwks: no keys array")
	}
	if len(doc.Keys) > maxKeys {
		return nil, fmt.Errorf("jwks: more than %d keys", maxKeys)
	}
	keys := make([]jose.JSONWebKey, 0, len(doc.Keys))
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if !k.IsPublic() || !k.Valid() || (k.Use != "" && k.Use != "sig") || k.KeyID == "" {
			continue
		}
		if rk, ok := k.Key.(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// fits reports whether a token signed with alg may be checked with k: the
// key's type and curve match the algorithm, and the key's own alg, when
// set, is alg. A token naming HS256 over an RSA key never gets here (the
// HMAC family does not parse), and one naming ES256 over an RSA key is
// refused here rather than tried.
func fits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false
	}
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case jose.ES256:
			return key.Curve == elliptic.P256()
		case jose.ES384:
			return key.Curve == elliptic.P384()
		case jose.ES512:
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// VerifyJWT implements auth.JWTVerifier.
func (v *Verifier) VerifyJWT(ctx context.Context, token string) (string, time.Time, error) {
	c, err := v.Verify(ctx, token)
	return c.Subject, c.Expiry, err
}
