package main

import (
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// --jwt-max-lifetime wins over SVC_JWT_MAX_LIFETIME; the default is 24h;
// a value that is not a duration from 1m to 720h is a usage error naming
// the setting.
func TestJWTMaxLifetimeConfig(t *testing.T) {
	tests := []struct {
		name, env string
		args      []string
		want      time.Duration
		err       bool
	}{
		{name: "default", want: 24 * time.Hour},
		{name: "environment", env: "2h", want: 2 * time.Hour},
		{name: "flag wins", env: "2h", args: []string{"--jwt-max-lifetime", "90m"}, want: 90 * time.Minute},
		{name: "a valid flag over a bad environment", env: "soon", args: []string{"--jwt-max-lifetime", "1m"}, want: time.Minute},
		{name: "30 days", env: "720h", want: 720 * time.Hour},
		{name: "zero", env: "0s", err: true},
		{name: "negative", args: []string{"--jwt-max-lifetime", "-1h"}, err: true},
		{name: "under a minute", env: "59s", err: true},
		{name: "past 30 days", env: "720h1s", err: true},
		{name: "days are not a Go duration", env: "1d", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SVC_JWT_MAX_LIFETIME", tc.env)
			args := append([]string{"--config-path", filepath.Join(t.TempDir(), "svc.json")}, tc.args...)
			c, err := parseServeConfig(args, io.Discard)
			if tc.err {
				require.ErrorContains(t, err, "SVC_JWT_MAX_LIFETIME")
				var ee *exitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, 2, ee.code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c.JWTMaxLifetime)
		})
	}
}
