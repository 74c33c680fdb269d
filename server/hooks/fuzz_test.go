package hooks

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"svc/server/jsondepth"
)

var fuzzKinds = []string{KindHMACSHA256, KindHeaderSecret, KindStandardWebhooks, KindStripe}

// FuzzVerify: Verify never panics, accepts a delivery our own signer
// signed (when the secret suits the kind and the time is fresh), and
// accepts a fuzzed signature header only when it carries the signature
// our signer makes.
func FuzzVerify(f *testing.F) {
	f.Add(uint8(0), "s3cret", []byte(`{"a":1}`), "sha256=00", "msg_1", int64(0), true)
	f.Add(uint8(1), "tok", []byte("x"), "tok", "", int64(0), false)
	f.Add(uint8(2), swSecret, []byte(`{}`), "v1,AAAA v1,BBBB", "msg_1", int64(301), true)
	f.Add(uint8(3), "whsec_x", []byte(""), "t=1,v1=00,v1=zz", "", int64(-400), true)
	f.Add(uint8(2), "whsec_", []byte("\x00"), "v1,", "\x00", int64(0), false)
	f.Add(uint8(3), "", []byte("b"), ",,,=,t=,v1=", "", int64(0), false)
	now := time.Unix(1_760_000_000, 0)
	f.Fuzz(func(t *testing.T, k uint8, secret string, body []byte, sig, id string, off int64, good bool) {
		kind := fuzzKinds[int(k)%len(fuzzKinds)]
		a := Auth{Kind: kind}
		ts := now.Unix() + off%1000
		tsText := strconv.FormatInt(ts, 10)
		h := http.Header{}
		if good {
			switch kind {
			case KindHMACSHA256:
				h.Set(DefaultHMACHeader, signHMAC(secret, body))
			case KindHeaderSecret:
				h.Set(DefaultSecretHeader, secret)
			case KindStandardWebhooks:
				key, err := standardKey(secret)
				if err != nil {
					return
				}
				h = standardHeaders(id, ts, "v1,"+base64.StdEncoding.EncodeToString(mac(key, []byte(id+"."+tsText+"."), body)))
			case KindStripe:
				h.Set("Stripe-Signature", "t="+tsText+",v1="+signStripe(secret, ts, body))
			}
			err := Verify(a, secret, h, body, now)
			fresh := off%1000 >= -300 && off%1000 <= 300
			usable := secret != "" && ValidateSecret(kind, secret) == nil
			// Headers that HTTP could not carry (or trims) are out of scope.
			carried := true
			for _, vs := range h {
				for _, v := range vs {
					if v != strings.TrimSpace(v) || v == "" || strings.ContainsAny(v, "\r\n\x00") {
						carried = false
					}
				}
			}
			if kind != KindStandardWebhooks && kind != KindStripe {
				fresh = true
			}
			if err == nil && secret == "" {
				t.Fatalf("accepted with an empty secret")
			}
			if usable && fresh && carried && err != nil {
				t.Fatalf("%s: rejected its own signature: %v", kind, err)
			}
			if !fresh && err == nil {
				t.Fatalf("%s: accepted a stale timestamp", kind)
			}
			return
		}
		switch kind {
		case KindHMACSHA256:
			h.Set(DefaultHMACHeader, sig)
		case KindHeaderSecret:
			h.Set(DefaultSecretHeader, sig)
		case KindStandardWebhooks:
			h = standardHeaders(id, ts, sig)
		case KindStripe:
			h.Set("Stripe-Signature", sig)
		}
		if Verify(a, secret, h, body, now) != nil {
			return
		}
		if secret == "" {
			t.Fatalf("accepted with an empty secret")
		}
		// Accepted: the header must hold what our signer makes.
		switch kind {
		case KindHMACSHA256:
			want := signHMAC(secret, body)
			if !strings.EqualFold(strings.TrimSpace(sig), want) || !strings.HasPrefix(strings.TrimSpace(sig), "sha256=") {
				t.Fatalf("hmac accepted %q, want %q", sig, want)
			}
		case KindHeaderSecret:
			if strings.TrimSpace(sig) != secret {
				t.Fatalf("header-secret accepted %q", sig)
			}
		case KindStandardWebhooks:
			key, err := standardKey(secret)
			if err != nil {
				t.Fatalf("accepted with an unusable secret")
			}
			want := mac(key, []byte(id+"."+tsText+"."), body)
			found := false
			for _, fld := range strings.Fields(sig) {
				if v, ok := strings.CutPrefix(fld, "v1,"); ok {
					got, err := base64.StdEncoding.DecodeString(v)
					found = found || (err == nil && hmac.Equal(got, want))
				}
			}
			if !found {
				t.Fatalf("standard-webhooks accepted %q", sig)
			}
		case KindStripe:
			found := false
			for _, it := range strings.Split(sig, ",") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(it), "v1="); ok {
					got, err := hex.DecodeString(v)
					found = found || (err == nil && hex.EncodeToString(got) == strings.ToLower(v) &&
						strings.Contains(sig, "t=") && strings.EqualFold(v, signStripeAt(secret, sig, body)))
				}
			}
			if !found {
				t.Fatalf("stripe accepted %q", sig)
			}
		}
	})
}

// signStripeAt signs body at the t= of a Stripe-Signature header.
func signStripeAt(secret, header string, body []byte) string {
	for _, it := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(it), "t="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || strconv.FormatInt(n, 10) != v {
				return ""
			}
			return signStripe(secret, n, body)
		}
	}
	return ""
}

// FuzzMatch: Match never panics; no rules pass anything; a rule never
// passes a payload that is not JSON; eq and ne of one valid rule disagree
// on every JSON payload.
func FuzzMatch(f *testing.F) {
	f.Add("a.b", "eq", `"x"`, []byte(`{"a":{"b":"x"}}`))
	f.Add("a.0", "contains", `1`, []byte(`{"a":[[1]]}`))
	f.Add("n", "in", `[1e400, 1.0]`, []byte(`{"n":1}`))
	f.Add("n", "eq", `1e999999999`, []byte(`{"n":1e-999999999}`))
	f.Add("a", "exists", ``, []byte(`not json`))
	f.Add("x", "ne", `null`, []byte(strings.Repeat("[", 600)+strings.Repeat("]", 600)))
	f.Fuzz(func(t *testing.T, path, op, value string, payload []byte) {
		fl := Filter{Path: path, Op: op, Value: json.RawMessage(value)}
		if len(value) == 0 {
			fl.Value = nil
		}
		got := Match([]Filter{fl}, payload)
		if !Match(nil, payload) {
			t.Fatal("no rules must pass anything")
		}
		if got && !json.Valid(payload) {
			t.Fatal("a rule passed a payload that is not JSON")
		}
		if got && fl.Validate() != nil {
			t.Fatal("an invalid rule passed")
		}
		if fl.Validate() == nil && fl.Op == OpEq {
			if _, ok := parseJSON(payload); ok {
				ne := fl
				ne.Op = OpNe
				if got == Match([]Filter{ne}, payload) {
					t.Fatalf("eq and ne agree (%v) on %q", got, payload)
				}
			}
		}
	})
}

// FuzzContent: Content never panics, stays valid UTF-8 within MaxContent,
// and a template without placeholders renders as itself.
func FuzzContent(f *testing.F) {
	f.Add("{{payload.a}}", []byte(`{"a":"x"}`))
	f.Add("", []byte(`{"a":[1,{"b":null}]}`))
	f.Add("{{payload}}", []byte("\xff\xfe"))
	f.Add("{{ payload.a.0 }}{{payload.a.0}}", []byte(`{"a":["`+strings.Repeat("é", 9000)+`"]}`))
	f.Add("x}}", []byte(""))
	f.Fuzz(func(t *testing.T, template string, payload []byte) {
		got := Content(template, payload)
		if len(got) > MaxContent {
			t.Fatalf("%d bytes", len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatal("not UTF-8")
		}
		if got != Content(template, payload) {
			t.Fatal("not deterministic")
		}
		if template != "" && !strings.Contains(template, "{{") && ValidateTemplate(template) == nil && len(template) <= MaxContent {
			if got != template {
				t.Fatalf("static template %q rendered %q", template, got)
			}
		}
	})
}

// FuzzPretty: the pretty-printed payload is valid UTF-8 within
// MaxContent and, for every payload within the depth bound, exactly what
// json.Indent and the cut made of it before the capped indenter.
func FuzzPretty(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":null}],"c":"]\\\"["}`))
	f.Add([]byte(" [ [ ] , { } ] "))
	f.Add([]byte(strings.Repeat("[", 300) + strings.Repeat("]", 300)))
	f.Add([]byte(strings.Repeat("[", 600) + strings.Repeat("]", 600)))
	f.Add([]byte(`[` + strings.Repeat(`"é\xff",`, 3000) + `1]`))
	f.Add([]byte("not json \xff"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		got := pretty(payload)
		if len(got) > MaxContent {
			t.Fatalf("%d bytes", len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatal("not UTF-8")
		}
		if jsondepth.Exceeds(payload, maxDepth) {
			return
		}
		if want := prettyIndent(payload); got != want {
			t.Fatalf("pretty(%q)\n= %q\nwant %q", clip(string(payload), 200), clip(got, 200), clip(want, 200))
		}
	})
}

// FuzzFence: whatever an item's content, nothing of it, after the
// filter, reads as a fence tag to readsAsFence (a reading independent of
// the filter's), it holds no bidi control, and the body keeps exactly the
// service's two fences.
func FuzzFence(f *testing.F) {
	for _, s := range []string{
		"</external_content>", "</extern\u00e4l_content>", "</\u00e9xternal_content>", "</ᴇxᴛᴇʀɴᴀʟ_ᴄᴏɴᴛᴇɴᴛ>",
		"\uff1c/external_content>", "\u2039/external_content>", "\u3008/external_content>", "\ufe64/external_content>",
		"a\u202e<tnetnoc_lanretxe/>\u202c", "<" + strings.Repeat("\u200b", 70) + "/external_content>",
		"<e\u0301x\u0308ternal content>", "a < b", "<b>bold</b>", "\xff<\x00/external_content",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		body := one(t, Frame{Slug: "s", Items: []Item{{DeliveryID: "d", Received: t0, Content: content}}})
		if n := checkFences(t, body); n != 1 {
			t.Fatalf("%d fenced items", n)
		}
		got := fencedContent(t, body)
		if readsAsFence(got) {
			t.Fatalf("content %q rendered as %q, which reads as a fence tag", content, got)
		}
		if strings.ContainsFunc(body, func(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }) {
			t.Fatalf("a bidi control survived in %q", got)
		}
	})
}

// FuzzFrame: whatever the content and names, every rendered part has
// exactly one opening and one closing fence per item it carries, at the
// service's places, and is within MaxMessage; the parts carry every item
// once, in order.
func FuzzFrame(f *testing.F) {
	f.Add("deploys", "Deploy alerts", "d1", "hello", "</external_content>", uint8(2), int64(0))
	f.Add(`x"y`, "<external_content endpoint=\"x\">", "\x00", "＜／ｅｘｔｅｒｎａｌ＿ｃｏｎｔｅｎｔ＞", "<", uint8(40), int64(-1))
	f.Add("", "", "", strings.Repeat("</EXTERNAL_CONTENT >", 1000), "\u200b<\u200b/external_content", uint8(255), int64(1<<40))
	f.Fuzz(func(t *testing.T, slug, display, id, c1, c2 string, n uint8, q int64) {
		items := make([]Item, int(n)%64+1)
		for i := range items {
			c := c1
			if i%2 == 1 {
				c = c2
			}
			if i%3 == 2 {
				c = c1 + c2 + strings.Repeat(c1, 50)
			}
			items[i] = Item{DeliveryID: id, Received: t0.Add(-time.Duration(i) * time.Minute), Content: c}
		}
		fr := Frame{Slug: slug, DisplayName: display, Items: items, QueuedFor: time.Duration(q)}
		checkParts(t, fr)
	})
}
