package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Test signers, written from each scheme's documentation independently of
// verify.go.

func signHMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func signStandard(secret, id string, ts int64, body []byte) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func standardHeaders(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h
}

func signStripe(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func stripeHeader(v string) http.Header {
	h := http.Header{}
	h.Set("Stripe-Signature", v)
	return h
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// reasonOf is the Reason of a *Rejected, "" for nil; anything else fails.
func reasonOf(t testing.TB, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var r *Rejected
	if !errors.As(err, &r) {
		t.Fatalf("error %T %v is not a *Rejected", err, err)
	}
	return r.Reason
}

const (
	swSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swSecret2 = "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="
)

func TestVerifyGitHubVector(t *testing.T) {
	// docs.github.com "Validating webhook deliveries": the documented
	// test values.
	h := hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	err := Verify(Auth{Kind: KindHMACSHA256}, "It's a Secret to Everybody", h, []byte("Hello, World!"), time.Now())
	require.NoError(t, err)
	require.Equal(t, ReasonSignatureMismatch, reasonOf(t, Verify(Auth{Kind: KindHMACSHA256}, "It's a Secret to Everybody", h, []byte("Hello, World?"), time.Now())))
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	ts := now.Unix()
	body := []byte(`{"action":"opened","number":42}`)
	reser := []byte(`{"action": "opened", "number": 42}`) // same JSON, other bytes
	good := signHMAC("s3cret", body)
	gh := Auth{Kind: KindHMACSHA256}
	custom := Auth{Kind: KindHMACSHA256, HeaderName: "X-Signature", Prefix: "hmac-sha256:"}
	hs := Auth{Kind: KindHeaderSecret}
	sw := Auth{Kind: KindStandardWebhooks}
	st := Auth{Kind: KindStripe}
	const stSecret = "whsec_stripe_test_secret"
	swGood := signStandard(swSecret, "msg_1", ts, body)
	stGood := signStripe(stSecret, ts, body)

	tests := []struct {
		name   string
		auth   Auth
		secret string
		h      http.Header
		body   []byte
		want   string // reason, "" = accepted
	}{
		// hmac-sha256
		{"hmac good", gh, "s3cret", hdr("X-Hub-Signature-256", good), body, ""},
		{"hmac uppercase hex", gh, "s3cret", hdr("X-Hub-Signature-256", "sha256="+strings.ToUpper(good[7:])), body, ""},
		{"hmac forged", gh, "s3cret", hdr("X-Hub-Signature-256", signHMAC("other", body)), body, ReasonSignatureMismatch},
		{"hmac truncated", gh, "s3cret", hdr("X-Hub-Signature-256", good[:len(good)-2]), body, ReasonSignatureMismatch},
		{"hmac odd length", gh, "s3cret", hdr("X-Hub-Signature-256", good[:len(good)-1]), body, ReasonMalformedHeader},
		{"hmac empty signature", gh, "s3cret", hdr("X-Hub-Signature-256", "sha256="), body, ReasonSignatureMismatch},
		{"hmac reserialised body", gh, "s3cret", hdr("X-Hub-Signature-256", good), reser, ReasonSignatureMismatch},
		{"hmac trailing newline", gh, "s3cret", hdr("X-Hub-Signature-256", good), append(append([]byte{}, body...), '\n'), ReasonSignatureMismatch},
		{"hmac wrong prefix", gh, "s3cret", hdr("X-Hub-Signature-256", "sha1="+good[7:]), body, ReasonPrefixMismatch},
		{"hmac no prefix", gh, "s3cret", hdr("X-Hub-Signature-256", good[7:]), body, ReasonPrefixMismatch},
		{"hmac missing header", gh, "s3cret", hdr("X-Hub-Signature", good), body, ReasonMissingHeader},
		{"hmac empty header", gh, "s3cret", hdr("X-Hub-Signature-256", "  "), body, ReasonMissingHeader},
		{"hmac repeated header", gh, "s3cret", hdr("X-Hub-Signature-256", good, "X-Hub-Signature-256", good), body, ReasonMalformedHeader},
		{"hmac non-hex", gh, "s3cret", hdr("X-Hub-Signature-256", "sha256=zz"+good[9:]), body, ReasonMalformedHeader},
		{"hmac empty secret", gh, "", hdr("X-Hub-Signature-256", signHMAC("", body)), body, ReasonNoSecret},
		{"hmac custom header and prefix", custom, "s3cret", hdr("X-Signature", "hmac-sha256:"+good[7:]), body, ""},
		{"hmac custom ignores default header", custom, "s3cret", hdr("X-Hub-Signature-256", good), body, ReasonMissingHeader},
		{"hmac empty body", gh, "s3cret", hdr("X-Hub-Signature-256", signHMAC("s3cret", nil)), nil, ""},

		// header-secret
		{"secret good", hs, "tok-123", hdr("X-Hook-Secret", "tok-123"), body, ""},
		{"secret wrong", hs, "tok-123", hdr("X-Hook-Secret", "tok-124"), body, ReasonSignatureMismatch},
		{"secret truncated", hs, "tok-123", hdr("X-Hook-Secret", "tok-12"), body, ReasonSignatureMismatch},
		{"secret longer", hs, "tok-123", hdr("X-Hook-Secret", "tok-1234"), body, ReasonSignatureMismatch},
		{"secret case differs", hs, "tok-123", hdr("X-Hook-Secret", "TOK-123"), body, ReasonSignatureMismatch},
		{"secret missing header", hs, "tok-123", hdr("Authorization", "tok-123"), body, ReasonMissingHeader},
		{"secret repeated header", hs, "tok-123", hdr("X-Hook-Secret", "tok-123", "X-Hook-Secret", "x"), body, ReasonMalformedHeader},
		{"secret empty secret", hs, "", hdr("X-Hook-Secret", ""), body, ReasonNoSecret},
		{"secret custom header", Auth{Kind: KindHeaderSecret, HeaderName: "X-Gitlab-Token"}, "tok", hdr("X-Gitlab-Token", "tok"), body, ""},

		// standard-webhooks
		{"sw good", sw, swSecret, standardHeaders("msg_1", ts, swGood), body, ""},
		{"sw forged", sw, swSecret, standardHeaders("msg_1", ts, signStandard(swSecret2, "msg_1", ts, body)), body, ReasonSignatureMismatch},
		{"sw truncated", sw, swSecret, standardHeaders("msg_1", ts, swGood[:len(swGood)-4]), body, ReasonSignatureMismatch},
		{"sw bad base64", sw, swSecret, standardHeaders("msg_1", ts, "v1,!!!"), body, ReasonSignatureMismatch},
		{"sw reserialised body", sw, swSecret, standardHeaders("msg_1", ts, swGood), reser, ReasonSignatureMismatch},
		{"sw other id", sw, swSecret, standardHeaders("msg_2", ts, swGood), body, ReasonSignatureMismatch},
		{"sw other timestamp", sw, swSecret, standardHeaders("msg_1", ts+1, swGood), body, ReasonSignatureMismatch},
		{"sw wrong version", sw, swSecret, standardHeaders("msg_1", ts, "v2,"+swGood[3:]), body, ReasonMalformedHeader},
		{"sw no comma", sw, swSecret, standardHeaders("msg_1", ts, swGood[3:]), body, ReasonMalformedHeader},
		{"sw missing id", sw, swSecret, hdr("webhook-timestamp", strconv.FormatInt(ts, 10), "webhook-signature", swGood), body, ReasonMissingHeader},
		{"sw missing timestamp", sw, swSecret, hdr("webhook-id", "msg_1", "webhook-signature", swGood), body, ReasonMissingHeader},
		{"sw missing signature", sw, swSecret, hdr("webhook-id", "msg_1", "webhook-timestamp", strconv.FormatInt(ts, 10)), body, ReasonMissingHeader},
		{"sw timestamp not digits", sw, swSecret, hdr("webhook-id", "msg_1", "webhook-timestamp", "-5", "webhook-signature", swGood), body, ReasonMalformedHeader},
		{"sw timestamp float", sw, swSecret, hdr("webhook-id", "msg_1", "webhook-timestamp", "1760000000.0", "webhook-signature", swGood), body, ReasonMalformedHeader},
		{"sw stale", sw, swSecret, standardHeaders("msg_1", ts-301, signStandard(swSecret, "msg_1", ts-301, body)), body, ReasonStaleTimestamp},
		{"sw future", sw, swSecret, standardHeaders("msg_1", ts+301, signStandard(swSecret, "msg_1", ts+301, body)), body, ReasonStaleTimestamp},
		{"sw at tolerance past", sw, swSecret, standardHeaders("msg_1", ts-300, signStandard(swSecret, "msg_1", ts-300, body)), body, ""},
		{"sw at tolerance future", sw, swSecret, standardHeaders("msg_1", ts+300, signStandard(swSecret, "msg_1", ts+300, body)), body, ""},
		{"sw rotation new first", sw, swSecret, standardHeaders("msg_1", ts, signStandard(swSecret2, "msg_1", ts, body)+" "+swGood), body, ""},
		{"sw rotation new last", sw, swSecret2, standardHeaders("msg_1", ts, swGood+" "+signStandard(swSecret2, "msg_1", ts, body)), body, ""},
		{"sw rotation with v1a", sw, swSecret, standardHeaders("msg_1", ts, "v1a,AAAA "+swGood), body, ""},
		{"sw rotation none match", sw, swSecret, standardHeaders("msg_1", ts, signStandard(swSecret2, "msg_1", ts, body)+" v1,AAAA"), body, ReasonSignatureMismatch},
		{"sw too many signatures", sw, swSecret, standardHeaders("msg_1", ts, strings.Repeat("v1,AAAA ", 40)+swGood), body, ReasonMalformedHeader},
		{"sw empty secret", sw, "", standardHeaders("msg_1", ts, swGood), body, ReasonNoSecret},
		{"sw unusable secret", sw, "not-whsec", standardHeaders("msg_1", ts, swGood), body, ReasonSecretUnusable},

		// stripe
		{"stripe good", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + stGood), body, ""},
		{"stripe good with v0", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + stGood + ",v0=abc"), body, ""},
		{"stripe forged", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + signStripe("whsec_other", ts, body)), body, ReasonSignatureMismatch},
		{"stripe truncated", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + stGood[:40]), body, ReasonSignatureMismatch},
		{"stripe reserialised body", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + stGood), reser, ReasonSignatureMismatch},
		{"stripe other timestamp", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts+1, 10) + ",v1=" + stGood), body, ReasonSignatureMismatch},
		{"stripe missing header", st, stSecret, hdr("X-Stripe", "t=1"), body, ReasonMissingHeader},
		{"stripe no t", st, stSecret, stripeHeader("v1=" + stGood), body, ReasonMalformedHeader},
		{"stripe two t", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",t=1,v1=" + stGood), body, ReasonMalformedHeader},
		{"stripe no v1", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v0=" + stGood), body, ReasonMalformedHeader},
		{"stripe garbage", st, stSecret, stripeHeader("garbage"), body, ReasonMalformedHeader},
		{"stripe stale", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts-301, 10) + ",v1=" + signStripe(stSecret, ts-301, body)), body, ReasonStaleTimestamp},
		{"stripe future", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts+301, 10) + ",v1=" + signStripe(stSecret, ts+301, body)), body, ReasonStaleTimestamp},
		{"stripe rotation", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + signStripe("whsec_old", ts, body) + ",v1=" + stGood), body, ""},
		{"stripe rotation none", st, stSecret, stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + signStripe("whsec_old", ts, body) + ",v1=zz"), body, ReasonSignatureMismatch},
		{"stripe empty secret", st, "", stripeHeader("t=" + strconv.FormatInt(ts, 10) + ",v1=" + signStripe("", ts, body)), body, ReasonNoSecret},

		// config
		{"unknown kind", Auth{Kind: "md5"}, "s3cret", hdr("X-Hub-Signature-256", good), body, ReasonUnsupportedKind},
		{"empty kind", Auth{}, "s3cret", hdr("X-Hub-Signature-256", good), body, ReasonUnsupportedKind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, reasonOf(t, Verify(tc.auth, tc.secret, tc.h, tc.body, now)))
		})
	}
}

func TestRejectedError(t *testing.T) {
	err := Verify(Auth{Kind: KindHMACSHA256}, "", http.Header{}, nil, time.Now())
	var r *Rejected
	require.ErrorAs(t, err, &r)
	require.Equal(t, ReasonNoSecret, r.Reason)
	require.NotContains(t, err.Error(), "s3cret")
}

func TestAuthValidate(t *testing.T) {
	tests := []struct {
		name  string
		auth  Auth
		field string // "" = valid
	}{
		{"hmac defaults", Auth{Kind: KindHMACSHA256}, ""},
		{"hmac custom", Auth{Kind: KindHMACSHA256, HeaderName: "X-Signature", Prefix: "v1="}, ""},
		{"header-secret", Auth{Kind: KindHeaderSecret, HeaderName: "X-Token"}, ""},
		{"standard-webhooks", Auth{Kind: KindStandardWebhooks}, ""},
		{"stripe", Auth{Kind: KindStripe}, ""},
		{"no kind", Auth{}, "kind"},
		{"unknown kind", Auth{Kind: "sha1"}, "kind"},
		{"kind case", Auth{Kind: "HMAC-SHA256"}, "kind"},
		{"bad header name", Auth{Kind: KindHMACSHA256, HeaderName: "X Sig"}, "headerName"},
		{"header name with colon", Auth{Kind: KindHeaderSecret, HeaderName: "X-Sig:"}, "headerName"},
		{"header name too long", Auth{Kind: KindHeaderSecret, HeaderName: strings.Repeat("x", 129)}, "headerName"},
		{"header name on stripe", Auth{Kind: KindStripe, HeaderName: "X-Sig"}, "headerName"},
		{"header name on standard", Auth{Kind: KindStandardWebhooks, HeaderName: "X-Sig"}, "headerName"},
		{"prefix on header-secret", Auth{Kind: KindHeaderSecret, Prefix: "x"}, "prefix"},
		{"prefix with space", Auth{Kind: KindHMACSHA256, Prefix: "sha256= "}, "prefix"},
		{"prefix with newline", Auth{Kind: KindHMACSHA256, Prefix: "a\nb"}, "prefix"},
		{"prefix non-ascii", Auth{Kind: KindHMACSHA256, Prefix: "é="}, "prefix"},
		{"prefix too long", Auth{Kind: KindHMACSHA256, Prefix: strings.Repeat("p", 65)}, "prefix"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.auth.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
		})
	}
}

func TestWithDefaults(t *testing.T) {
	require.Equal(t, Auth{Kind: KindHMACSHA256, HeaderName: "x-hub-signature-256", Prefix: "sha256="}, Auth{Kind: KindHMACSHA256}.WithDefaults())
	require.Equal(t, Auth{Kind: KindHMACSHA256, HeaderName: "X-Sig", Prefix: "v1="}, Auth{Kind: KindHMACSHA256, HeaderName: "X-Sig", Prefix: "v1="}.WithDefaults())
	require.Equal(t, Auth{Kind: KindHeaderSecret, HeaderName: "x-hook-secret"}, Auth{Kind: KindHeaderSecret}.WithDefaults())
	require.Equal(t, Auth{Kind: KindStripe}, Auth{Kind: KindStripe}.WithDefaults())
	require.Equal(t, Auth{Kind: KindStandardWebhooks}, Auth{Kind: KindStandardWebhooks}.WithDefaults())
}

func TestValidateSecret(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		secret string
		ok     bool
	}{
		{"hmac", KindHMACSHA256, "It's a Secret to Everybody", true},
		{"hmac max", KindHMACSHA256, strings.Repeat("s", MaxSecret), true},
		{"hmac over max", KindHMACSHA256, strings.Repeat("s", MaxSecret+1), false},
		{"empty", KindHMACSHA256, "", false},
		{"invalid utf8", KindHMACSHA256, "a\xffb", false},
		{"stripe", KindStripe, "whsec_abc123", true},
		{"header-secret", KindHeaderSecret, "tok-123", true},
		{"header-secret leading space", KindHeaderSecret, " tok", false},
		{"header-secret trailing space", KindHeaderSecret, "tok ", false},
		{"header-secret newline", KindHeaderSecret, "to\nk", false},
		{"header-secret NUL", KindHeaderSecret, "to\x00k", false},
		{"standard", KindStandardWebhooks, swSecret, true},
		{"standard no prefix", KindStandardWebhooks, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{"standard not base64", KindStandardWebhooks, "whsec_!!!", false},
		{"standard empty key", KindStandardWebhooks, "whsec_", false},
		{"unknown kind", "md5", "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateSecret(tc.kind, tc.secret)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			if len(tc.secret) > len("whsec_") {
				require.NotContains(t, err.Error(), tc.secret, "a secret is never echoed")
			}
		})
	}
}

func TestDedupeKey(t *testing.T) {
	long := strings.Repeat("k", MaxDedupeKey+1)
	tests := []struct {
		name   string
		h      http.Header
		header string
		want   string
	}{
		{"github", hdr("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"case-insensitive", hdr("webhook-id", "msg_1"), "Webhook-Id", "msg_1"},
		{"trimmed", hdr("X-Id", "  abc \t"), "X-Id", "abc"},
		{"absent", hdr("X-Other", "abc"), "X-Id", ""},
		{"blank", hdr("X-Id", "   "), "X-Id", ""},
		{"no header configured", hdr("X-Id", "abc"), "", ""},
		{"first of repeated", hdr("X-Id", "a", "X-Id", "b"), "X-Id", "a"},
		{"at bound", hdr("X-Id", long[:MaxDedupeKey]), "X-Id", long[:MaxDedupeKey]},
		{"over bound hashed", hdr("X-Id", long), "X-Id", "sha256:" + sha256Hex(long)},
		{"non-ascii hashed", hdr("X-Id", "idé"), "X-Id", "sha256:" + sha256Hex("idé")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DedupeKey(tc.h, tc.header)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), MaxDedupeKey)
		})
	}
	require.NotEqual(t, DedupeKey(hdr("X-Id", long+"a"), "X-Id"), DedupeKey(hdr("X-Id", long+"b"), "X-Id"))
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
