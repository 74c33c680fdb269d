package e2e

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"svc/server/federation/issuertest"
)

// TestFederationJWTMaxLifetimeSetting: SVC_JWT_MAX_LIFETIME (or
// --jwt-max-lifetime) caps how far ahead a JWT's exp may lie: with 2h, a
// token expiring in 1h works and one expiring in 3h (which the 24h default
// accepts) is refused.
func TestFederationJWTMaxLifetimeSetting(t *testing.T) {
	t.Parallel()
	key := issuertest.NewECKey(t, "ec-1")
	is := issuertest.New(t, key)
	p := mustStartSvc(t, procOpts{env: []string{fedEgress}})
	p.adminToken(t)
	p.mustStop(t)
	raw, err := os.ReadFile(p.opts.configPath)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	cfg["jwt"] = obj{"issuer": is.Name, "audience": is.Audience, "jwksUrl": is.JWKSURL()}
	raw, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p.opts.configPath, raw, 0o600))

	expIn := func(d time.Duration) cred {
		now := time.Now()
		c := is.Claims("admin", now)
		c.Expiry = jwt.NewNumericDate(now.Add(d))
		return jwtCred(t, key, c)
	}

	// The default: 3h is within 24h.
	p = p.restart(t)
	requireWorks(t, restDriver{p}, expIn(3*time.Hour), "admin")
	requireRejected(t, restDriver{p}, expIn(25*time.Hour))
	p.mustStop(t)

	opts := p.opts
	opts.env = []string{fedEgress, "SVC_JWT_MAX_LIFETIME=2h"}
	p = mustStartSvc(t, opts)
	d := restDriver{p}
	requireWorks(t, d, expIn(time.Hour), "admin")
	requireWorks(t, d, expIn(2*time.Hour-time.Minute), "admin")
	requireRejected(t, d, expIn(3*time.Hour))
	requireRejected(t, d, expIn(2*time.Hour+2*time.Minute))
}
