// Package kek seals write-only secrets under the key-encryption key with
// AES-256-GCM and loads or creates the KEK itself.
package kek

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	aead cipher.AEAD
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
	return &KEK{aead: aead}, nil
}

// Parse decodes a base64 (standard or URL alphabet, padding optional) key.
func Parse(encoded string) (*KEK, error) {
	key, err := decodeBase64(strings.TrimSpace(encoded))
	if err != nil {
		return nil, fmt.Errorf("kek: key is not base64: %w", err)
	}
	return New(key)
}

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("invalid base64")
}

// LoadOrCreate reads the base64 KEK file at path, creating it with a fresh
// random key (mode 0600, parent 0700) when it does not exist.
func LoadOrCreate(path string) (k *KEK, created bool, err error) {
	data, err := os.ReadFile(path)
	if err == nil {
		k, err := Parse(string(data))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("kek: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("kek: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("kek: %w", err)
	}
	// O_EXCL: never overwrite a key another process wrote meanwhile.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("kek: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, false, fmt.Errorf("kek: %w", err)
	}
	k, err = New(key)
	return k, true, err
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
