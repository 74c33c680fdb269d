package auth_test

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/federation"
	"svc/server/federation/issuertest"
	"svc/store"
)

// jwtEnv is an authEnv whose Authenticator also takes federation JWTs from
// a local issuer.
type jwtEnv struct {
	*authEnv
	is  *issuertest.Issuer
	key *issuertest.Key
	v   *federation.Verifier
}

func newJWTEnv(t *testing.T) *jwtEnv {
	t.Helper()
	e := newAuthEnv(t)
	key := issuertest.NewRSAKey(t, "k1")
	is := issuertest.New(t, key)
	v := federation.New(federation.Options{Client: is.Srv.Client(), Now: e.clk.Now})
	v.SetConfig(&federation.Config{Issuer: is.Name, Audience: is.Audience, JWKSURL: is.JWKSURL()})
	members := membersOf(map[string][]string{"alice": alicePerms, "carol": {auth.TeamManage}})
	e.authn = auth.NewAuthenticator(e.db, e.db, members, e.clk.Now, discardLogger(), auth.WithJWT(v))
	return &jwtEnv{authEnv: e, is: is, key: key, v: v}
}

func TestAuthenticateJWT(t *testing.T) {
	e := newJWTEnv(t)
	now := e.clk.Now()
	good := e.is.Claims("alice", now)
	with := func(f func(c *jwt.Claims)) jwt.Claims { c := good; f(&c); return c }
	session := mustSession(t, e.db, "carol", store.Session{CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(time.Hour)})
	token := mustToken(t, e.db, "t1", "alice", store.Token{})

	cases := []struct {
		name    string
		creds   auth.Credentials
		wantErr bool
		member  string
		via     auth.Via
	}{
		{name: "good", creds: auth.Credentials{Bearer: issuertest.Sign(t, e.key, good)}, member: "alice", via: auth.ViaJWT},
		{name: "token still works", creds: auth.Credentials{Bearer: token}, member: "alice", via: auth.ViaBearer},
		{name: "unknown sub", creds: auth.Credentials{Bearer: issuertest.Sign(t, e.key, with(func(c *jwt.Claims) { c.Subject = "mallory" }))}, wantErr: true},
		{name: "sub of a member gone from the team", creds: auth.Credentials{Bearer: issuertest.Sign(t, e.key, with(func(c *jwt.Claims) { c.Subject = "ghost" }))}, wantErr: true},
		{name: "expired", creds: auth.Credentials{Bearer: issuertest.Sign(t, e.key, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) }))}, wantErr: true},
		{name: "alg none", creds: auth.Credentials{Bearer: "eyJhbGciOiJub25lIiwia2lkIjoiazEifQ.eyJzdWIiOiJhbGljZSJ9.eA"}, wantErr: true},
		{name: "unknown kid", creds: auth.Credentials{Bearer: issuertest.SignAs(t, jose.RS256, "k9", e.key.Priv, good)}, wantErr: true},
		{name: "bad JWT does not fall back to the cookie", creds: auth.Credentials{Bearer: issuertest.Sign(t, e.key, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"x"} })), Session: session}, wantErr: true},
		{name: "not JWS shaped", creds: auth.Credentials{Bearer: "a.b"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, verify := range []bool{false, true} {
				f := e.authn.Authenticate
				if verify {
					f = e.authn.Verify
				}
				p, err := f(context.Background(), tc.creds)
				if tc.wantErr {
					require.ErrorIs(t, err, auth.ErrUnauthenticated)
					require.Nil(t, p)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, tc.member, p.Member)
				require.Equal(t, tc.via, p.Via)
				require.Equal(t, alicePerms, p.Permissions, "the member's own permissions")
				require.True(t, p.BearerPlane())
				if tc.via == auth.ViaJWT {
					require.Equal(t, good.Expiry.Time(), p.ExpiresAt)
					require.Len(t, p.JWTHash, 64)
					require.Empty(t, p.TokenID)
				}
			}
		})
	}
}

func TestJWTRefusedWithoutFederation(t *testing.T) {
	e := newJWTEnv(t)
	tok := issuertest.Sign(t, e.key, e.is.Claims("alice", e.clk.Now()))

	// An Authenticator without a verifier: a JWT is an unknown bearer.
	plain := auth.NewAuthenticator(e.db, e.db, membersOf(map[string][]string{"alice": alicePerms}), e.clk.Now, discardLogger())
	_, err := plain.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	// A verifier whose config was removed: the same.
	e.v.SetConfig(nil)
	_, err = e.authn.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

func TestJWTPermissionsFollowTheTeam(t *testing.T) {
	e := newJWTEnv(t)
	perms := map[string][]string{"alice": {auth.ActivityRead}}
	authn := auth.NewAuthenticator(e.db, e.db, membersOf(perms), e.clk.Now, discardLogger(), auth.WithJWT(e.v))
	tok := issuertest.Sign(t, e.key, e.is.Claims("alice", e.clk.Now()))
	p, err := authn.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.True(t, p.Has(auth.ActivityRead))
	require.False(t, p.Has(auth.MembersManage))

	perms["alice"] = []string{auth.MembersManage}
	p, err = authn.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.NoError(t, err)
	require.True(t, p.Has(auth.MembersManage))

	delete(perms, "alice")
	_, err = authn.Authenticate(context.Background(), auth.Credentials{Bearer: tok})
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}
