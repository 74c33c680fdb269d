package webpushtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// maxExpiry is how far ahead a VAPID JWT may expire (RFC 8292 §2).
const maxExpiry = 24 * time.Hour

// verifyVAPID checks an RFC 8292 "vapid t=<JWT>, k=<key>" header for audience aud at now,
// and returns the key and the "sub" claim.
func verifyVAPID(header, aud string, now time.Time) (key, subject string, err error) {
	scheme, params, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "vapid") {
		return "", "", fmt.Errorf("authorization %q is not the vapid scheme", header)
	}
	var token string
	for p := range strings.SplitSeq(params, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch name {
		case "t":
			token = value
		case "k":
			key = value
		}
	}
	keyBytes, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return "", "", fmt.Errorf("k is not unpadded base64url: %w", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), keyBytes)
	if err != nil {
		return "", "", fmt.Errorf("k: %w", err)
	}

	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", errors.New("t is not a compact jws")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err := decodeJSON(parts[0], &hdr); err != nil {
		return "", "", fmt.Errorf("jwt header: %w", err)
	}
	if hdr.Alg != "ES256" {
		return "", "", fmt.Errorf("jwt alg %q, want ES256", hdr.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "", "", errors.New("jwt signature is not 64 bytes of base64url")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return "", "", errors.New("jwt signature does not verify with k")
	}

	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := decodeJSON(parts[1], &claims); err != nil {
		return "", "", fmt.Errorf("jwt claims: %w", err)
	}
	if claims.Aud != aud {
		return "", "", fmt.Errorf("aud %q, want %q", claims.Aud, aud)
	}
	exp := time.Unix(claims.Exp, 0)
	if !exp.After(now) || exp.After(now.Add(maxExpiry)) {
		return "", "", fmt.Errorf("exp %s is not within %s of now", exp.UTC(), maxExpiry)
	}
	if !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https:") {
		return "", "", fmt.Errorf("sub %q is not a mailto: or https: uri", claims.Sub)
	}
	return key, claims.Sub, nil
}

func decodeJSON(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
