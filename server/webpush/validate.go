package webpush

import (
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ValidateKeys checks a subscription's keys as a browser sends them: p256dh is base64url
// (padding optional) of a 65-byte uncompressed P-256 point and auth is base64url of 16 bytes.
func ValidateKeys(p256dh, auth string) error {
	return checkKeys(p256dh, auth, decodeURL)
}

func checkKeys(p256dh, auth string, decode func(string) ([]byte, error)) error {
	p, err := decode(p256dh)
	if err != nil {
		return fmt.Errorf("webpush: p256dh: %w", err)
	}
	if len(p) != 65 {
		return fmt.Errorf("webpush: p256dh is %d bytes, want 65", len(p))
	}
	if _, err := ecdh.P256().NewPublicKey(p); err != nil {
		return errors.New("webpush: p256dh is not an uncompressed P-256 point")
	}
	a, err := decode(auth)
	if err != nil {
		return fmt.Errorf("webpush: auth: %w", err)
	}
	if len(a) != 16 {
		return fmt.Errorf("webpush: auth is %d bytes, want 16", len(a))
	}
	return nil
}

// decodeURL decodes base64url with or without padding.
func decodeURL(s string) ([]byte, error) {
	return decode(s, base64.URLEncoding)
}

// decodeLenient also takes the standard alphabet, matching what the library accepts when sending.
func decodeLenient(s string) ([]byte, error) {
	if b, err := decode(s, base64.URLEncoding); err == nil {
		return b, nil
	}
	return decode(s, base64.StdEncoding)
}

// decode takes padded or unpadded input in enc's alphabet.
func decode(s string, enc *base64.Encoding) ([]byte, error) {
	// encoding/base64 skips CR and LF; a key never contains them.
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("invalid base64")
	}
	if strings.HasSuffix(s, "=") {
		return enc.DecodeString(s)
	}
	return enc.WithPadding(base64.NoPadding).DecodeString(s)
}

// ValidateEndpoint checks a subscription endpoint: an absolute https URL (http only if allowHTTP)
// with a host, no userinfo, no fragment, and at most 2048 bytes.
func ValidateEndpoint(endpoint string, allowHTTP bool) error {
	if len(endpoint) > maxEndpointLen {
		return fmt.Errorf("webpush: endpoint longer than %d bytes", maxEndpointLen)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return errors.New("webpush: endpoint is not a url")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	default:
		return errors.New("webpush: endpoint scheme must be https")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return errors.New("webpush: endpoint has no host")
	}
	if u.User != nil {
		return errors.New("webpush: endpoint must not carry userinfo")
	}
	if u.Fragment != "" || strings.Contains(endpoint, "#") {
		return errors.New("webpush: endpoint must not have a fragment")
	}
	return nil
}
