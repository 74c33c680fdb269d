package webpush_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"svc/server/webpush"
	"svc/server/webpush/webpushtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustVAPIDKeys returns a fresh VAPID key pair as the team config stores it.
func mustVAPIDKeys(tb testing.TB) (public, private string) {
	tb.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(tb, err)
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(k.Bytes())
}

func mustSender(tb testing.TB, opts ...webpush.Option) (*webpush.Sender, string) {
	tb.Helper()
	pub, priv := mustVAPIDKeys(tb)
	s, err := webpush.New(pub, priv, "mailto:svc@localhost", opts...)
	require.NoError(tb, err)
	return s, pub
}

func subscription(sub *webpushtest.Subscriber) webpush.Subscription {
	return webpush.Subscription{Endpoint: sub.Endpoint(), P256dh: sub.P256dh(), Auth: sub.Auth()}
}

// reencode turns unpadded base64url into padded standard base64, which the library also accepts.
func reencode(tb testing.TB, s string) string {
	tb.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(tb, err)
	return base64.StdEncoding.EncodeToString(b)
}

func TestSendDelivers(t *testing.T) {
	svc := webpushtest.NewService(t)
	tests := []struct {
		name    string
		payload []byte
		opts    []webpush.Option
		stdKeys bool
		wantTTL int
	}{
		{name: "json", payload: []byte(`{"id":"1","from":"ana","title":"hi","body":"héllo ✓","thread":"obj:7"}`), wantTTL: 86400},
		{name: "empty", payload: []byte{}, wantTTL: 86400},
		{name: "max payload", payload: []byte(strings.Repeat("x", webpush.MaxPayload)), wantTTL: 86400},
		{name: "ttl option", payload: []byte("ttl"), opts: []webpush.Option{webpush.WithTTL(90 * time.Second)}, wantTTL: 90},
		{name: "zero ttl", payload: []byte("now or never"), opts: []webpush.Option{webpush.WithTTL(-time.Second)}, wantTTL: 0},
		{name: "padded std keys", payload: []byte("std"), stdKeys: true, wantTTL: 86400},
		{name: "custom client", payload: []byte("client"), opts: []webpush.Option{webpush.WithHTTPClient(&http.Client{Timeout: time.Second})}, wantTTL: 86400},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sender, pub := mustSender(t, tc.opts...)
			sub := svc.NewSubscriber("/push/" + tc.name)
			ps := subscription(sub)
			if tc.stdKeys {
				ps.P256dh, ps.Auth = reencode(t, ps.P256dh), reencode(t, ps.Auth)
			}

			res, err := sender.Send(t.Context(), ps, tc.payload)
			require.NoError(t, err)
			require.Equal(t, webpush.Result{Status: http.StatusCreated}, res)

			got := svc.Received()
			require.Len(t, got, i+1)
			d := got[i]
			require.NoError(t, d.Err)
			require.Equal(t, "/push/"+tc.name, d.Path)
			require.Equal(t, tc.payload, d.Plaintext)
			require.Equal(t, pub, d.VAPIDKey)
			require.Equal(t, "mailto:svc@localhost", d.Subject)
			require.Equal(t, tc.wantTTL, d.TTL)
		})
	}
}

func TestSendHTTPSSubject(t *testing.T) {
	svc := webpushtest.NewService(t)
	pub, priv := mustVAPIDKeys(t)
	sender, err := webpush.New(pub, priv, "https://svc.example/contact")
	require.NoError(t, err)
	sub := svc.NewSubscriber("/s")

	_, err = sender.Send(t.Context(), subscription(sub), []byte("x"))
	require.NoError(t, err)
	got, err := svc.Wait(t.Context(), 1)
	require.NoError(t, err)
	require.NoError(t, got[0].Err)
	require.Equal(t, "https://svc.example/contact", got[0].Subject)
}

func TestSendStatus(t *testing.T) {
	svc := webpushtest.NewService(t)
	sender, _ := mustSender(t)
	tests := []struct {
		name     string
		code     int // 0: no subscriber registered at the path
		wantGone bool
		wantErr  bool
	}{
		{name: "gone", code: http.StatusGone, wantGone: true},
		{name: "not found", code: http.StatusNotFound, wantGone: true},
		{name: "unknown subscriber", code: 0, wantGone: true},
		{name: "accepted", code: http.StatusAccepted},
		{name: "server error", code: http.StatusInternalServerError, wantErr: true},
		{name: "too many requests", code: http.StatusTooManyRequests, wantErr: true},
		{name: "redirect not followed", code: http.StatusFound, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := "/status/" + strings.ReplaceAll(tc.name, " ", "-")
			ps := webpush.Subscription{Endpoint: svc.URL() + path}
			if tc.code != 0 {
				sub := svc.NewSubscriber(path)
				svc.SetStatus(path, tc.code)
				ps = subscription(sub)
			} else {
				other := svc.NewSubscriber("/elsewhere")
				ps.P256dh, ps.Auth = other.P256dh(), other.Auth()
			}

			res, err := sender.Send(t.Context(), ps, []byte("hello"))
			wantStatus := tc.code
			if tc.code == 0 {
				wantStatus = http.StatusNotFound
			}
			require.Equal(t, webpush.Result{Status: wantStatus, Gone: tc.wantGone}, res)
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			var se *webpush.StatusError
			require.ErrorAs(t, err, &se)
			require.Equal(t, wantStatus, se.Code)
			require.ErrorContains(t, err, http.StatusText(wantStatus))
		})
	}
}

func TestSendRefusesWithoutRequest(t *testing.T) {
	svc := webpushtest.NewService(t)
	sender, _ := mustSender(t)
	sub := svc.NewSubscriber("/refused")
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		mutate  func(*webpush.Subscription)
		payload []byte
		wantIs  error
	}{
		{name: "oversize", ctx: t.Context(), payload: make([]byte, webpush.MaxPayload+1), wantIs: webpush.ErrPayloadTooLarge},
		{name: "bad p256dh", ctx: t.Context(), mutate: func(s *webpush.Subscription) { s.P256dh = s.Auth }},
		{name: "bad auth", ctx: t.Context(), mutate: func(s *webpush.Subscription) { s.Auth = "c2hvcnQ" }},
		{name: "canceled", ctx: canceled, wantIs: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := subscription(sub)
			if tc.mutate != nil {
				tc.mutate(&ps)
			}
			_, err := sender.Send(tc.ctx, ps, tc.payload)
			require.Error(t, err)
			if tc.wantIs != nil {
				require.ErrorIs(t, err, tc.wantIs)
			}
			require.Empty(t, svc.Received())
		})
	}
}

func TestNew(t *testing.T) {
	pub, priv := mustVAPIDKeys(t)
	// The std-alphabet case needs a key whose encoding has a '-' or '_' to
	// change; about one key in 16 has none.
	for !strings.ContainsAny(pub, "-_") {
		pub, priv = mustVAPIDKeys(t)
	}
	otherPub, _ := mustVAPIDKeys(t)
	raw := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	offCurve := append([]byte{4}, make([]byte, 64)...)
	offCurve[64] = 1
	tests := []struct {
		name    string
		pub     string
		priv    string
		subject string
		wantErr string
	}{
		{name: "valid", pub: pub, priv: priv, subject: "mailto:svc@localhost"},
		{name: "https subject", pub: pub, priv: priv, subject: "https://svc.example"},
		{name: "mismatched", pub: otherPub, priv: priv, subject: "mailto:a@b", wantErr: "does not match"},
		{name: "public padded", pub: pub + "=", priv: priv, subject: "mailto:a@b", wantErr: "public key"},
		{name: "public std alphabet", pub: base64.RawStdEncoding.EncodeToString(mustDecode(t, pub)), priv: priv, subject: "mailto:a@b", wantErr: "public key"},
		{name: "public compressed", pub: raw(append([]byte{2}, mustDecode(t, pub)[1:33]...)), priv: priv, subject: "mailto:a@b", wantErr: "public key"},
		{name: "public off curve", pub: raw(offCurve), priv: priv, subject: "mailto:a@b", wantErr: "does not match"},
		{name: "public empty", pub: "", priv: priv, subject: "mailto:a@b", wantErr: "public key"},
		{name: "private short", pub: pub, priv: raw(make([]byte, 31)), subject: "mailto:a@b", wantErr: "private key"},
		{name: "private zero", pub: pub, priv: raw(make([]byte, 32)), subject: "mailto:a@b", wantErr: "private key"},
		{name: "private above order", pub: pub, priv: raw([]byte(strings.Repeat("\xff", 32))), subject: "mailto:a@b", wantErr: "private key"},
		{name: "private garbage", pub: pub, priv: "!!!", subject: "mailto:a@b", wantErr: "private key"},
		{name: "swapped", pub: priv, priv: pub, subject: "mailto:a@b", wantErr: "public key"},
		{name: "bare email subject", pub: pub, priv: priv, subject: "svc@localhost", wantErr: "subject"},
		{name: "empty mailto", pub: pub, priv: priv, subject: "mailto:", wantErr: "subject"},
		{name: "http subject", pub: pub, priv: priv, subject: "http://svc.example", wantErr: "subject"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := webpush.New(tc.pub, tc.priv, tc.subject)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, s)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.Nil(t, s)
		})
	}
}

func mustDecode(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(tb, err)
	return b
}

// An endpoint URL is a bearer-like secret: a transport error names the
// endpoint's host, never its path.
func TestSendErrorNamesTheHostOnly(t *testing.T) {
	sender, _ := mustSender(t)
	sub := webpush.Subscription{Endpoint: "http://127.0.0.1:1/push/secret-subscription-id", P256dh: "", Auth: ""}
	svc := webpushtest.NewService(t)
	good := svc.NewSubscriber("/x")
	sub.P256dh, sub.Auth = good.P256dh(), good.Auth()
	_, err := sender.Send(t.Context(), sub, []byte("x"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.NotContains(t, err.Error(), "secret-subscription-id")
	require.Equal(t, "push.example:8443", webpush.EndpointHost("https://push.example:8443/a/b?c"))
	require.Equal(t, "(unparsable endpoint)", webpush.EndpointHost("::"))
}
