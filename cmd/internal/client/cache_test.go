package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestCachePath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "explicit", env: map[string]string{EnvAuthConfigPath: "/x/a.json", "XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, want: "/x/a.json"},
		{name: "xdg", env: map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, want: "/xdg/svc/auth.json"},
		{name: "home", env: map[string]string{"HOME": "/h"}, want: "/h/.config/svc/auth.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CachePath(env(tc.env))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCacheSaveModesAndReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "svc")
	path := filepath.Join(dir, "auth.json")
	t0 := time.UnixMilli(1_700_000_000_000)
	require.NoError(t, SaveToken(path, "http://a:1", "svc_one", t0))
	require.NoError(t, SaveToken(path, "http://b:2", "svc_two", t0))
	require.NoError(t, SaveToken(path, "http://a:1", "svc_three", t0.Add(time.Second)))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	c, err := LoadCache(path)
	require.NoError(t, err)
	require.Equal(t, 1, c.Schema)
	require.Equal(t, []CacheEntry{
		{URL: "http://a:1", Token: "svc_three", SavedAt: t0.Add(time.Second).UnixMilli()},
		{URL: "http://b:2", Token: "svc_two", SavedAt: t0.UnixMilli()},
	}, c.Entries)

	// No temp files are left beside the cache.
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1)
}

func TestCacheAtomicReplaceKeepsOldInode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	require.NoError(t, SaveToken(path, "http://a:1", "svc_old", time.Now()))
	old, err := os.Open(path)
	require.NoError(t, err)
	defer old.Close()
	require.NoError(t, SaveToken(path, "http://a:1", "svc_new", time.Now()))
	// The open handle still reads the complete old file: the new one was
	// renamed over it, not written in place.
	c, err := ParseCacheFrom(old)
	require.NoError(t, err)
	tok, _ := c.Lookup("http://a:1")
	require.Equal(t, "svc_old", tok)
	c, err = LoadCache(path)
	require.NoError(t, err)
	tok, _ = c.Lookup("http://a:1")
	require.Equal(t, "svc_new", tok)
}

func TestCacheLookupIsExact(t *testing.T) {
	c := &Cache{Schema: 1}
	c.Put("http://127.0.0.1:7433", "svc_a", time.Now())
	for _, u := range []string{"http://127.0.0.1:7433/", "http://localhost:7433", "HTTP://127.0.0.1:7433", "http://127.0.0.1:7433 "} {
		_, ok := c.Lookup(u)
		require.False(t, ok, u)
	}
	tok, ok := c.Lookup("http://127.0.0.1:7433")
	require.True(t, ok)
	require.Equal(t, "svc_a", tok)
}

func TestParseCache(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
	}{
		{name: "ok", data: `{"schema":1,"entries":[{"url":"http://a","token":"t","savedAt":1}]}`},
		{name: "empty entries", data: `{"schema":1,"entries":[]}`},
		{name: "schema 2", data: `{"schema":2,"entries":[]}`, wantErr: "unsupported schema 2"},
		{name: "no schema", data: `{"entries":[]}`, wantErr: "unsupported schema 0"},
		{name: "corrupt", data: `{"schema":1,"entries":[`, wantErr: "not a token cache"},
		{name: "not json", data: `hello`, wantErr: "not a token cache"},
		{name: "unknown field", data: `{"schema":1,"entries":[],"x":1}`, wantErr: "not a token cache"},
		{name: "trailing", data: `{"schema":1,"entries":[]} {}`, wantErr: "data after"},
		{name: "no token", data: `{"schema":1,"entries":[{"url":"http://a","token":""}]}`, wantErr: "url and token are required"},
		{name: "duplicate", data: `{"schema":1,"entries":[{"url":"http://a","token":"t"},{"url":"http://a","token":"u"}]}`, wantErr: "appears twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCache([]byte(tc.data))
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestLoadCacheMissingAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadCache(filepath.Join(dir, "none.json"))
	require.NoError(t, err)
	require.Empty(t, c.Entries)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{garbage"), 0o600))
	_, err = LoadCache(bad)
	require.ErrorContains(t, err, bad)
	require.ErrorContains(t, err, "not a token cache")
	// A corrupt cache is never overwritten by a save.
	require.Error(t, SaveToken(bad, "http://a", "t", time.Now()))
	data, err := os.ReadFile(bad)
	require.NoError(t, err)
	require.Equal(t, "{garbage", string(data))

	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, make([]byte, maxCacheBytes+2), 0o600))
	_, err = LoadCache(big)
	require.ErrorContains(t, err, "larger than")
}

func TestResolveToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	require.NoError(t, SaveToken(path, "http://a:1", "svc_cache", time.Now()))
	tests := []struct {
		name, flag, envTok, url string
		want                    string
		src                     TokenSource
		wantErr                 string
	}{
		{name: "flag wins", flag: "svc_flag", envTok: "svc_env", url: "http://a:1", want: "svc_flag", src: SourceFlag},
		{name: "env next", envTok: "svc_env", url: "http://a:1", want: "svc_env", src: SourceEnv},
		{name: "cache last", url: "http://a:1", want: "svc_cache", src: SourceCache},
		{name: "cache exact url", url: "http://a:1/", wantErr: "no token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := ResolveToken(tc.flag, env(map[string]string{EnvToken: tc.envTok, EnvAuthConfigPath: path}), tc.url)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.src, src)
		})
	}
	for _, bad := range []string{"svc_a b", "svc_\x00", "svc_é", strings.Repeat("a", maxTokenLen+1)} {
		_, _, err := ResolveToken(bad, env(nil), "http://a:1")
		require.ErrorContains(t, err, "the token from --token")
		require.NotContains(t, err.Error(), bad, "the token is never echoed")
	}
	// An explicit token never reads the cache, so a corrupt one is harmless.
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("nope"), 0o600))
	got, _, err := ResolveToken("", env(map[string]string{EnvToken: "svc_env", EnvAuthConfigPath: bad}), "http://a:1")
	require.NoError(t, err)
	require.Equal(t, "svc_env", got)
	_, _, err = ResolveToken("", env(map[string]string{EnvAuthConfigPath: bad}), "http://a:1")
	require.ErrorContains(t, err, "not a token cache")
}

func TestResolveURL(t *testing.T) {
	tests := []struct {
		name, flag, env, want, wantErr string
	}{
		{name: "default", want: DefaultURL},
		{name: "env", env: "http://h:1", want: "http://h:1"},
		{name: "flag wins", flag: "https://f", env: "http://h:1", want: "https://f"},
		{name: "kept exactly", flag: "http://h:1/", want: "http://h:1/"},
		{name: "no scheme", flag: "h:1", wantErr: "want http"},
		{name: "ftp", flag: "ftp://h", wantErr: "want http"},
		{name: "query", flag: "http://h/?a=1", wantErr: "want http"},
		{name: "userinfo", flag: "http://u:p@h/", wantErr: "want http"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveURL(tc.flag, env(map[string]string{EnvURL: tc.env}))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseCache(f *testing.F) {
	f.Add([]byte(`{"schema":1,"entries":[{"url":"http://a","token":"t","savedAt":1}]}`))
	f.Add([]byte(`{"schema":1,"entries":[]}`))
	f.Add([]byte(`{"schema":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCache(data)
		if err != nil {
			return
		}
		// Whatever parses survives a save and a load unchanged.
		path := filepath.Join(t.TempDir(), "auth.json")
		require.NoError(t, c.Save(path))
		back, err := LoadCache(path)
		require.NoError(t, err)
		require.Equal(t, len(c.Entries), len(back.Entries))
		for i := range c.Entries {
			require.Equal(t, c.Entries[i], back.Entries[i])
		}
	})
}
