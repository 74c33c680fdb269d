package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// Verification kinds (docs/HOOKS-PROVIDERS.md, Verification kinds:
// standard-webhooks and stripe go beyond the specification's two).
const (
	KindHMACSHA256       = "hmac-sha256"
	KindHeaderSecret     = "header-secret"
	KindStandardWebhooks = "standard-webhooks"
	KindStripe           = "stripe"
)

// Defaults of the configurable kinds: GitHub's header and prefix, and a
// header for scripts.
const (
	DefaultHMACHeader   = "x-hub-signature-256"
	DefaultHMACPrefix   = "sha256="
	DefaultSecretHeader = "x-hook-secret"
)

// Limits of a verification config and secret.
const (
	// MaxSecret is the spec's cap on a secret: 4 KiB.
	MaxSecret = 4 << 10
	// maxHeaderName bounds a configured header name.
	maxHeaderName = 128
	// maxPrefix bounds a configured signature prefix.
	maxPrefix = 64
	// maxSignatures bounds the signatures one header may carry (several
	// are sent while a sender rotates its secret); more is malformed.
	maxSignatures = 32
	// maxTimestampDigits bounds a unix-seconds timestamp.
	maxTimestampDigits = 12
)

// Tolerance is how far the timestamp of a standard-webhooks or stripe
// delivery may be from the receiver's clock, either way.
const Tolerance = 5 * time.Minute

// Rejection reasons: the value of Rejected.Reason, as they go on a
// delivery receipt. The HTTP answer is a bare 401 whichever it is.
const (
	// ReasonNoSecret: the endpoint (or its profile) has no secret, so
	// it rejects everything.
	ReasonNoSecret = "no_secret"
	// ReasonMissingHeader: a header the kind needs is absent or empty.
	ReasonMissingHeader = "missing_header"
	// ReasonPrefixMismatch: the hmac-sha256 header does not start with
	// the configured prefix.
	ReasonPrefixMismatch = "prefix_mismatch"
	// ReasonSignatureMismatch: no signature (or, for header-secret, the
	// header value) matches the secret and the exact body.
	ReasonSignatureMismatch = "signature_mismatch"
	// ReasonMalformedHeader: a header is present but cannot be read: a
	// repeated header, a timestamp that is not unix seconds, a signature
	// list without one signature of the expected scheme, too many
	// signatures, or non-hex in an hmac-sha256 signature.
	ReasonMalformedHeader = "malformed_header"
	// ReasonStaleTimestamp: the signature matches but the signed
	// timestamp is more than Tolerance from now (a replay or a skewed
	// clock).
	ReasonStaleTimestamp = "stale_timestamp"
	// ReasonUnsupportedKind: the config names no kind this engine knows.
	ReasonUnsupportedKind = "unsupported_kind"
	// ReasonSecretUnusable: the stored secret does not fit the kind (a
	// standard-webhooks secret that is not whsec_<base64>, e.g. after
	// the kind was changed without setting a new secret).
	ReasonSecretUnusable = "secret_unusable"
)

// Auth is a verification config (docs/HOOKS-PROVIDERS.md).
type Auth struct {
	Kind       string `json:"kind"`                 // hmac-sha256 | header-secret | standard-webhooks | stripe
	HeaderName string `json:"headerName,omitempty"` // hmac-sha256 and header-secret
	Prefix     string `json:"prefix,omitempty"`     // hmac-sha256
}

// InvalidError says why a config, secret, filter or template is refused;
// Field names the offending part ("kind", "headerName", "secret", "path").
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Rejected is a delivery that failed verification; Reason is one of the
// Reason constants.
type Rejected struct{ Reason string }

func (e *Rejected) Error() string { return "hook verification failed: " + e.Reason }

func reject(reason string) error { return &Rejected{Reason: reason} }

// WithDefaults fills the defaults of a's kind: hmac-sha256 gets header
// x-hub-signature-256 and prefix "sha256=", header-secret gets header
// x-hook-secret. Other fields are left as they are.
func (a Auth) WithDefaults() Auth {
	switch a.Kind {
	case KindHMACSHA256:
		if a.HeaderName == "" {
			a.HeaderName = DefaultHMACHeader
		}
		if a.Prefix == "" {
			a.Prefix = DefaultHMACPrefix
		}
	case KindHeaderSecret:
		if a.HeaderName == "" {
			a.HeaderName = DefaultSecretHeader
		}
	}
	return a
}

// Validate checks a config at save time. The error is an *InvalidError.
// A field the kind does not use must be empty: a config that says more
// than it means is refused rather than silently ignored.
func (a Auth) Validate() error {
	switch a.Kind {
	case KindHMACSHA256, KindHeaderSecret, KindStandardWebhooks, KindStripe:
	case "":
		return invalid("kind", "required: one of %s, %s, %s, %s", KindHMACSHA256, KindHeaderSecret, KindStandardWebhooks, KindStripe)
	default:
		return invalid("kind", "unknown kind %q: want one of %s, %s, %s, %s", clip(a.Kind, 40), KindHMACSHA256, KindHeaderSecret, KindStandardWebhooks, KindStripe)
	}
	usesHeader := a.Kind == KindHMACSHA256 || a.Kind == KindHeaderSecret
	if a.HeaderName != "" {
		if !usesHeader {
			return invalid("headerName", "not used by kind %s", a.Kind)
		}
		if len(a.HeaderName) > maxHeaderName {
			return invalid("headerName", "longer than %d bytes", maxHeaderName)
		}
		if !httpguts.ValidHeaderFieldName(a.HeaderName) {
			return invalid("headerName", "not a valid HTTP header name")
		}
	}
	if a.Prefix != "" {
		if a.Kind != KindHMACSHA256 {
			return invalid("prefix", "not used by kind %s", a.Kind)
		}
		if len(a.Prefix) > maxPrefix {
			return invalid("prefix", "longer than %d bytes", maxPrefix)
		}
		for i := 0; i < len(a.Prefix); i++ {
			// Printable ASCII without space: a header value is trimmed,
			// so a prefix with spaces at its ends could never match.
			if c := a.Prefix[i]; c <= ' ' || c >= 0x7f {
				return invalid("prefix", "only printable ASCII without spaces")
			}
		}
	}
	return nil
}

// ValidateSecret checks a secret for kind at save time: present, at most
// MaxSecret bytes, valid UTF-8; header-secret wants a value that can
// travel in a header verbatim (no control characters, no spaces at its
// ends, which HTTP trims); standard-webhooks wants whsec_<base64> whose
// decoded bytes are the key. The error is an *InvalidError.
func ValidateSecret(kind, secret string) error {
	if secret == "" {
		return invalid("secret", "required")
	}
	if len(secret) > MaxSecret {
		return invalid("secret", "longer than %d bytes", MaxSecret)
	}
	if !utf8.ValidString(secret) {
		return invalid("secret", "not valid UTF-8")
	}
	switch kind {
	case KindHMACSHA256, KindStripe:
		return nil
	case KindHeaderSecret:
		if strings.TrimSpace(secret) != secret {
			return invalid("secret", "has spaces at its ends, which HTTP trims from a header value")
		}
		if !httpguts.ValidHeaderFieldValue(secret) {
			return invalid("secret", "has characters a header value cannot carry")
		}
		return nil
	case KindStandardWebhooks:
		if _, err := standardKey(secret); err != nil {
			return invalid("secret", "%v", err)
		}
		return nil
	default:
		return invalid("kind", "unknown kind %q", clip(kind, 40))
	}
}

// standardKey decodes a standard-webhooks secret whsec_<base64>.
func standardKey(secret string) ([]byte, error) {
	const p = "whsec_"
	if !strings.HasPrefix(secret, p) {
		return nil, fmt.Errorf("a standard-webhooks secret is whsec_<base64>")
	}
	key, err := base64.StdEncoding.DecodeString(secret[len(p):])
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("the part after whsec_ is not non-empty standard base64")
	}
	return key, nil
}

// Verify checks one delivery over its exact raw bytes, in constant time
// where a secret is involved, failing closed; an empty secret rejects.
// a is read with its defaults (WithDefaults). now is the receiver's clock
// for the timestamped kinds. The error is a *Rejected whose Reason is one
// of the Reason constants (it goes on the receipt; the HTTP answer is a
// bare 401 whatever the reason).
func Verify(a Auth, secret string, h http.Header, body []byte, now time.Time) error {
	a = a.WithDefaults()
	switch a.Kind {
	case KindHMACSHA256, KindHeaderSecret, KindStandardWebhooks, KindStripe:
	default:
		return reject(ReasonUnsupportedKind)
	}
	if secret == "" {
		return reject(ReasonNoSecret)
	}
	switch a.Kind {
	case KindHMACSHA256:
		return verifyHMAC(a, secret, h, body)
	case KindHeaderSecret:
		return verifyHeaderSecret(a, secret, h)
	case KindStandardWebhooks:
		return verifyStandard(secret, h, body, now)
	default:
		return verifyStripe(secret, h, body, now)
	}
}

// single is the one value of header name: absent or empty is
// missing_header, repeated is malformed_header (two values would make it
// ambiguous which one was checked).
func single(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0:
		return "", reject(ReasonMissingHeader)
	case len(vs) > 1:
		return "", reject(ReasonMalformedHeader)
	}
	v := strings.TrimSpace(vs[0])
	if v == "" {
		return "", reject(ReasonMissingHeader)
	}
	return v, nil
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func verifyHMAC(a Auth, secret string, h http.Header, body []byte) error {
	v, err := single(h, a.HeaderName)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(v, a.Prefix) {
		return reject(ReasonPrefixMismatch)
	}
	got, err := hex.DecodeString(v[len(a.Prefix):])
	if err != nil {
		return reject(ReasonMalformedHeader)
	}
	// hmac.Equal is constant-time in the contents; a wrong length (a
	// truncated signature) is simply unequal.
	if !hmac.Equal(got, mac([]byte(secret), body)) {
		return reject(ReasonSignatureMismatch)
	}
	return nil
}

func verifyHeaderSecret(a Auth, secret string, h http.Header) error {
	v, err := single(h, a.HeaderName)
	if err != nil {
		return err
	}
	// Comparing digests keeps even the secret's length out of the timing.
	gv, ws := sha256.Sum256([]byte(v)), sha256.Sum256([]byte(secret))
	if !hmac.Equal(gv[:], ws[:]) {
		return reject(ReasonSignatureMismatch)
	}
	return nil
}

// timestamp reads unix seconds: decimal digits only, bounded.
func timestamp(s string) (time.Time, bool) {
	if s == "" || len(s) > maxTimestampDigits {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

func fresh(ts, now time.Time) bool {
	d := now.Sub(ts)
	return d <= Tolerance && d >= -Tolerance
}

// verifyStandard is Standard Webhooks' symmetric scheme: webhook-signature
// is a space-separated list of "v1,<base64 HMAC-SHA256 of id.ts.body>"
// keyed with the decoded whsec_ secret; any one matching passes.
// Signatures of other versions (v1a is asymmetric) are ignored.
func verifyStandard(secret string, h http.Header, body []byte, now time.Time) error {
	id, err := single(h, "webhook-id")
	if err != nil {
		return err
	}
	tsText, err := single(h, "webhook-timestamp")
	if err != nil {
		return err
	}
	sigs, err := single(h, "webhook-signature")
	if err != nil {
		return err
	}
	ts, ok := timestamp(tsText)
	if !ok {
		return reject(ReasonMalformedHeader)
	}
	key, err := standardKey(secret)
	if err != nil {
		return reject(ReasonSecretUnusable)
	}
	want := mac(key, []byte(id), []byte("."), []byte(tsText), []byte("."), body)
	fields := strings.Fields(sigs)
	if len(fields) > maxSignatures {
		return reject(ReasonMalformedHeader)
	}
	seen, match := 0, false
	for _, f := range fields {
		version, sig, ok := strings.Cut(f, ",")
		if !ok || version != "v1" {
			continue
		}
		seen++
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		// No early exit: every candidate is compared.
		if hmac.Equal(got, want) {
			match = true
		}
	}
	if seen == 0 {
		return reject(ReasonMalformedHeader)
	}
	if !match {
		return reject(ReasonSignatureMismatch)
	}
	if !fresh(ts, now) {
		return reject(ReasonStaleTimestamp)
	}
	return nil
}

// verifyStripe is Stripe's scheme: Stripe-Signature is
// "t=<unix>,v1=<hex HMAC-SHA256 of t.body>[,v1=...]" keyed with the whole
// secret string (whsec_ included, as Stripe's libraries do); any v1
// matching passes. Other schemes (v0) are ignored.
func verifyStripe(secret string, h http.Header, body []byte, now time.Time) error {
	v, err := single(h, "Stripe-Signature")
	if err != nil {
		return err
	}
	items := strings.Split(v, ",")
	if len(items) > maxSignatures+1 {
		return reject(ReasonMalformedHeader)
	}
	var tsText string
	var sigs []string
	for _, it := range items {
		k, val, ok := strings.Cut(strings.TrimSpace(it), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if tsText != "" {
				return reject(ReasonMalformedHeader)
			}
			tsText = val
		case "v1":
			sigs = append(sigs, val)
		}
	}
	ts, ok := timestamp(tsText)
	if !ok || len(sigs) == 0 {
		return reject(ReasonMalformedHeader)
	}
	want := mac([]byte(secret), []byte(tsText), []byte("."), body)
	match := false
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			match = true
		}
	}
	if !match {
		return reject(ReasonSignatureMismatch)
	}
	if !fresh(ts, now) {
		return reject(ReasonStaleTimestamp)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
