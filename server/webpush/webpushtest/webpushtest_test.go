package webpushtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// signJWT builds an ES256 JWT over claims by hand, independently of any JWT library.
func signJWT(tb testing.TB, key *ecdsa.PrivateKey, alg string, claims map[string]any) string {
	tb.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(tb, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"typ": "JWT", "alg": alg}) + "." + enc(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	require.NoError(tb, err)
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func mustKey(tb testing.TB) (*ecdsa.PrivateKey, string) {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	pub, err := k.PublicKey.Bytes()
	require.NoError(tb, err)
	return k, base64.RawURLEncoding.EncodeToString(pub)
}

func TestVerifyVAPID(t *testing.T) {
	const aud = "http://127.0.0.1:1234"
	now := time.Now()
	key, k := mustKey(t)
	other, _ := mustKey(t)
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"aud": aud, "exp": now.Add(12 * time.Hour).Unix(), "sub": "mailto:svc@localhost"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	header := func(signer *ecdsa.PrivateKey, alg string, c map[string]any) string {
		return "vapid t=" + signJWT(t, signer, alg, c) + ", k=" + k
	}
	tests := []struct {
		name    string
		header  string
		wantErr string
	}{
		{name: "valid", header: header(key, "ES256", claims(nil))},
		{name: "bearer scheme", header: "Bearer " + signJWT(t, key, "ES256", claims(nil)), wantErr: "vapid scheme"},
		{name: "missing", header: "", wantErr: "vapid scheme"},
		{name: "other signer", header: header(other, "ES256", claims(nil)), wantErr: "does not verify"},
		{name: "alg none", header: header(key, "none", claims(nil)), wantErr: "ES256"},
		{name: "wrong aud", header: header(key, "ES256", claims(func(c map[string]any) { c["aud"] = "https://evil.example" })), wantErr: "aud"},
		{name: "expired", header: header(key, "ES256", claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), wantErr: "exp"},
		{name: "exp too far", header: header(key, "ES256", claims(func(c map[string]any) { c["exp"] = now.Add(25 * time.Hour).Unix() })), wantErr: "exp"},
		{name: "no sub", header: header(key, "ES256", claims(func(c map[string]any) { delete(c, "sub") })), wantErr: "sub"},
		{name: "no k", header: "vapid t=" + signJWT(t, key, "ES256", claims(nil)), wantErr: "k"},
		{name: "not a jws", header: "vapid t=abc, k=" + k, wantErr: "compact jws"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotK, sub, err := verifyVAPID(tc.header, aud, now)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, k, gotK)
				require.Equal(t, "mailto:svc@localhost", sub)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestServiceRejects(t *testing.T) {
	svc := NewService(t)
	sub := svc.NewSubscriber("reject")
	require.Equal(t, svc.URL()+"/reject", sub.Endpoint())
	key, k := mustKey(t)
	auth := "vapid t=" + signJWT(t, key, "ES256", map[string]any{
		"aud": svc.URL(), "exp": time.Now().Add(time.Hour).Unix(), "sub": "mailto:a@b",
	}) + ", k=" + k
	tests := []struct {
		name     string
		method   string
		path     string
		encoding string
		ttl      string
		body     []byte
		wantCode int
		wantErr  string
	}{
		{name: "get", method: http.MethodGet, path: "/reject", wantCode: http.StatusBadRequest, wantErr: "method"},
		{name: "unknown path", method: http.MethodPost, path: "/nobody", wantCode: http.StatusNotFound, wantErr: "no subscriber"},
		{name: "aesgcm encoding", method: http.MethodPost, path: "/reject", encoding: "aesgcm", ttl: "60", wantCode: http.StatusBadRequest, wantErr: "content-encoding"},
		{name: "no ttl", method: http.MethodPost, path: "/reject", encoding: "aes128gcm", wantCode: http.StatusBadRequest, wantErr: "ttl"},
		{name: "oversize body", method: http.MethodPost, path: "/reject", encoding: "aes128gcm", ttl: "60", body: make([]byte, 4097), wantCode: http.StatusBadRequest, wantErr: "more than 4096"},
		{name: "garbage body", method: http.MethodPost, path: "/reject", encoding: "aes128gcm", ttl: "60", body: make([]byte, 200), wantCode: http.StatusBadRequest, wantErr: "decrypt"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, svc.URL()+tc.path, bytes.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", auth)
			req.Header.Set("Content-Encoding", tc.encoding)
			if tc.ttl != "" {
				req.Header.Set("TTL", tc.ttl)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, tc.wantCode, resp.StatusCode)

			got, err := svc.Wait(t.Context(), i+1)
			require.NoError(t, err)
			require.ErrorContains(t, got[i].Err, tc.wantErr)
			require.Nil(t, got[i].Plaintext)
		})
	}
}
