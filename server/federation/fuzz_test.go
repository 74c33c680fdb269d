package federation_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4/jwt"

	"svc/server/federation"
	"svc/server/federation/issuertest"
)

// FuzzVerify feeds Verify arbitrary tokens, seeded with good ones and
// forgeries. Properties: it never panics, and whatever it accepts carries a
// signature that the standard library, not go-jose, confirms over the
// token's own signing input with a published key.
func FuzzVerify(f *testing.F) {
	e := newEnv(f)
	now := e.clk.Now()
	good := e.is.Claims("alice", now)
	for _, tok := range []string{
		issuertest.Sign(f, e.rsa, good),
		issuertest.Sign(f, e.ec, good),
		issuertest.Sign(f, e.rsa, jwt.Claims{Issuer: good.Issuer, Audience: good.Audience, Subject: "alice"}),
		rawJWS(map[string]string{"alg": "none", "kid": "rsa-1"}, good, []byte("x")),
		hs256(map[string]string{"alg": "HS256", "kid": "rsa-1"}, good, []byte("secret")),
		"", ".", "..", "a.b.c", "svc_abc", "\x00.\x00.\x00", "ü.ü.ü",
		strings.Repeat("A", 100) + "." + strings.Repeat("B", 100) + "." + strings.Repeat("C", 100),
	} {
		f.Add(tok)
	}
	// Fetch the keys once, so every input is checked against them.
	if _, err := e.v.Verify(context.Background(), issuertest.Sign(f, e.rsa, good)); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := e.v.Verify(context.Background(), tok)
		if err != nil {
			if c != (federation.Claims{}) {
				t.Fatalf("refusal %v carries claims %+v", err, c)
			}
			return
		}
		if !independentlySigned(t, e, tok) {
			t.Fatalf("accepted %q without a signature the standard library confirms", tok)
		}
		if c.Subject == "" || c.Expiry.Before(now.Add(-federation.Leeway)) {
			t.Fatalf("accepted claims %+v", c)
		}
	})
}

// independentlySigned checks tok's signature with crypto/rsa or
// crypto/ecdsa directly.
func independentlySigned(t *testing.T, e *env, tok string) bool {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if json.Unmarshal(hb, &h) != nil {
		return false
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch {
	case h.Alg == "RS256" && h.Kid == e.rsa.KID:
		return rsa.VerifyPKCS1v15(&e.rsa.Priv.(*rsa.PrivateKey).PublicKey, crypto.SHA256, digest[:], sig) == nil
	case h.Alg == "ES256" && h.Kid == e.ec.KID && len(sig) == 64:
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(&e.ec.Priv.(*ecdsa.PrivateKey).PublicKey, digest[:], r, s)
	}
	return false
}
