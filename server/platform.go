package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"svc/server/apierr"
	"svc/server/wire"
	"sync"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/federation"
	"svc/server/teamconfig"
	"svc/store"
)

// Platform connect bounds.
const (
	// PairingCodeTTL is how long a pairing code may be looked up: long
	// enough to paste it into the other broker, short enough that a leaked
	// one is soon worthless.
	PairingCodeTTL = 5 * time.Minute
	// maxPairingCodes bounds the unexpired codes outstanding at once, so
	// minting cannot grow the store without bound.
	maxPairingCodes = 100
	// maxPairingCodeLen bounds a code a caller presents; ours are 32.
	maxPairingCodeLen = 256
	// maxPlatformURLLen bounds the platform URL of a bind.
	maxPlatformURLLen = 2048
	// maxLookupBody bounds the platform's lookup answer: three short
	// strings.
	maxLookupBody = 64 << 10
	// lookupTimeout bounds the bind's request to the platform.
	lookupTimeout = 10 * time.Second
)

// pairingEncoding renders the code's 20 random bytes as 32 lowercase
// characters without padding.
var pairingEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// federationState is the live federation config and where a bind persists
// it.
type federationState struct {
	verifier *federation.Verifier
	// overlay is the path of the overlay file (<config>.jwt.json); empty
	// means binds are not possible (no config file).
	overlay string
	// client is the egress client of the bind's lookup.
	client *http.Client
	// bindMu serializes binds, so the overlay file and the live config
	// always name the same platform.
	bindMu sync.Mutex
}

// Platform implements apiv1.PlatformServer: platform connect.
type Platform struct {
	apiv1.UnimplementedPlatformServer
	*core
	fed *federationState
}

var _ apiv1.PlatformServer = (*Platform)(nil)

// CreatePairingCode implements apiv1.PlatformServer.
func (s *Platform) CreatePairingCode(ctx context.Context, req *apiv1.CreatePairingCodeRequest) (*apiv1.CreatePairingCodeResponse, error) {
	p := mustPrincipal(ctx)
	var cfg federation.Config
	switch {
	case req.Issuer == nil && req.Audience == nil && req.JwksUrl == nil:
		cur := s.fed.verifier.Config()
		if cur == nil {
			return nil, apierr.Errorf(apierr.CodeBadRequest, "this broker has no jwt config to pass on: give issuer, audience and jwksUrl")
		}
		cfg = *cur
	case req.Issuer != nil && req.Audience != nil && req.JwksUrl != nil:
		cfg = federation.Config{Issuer: req.GetIssuer(), Audience: req.GetAudience(), JWKSURL: req.GetJwksUrl()}
	default:
		return nil, apierr.Errorf(apierr.CodeBadRequest, "give issuer, audience and jwksUrl together, or none of them")
	}
	if err := cfg.Validate(); err != nil {
		return nil, apierr.Invalid("jwt", "%v", err)
	}
	var raw [20]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	code := pairingEncoding.EncodeToString(raw[:])
	now := s.now()
	pc := store.PairingCode{
		Hash: pairingHash(code), Issuer: cfg.Issuer, Audience: cfg.Audience, JWKSURL: cfg.JWKSURL,
		CreatedBy: p.Member, CreatedAt: now, ExpiresAt: now.Add(PairingCodeTTL),
	}
	err := s.store.CreatePairingCode(ctx, pc, maxPairingCodes)
	if errors.Is(err, store.ErrPrecondition) {
		return nil, &apierr.Error{Code: apierr.CodeRateLimited, RetryAfter: PairingCodeTTL,
			Message: fmt.Sprintf("%d pairing codes are outstanding, the most there may be: wait for one to be used or expire", maxPairingCodes)}
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "pairing code created", "member", p.Member, "issuer", cfg.Issuer, "expires_at", pc.ExpiresAt)
	return &apiv1.CreatePairingCodeResponse{Code: code, ExpiresAt: wire.MS(pc.ExpiresAt), Jwt: jwtToProto(cfg)}, nil
}

// pairingHash is the stored form of a code.
func pairingHash(code string) store.PairingHash { return sha256.Sum256([]byte(code)) }

// LookupPairingCode implements apiv1.PlatformServer.
func (s *Platform) LookupPairingCode(ctx context.Context, req *apiv1.LookupPairingCodeRequest) (*apiv1.LookupPairingCodeResponse, error) {
	code := req.GetCode()
	if code == "" {
		return nil, apierr.Invalid("code", "is required")
	}
	if len(code) > maxPairingCodeLen {
		return nil, apierr.Invalid("code", "is longer than %d bytes", maxPairingCodeLen)
	}
	// The lookup is by the code's hash through the primary key: no code is
	// compared, so none leaks through timing.
	pc, err := s.store.ConsumePairingCode(ctx, pairingHash(code), s.now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(apierr.CodeNotFound, "no such pairing code: unknown, already used or expired")
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "pairing code looked up", "issuer", pc.Issuer, "created_by", pc.CreatedBy)
	return &apiv1.LookupPairingCodeResponse{Issuer: pc.Issuer, Audience: pc.Audience, JwksUrl: pc.JWKSURL}, nil
}

// Bind implements apiv1.PlatformServer.
func (s *Platform) Bind(ctx context.Context, req *apiv1.BindRequest) (*apiv1.BindResponse, error) {
	p := mustPrincipal(ctx)
	if p.Via != auth.ViaSession {
		return nil, fmt.Errorf("%w: platform connect binds with a session (TOTP login), not a bearer credential", auth.ErrForbidden)
	}
	code := req.GetPairingCode()
	switch {
	case code == "":
		return nil, apierr.Invalid("pairingCode", "is required")
	case len(code) > maxPairingCodeLen:
		return nil, apierr.Invalid("pairingCode", "is longer than %d bytes", maxPairingCodeLen)
	case strings.ContainsFunc(code, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return nil, apierr.Invalid("pairingCode", "holds control characters")
	}
	lookup, err := lookupURL(req.GetPlatformUrl())
	if err != nil {
		return nil, err
	}
	if s.fed.overlay == "" {
		return nil, apierr.Errorf(apierr.CodeUnavailable, "this broker has no config file to write the jwt block to")
	}
	cfg, err := s.fetchLookup(ctx, lookup, code)
	if err != nil {
		return nil, err
	}

	s.fed.bindMu.Lock()
	defer s.fed.bindMu.Unlock()
	// Written (fsynced, renamed) before it is applied and answered: a bind
	// that was confirmed survives a crash.
	j := teamconfig.JWT(cfg)
	if err := teamconfig.SaveJWTOverlay(s.fed.overlay, &j); err != nil {
		return nil, fmt.Errorf("write jwt overlay: %w", err)
	}
	s.fed.verifier.SetConfig(&cfg)
	now := s.now()
	s.log.InfoContext(ctx, "platform connect bound", "member", p.Member, "platform", req.GetPlatformUrl(),
		"issuer", cfg.Issuer, "audience", cfg.Audience, "jwks_url", cfg.JWKSURL)
	return &apiv1.BindResponse{Bound: true, PlatformUrl: req.GetPlatformUrl(), Jwt: jwtToProto(cfg), BoundAt: wire.MS(now)}, nil
}

// lookupURL checks a bind's platform URL and returns its lookup endpoint
// (without the code).
func lookupURL(platform string) (*url.URL, error) {
	if platform == "" {
		return nil, apierr.Invalid("platformUrl", "is required")
	}
	if len(platform) > maxPlatformURLLen {
		return nil, apierr.Invalid("platformUrl", "is longer than %d bytes", maxPlatformURLLen)
	}
	if err := federation.ValidateURL(platform); err != nil {
		return nil, apierr.Invalid("platformUrl", "%v", err)
	}
	u, err := url.Parse(platform)
	if err != nil {
		return nil, apierr.Invalid("platformUrl", "not a URL")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, apierr.Invalid("platformUrl", "must not carry a query")
	}
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	return u.JoinPath("platform-connect", "lookup"), nil
}

// fetchLookup asks the platform for the pairing code's jwt block: 502 when
// the platform cannot be reached or answers non-2xx, 400 when its answer is
// not a valid block.
func (s *Platform) fetchLookup(ctx context.Context, lookup *url.URL, code string) (federation.Config, error) {
	u := *lookup
	u.RawQuery = url.Values{"code": {code}}.Encode()
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return federation.Config{}, apierr.Invalid("platformUrl", "not a URL")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-SVC-Protocol", ProtocolVersion)
	resp, err := s.fed.client.Do(req)
	if err != nil {
		// The cause names the address, never the code (the URL is not
		// logged either: its query holds the code).
		return federation.Config{}, &apierr.Error{Code: apierr.CodeBadGateway, Message: "the platform could not be reached", Err: scrub(err, code)}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxLookupBody))
		return federation.Config{}, apierr.Errorf(apierr.CodeBadGateway, "the platform answered the lookup with status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLookupBody+1))
	if err != nil {
		return federation.Config{}, &apierr.Error{Code: apierr.CodeBadGateway, Message: "the platform's answer could not be read", Err: scrub(err, code)}
	}
	if len(body) > maxLookupBody {
		return federation.Config{}, apierr.Errorf(apierr.CodeBadRequest, "the platform's answer is over %d bytes", maxLookupBody)
	}
	cfg, err := parseLookup(body)
	if err != nil {
		return federation.Config{}, apierr.Errorf(apierr.CodeBadRequest, "the platform's answer is not platform info: %v", err)
	}
	return cfg, nil
}

// parseLookup reads a lookup answer: a JSON object whose issuer, audience
// and jwksUrl are non-empty strings, jwksUrl http or https. Other fields
// are ignored (a platform may say more).
func parseLookup(body []byte) (federation.Config, error) {
	var a struct {
		Issuer   *string `json:"issuer"`
		Audience *string `json:"audience"`
		JWKSURL  *string `json:"jwksUrl"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&a); err != nil {
		return federation.Config{}, errors.New("not a JSON object")
	}
	if dec.More() {
		return federation.Config{}, errors.New("trailing data")
	}
	if a.Issuer == nil || a.Audience == nil || a.JWKSURL == nil {
		return federation.Config{}, errors.New("issuer, audience and jwksUrl are required")
	}
	cfg := federation.Config{Issuer: *a.Issuer, Audience: *a.Audience, JWKSURL: *a.JWKSURL}
	if err := cfg.Validate(); err != nil {
		return federation.Config{}, err
	}
	return cfg, nil
}

// scrub keeps the pairing code out of an error bound for the log: net/http
// errors quote the URL, whose query holds it.
func scrub(err error, code string) error {
	msg := err.Error()
	for _, c := range []string{code, url.QueryEscape(code)} {
		if c != "" {
			msg = strings.ReplaceAll(msg, c, "<code>")
		}
	}
	return errors.New(msg)
}

func jwtToProto(c federation.Config) *apiv1.JwtConfig {
	return &apiv1.JwtConfig{Issuer: c.Issuer, Audience: c.Audience, JwksUrl: c.JWKSURL}
}
