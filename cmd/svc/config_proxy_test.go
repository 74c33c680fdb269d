package main

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// --trusted-proxies wins over SVC_TRUSTED_PROXIES; a malformed list is a
// usage error naming the setting.
func TestTrustedProxiesConfig(t *testing.T) {
	tests := []struct {
		name, env string
		args      []string
		want, err string
	}{
		{name: "default: none", want: ""},
		{name: "environment", env: "127.0.0.1, 10.0.0.0/8", want: "127.0.0.1/32,10.0.0.0/8"},
		{name: "flag wins", env: "127.0.0.1", args: []string{"--trusted-proxies", "fd00::/8"}, want: "fd00::/8"},
		{name: "a valid flag over a bad environment", env: "proxy.local", args: []string{"--trusted-proxies", "10.1.2.3"}, want: "10.1.2.3/32"},
		{name: "host name", env: "proxy.local", err: `SVC_TRUSTED_PROXIES: "proxy.local": not an IP address`},
		{name: "host bits", args: []string{"--trusted-proxies", "10.0.0.1/8"}, err: "did you mean 10.0.0.0/8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SVC_TRUSTED_PROXIES", tc.env)
			args := append([]string{"--config-path", filepath.Join(t.TempDir(), "svc.json")}, tc.args...)
			c, err := parseServeConfig(args, io.Discard)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var ee *exitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, 2, ee.code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c.TrustedProxies.String())
		})
	}
}
