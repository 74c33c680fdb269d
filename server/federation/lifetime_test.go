package federation_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"svc/server/federation"
	"svc/server/federation/issuertest"
)

// TestMaxLifetime: a token whose exp lies further away than the maximum
// lifetime (24 h by default, within the clock leeway) is refused, however
// well signed: nothing revokes a JWT, so a 10-year one would be a 10-year
// credential.
func TestMaxLifetime(t *testing.T) {
	e := newEnv(t)
	short := federation.New(federation.Options{Client: e.is.Srv.Client(), Now: e.clk.Now, MaxLifetime: time.Hour})
	short.SetConfig(&e.config)
	now := e.clk.Now()
	expIn := func(d time.Duration) string {
		c := e.is.Claims("alice", now)
		c.Expiry = jwt.NewNumericDate(now.Add(d))
		return issuertest.Sign(t, e.rsa, c)
	}
	cases := []struct {
		name    string
		v       *federation.Verifier
		token   string
		wantErr bool
	}{
		{name: "an hour", v: e.v, token: expIn(time.Hour)},
		{name: "exactly the default", v: e.v, token: expIn(federation.DefaultMaxLifetime)},
		{name: "the default plus the leeway", v: e.v, token: expIn(federation.DefaultMaxLifetime + federation.Leeway)},
		{name: "past the default and the leeway", v: e.v, token: expIn(federation.DefaultMaxLifetime + federation.Leeway + time.Second), wantErr: true},
		{name: "two days", v: e.v, token: expIn(48 * time.Hour), wantErr: true},
		{name: "ten years", v: e.v, token: expIn(10 * 365 * 24 * time.Hour), wantErr: true},
		{name: "configured: within", v: short, token: expIn(59 * time.Minute)},
		{name: "configured: past", v: short, token: expIn(2 * time.Hour), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.v.Verify(context.Background(), tc.token)
			if tc.wantErr {
				require.ErrorIs(t, err, federation.ErrInvalid)
				require.ErrorContains(t, err, "exp is more than")
				require.Empty(t, c.Subject)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "alice", c.Subject)
		})
	}
}
