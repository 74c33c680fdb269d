package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPoolConfig: pool_max_conns is read as a parameter of the URL or of
// a key=value string, and its absence gives the store's default; the
// same words elsewhere (a password, an application name) are not it.
// Before, a plain substring match took any of them for the parameter and
// left pgxpool's default of at least 4 connections.
func TestPoolConfig(t *testing.T) {
	tests := []struct {
		name string
		url  string
		want int32
	}{
		{"default", "postgres://svc@localhost/svc", defaultMaxConns},
		{"url query", "postgres://svc@localhost/svc?pool_max_conns=3", 3},
		{"key=value", "host=localhost dbname=svc pool_max_conns=5", 5},
		{"in the password", "postgres://svc:pool_max_conns@localhost/svc", defaultMaxConns},
		{"in another parameter", "postgres://svc@localhost/svc?application_name=pool_max_conns", defaultMaxConns},
		{"in the database name", "host=localhost dbname=pool_max_conns", defaultMaxConns},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := poolConfig(tc.url)
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.MaxConns)
			require.Equal(t, defaultConnectTimout, cfg.ConnConfig.ConnectTimeout)
			_, leaked := cfg.ConnConfig.RuntimeParams["pool_max_conns"]
			require.False(t, leaked, "pool_max_conns is not sent to the server")
		})
	}
	cfg, err := poolConfig("postgres://svc@localhost/svc?connect_timeout=2")
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.ConnConfig.ConnectTimeout, "a timeout given is kept")
	_, err = poolConfig("postgres://svc:secret@localhost:notaport/svc")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret")
}
