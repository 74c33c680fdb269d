package webpushtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// Subscriber is a browser's side of a push subscription: its endpoint, its P-256 key pair and auth secret.
type Subscriber struct {
	endpoint string
	key      *ecdh.PrivateKey
	auth     []byte
}

func newSubscriber(endpoint string) *Subscriber {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("webpushtest: generate key: %v", err)) // crypto/rand does not fail
	}
	return &Subscriber{endpoint: endpoint, key: key, auth: randomBytes(16)}
}

// Endpoint returns the subscription endpoint URL.
func (s *Subscriber) Endpoint() string { return s.endpoint }

// P256dh returns the subscriber's public key, unpadded base64url as browsers send it.
func (s *Subscriber) P256dh() string {
	return base64.RawURLEncoding.EncodeToString(s.key.PublicKey().Bytes())
}

// Auth returns the 16-byte auth secret, unpadded base64url.
func (s *Subscriber) Auth() string { return base64.RawURLEncoding.EncodeToString(s.auth) }

// Decrypt decodes an RFC 8291 push message body: one RFC 8188 aes128gcm record whose key id is
// the application server's ephemeral public key.
func (s *Subscriber) Decrypt(body []byte) ([]byte, error) {
	const fixed = 16 + 4 + 1 // salt, rs, idlen
	if len(body) < fixed {
		return nil, errors.New("body shorter than the aes128gcm header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if rs < 18 {
		return nil, fmt.Errorf("record size %d below 18", rs)
	}
	if idlen != 65 || len(body) < fixed+idlen {
		return nil, fmt.Errorf("key id is %d bytes, want a 65-byte P-256 point", idlen)
	}
	asPub, err := ecdh.P256().NewPublicKey(body[fixed : fixed+idlen])
	if err != nil {
		return nil, fmt.Errorf("key id: %w", err)
	}
	ct := body[fixed+idlen:]
	if uint64(len(ct)) > uint64(rs) {
		return nil, fmt.Errorf("%d bytes of records exceed one record of %d: web push allows one", len(ct), rs)
	}

	secret, err := s.key.ECDH(asPub)
	if err != nil {
		return nil, fmt.Errorf("ecdh: %w", err)
	}
	// RFC 8291 §3.3-3.4: IKM from the ECDH secret and auth secret, then RFC 8188 §2.2-2.3 key and nonce.
	keyInfo := "WebPush: info\x00" + string(s.key.PublicKey().Bytes()) + string(asPub.Bytes())
	ikm, err := hkdf.Key(sha256.New, secret, s.auth, keyInfo, 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	// Record 0's nonce is the derived nonce XOR 0.
	pt, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("aes-gcm: %w", err)
	}
	i := len(pt) - 1
	for i >= 0 && pt[i] == 0 {
		i--
	}
	if i < 0 || pt[i] != 0x02 {
		return nil, errors.New("missing the 0x02 delimiter of the last record")
	}
	return pt[:i], nil
}
