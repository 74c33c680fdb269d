package webpush_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/webpush"
)

// browserKeys returns a p256dh and auth pair as a browser encodes them.
func browserKeys(tb testing.TB) (p256dh, auth []byte) {
	tb.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(tb, err)
	auth = make([]byte, 16)
	_, _ = rand.Read(auth)
	return k.PublicKey().Bytes(), auth
}

func TestValidateKeys(t *testing.T) {
	p, a := browserKeys(t)
	raw, pad := base64.RawURLEncoding.EncodeToString, base64.URLEncoding.EncodeToString
	offCurve := append([]byte{4}, make([]byte, 64)...)
	offCurve[64] = 1
	tests := []struct {
		name    string
		p256dh  string
		auth    string
		wantErr string
	}{
		{name: "unpadded", p256dh: raw(p), auth: raw(a)},
		{name: "padded", p256dh: pad(p), auth: pad(a)},
		{name: "std alphabet", p256dh: base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 33))[:65]), auth: raw(a), wantErr: "p256dh"},
		{name: "compressed point", p256dh: raw(append([]byte{2}, p[1:33]...)), auth: raw(a), wantErr: "want 65"},
		{name: "off curve", p256dh: raw(offCurve), auth: raw(a), wantErr: "not an uncompressed P-256 point"},
		{name: "infinity", p256dh: raw(make([]byte, 65)), auth: raw(a), wantErr: "not an uncompressed P-256 point"},
		{name: "p256dh 66 bytes", p256dh: raw(append(p, 0)), auth: raw(a), wantErr: "want 65"},
		{name: "p256dh empty", p256dh: "", auth: raw(a), wantErr: "want 65"},
		{name: "p256dh newline", p256dh: raw(p)[:40] + "\n" + raw(p)[40:], auth: raw(a), wantErr: "p256dh"},
		{name: "p256dh overpadded", p256dh: raw(p) + "==", auth: raw(a), wantErr: "p256dh"},
		{name: "auth 15 bytes", p256dh: raw(p), auth: raw(a[:15]), wantErr: "want 16"},
		{name: "auth 17 bytes", p256dh: raw(p), auth: raw(append(a, 1)), wantErr: "want 16"},
		{name: "auth garbage", p256dh: raw(p), auth: "***", wantErr: "auth"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := webpush.ValidateKeys(tc.p256dh, tc.auth)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestValidateEndpoint(t *testing.T) {
	long := "https://push.example/" + strings.Repeat("a", 2048-len("https://push.example/"))
	tests := []struct {
		name      string
		endpoint  string
		allowHTTP bool
		wantErr   string
	}{
		{name: "fcm", endpoint: "https://fcm.googleapis.com/fcm/send/abc:APA91b"},
		{name: "mozilla with port", endpoint: "https://updates.push.services.mozilla.com:443/wpush/v2/gAAA"},
		{name: "exactly 2048", endpoint: long},
		{name: "2049", endpoint: long + "a", wantErr: "longer"},
		{name: "http refused", endpoint: "http://127.0.0.1:8080/p", wantErr: "https"},
		{name: "http allowed", endpoint: "http://127.0.0.1:8080/p", allowHTTP: true},
		{name: "ftp", endpoint: "ftp://push.example/p", allowHTTP: true, wantErr: "https"},
		{name: "relative", endpoint: "/push/p", wantErr: "https"},
		{name: "empty", endpoint: "", wantErr: "https"},
		{name: "no host", endpoint: "https:///p", wantErr: "host"},
		{name: "port only", endpoint: "https://:443/p", wantErr: "host"},
		{name: "opaque", endpoint: "https:push.example", wantErr: "host"},
		{name: "userinfo", endpoint: "https://user:pw@push.example/p", wantErr: "userinfo"},
		{name: "fragment", endpoint: "https://push.example/p#frag", wantErr: "fragment"},
		{name: "empty fragment", endpoint: "https://push.example/p#", wantErr: "fragment"},
		{name: "control char", endpoint: "https://push.example/\x00", wantErr: "not a url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := webpush.ValidateEndpoint(tc.endpoint, tc.allowHTTP)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func FuzzValidateKeys(f *testing.F) {
	p, a := browserKeys(f)
	f.Add(base64.RawURLEncoding.EncodeToString(p), base64.RawURLEncoding.EncodeToString(a))
	f.Add(base64.URLEncoding.EncodeToString(p), base64.URLEncoding.EncodeToString(a))
	f.Add("", "")
	f.Add("\x00", "\x00")
	f.Add("✓", "==")
	f.Fuzz(func(t *testing.T, p256dh, auth string) {
		if webpush.ValidateKeys(p256dh, auth) != nil {
			return
		}
		pb, err := base64.RawURLEncoding.DecodeString(strings.TrimSuffix(strings.TrimSuffix(p256dh, "="), "="))
		require.NoError(t, err)
		_, err = ecdh.P256().NewPublicKey(pb)
		require.NoError(t, err)
		ab, err := base64.RawURLEncoding.DecodeString(strings.TrimSuffix(strings.TrimSuffix(auth, "="), "="))
		require.NoError(t, err)
		require.Len(t, ab, 16)
	})
}

func FuzzValidateEndpoint(f *testing.F) {
	for _, s := range []string{"https://push.example/p", "http://127.0.0.1:1/p", "", "\x00", "https://✓.example/ü", "https://u@h/#f", "https:h"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, endpoint string, allowHTTP bool) {
		if webpush.ValidateEndpoint(endpoint, allowHTTP) != nil {
			return
		}
		require.LessOrEqual(t, len(endpoint), 2048)
		require.NotContains(t, endpoint, "#")
		u, err := url.Parse(endpoint)
		require.NoError(t, err)
		require.True(t, u.IsAbs())
		require.True(t, u.Scheme == "https" || (allowHTTP && u.Scheme == "http"), "scheme %q", u.Scheme)
		require.NotEmpty(t, u.Hostname())
		require.Nil(t, u.User)
	})
}
