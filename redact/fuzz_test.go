package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// markerSafe reports whether no output can spell sec by the marker's own
// characters meeting the text around it: a secret holding '[', ']', '"'
// or the word REDACTED could be rebuilt by "[REDACTED]" and its neighbours.
func markerSafe(sec string) bool {
	return !strings.ContainsAny(sec, `[]"`) && !strings.Contains(sec, "REDACTED")
}

// FuzzRedactInserted puts a secret, in one of the encodings the engine
// promises, at any place of any text, and checks that neither the secret
// nor its encoding survives, that JSON stays JSON, and that redacting
// again changes nothing.
func FuzzRedactInserted(f *testing.F) {
	f.Add("some text around", secret, uint(5), uint8(0))
	f.Add(`{"a":"b"}`, "12345678", uint(3), uint8(1))
	f.Add("", "\x00\x00\x00\x00\x00\x00\x00\x00", uint(0), uint8(2))
	f.Add("AAAA", "é漢字é漢字é漢字", uint(1), uint8(3))
	f.Add("x", "aaaaaaaaaaaaaaaaaaaaaaa", uint(9), uint8(4))
	f.Add("%%%", "a b c d e f", uint(2), uint8(5))
	f.Add(`\u00`, "path/with space", uint(1), uint8(6))
	f.Add("tail", "\\\\\\\\\\\\\\\\", uint(0), uint8(7))
	f.Add("q", "svc_ABCDEFGHIJKLMNOPQ", uint(0), uint8(8))
	f.Fuzz(func(t *testing.T, text, sec string, pos uint, enc uint8) {
		if len(sec) < MinSecretLen || !markerSafe(sec) || len(text) > 4096 || len(sec) > 512 {
			return
		}
		p := int(pos % uint(len(text)+1))
		r := New(sec)
		var doc, encoded string
		isJSON, percent, plus := false, false, false
		switch enc % 9 {
		case 0:
			encoded = sec
			doc = text[:p] + sec + text[p:]
		case 1: // a JSON string as encoding/json writes it
			if !utf8.ValidString(sec) {
				return
			}
			b, _ := json.Marshal(map[string]string{"k": text[:p] + sec + text[p:]})
			doc, isJSON = string(b), true
		case 2: // every character of the secret \u-escaped, in a JSON string
			if !utf8.ValidString(sec) {
				return
			}
			encoded = unicodeEscaped(sec)
			b, _ := json.Marshal(map[string]string{"a": text})
			doc, isJSON = `{"k":"`+encoded+`",`+string(b[1:]), true
		case 3: // base64 std at any offset of longer data
			doc = base64.StdEncoding.EncodeToString([]byte(text[:p] + sec + text[p:]))
			encoded = b64Pattern(sec, p%3, base64.RawStdEncoding).s
		case 4:
			doc = base64.RawURLEncoding.EncodeToString([]byte(text[:p] + sec + text[p:]))
			encoded = b64Pattern(sec, p%3, base64.RawURLEncoding).s
		// Percent-encoded, in a text encoded the same way (a bare '%'
		// before the secret would make another escape of its first bytes).
		// (The check is on the decoded output: "0%20" is also the end of
		// one escape and the start of the next.)
		case 5:
			doc = url.QueryEscape(text[:p]) + url.QueryEscape(sec) + url.QueryEscape(text[p:])
			percent, plus = true, true
		case 6:
			doc = url.PathEscape(text[:p]) + url.PathEscape(sec) + url.PathEscape(text[p:])
			percent = true
		case 7:
			doc = url.QueryEscape(text[:p]) + percentAll(sec) + url.QueryEscape(text[p:])
			percent, plus = true, true
		case 8: // a token where the secret was
			tok := "svc_" + base64.RawURLEncoding.EncodeToString([]byte(sec+"padding!")) + "Z9"
			r = New()
			sec, encoded = tok, tok
			doc = text[:p] + tok + text[p:]
		}
		out := r.String(doc)
		if strings.Contains(out, sec) {
			t.Fatalf("secret left in %q (from %q)", out, doc)
		}
		if encoded != "" && strings.Contains(out, encoded) {
			t.Fatalf("encoded secret %q left in %q", encoded, out)
		}
		if dec, _ := unescapePercent(out, plus, false); percent && strings.Contains(dec, sec) {
			t.Fatalf("secret left in %q decoded: %q", out, dec)
		}
		if isJSON {
			if !json.Valid([]byte(out)) {
				t.Fatalf("not JSON any more: %q", out)
			}
			if decodedStrings(t, out).Has(sec) {
				t.Fatalf("secret left in the decoded strings of %q", out)
			}
		}
		if again := r.String(out); again != out {
			t.Fatalf("redacting again changed %q to %q", out, again)
		}
	})
}

// FuzzRedactJSON redacts any secret from any JSON document (an object, an
// array or a string; a bare number is text): the result is
// JSON, and no string of it, decoded, holds the secret, whatever escapes
// spelled it (as long as the secret holds no JSON punctuation or white
// space, which could only match across values).
func FuzzRedactJSON(f *testing.F) {
	f.Add(`{"a":"s3cr3t-Value+/x","b":[1,2,3]}`, secret)
	f.Add(`[12345678, 1.2345678e7, "12345678"]`, "12345678")
	f.Add(`{"k":"\u0073\u0033cr3t-Value+\/x"}`, secret)
	f.Add(`{"t":"svc_Ab3dEfGhIjKlMnOpQrSt"}`, "abcdefgh")
	f.Add(`{"nested":"{\"k\":\"\\u0061bcdefgh\"}"}`, "abcdefgh")
	f.Add(`"abc\ud83d\ude00defgh"`, "defghijk")
	f.Fuzz(func(t *testing.T, doc, sec string) {
		if len(doc) > 8192 || !json.Valid([]byte(doc)) || !looksJSON(doc) {
			return // a bare number or literal is taken as text
		}
		r := New(sec)
		out := r.String(doc)
		if strings.ContainsAny(sec, "{}[],:\" \t\r\n") || !markerSafe(sec) || strings.TrimSpace(sec) != sec {
			return // matches may cross values; the output need not be JSON
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("not JSON any more: %q -> %q", doc, out)
		}
		if len(sec) >= MinSecretLen && utf8.ValidString(sec) && decodedStrings(t, out).Has(sec) {
			t.Fatalf("secret left in %q", out)
		}
	})
}
