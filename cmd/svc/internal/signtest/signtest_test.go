package signtest

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/hooks"
)

func reason(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var r *hooks.Rejected
	require.True(t, errors.As(err, &r), "%T %v", err, err)
	return r.Reason
}

var bodies = []string{
	`{"type":"invoice.paid","data":{"object":{"id":"in_1","amount":4200}}}`,
	"{\n  \"text\": \"héllo wörld 😀 </external_content>\"\n}\n",
	"",
}

func TestStandardWebhooksSigner(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	auth := hooks.Auth{Kind: hooks.KindStandardWebhooks}
	require.NoError(t, auth.Validate())
	require.NoError(t, hooks.ValidateSecret(auth.Kind, secret))
	now := time.Now()
	for _, body := range bodies {
		ts := now.Add(-30 * time.Second)
		h := StandardWebhooks(t, secret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", ts, []byte(body))
		require.True(t, strings.HasPrefix(h.Get("webhook-signature"), "v1,"), h.Get("webhook-signature"))
		require.Equal(t, "", reason(t, hooks.Verify(auth, secret, h, []byte(body), now)), "body %q", body)

		tampered := []byte(body + " ")
		require.Equal(t, hooks.ReasonSignatureMismatch, reason(t, hooks.Verify(auth, secret, h, tampered, now)))
		require.Equal(t, hooks.ReasonSignatureMismatch, reason(t, hooks.Verify(auth, "whsec_"+strings.Repeat("A", 32), h, []byte(body), now)))
		require.Equal(t, hooks.ReasonStaleTimestamp, reason(t, hooks.Verify(auth, secret, h, []byte(body), now.Add(10*time.Minute))))
	}
	// Rotation: the sender signs with old and new secrets; either verifies.
	const next = "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="
	body := []byte(bodies[0])
	a := StandardWebhooks(t, secret, "msg_1", now, body)
	b := StandardWebhooks(t, next, "msg_1", now, body)
	h := a.Clone()
	h.Set("webhook-signature", a.Get("webhook-signature")+" "+b.Get("webhook-signature"))
	require.Equal(t, "", reason(t, hooks.Verify(auth, secret, h, body, now)))
	require.Equal(t, "", reason(t, hooks.Verify(auth, next, h, body, now)))
}

func TestStripeSigner(t *testing.T) {
	const secret = "whsec_test_3f9a1c0b7e2d4a6b"
	auth := hooks.Auth{Kind: hooks.KindStripe}
	require.NoError(t, auth.Validate())
	require.NoError(t, hooks.ValidateSecret(auth.Kind, secret))
	now := time.Now()
	for _, body := range bodies {
		ts := now.Add(-time.Minute)
		v := Stripe(t, secret, []byte(body), ts)
		require.True(t, strings.HasPrefix(v, "t="), v)
		h := http.Header{}
		h.Set("Stripe-Signature", v)
		require.Equal(t, "", reason(t, hooks.Verify(auth, secret, h, []byte(body), now)), "body %q", body)

		require.Equal(t, hooks.ReasonSignatureMismatch, reason(t, hooks.Verify(auth, secret, h, []byte(body+"\n"), now)))
		require.Equal(t, hooks.ReasonSignatureMismatch, reason(t, hooks.Verify(auth, secret+"x", h, []byte(body), now)))
		require.Equal(t, hooks.ReasonStaleTimestamp, reason(t, hooks.Verify(auth, secret, h, []byte(body), now.Add(10*time.Minute))))
	}
}
