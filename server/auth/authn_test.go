package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"svc/server/auth"
	"svc/store"
)

// authEnv is an Authenticator over an in-memory store with members alice
// (known to the lookup) and ghost (stored but gone from the team).
type authEnv struct {
	clk   *fakeClock
	db    store.Store
	authn *auth.Authenticator
}

var alicePerms = []string{auth.ObjectivesWatch, auth.ActivityRead}

func newAuthEnv(t *testing.T) *authEnv {
	t.Helper()
	clk := newFakeClock()
	db := mustOpenStore(t, clk)
	mustPutMember(t, db, "alice")
	mustPutMember(t, db, "carol")
	mustPutMember(t, db, "ghost")
	members := membersOf(map[string][]string{"alice": alicePerms, "carol": {auth.TeamManage}})
	return &authEnv{clk: clk, db: db, authn: auth.NewAuthenticator(db, db, members, clk.Now, discardLogger())}
}

func TestAuthenticateBearer(t *testing.T) {
	e := newAuthEnv(t)
	now := e.clk.Now()
	valid := mustToken(t, e.db, "t-valid", "alice", store.Token{})
	expiring := mustToken(t, e.db, "t-expiring", "alice", store.Token{ExpiresAt: now.Add(time.Hour)})
	revoked := mustToken(t, e.db, "t-revoked", "alice", store.Token{RevokedAt: now.Add(-time.Minute)})
	revokedLater := mustToken(t, e.db, "t-revoked-later", "alice", store.Token{RevokedAt: now.Add(time.Hour)})
	expired := mustToken(t, e.db, "t-expired", "alice", store.Token{ExpiresAt: now.Add(-time.Millisecond)})
	expiresNow := mustToken(t, e.db, "t-expires-now", "alice", store.Token{ExpiresAt: now})
	ghost := mustToken(t, e.db, "t-ghost", "ghost", store.Token{})
	unknown, _, err := auth.NewToken()
	require.NoError(t, err)

	tests := []struct {
		name        string
		bearer      string
		wantErr     bool
		wantTokenID string
		wantExpires time.Time
	}{
		{name: "valid", bearer: valid, wantTokenID: "t-valid"},
		{name: "valid with expiry", bearer: expiring, wantTokenID: "t-expiring", wantExpires: now.Add(time.Hour)},
		{name: "revoked", bearer: revoked, wantErr: true},
		{name: "revoked at any time", bearer: revokedLater, wantErr: true},
		{name: "expired", bearer: expired, wantErr: true},
		{name: "expires exactly now", bearer: expiresNow, wantErr: true},
		{name: "member gone from the team", bearer: ghost, wantErr: true},
		{name: "unknown well-formed token", bearer: unknown, wantErr: true},
		{name: "malformed short", bearer: "svc_abc", wantErr: true},
		{name: "malformed trailing junk", bearer: valid + "x", wantErr: true},
		{name: "no prefix", bearer: "abc", wantErr: true},
		{name: "raw authorization value", bearer: "Basic dXNlcjpwYXNz", wantErr: true},
		{name: "NUL", bearer: "\x00", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.authn.Authenticate(context.Background(), auth.Credentials{Bearer: tc.bearer})
			if tc.wantErr {
				require.ErrorIs(t, err, auth.ErrUnauthenticated)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "alice", p.Member)
			require.Equal(t, alicePerms, p.Permissions)
			require.Equal(t, auth.ViaBearer, p.Via)
			require.Equal(t, tc.wantTokenID, p.TokenID)
			require.True(t, tc.wantExpires.Equal(p.ExpiresAt), "ExpiresAt %v, want %v", p.ExpiresAt, tc.wantExpires)
			require.Empty(t, p.SessionID)
			require.False(t, p.Refreshed)
		})
	}
}

func TestAuthenticateNoCredentials(t *testing.T) {
	e := newAuthEnv(t)
	p, err := e.authn.Authenticate(context.Background(), auth.Credentials{})
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	require.Nil(t, p)
}

func TestAuthenticatePermissionsComeFromLookup(t *testing.T) {
	// Permission changes apply on the next request: the lookup, not the
	// store, is asked every time.
	clk := newFakeClock()
	db := mustOpenStore(t, clk)
	mustPutMember(t, db, "alice")
	perms := []string{auth.ObjectivesWatch}
	calls := 0
	members := fakeMembers{permissions: func(name string) ([]string, bool) {
		calls++
		require.Equal(t, "alice", name)
		return perms, true
	}}
	a := auth.NewAuthenticator(db, db, members, clk.Now, discardLogger())
	tok := mustToken(t, db, "t1", "alice", store.Token{})

	p, err := a.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.False(t, p.Has(auth.TeamManage))

	perms = []string{auth.TeamManage}
	p, err = a.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.True(t, p.Has(auth.TeamManage))
	require.Equal(t, 2, calls)
}

func TestAuthenticateBearerDoesNotFallBackToSession(t *testing.T) {
	e := newAuthEnv(t)
	now := e.clk.Now()
	session := mustSession(t, e.db, "carol", store.Session{ExpiresAt: now.Add(time.Hour)})
	revoked := mustToken(t, e.db, "t-revoked", "alice", store.Token{RevokedAt: now})
	valid := mustToken(t, e.db, "t-valid", "alice", store.Token{})

	// The session alone works.
	p, err := e.authn.Authenticate(context.Background(), auth.Credentials{Session: session})
	require.NoError(t, err)
	require.Equal(t, "carol", p.Member)

	tests := []struct {
		name   string
		bearer string
	}{
		{name: "revoked bearer", bearer: revoked},
		{name: "malformed bearer", bearer: "svc_nope"},
		{name: "foreign scheme", bearer: "Basic dXNlcjpwYXNz"},
		{name: "bare scheme", bearer: "Bearer "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.authn.Authenticate(context.Background(), auth.Credentials{Bearer: tc.bearer, Session: session})
			require.ErrorIs(t, err, auth.ErrUnauthenticated)
			require.Nil(t, p)
		})
	}

	t.Run("valid bearer wins over session", func(t *testing.T) {
		p, err := e.authn.Authenticate(context.Background(), auth.Credentials{Bearer: valid, Session: session})
		require.NoError(t, err)
		require.Equal(t, "alice", p.Member)
		require.Equal(t, auth.ViaBearer, p.Via)
	})

	t.Run("through metadata", func(t *testing.T) {
		md := metadata.Pairs("authorization", "Basic dXNlcjpwYXNz", "grpcgateway-cookie", auth.SessionCookieName+"="+session)
		p, err := e.authn.Authenticate(context.Background(), auth.CredentialsFromMetadata(md))
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		require.Nil(t, p)
	})
}

func TestAuthenticateTouchesToken(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	tok := mustToken(t, e.db, "t1", "alice", store.Token{})
	lastUsed := func() time.Time {
		t.Helper()
		got, err := e.db.GetTokenByHash(ctx, auth.HashToken(tok))
		require.NoError(t, err)
		return got.LastUsedAt
	}
	require.True(t, lastUsed().IsZero())

	first := e.clk.Now()
	_, err := e.authn.Authenticate(ctx, auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.True(t, first.Equal(lastUsed()))

	// Uses within the coalescing interval do not write.
	e.clk.Advance(500 * time.Millisecond)
	_, err = e.authn.Authenticate(ctx, auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.True(t, first.Equal(lastUsed()))

	e.clk.Advance(time.Minute)
	_, err = e.authn.Authenticate(ctx, auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.True(t, e.clk.Now().Equal(lastUsed()))
}

func TestAuthenticateSession(t *testing.T) {
	e := newAuthEnv(t)
	now := e.clk.Now()
	storedExpiry := now.Add(time.Hour)
	stale := mustSession(t, e.db, "alice", store.Session{CreatedAt: now.Add(-time.Hour), LastSeenAt: now.Add(-time.Minute), ExpiresAt: storedExpiry})
	fresh := mustSession(t, e.db, "alice", store.Session{CreatedAt: now, LastSeenAt: now, ExpiresAt: storedExpiry})
	expired := mustSession(t, e.db, "alice", store.Session{CreatedAt: now.Add(-8 * 24 * time.Hour), LastSeenAt: now.Add(-8 * 24 * time.Hour), ExpiresAt: now.Add(-24 * time.Hour)})
	expiresNow := mustSession(t, e.db, "alice", store.Session{CreatedAt: now.Add(-time.Hour), LastSeenAt: now.Add(-time.Hour), ExpiresAt: now})
	ghost := mustSession(t, e.db, "ghost", store.Session{ExpiresAt: storedExpiry})
	unknown, _, err := auth.NewSessionID()
	require.NoError(t, err)

	tests := []struct {
		name          string
		session       string
		wantErr       bool
		wantRefreshed bool
		wantExpires   time.Time
	}{
		{name: "valid, last seen a minute ago: slides", session: stale, wantRefreshed: true, wantExpires: now.Add(auth.SessionTTL)},
		{name: "valid, just seen: not rewritten", session: fresh, wantExpires: storedExpiry},
		{name: "expired", session: expired, wantErr: true},
		{name: "expires exactly now", session: expiresNow, wantErr: true},
		{name: "member gone", session: ghost, wantErr: true},
		{name: "unknown", session: unknown, wantErr: true},
		{name: "malformed", session: "abc", wantErr: true},
		{name: "token as session", session: auth.TokenPrefix + validBody, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.authn.Authenticate(context.Background(), auth.Credentials{Session: tc.session})
			if tc.wantErr {
				require.ErrorIs(t, err, auth.ErrUnauthenticated)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "alice", p.Member)
			require.Equal(t, alicePerms, p.Permissions)
			require.Equal(t, auth.ViaSession, p.Via)
			require.Equal(t, tc.session, p.SessionID)
			h, err := auth.ParseSessionID(tc.session)
			require.NoError(t, err)
			require.Equal(t, h, p.Session)
			require.Empty(t, p.TokenID)
			require.Equal(t, tc.wantRefreshed, p.Refreshed)
			require.True(t, tc.wantExpires.Equal(p.ExpiresAt), "ExpiresAt %v, want %v", p.ExpiresAt, tc.wantExpires)

			stored, err := e.db.GetSession(context.Background(), h)
			require.NoError(t, err)
			require.True(t, tc.wantExpires.Equal(stored.ExpiresAt), "stored expiry %v, want %v", stored.ExpiresAt, tc.wantExpires)
		})
	}
}

func TestSessionSlides(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	t0 := e.clk.Now()
	id := mustSession(t, e.db, "alice", store.Session{CreatedAt: t0, LastSeenAt: t0, ExpiresAt: t0.Add(auth.SessionTTL)})
	h, err := auth.ParseSessionID(id)
	require.NoError(t, err)

	// Each use after the coalescing interval slides the expiry.
	step := 3 * 24 * time.Hour
	for i := 1; i <= 4; i++ {
		e.clk.Advance(step) // after the 3rd step we are past t0+TTL
		p, err := e.authn.Authenticate(ctx, auth.Credentials{Session: id})
		require.NoError(t, err, "use %d", i)
		want := e.clk.Now().Add(auth.SessionTTL)
		require.True(t, p.Refreshed)
		require.True(t, want.Equal(p.ExpiresAt))
		s, err := e.db.GetSession(ctx, h)
		require.NoError(t, err)
		require.True(t, want.Equal(s.ExpiresAt))
		require.True(t, e.clk.Now().Equal(s.LastSeenAt))
	}
	require.True(t, e.clk.Now().After(t0.Add(auth.SessionTTL)), "the session outlived its first expiry")

	// A second request in the same instant is coalesced: no refresh.
	p, err := e.authn.Authenticate(ctx, auth.Credentials{Session: id})
	require.NoError(t, err)
	require.False(t, p.Refreshed)
	expiry := p.ExpiresAt

	// Idle for the whole TTL: gone.
	e.clk.Advance(expiry.Sub(e.clk.Now()))
	_, err = e.authn.Authenticate(ctx, auth.Credentials{Session: id})
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

// failingTokens is a TokenStore whose reads and touches fail on demand.
type failingTokens struct {
	store.TokenStore
	get   func(h store.TokenHash) (store.Token, error)
	touch func(id string) error
}

func (f failingTokens) GetTokenByHash(_ context.Context, h store.TokenHash) (store.Token, error) {
	return f.get(h)
}

func (f failingTokens) TouchToken(_ context.Context, id string, _ time.Time) error {
	return f.touch(id)
}

// failingSessions is a SessionStore whose reads and touches fail on demand.
type failingSessions struct {
	store.SessionStore
	get   func(h store.SessionHash) (store.Session, error)
	touch func(h store.SessionHash) error
}

func (f failingSessions) GetSession(_ context.Context, h store.SessionHash) (store.Session, error) {
	return f.get(h)
}

func (f failingSessions) TouchSession(_ context.Context, h store.SessionHash, _, _ time.Time) error {
	return f.touch(h)
}

func TestAuthenticateStoreFailures(t *testing.T) {
	clk := newFakeClock()
	now := clk.Now()
	boom := errors.New("disk on fire")
	members := membersOf(map[string][]string{"alice": alicePerms})
	tok, _, err := auth.NewToken()
	require.NoError(t, err)
	sid, _, err := auth.NewSessionID()
	require.NoError(t, err)
	goodToken := func(store.TokenHash) (store.Token, error) { return store.Token{ID: "t", Member: "alice"}, nil }
	goodSession := func(h store.SessionHash) (store.Session, error) {
		return store.Session{Hash: h, Member: "alice", ExpiresAt: now.Add(time.Hour)}, nil
	}

	tests := []struct {
		name     string
		tokens   failingTokens
		sessions failingSessions
		creds    auth.Credentials
		wantErr  error // nil: authenticated
		refresh  bool
	}{
		{
			name:    "token read fails: not a 401",
			tokens:  failingTokens{get: func(store.TokenHash) (store.Token, error) { return store.Token{}, boom }},
			creds:   auth.Credentials{Bearer: tok},
			wantErr: boom,
		},
		{
			name:   "token touch fails: still authenticated",
			tokens: failingTokens{get: goodToken, touch: func(string) error { return boom }},
			creds:  auth.Credentials{Bearer: tok},
		},
		{
			name:   "token deleted meanwhile: still authenticated",
			tokens: failingTokens{get: goodToken, touch: func(string) error { return store.ErrNotFound }},
			creds:  auth.Credentials{Bearer: tok},
		},
		{
			name:     "session read fails: not a 401",
			sessions: failingSessions{get: func(store.SessionHash) (store.Session, error) { return store.Session{}, boom }},
			creds:    auth.Credentials{Session: sid},
			wantErr:  boom,
		},
		{
			name:     "session touch fails: authenticated, not refreshed",
			sessions: failingSessions{get: goodSession, touch: func(store.SessionHash) error { return boom }},
			creds:    auth.Credentials{Session: sid},
		},
		{
			name:     "session touch succeeds: refreshed",
			sessions: failingSessions{get: goodSession, touch: func(store.SessionHash) error { return nil }},
			creds:    auth.Credentials{Session: sid},
			refresh:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := auth.NewAuthenticator(tc.tokens, tc.sessions, members, clk.Now, slog.New(slog.DiscardHandler))
			p, err := a.Authenticate(context.Background(), tc.creds)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.NotErrorIs(t, err, auth.ErrUnauthenticated)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "alice", p.Member)
			require.Equal(t, tc.refresh, p.Refreshed)
		})
	}
}

func TestCredentialsFromMetadata(t *testing.T) {
	tok := auth.TokenPrefix + validBody
	sid := validBody
	tests := []struct {
		name string
		md   metadata.MD
		want auth.Credentials
	}{
		{name: "nothing", md: metadata.MD{}, want: auth.Credentials{}},
		{name: "nil metadata", md: nil, want: auth.Credentials{}},
		{name: "bearer", md: metadata.Pairs("authorization", "Bearer "+tok), want: auth.Credentials{Bearer: tok}},
		{name: "lower-case bearer scheme", md: metadata.Pairs("authorization", "bearer "+tok), want: auth.Credentials{Bearer: tok}},
		{name: "header key is case-insensitive", md: metadata.Pairs("Authorization", "Bearer "+tok), want: auth.Credentials{Bearer: tok}},
		{name: "unusable authorization kept so it fails", md: metadata.Pairs("authorization", "Basic abc"), want: auth.Credentials{Bearer: "Basic abc"}},
		{name: "empty bearer kept so it fails", md: metadata.Pairs("authorization", "Bearer "), want: auth.Credentials{Bearer: "Bearer "}},
		{name: "native cookie", md: metadata.Pairs("cookie", "a=b; svc_session="+sid), want: auth.Credentials{Session: sid}},
		{name: "gateway cookie", md: metadata.Pairs("grpcgateway-cookie", "svc_session="+sid), want: auth.Credentials{Session: sid}},
		{name: "cookie on a later line", md: metadata.Pairs("cookie", "a=b", "cookie", "svc_session="+sid), want: auth.Credentials{Session: sid}},
		{name: "native cookie before gateway cookie", md: metadata.Pairs("grpcgateway-cookie", "svc_session=gw", "cookie", "svc_session=native"), want: auth.Credentials{Session: "native"}},
		{name: "cookie without session", md: metadata.Pairs("cookie", "theme=dark"), want: auth.Credentials{}},
		{name: "both", md: metadata.Pairs("authorization", "Bearer "+tok, "grpcgateway-cookie", "svc_session="+sid), want: auth.Credentials{Bearer: tok, Session: sid}},
		{name: "first authorization value wins", md: metadata.Pairs("authorization", "Bearer first", "authorization", "Bearer second"), want: auth.Credentials{Bearer: "first"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, auth.CredentialsFromMetadata(tc.md))
		})
	}
}

func TestPrincipalContext(t *testing.T) {
	_, ok := auth.PrincipalFrom(context.Background())
	require.False(t, ok)

	p := &auth.Principal{Member: "alice", Permissions: []string{auth.TeamManage}, SessionID: "secret-cookie", TokenID: "tid"}
	got, ok := auth.PrincipalFrom(auth.WithPrincipal(context.Background(), p))
	require.True(t, ok)
	require.Same(t, p, got)
	require.True(t, got.Has(auth.TeamManage))
	require.False(t, got.Has(auth.MembersManage))

	// LogValue carries the member name and nothing else.
	require.Equal(t, "alice", p.LogValue().String())
}
