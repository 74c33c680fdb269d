package kek

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustKEK(t *testing.T) *KEK {
	t.Helper()
	key := make([]byte, KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	k, err := New(key)
	require.NoError(t, err)
	return k
}

func TestSealOpen(t *testing.T) {
	k := mustKEK(t)
	s, err := k.Seal([]byte("JBSWY3DPEHPK3PXP"), "totp:alice")
	require.NoError(t, err)
	require.Equal(t, 1, s.V)
	require.NotContains(t, s.CT, "JBSWY3DPEHPK3PXP")

	pt, err := k.Open(s, "totp:alice")
	require.NoError(t, err)
	require.Equal(t, "JBSWY3DPEHPK3PXP", string(pt))

	s2, err := k.Seal([]byte("JBSWY3DPEHPK3PXP"), "totp:alice")
	require.NoError(t, err)
	require.NotEqual(t, s.IV, s2.IV, "every seal uses a fresh IV")
}

func TestOpenRejects(t *testing.T) {
	k := mustKEK(t)
	s, err := k.Seal([]byte("secret"), "totp:alice")
	require.NoError(t, err)
	tampered := s
	ct, _ := base64.StdEncoding.DecodeString(s.CT)
	ct[0] ^= 1
	tampered.CT = base64.StdEncoding.EncodeToString(ct)

	tests := []struct {
		name    string
		kek     *KEK
		sealed  Sealed
		purpose string
	}{
		{name: "other purpose", kek: k, sealed: s, purpose: "totp:bob"},
		{name: "other key", kek: mustKEK(t), sealed: s, purpose: "totp:alice"},
		{name: "tampered", kek: k, sealed: tampered, purpose: "totp:alice"},
		{name: "bad iv", kek: k, sealed: Sealed{V: 1, CT: s.CT, IV: "AAAA"}, purpose: "totp:alice"},
		{name: "bad version", kek: k, sealed: Sealed{V: 2, CT: s.CT, IV: s.IV}, purpose: "totp:alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.kek.Open(tc.sealed, tc.purpose)
			require.Error(t, err)
		})
	}
}

func TestParse(t *testing.T) {
	key := make([]byte, KeySize)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
		_, err := Parse(enc.EncodeToString(key) + "\n")
		require.NoError(t, err)
	}
	_, err := Parse(base64.StdEncoding.EncodeToString(key[:16]))
	require.Error(t, err)
	_, err = Parse("not base64 !!")
	require.Error(t, err)
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "svc.json.kek")
	k1, created, err := LoadOrCreate(path)
	require.NoError(t, err)
	require.True(t, created)

	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dir.Mode().Perm())

	s, err := k1.Seal([]byte("x"), "p")
	require.NoError(t, err)
	k2, created, err := LoadOrCreate(path)
	require.NoError(t, err)
	require.False(t, created)
	pt, err := k2.Open(s, "p")
	require.NoError(t, err, "the reloaded KEK opens what the first sealed")
	require.Equal(t, "x", string(pt))
}
