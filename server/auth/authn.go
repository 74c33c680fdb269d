package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"svc/store"
)

// Authentication outcomes. The server maps them to 401 and 403.
var (
	// ErrUnauthenticated means no valid credential was presented.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden means the caller lacks the permission.
	ErrForbidden = errors.New("forbidden")
)

// SessionTTL is the sliding lifetime of a session (docs/DECISIONS.md,
// Sessions and TOTP).
const SessionTTL = 7 * 24 * time.Hour

// Session refresh and token lastUsedAt writes are coalesced to one per this
// interval per credential, so a busy client does not turn every request into
// a write.
const touchInterval = time.Second

// Via says how a principal authenticated.
type Via int

// Ways to authenticate.
const (
	ViaBearer Via = iota + 1
	ViaSession
	// ViaJWT is a federation JWT in Authorization: Bearer. It is a machine
	// credential on the bearer plane like a token (BearerPlane), but no
	// token id backs it: it cannot be revoked here and ends at its exp.
	ViaJWT
)

// Principal is the authenticated caller.
type Principal struct {
	Member      string
	Permissions []string
	Via         Via
	TokenID     string            // with ViaBearer
	JWTHash     string            // hex SHA-256 of the token, with ViaJWT
	Session     store.SessionHash // with ViaSession
	SessionID   string            // the cookie value, with ViaSession
	ExpiresAt   time.Time         // credential expiry; zero when none
	// Refreshed is true when this request slid the session's expiry.
	Refreshed bool
}

// RefreshedCookie is the Set-Cookie value that slides the browser's copy of
// the session cookie when this request slid the session, or "" when it did
// not. The interceptors and the hand-written HTTP routes both send it.
func (p *Principal) RefreshedCookie() string {
	if !p.Refreshed {
		return ""
	}
	return SessionCookie(p.SessionID, int(SessionTTL/time.Second))
}

// BearerPlane reports whether the caller authenticated with the
// Authorization header (a token or a federation JWT) rather than the
// session cookie: the machine plane, which routes that need an exporter's
// or runner's credential accept.
func (p *Principal) BearerPlane() bool { return p.Via == ViaBearer || p.Via == ViaJWT }

// Has reports whether the principal holds the leaf.
func (p *Principal) Has(leaf string) bool { return slices.Contains(p.Permissions, leaf) }

// LogValue keeps credentials out of logs.
func (p *Principal) LogValue() slog.Value { return slog.StringValue(p.Member) }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of an authenticated request.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok
}

// Credentials are what a request presented.
type Credentials struct {
	Bearer  string
	Session string
}

// CredentialsFromHeader reads an HTTP request's Authorization header and
// session cookie, as CredentialsFromMetadata reads them from gRPC metadata.
func CredentialsFromHeader(h http.Header) Credentials {
	md := metadata.MD{}
	if v := h.Values("Authorization"); len(v) > 0 {
		md.Set("authorization", v...)
	}
	if v := h.Values("Cookie"); len(v) > 0 {
		md.Set("cookie", v...)
	}
	return CredentialsFromMetadata(md)
}

// CredentialsFromMetadata reads gRPC metadata: authorization, and the cookie
// either sent natively or forwarded by the gateway as grpcgateway-cookie.
func CredentialsFromMetadata(md metadata.MD) Credentials {
	var c Credentials
	if v := md.Get("authorization"); len(v) > 0 {
		c.Bearer, _ = ParseBearer(v[0])
		if c.Bearer == "" {
			c.Bearer = v[0] // present but unusable: must fail, not fall back
		}
	}
	cookies := append(md.Get("cookie"), md.Get("grpcgateway-cookie")...)
	c.Session, _ = SessionFromCookies(cookies)
	return c
}

// MemberLookup resolves a member's current permissions; the team registry
// implements it, so permission changes apply to the next request.
type MemberLookup interface {
	MemberPermissions(name string) ([]string, bool)
}

// JWTVerifier verifies a federation JWT and returns its subject (the
// member's name) and expiry; federation.Verifier implements it.
type JWTVerifier interface {
	VerifyJWT(ctx context.Context, token string) (subject string, expires time.Time, err error)
}

// Authenticator resolves credentials to a principal.
type Authenticator struct {
	tokens   store.TokenStore
	sessions store.SessionStore
	members  MemberLookup
	jwt      JWTVerifier // nil: no federation, every JWT is an unknown bearer
	now      func() time.Time
	log      *slog.Logger
}

// AuthenticatorOption sets an optional setting of an Authenticator.
type AuthenticatorOption func(*Authenticator)

// WithJWT accepts federation JWTs that v verifies: a bearer that is not an
// svc_ token and has the shape of a compact JWS resolves to the member its
// subject names.
func WithJWT(v JWTVerifier) AuthenticatorOption { return func(a *Authenticator) { a.jwt = v } }

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(tokens store.TokenStore, sessions store.SessionStore, members MemberLookup, now func() time.Time, log *slog.Logger, opts ...AuthenticatorOption) *Authenticator {
	a := &Authenticator{tokens: tokens, sessions: sessions, members: members, now: now, log: log}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Authenticate resolves c. A presented bearer is authoritative: when it is
// invalid the request fails rather than falling back to a cookie.
func (a *Authenticator) Authenticate(ctx context.Context, c Credentials) (*Principal, error) {
	return a.authenticate(ctx, c, true)
}

// Verify resolves c as Authenticate does, without recording the use: no
// lastUsedAt, no sliding expiry. For a check that the request's own
// authentication follows.
func (a *Authenticator) Verify(ctx context.Context, c Credentials) (*Principal, error) {
	return a.authenticate(ctx, c, false)
}

func (a *Authenticator) authenticate(ctx context.Context, c Credentials, touch bool) (*Principal, error) {
	switch {
	case c.Bearer != "":
		return a.bearer(ctx, c.Bearer, touch)
	case c.Session != "":
		return a.session(ctx, c.Session, touch)
	default:
		return nil, fmt.Errorf("%w: no credentials", ErrUnauthenticated)
	}
}

func (a *Authenticator) bearer(ctx context.Context, token string, touch bool) (*Principal, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		if a.jwt != nil && looksLikeJWS(token) {
			return a.federated(ctx, token)
		}
		return nil, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	h, err := ParseToken(token)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed token", ErrUnauthenticated)
	}
	t, err := a.tokens.GetTokenByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	now := a.now()
	if !t.Active(now) {
		return nil, fmt.Errorf("%w: token revoked or expired", ErrUnauthenticated)
	}
	perms, ok := a.members.MemberPermissions(t.Member)
	if !ok {
		return nil, fmt.Errorf("%w: member gone", ErrUnauthenticated)
	}
	if touch && now.Sub(t.LastUsedAt) >= touchInterval {
		if err := a.tokens.TouchToken(ctx, t.ID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			a.log.WarnContext(ctx, "token touch failed", "err", err)
		}
	}
	return &Principal{Member: t.Member, Permissions: perms, Via: ViaBearer, TokenID: t.ID, ExpiresAt: t.ExpiresAt}, nil
}

// maxJWTBytes bounds a bearer tried as a JWT.
const maxJWTBytes = 8 << 10

// looksLikeJWS reports whether s has the shape of a compact JWS: three
// non-empty base64url segments.
func looksLikeJWS(s string) bool {
	if len(s) > maxJWTBytes || strings.Count(s, ".") != 2 {
		return false
	}
	for _, seg := range strings.Split(s, ".") {
		if seg == "" || strings.ContainsFunc(seg, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) {
			return false
		}
	}
	return true
}

// federated resolves a federation JWT: verified, then its subject must be
// a loaded member, whose current permissions it carries. Nothing is
// touched: no store row backs the token.
func (a *Authenticator) federated(ctx context.Context, token string) (*Principal, error) {
	sub, exp, err := a.jwt.VerifyJWT(ctx, token)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		a.log.DebugContext(ctx, "federation jwt refused", "err", err)
		return nil, fmt.Errorf("%w: invalid federation token", ErrUnauthenticated)
	}
	perms, ok := a.members.MemberPermissions(sub)
	if !ok {
		return nil, fmt.Errorf("%w: federation token names no member", ErrUnauthenticated)
	}
	sum := sha256.Sum256([]byte(token))
	return &Principal{Member: sub, Permissions: perms, Via: ViaJWT, JWTHash: hex.EncodeToString(sum[:]), ExpiresAt: exp}, nil
}

func (a *Authenticator) session(ctx context.Context, id string, touch bool) (*Principal, error) {
	h, err := ParseSessionID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed session", ErrUnauthenticated)
	}
	s, err := a.sessions.GetSession(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown session", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	now := a.now()
	if !now.Before(s.ExpiresAt) {
		return nil, fmt.Errorf("%w: session expired", ErrUnauthenticated)
	}
	perms, ok := a.members.MemberPermissions(s.Member)
	if !ok {
		return nil, fmt.Errorf("%w: member gone", ErrUnauthenticated)
	}
	p := &Principal{Member: s.Member, Permissions: perms, Via: ViaSession, Session: h, SessionID: id, ExpiresAt: s.ExpiresAt}
	if touch && now.Sub(s.LastSeenAt) >= touchInterval {
		expires := now.Add(SessionTTL)
		if err := a.sessions.TouchSession(ctx, h, now, expires); err == nil {
			p.ExpiresAt, p.Refreshed = expires, true
		} else if !errors.Is(err, store.ErrNotFound) {
			a.log.WarnContext(ctx, "session touch failed", "err", err)
		}
	}
	return p, nil
}
