package teamconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/teamconfig"
)

func TestConfigJWTBlock(t *testing.T) {
	base := `{"team":{"name":"t"},"store":{"members":[]}`
	f := mustParse(t, base+`,"jwt":{"issuer":"https://p/","audience":"team","jwksUrl":"https://p/jwks"}}`)
	require.Equal(t, &teamconfig.JWT{Issuer: "https://p/", Audience: "team", JWKSURL: "https://p/jwks"}, f.JWT)
	f = mustParse(t, base+`}`)
	require.Nil(t, f.JWT, "absent block disables federation")

	for name, block := range map[string]string{
		"no issuer":    `{"audience":"team","jwksUrl":"https://p/jwks"}`,
		"no audience":  `{"issuer":"i","jwksUrl":"https://p/jwks"}`,
		"no jwksUrl":   `{"issuer":"i","audience":"team"}`,
		"ftp jwksUrl":  `{"issuer":"i","audience":"team","jwksUrl":"ftp://p/jwks"}`,
		"relative url": `{"issuer":"i","audience":"team","jwksUrl":"/jwks"}`,
		"empty":        `{}`,
	} {
		_, err := teamconfig.Parse([]byte(base + `,"jwt":` + block + `}`))
		require.ErrorContains(t, err, "jwt", name)
	}
}

func TestJWTOverlay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	path := filepath.Join(dir, "svc.json"+teamconfig.JWTOverlaySuffix)

	j, err := teamconfig.LoadJWTOverlay(path)
	require.NoError(t, err)
	require.Nil(t, j, "no overlay file: no overlay")

	want := &teamconfig.JWT{Issuer: "https://p/", Audience: "team", JWKSURL: "http://127.0.0.1:9/jwks"}
	require.NoError(t, teamconfig.SaveJWTOverlay(path, want))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dst, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dst.Mode().Perm())
	got, err := teamconfig.LoadJWTOverlay(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temp file left behind")

	// Rewritten in place.
	want2 := &teamconfig.JWT{Issuer: "https://q/", Audience: "team2", JWKSURL: "https://q/jwks"}
	require.NoError(t, teamconfig.SaveJWTOverlay(path, want2))
	got, err = teamconfig.LoadJWTOverlay(path)
	require.NoError(t, err)
	require.Equal(t, want2, got)

	// An invalid block is never written.
	require.Error(t, teamconfig.SaveJWTOverlay(path, &teamconfig.JWT{Issuer: "i"}))
	got, err = teamconfig.LoadJWTOverlay(path)
	require.NoError(t, err)
	require.Equal(t, want2, got)
}

func TestParseJWTOverlayRefusals(t *testing.T) {
	for name, data := range map[string]string{
		"empty":          ``,
		"not an object":  `[]`,
		"null":           `null`,
		"no jwt":         `{}`,
		"jwt null":       `{"jwt":null}`,
		"unknown key":    `{"jwt":{"issuer":"i","audience":"a","jwksUrl":"https://p/j"},"x":1}`,
		"unknown field":  `{"jwt":{"issuer":"i","audience":"a","jwksUrl":"https://p/j","x":1}}`,
		"trailing":       `{"jwt":{"issuer":"i","audience":"a","jwksUrl":"https://p/j"}}{}`,
		"bad url":        `{"jwt":{"issuer":"i","audience":"a","jwksUrl":"gopher://p/j"}}`,
		"missing issuer": `{"jwt":{"audience":"a","jwksUrl":"https://p/j"}}`,
	} {
		_, err := teamconfig.ParseJWTOverlay([]byte(data))
		require.Error(t, err, name)
	}
	path := filepath.Join(t.TempDir(), "big.jwt.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"jwt":{"issuer":"`+strings.Repeat("i", 70<<10)+`"}}`), 0o600))
	_, err := teamconfig.LoadJWTOverlay(path)
	require.ErrorContains(t, err, "over")
}
