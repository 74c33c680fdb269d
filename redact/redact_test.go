package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	secret = "s3cr3t-Value+/x" // base64 std and url differ on it; '+' and '/' percent-encode
	token  = "svc_Ab3dEfGhIjKlMnOpQrStUvWxYz0123456789-_abcd"
)

// unicodeEscaped spells every byte of s as a \u escape.
func unicodeEscaped(s string) string {
	var sb strings.Builder
	for _, r := range s {
		fmt.Fprintf(&sb, `\u%04x`, r)
	}
	return sb.String()
}

// percentAll percent-encodes every byte of s, lower-case hex.
func percentAll(s string) string {
	var sb strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&sb, "%%%02x", s[i])
	}
	return sb.String()
}

// b64At is the base64 of s placed k bytes into longer data, with the
// bytes around it.
func b64At(s string, k int, enc *base64.Encoding) string {
	return enc.EncodeToString([]byte(strings.Repeat("Q", k) + s + "tail bytes"))
}

func TestRedactEncodings(t *testing.T) {
	r := New(secret)
	for _, tc := range []struct {
		name, in string
		// gone must not be in the output (besides the secret itself).
		gone string
		json bool // the input is JSON and must stay JSON
	}{
		{name: "plain text", in: "the key is " + secret + ", keep it"},
		{name: "json string", in: `{"a":"x ` + secret + ` y"}`, json: true},
		{name: "json key", in: `{"` + secret + `":1}`, json: true},
		{name: "json every character escaped", in: `{"a":"` + unicodeEscaped(secret) + `"}`, gone: unicodeEscaped(secret), json: true},
		{name: "json split by one escape", in: `{"a":"s3cr\u0033t-Value+\/x"}`, gone: `s3cr\u0033t`, json: true},
		{name: "json in a json string", in: mustJSON(t, map[string]string{"body": `{"k":"` + unicodeEscaped(secret) + `"}`}), gone: "0073", json: true},
		{name: "truncated json", in: `{"a":"` + unicodeEscaped(secret) + `","b":"more te`, gone: unicodeEscaped(secret)},
		{name: "base64 std padded", in: "x " + base64.StdEncoding.EncodeToString([]byte(secret)) + " y", gone: base64.StdEncoding.EncodeToString([]byte(secret))},
		{name: "base64 url unpadded", in: base64.RawURLEncoding.EncodeToString([]byte(secret)), gone: base64.RawURLEncoding.EncodeToString([]byte(secret))},
		{name: "base64 std at offset 1", in: b64At(secret, 1, base64.StdEncoding), gone: "czNjcjN0"},
		{name: "base64 std at offset 2", in: b64At(secret, 2, base64.StdEncoding)},
		{name: "base64 url at offset 4", in: b64At(secret, 4, base64.URLEncoding)},
		{name: "base64 in json", in: `{"auth":"Basic ` + base64.StdEncoding.EncodeToString([]byte("user:"+secret)) + `"}`, json: true},
		{name: "base64 percent-encoded", in: "?k=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(secret))), gone: "%2F"},
		{name: "query escaped", in: "https://h/?k=" + url.QueryEscape(secret) + "&n=1", gone: url.QueryEscape(secret)},
		{name: "path escaped", in: "https://h/" + url.PathEscape(secret), gone: url.PathEscape(secret)},
		{name: "every byte percent-encoded", in: "a=" + percentAll(secret), gone: percentAll(secret)},
		{name: "percent-encoded inside json escapes", in: `{"u":"` + unicodeEscaped(url.QueryEscape(secret)) + `"}`, json: true},
		{name: "json escapes inside percent-encoding", in: "q=" + url.QueryEscape(`{"k":"`+unicodeEscaped(secret)+`"}`)},
		{name: "secret twice, overlapping text", in: secret + secret[:4] + secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := r.String(tc.in)
			require.NotContains(t, out, secret)
			require.Contains(t, out, Redacted)
			if tc.gone != "" {
				require.NotContains(t, out, tc.gone)
			}
			if tc.json {
				require.True(t, json.Valid([]byte(out)), "%s", out)
				require.False(t, decodedStrings(t, out).Has(secret), "%s", out)
			}
			require.Equal(t, out, r.String(out), "redacting again changes nothing")
		})
	}
}

func TestRedactBase64EveryOffset(t *testing.T) {
	for _, sec := range []string{"abcdefgh", "abcdefghi", "abcdefghij", secret} {
		r := New(sec)
		for k := range 6 {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
				data := []byte(strings.Repeat("\xfe", k) + sec + strings.Repeat("\xff", k%3))
				in := enc.EncodeToString(data)
				out := r.String(in)
				require.Contains(t, out, Redacted, "%q at %d: %s", sec, k, in)
				// What is left of the base64 decodes to no part of the
				// secret longer than a third of it.
				for _, run := range strings.Split(out, Redacted) {
					dec, _ := enc.DecodeString(run)
					require.NotContains(t, string(dec), sec[:len(sec)/3+2], "%q at %d", sec, k)
				}
			}
		}
	}
}

func TestRedactNumbers(t *testing.T) {
	r := New("12345678")
	for _, tc := range []struct{ name, in, want string }{
		{name: "json number", in: `{"pin":12345678,"n":1}`, want: `{"pin":"[REDACTED]","n":1}`},
		{name: "exponent form", in: `[1.2345678e7, 2]`, want: `["[REDACTED]", 2]`},
		{name: "fraction form", in: `{"a":12345678.0}`, want: `{"a":"[REDACTED]"}`},
		{name: "inside a longer number", in: `{"a":9123456789}`, want: `{"a":"[REDACTED]"}`},
		{name: "negative", in: `{"a":-12345678}`, want: `{"a":"[REDACTED]"}`},
		{name: "in a string", in: `{"a":"pin 12345678 ok"}`, want: `{"a":"pin [REDACTED] ok"}`},
		{name: "attribute rendered as a float", in: "1.2345678e+07", want: Redacted},
		{name: "other numbers stay", in: `{"a":12345679,"b":1234567}`, want: `{"a":12345679,"b":1234567}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, r.String(tc.in))
		})
	}
	// A large numeric secret stored as a double loses digits: it is still
	// found by value.
	big := New("12345678901234567890")
	require.Equal(t, `{"a":"[REDACTED]"}`, big.String(`{"a":1.2345678901234567e+19}`))
}

func TestRedactTokens(t *testing.T) {
	var none *Redactor
	for _, tc := range []struct{ name, in, want string }{
		{name: "bare", in: "token " + token + " end", want: "token [REDACTED] end"},
		{name: "header", in: "Authorization=Bearer " + token, want: "Authorization=Bearer [REDACTED]"},
		{name: "json", in: `{"h":"` + token + `"}`, want: `{"h":"[REDACTED]"}`},
		{name: "json escaped", in: `{"h":"\u0073vc_Ab3dEfGhIjKlMnOpQrSt"}`, want: `{"h":"[REDACTED]"}`},
		{name: "percent-encoded", in: "t=%73vc_Ab3dEfGhIjKlMnOpQrSt&x=1", want: "t=[REDACTED]&x=1"},
		{name: "metric name stays", in: "svc_otlp_records_total and svc_hook_deliveries_total", want: "svc_otlp_records_total and svc_hook_deliveries_total"},
		{name: "cookie name stays", in: "svc_session=abc", want: "svc_session=abc"},
		{name: "short body stays", in: "svc_Ab3dEf", want: "svc_Ab3dEf"},
		{name: "prefix repeated", in: "svc_svc_Ab3dEfGhIjKlMnOpQrSt", want: Redacted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, none.String(tc.in))
			require.Equal(t, tc.want, New().String(tc.in))
		})
	}
}

func TestRedactSecretLengths(t *testing.T) {
	require.Equal(t, "a b c abcdefg", New("a", "abcdefg").String("a b c abcdefg"), "shorter than MinSecretLen: kept")
	require.Equal(t, "x [REDACTED]", New("abcdefgh").String("x abcdefgh"))
	require.Equal(t, "k=[REDACTED];", New("abcdefgh\n").String("k=abcdefgh;"), "found without its trailing newline")
	require.Equal(t, "[REDACTED]", New("longsecretvalue", "secretva").String("longsecretvalue"), "the longer secret goes whole")
	require.Equal(t, "plain", New("", "        ").String("plain"))
}

func TestRedactSpecialCharacters(t *testing.T) {
	sec := "line1\nline2\t\"quoted\"\\end"
	r := New(sec)
	in := mustJSON(t, map[string]any{"pem": sec, "nested": mustJSON(t, map[string]string{"k": sec})})
	out := r.String(in)
	require.True(t, json.Valid([]byte(out)), "%s", out)
	require.False(t, decodedStrings(t, out).Has(sec), "%s", out)
	require.NotContains(t, out, `line1\nline2`)
	require.Equal(t, "a [REDACTED] b", r.String("a "+sec+" b"))
}

func TestRedactKeepsUnmatched(t *testing.T) {
	r := New(secret)
	for _, in := range []string{"", "plain text", `{"a":[1,2,{"b":"c\u00e9\n"}]}`, "%zz%2", `\u12`, `\ud800`, "\xff\xfe"} {
		require.Equal(t, in, r.String(in))
		b := []byte(in)
		require.Equal(t, in, string(r.Bytes(b)))
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// decodedStrings is every string (keys included) of a JSON document,
// decoded, and of the JSON documents quoted in them (one level down: the
// two layers of escaping the engine looks through).
func decodedStrings(t testing.TB, doc string) strs {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber() // 1e700 is JSON, and no float64
	var v any
	require.NoError(t, dec.Decode(&v))
	var out strs
	var walk func(any, int)
	walk = func(v any, depth int) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
			var inner any
			if depth == 0 && json.Unmarshal([]byte(x), &inner) == nil {
				walk(inner, depth+1)
			}
		case []any:
			for _, e := range x {
				walk(e, depth)
			}
		case map[string]any:
			for k, e := range x {
				out = append(out, k)
				walk(e, depth)
			}
		}
	}
	walk(v, 0)
	return out
}

// strs is a list of strings that tells whether one of them holds a text.
type strs []string

func (ss strs) Has(sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestRedactEchoes: with Options.Echoes the engine also finds a secret
// hex-encoded, reversed, in another case, URL-encoded and split across
// JSON string values; without it, none of those (the telemetry paths keep
// New's forms and cost).
func TestRedactEchoes(t *testing.T) {
	hexed := hex.EncodeToString([]byte(secret))
	rev := "x/+eulaV-t3rc3s"
	for _, tc := range []struct {
		name, in, gone string
		json, plainToo bool // plainToo: New finds it as well
	}{
		{name: "upper case", in: "k=" + strings.ToUpper(secret), gone: strings.ToUpper(secret)},
		{name: "lower case", in: "k=" + strings.ToLower(secret) + ";", gone: strings.ToLower(secret)},
		{name: "reversed", in: "k=" + rev, gone: rev},
		{name: "reversed upper case", in: "k=" + strings.ToUpper(rev), gone: strings.ToUpper(rev)},
		{name: "hex", in: "k=" + hexed, gone: hexed},
		{name: "hex upper case", in: "k=" + strings.ToUpper(hexed), gone: strings.ToUpper(hexed)},
		{name: "hex in a JSON string", in: `{"k":"` + strings.ToUpper(hexed) + `"}`, gone: strings.ToUpper(hexed), json: true},
		{name: "URL-encoded after a percent sign", in: "%" + url.QueryEscape(secret), gone: url.QueryEscape(secret), plainToo: true},
		{name: "split across array strings", in: `["s3cr3t","-Value+","/x"]`, gone: `s3cr3t","-Value+","/x`, json: true},
		{name: "split across object values", in: `{"a":"s3cr3t-Va","b":{"c":"lue+\/x"}}`, gone: `lue+\/x`, json: true},
		{name: "split upper case", in: `["S3CR3T-VA","LUE+/X"]`, gone: `LUE+/X`, json: true},
		{name: "as is", in: "k=" + secret, gone: secret, plainToo: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := NewWith(Options{Echoes: true}, secret).String(tc.in)
			require.NotContains(t, out, tc.gone)
			require.Contains(t, out, Redacted)
			if tc.json {
				require.True(t, json.Valid([]byte(out)), out)
			}
			require.Equal(t, tc.plainToo, New(secret).String(tc.in) != tc.in, "New alone")
		})
	}
	t.Run("a key between pieces is not joined", func(t *testing.T) {
		in := `{"s3cr3t-Va":"lue+/x"}`
		require.Equal(t, in, NewWith(Options{Echoes: true}, secret).String(in))
	})
	t.Run("a secret the marker spells converges", func(t *testing.T) {
		require.Equal(t, "a [REDACTED] b", NewWith(Options{Echoes: true}, "REDACTED").String("a REDACTED b"))
		require.Equal(t, "a [REDACTED] b", NewWith(Options{Echoes: true}, "redacted").String("a [REDACTED] b"))
	})
}
