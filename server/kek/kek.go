// Package kek seals write-only secrets under the key-encryption key with
// AES-256-GCM and loads or creates the KEK itself.
package kek

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// KeySize is the KEK length in bytes (AES-256).
const KeySize = 32

// Version is the schema version carried by every sealed value, for future key
// rotation.
const Version = 1

// ErrDecrypt means a sealed value could not be opened: wrong KEK, tampered
// ciphertext or a different purpose.
var ErrDecrypt = errors.New("kek: cannot decrypt sealed value")

// Sealed is an encrypted value as stored at rest: {v, ct, iv}, ct and iv in
// standard base64. The GCM tag is the tail of ct.
type Sealed struct {
	V  int    `json:"v"`
	CT string `json:"ct"`
	IV string `json:"iv"`
}

// KEK seals and opens secrets. The zero value is not usable; use New.
type KEK struct {
	aead        cipher.AEAD
	fingerprint string
	key         []byte // for Derive
}

// New returns a KEK for a 32-byte key.
func New(key []byte) (*KEK, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("kek: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(fingerprintLabel))
	return &KEK{aead: aead, fingerprint: hex.EncodeToString(mac.Sum(nil)[:16]), key: slices.Clone(key)}, nil
}

// Parse decodes a base64 (standard or URL alphabet, padding optional) key.
func Parse(encoded string) (*KEK, error) {
	key, err := Decode(encoded)
	if err != nil {
		return nil, err
	}
	return New(key)
}

// Decode returns the key bytes of a base64 key as Parse reads it.
func Decode(encoded string) ([]byte, error) {
	key, err := decodeBase64(strings.TrimSpace(encoded))
	if err != nil {
		return nil, fmt.Errorf("kek: key is not base64: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("kek: key must be %d bytes, got %d", KeySize, len(key))
	}
	return key, nil
}

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("invalid base64")
}

// Load reads the base64 KEK file at path. A missing file gives an error
// wrapping fs.ErrNotExist: whether a new key may be made is the caller's
// decision (a store holding sealed values must not get one silently).
func Load(path string) (*KEK, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	k, err := Parse(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Generate returns a fresh random key.
func Generate() ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	return key, nil
}

// Encode renders a key as a KEK file holds it: standard base64 and a
// newline.
func Encode(key []byte) []byte {
	return []byte(base64.StdEncoding.EncodeToString(key) + "\n")
}

// Create writes a fresh random key to path (mode 0600, parent 0700) and
// returns it. It never overwrites: an existing file is an error wrapping
// fs.ErrExist.
func Create(path string) (*KEK, error) {
	key, err := Generate()
	if err != nil {
		return nil, err
	}
	if err := WriteNew(path, key); err != nil {
		return nil, err
	}
	return New(key)
}

// WriteNew writes key to a new file at path (mode 0600, parent 0700),
// fsynced with its directory. O_EXCL: it never overwrites a key another
// process or an earlier run wrote.
func WriteNew(path string, key []byte) error {
	if len(key) != KeySize {
		return fmt.Errorf("kek: key must be %d bytes, got %d", KeySize, len(key))
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	_, werr := f.Write(Encode(key))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	return syncDir(dir)
}

// Replace writes key to path atomically, replacing what is there: a 0600
// temp file in the same directory, fsync, rename, fsync of the directory.
// A crash leaves the old file or the new one, never a torn key.
func Replace(path string, key []byte) error {
	if len(key) != KeySize {
		return fmt.Errorf("kek: key must be %d bytes, got %d", KeySize, len(key))
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(Encode(key))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("kek: %w", err)
	}
	return nil
}

// fingerprintLabel is the message the fingerprint is the MAC of. The
// version lets a later scheme coexist.
const fingerprintLabel = "svc-kek-fingerprint-v1"

// Fingerprint names the key without revealing it: the first 16 bytes of
// HMAC-SHA256(key, "svc-kek-fingerprint-v1"), in hex. The store records
// it, so a broker started under another key is refused before it seals
// anything (docs/DECISIONS.md, "The KEK a store was sealed under").
func (k *KEK) Fingerprint() string { return k.fingerprint }

// Derive returns a 32-byte key for one use other than sealing (say, the
// MAC brokers sign what they publish with), HKDF-SHA256 of the KEK with
// label as its info: whoever holds the KEK derives the same key, and the
// derived key reveals neither the KEK nor another label's key.
func (k *KEK) Derive(label string) []byte {
	out, err := hkdf.Key(sha256.New, k.key, nil, label, KeySize)
	if err != nil {
		panic("kek: " + err.Error()) // only for a length HKDF cannot give
	}
	return out
}

// Seal encrypts plaintext. purpose is bound as additional data, so a value
// sealed for one purpose (say one member's TOTP secret) cannot be moved to
// another.
func (k *KEK) Seal(plaintext []byte, purpose string) (Sealed, error) {
	iv := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(iv); err != nil {
		return Sealed{}, fmt.Errorf("kek: %w", err)
	}
	ct := k.aead.Seal(nil, iv, plaintext, []byte(purpose))
	return Sealed{
		V:  Version,
		CT: base64.StdEncoding.EncodeToString(ct),
		IV: base64.StdEncoding.EncodeToString(iv),
	}, nil
}

// Open decrypts a sealed value sealed for the same purpose.
func (k *KEK) Open(s Sealed, purpose string) ([]byte, error) {
	if s.V != Version {
		return nil, fmt.Errorf("kek: unsupported sealed version %d", s.V)
	}
	iv, err := base64.StdEncoding.DecodeString(s.IV)
	if err != nil || len(iv) != k.aead.NonceSize() {
		return nil, ErrDecrypt
	}
	ct, err := base64.StdEncoding.DecodeString(s.CT)
	if err != nil {
		return nil, ErrDecrypt
	}
	pt, err := k.aead.Open(nil, iv, ct, []byte(purpose))
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}
