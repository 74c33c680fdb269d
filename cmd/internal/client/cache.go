package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// CacheSchema is the only token cache schema this client reads and writes.
const CacheSchema = 1

// maxCacheBytes bounds the token cache file: a cache holding thousands of
// brokers is far below it; a larger file is not ours.
const maxCacheBytes = 1 << 20

// EnvAuthConfigPath names the token cache file (docs/CLIENT.md).
const EnvAuthConfigPath = "SVC_AUTH_CONFIG_PATH"

// Cache is the client token cache file: { schema: 1, entries: [ { url,
// token, savedAt } ] }. There is one entry per exact broker URL; lookup does
// no normalization, so http://h:1 and http://h:1/ are different brokers.
type Cache struct {
	Schema  int          `json:"schema"`
	Entries []CacheEntry `json:"entries"`
}

// CacheEntry is the token saved for one broker URL. SavedAt is epoch
// milliseconds, like every timestamp svc writes.
type CacheEntry struct {
	URL     string `json:"url"`
	Token   string `json:"token"`
	SavedAt int64  `json:"savedAt"`
}

// CachePath is where the token cache lives: $SVC_AUTH_CONFIG_PATH, else
// $XDG_CONFIG_HOME/svc/auth.json, else ~/.config/svc/auth.json
// (docs/CLIENT.md).
func CachePath(getenv func(string) string) (string, error) {
	if p := getenv(EnvAuthConfigPath); p != "" {
		return p, nil
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "svc", "auth.json"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("token cache: no %s, XDG_CONFIG_HOME or home directory", EnvAuthConfigPath)
		}
	}
	return filepath.Join(home, ".config", "svc", "auth.json"), nil
}

// ParseCache decodes and validates a token cache. Unknown fields, a schema
// other than 1, an entry without url or token, or a duplicated url are
// refused: a cache we do not understand is never silently rewritten.
func ParseCache(data []byte) (*Cache, error) {
	if len(data) > maxCacheBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxCacheBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Cache
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a token cache: %v", err)
	}
	if dec.More() {
		return nil, errors.New("not a token cache: data after the JSON object")
	}
	if c.Schema != CacheSchema {
		return nil, fmt.Errorf("unsupported schema %d (want %d)", c.Schema, CacheSchema)
	}
	seen := make(map[string]bool, len(c.Entries))
	for i, e := range c.Entries {
		if e.URL == "" || e.Token == "" {
			return nil, fmt.Errorf("entry %d: url and token are required", i)
		}
		if seen[e.URL] {
			return nil, fmt.Errorf("entry %d: url %q appears twice", i, e.URL)
		}
		seen[e.URL] = true
	}
	return &c, nil
}

// LoadCache reads the cache at path. A missing file is an empty cache; a
// corrupt one is an error naming the file.
func LoadCache(path string) (*Cache, error) {
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Cache{Schema: CacheSchema}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token cache %s: %w", path, err)
	}
	c, err := ParseCache(data)
	if err != nil {
		return nil, fmt.Errorf("token cache %s: %v", path, err)
	}
	return c, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
}

// Lookup returns the token saved for exactly url.
func (c *Cache) Lookup(url string) (string, bool) {
	for _, e := range c.Entries {
		if e.URL == url {
			return e.Token, true
		}
	}
	return "", false
}

// Put replaces (or adds) the entry of exactly url: latest write wins.
func (c *Cache) Put(url, token string, now time.Time) {
	e := CacheEntry{URL: url, Token: token, SavedAt: now.UnixMilli()}
	for i := range c.Entries {
		if c.Entries[i].URL == url {
			c.Entries[i] = e
			return
		}
	}
	c.Entries = append(c.Entries, e)
}

// Save writes the cache to path atomically (WriteFileAtomic).
func (c *Cache) Save(path string) error {
	c.Schema = CacheSchema
	if c.Entries == nil {
		c.Entries = []CacheEntry{}
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(path, append(data, '\n')); err != nil {
		return fmt.Errorf("token cache: %w", err)
	}
	return nil
}

// WriteFileAtomic writes a private client file: a 0600 temp file in the
// same directory (created 0700), synced, renamed over path, and the
// directory synced. A reader sees the old file or the new one, never a
// torn write; a crash leaves one or the other.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes 0600 files; Chmod states it whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// SaveToken stores token as the entry of url in the cache at path, keeping
// every other entry.
func SaveToken(path, url, token string, now time.Time) error {
	c, err := LoadCache(path)
	if err != nil {
		return err
	}
	c.Put(url, token, now)
	return c.Save(path)
}

// ParseCacheFrom reads (bounded) and parses a cache from r.
func ParseCacheFrom(r io.Reader) (*Cache, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxCacheBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseCache(data)
}
