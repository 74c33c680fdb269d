package toolcall

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string // JSON
		secrets []string
		want    string // JSON
	}{
		{name: "string", in: `"token abc123 and abc123"`, secrets: []string{"abc123"}, want: `"token [REDACTED] and [REDACTED]"`},
		{name: "nested", in: `{"a":[{"b":"xabc123y"},"abc123",1,true,null],"c":{"d":"none"}}`, secrets: []string{"abc123"},
			want: `{"a":[{"b":"x[REDACTED]y"},"[REDACTED]",1,true,null],"c":{"d":"none"}}`},
		{name: "map key", in: `{"abc123":"v"}`, secrets: []string{"abc123"}, want: `{"[REDACTED]":"v"}`},
		{name: "several secrets", in: `["one two three"]`, secrets: []string{"one", "three"}, want: `["[REDACTED] two [REDACTED]"]`},
		{name: "secret inside another", in: `"xsecretlongx secret"`, secrets: []string{"secret", "secretlong"}, want: `"x[REDACTED]x [REDACTED]"`},
		{name: "secret that is part of the marker", in: `"RED abcd"`, secrets: []string{"abcd", "RED"}, want: `"[REDACTED] [REDACTED]"`},
		{name: "empty secret ignored", in: `"abc"`, secrets: []string{""}, want: `"abc"`},
		{name: "no secrets", in: `{"a":"abc"}`, want: `{"a":"abc"}`},
		{name: "numbers untouched", in: `[123,1.5]`, secrets: []string{"123"}, want: `[123,1.5]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v any
			require.NoError(t, json.Unmarshal([]byte(tc.in), &v))
			got := Redact(v, tc.secrets...)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
			// The input is untouched: a deep copy.
			b, err = json.Marshal(v)
			require.NoError(t, err)
			require.JSONEq(t, tc.in, string(b))
		})
	}
}

func TestRedactCopies(t *testing.T) {
	t.Parallel()
	in := map[string]any{"a": []any{"x"}, "m": map[string]any{"k": "v"}}
	out := Redact(in, "zzz").(map[string]any)
	out["a"].([]any)[0] = "changed"
	out["m"].(map[string]any)["k"] = "changed"
	require.Equal(t, "x", in["a"].([]any)[0])
	require.Equal(t, "v", in["m"].(map[string]any)["k"])
	require.Equal(t, json.Number("5"), Redact(json.Number("5"), "5"))
	require.Nil(t, Redact(nil, "x"))
}

// echoSecret is a credential whose base64 differs between the standard
// and URL alphabets, with letters of both cases.
const echoSecret = "sk_Live-4f9K+a/Zq~Yw8>"

// asciiSwapCase swaps the case of the ASCII letters of s.
func asciiSwapCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// asciiUpper and asciiLower change the case of the ASCII letters of s
// only, as the engine reads case (a credential is a header value).
func asciiUpper(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r + 'A' - 'a'
		}
		return r
	}, s)
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func reversed(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// echoForms are the encodings an upstream may echo a credential in, by
// name; fold marks those found in any case.
func echoForms(sec string) []struct {
	name, s string
	fold    bool
} {
	return []struct {
		name, s string
		fold    bool
	}{
		{"as is", sec, true},
		{"upper case", asciiUpper(sec), true},
		{"lower case", asciiLower(sec), true},
		{"swapped case", asciiSwapCase(sec), true},
		{"reversed", reversed(sec), true},
		{"reversed upper case", asciiUpper(reversed(sec)), true},
		{"hex", hex.EncodeToString([]byte(sec)), true},
		{"hex upper case", strings.ToUpper(hex.EncodeToString([]byte(sec))), true},
		{"base64 standard", base64.StdEncoding.EncodeToString([]byte(sec)), false},
		{"base64 URL", base64.URLEncoding.EncodeToString([]byte(sec)), false},
		{"base64 URL unpadded", base64.RawURLEncoding.EncodeToString([]byte(sec)), false},
		{"URL-encoded", url.QueryEscape(sec), false},
		{"URL-encoded path", url.PathEscape(sec), false},
	}
}

// leak names the echo of sec that out still holds, or "": any form of
// echoForms, and sec in any case (of its ASCII letters) or reversed in
// the strings of out, read as JSON, joined.
func leak(out, sec string) string {
	low := asciiLower(out)
	for _, f := range echoForms(sec) {
		if f.fold && strings.Contains(low, asciiLower(f.s)) || !f.fold && strings.Contains(out, f.s) {
			return f.name
		}
	}
	d := json.NewDecoder(strings.NewReader(out))
	var joined strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok {
			joined.WriteString(asciiLower(s))
		}
	}
	j := joined.String()
	if strings.Contains(j, asciiLower(sec)) || strings.Contains(j, asciiLower(reversed(sec))) {
		return "joined JSON strings"
	}
	return ""
}

// TestRedactEchoes: a credential an upstream echoes back encoded does
// not reach the invoking member (issue 26, finding 8).
func TestRedactEchoes(t *testing.T) {
	t.Parallel()
	sec := echoSecret
	require.NotEqual(t, base64.StdEncoding.EncodeToString([]byte(sec)), base64.URLEncoding.EncodeToString([]byte(sec)))
	type row struct {
		name, in string
		json     bool
	}
	var tests []row
	for _, f := range echoForms(sec) {
		tests = append(tests,
			row{name: f.name + " in text", in: "echo: " + f.s + " (end)"},
			row{name: f.name + " in a JSON string", in: `{"echo":"x ` + strings.ReplaceAll(f.s, `\`, `\\`) + ` y","n":1}`, json: true})
	}
	unicodeEscaped := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	tests = append(tests,
		row{name: "base64 inside longer base64", in: base64.StdEncoding.EncodeToString([]byte("Bearer " + sec + " and more"))},
		row{name: "every character JSON-escaped", in: `{"a":"` + unicodeEscaped(sec) + `"}`, json: true},
		row{name: "upper case JSON-escaped", in: `{"a":"` + unicodeEscaped(asciiUpper(sec)) + `"}`, json: true},
		row{name: "hex URL-encoded", in: "q=" + url.QueryEscape("%"+hex.EncodeToString([]byte(sec)))},
		row{name: "split across array strings", in: `["sk_Li","ve-4f9K+a","/Zq~Yw8>"]`, json: true},
		row{name: "split across object values", in: `{"a":"sk_Live-4","b":"f9K+a/Zq~Yw8>"}`, json: true},
		row{name: "split across nested values", in: `{"a":{"x":"Authorization: sk_Live"},"b":["-4f9K+a/Zq~Yw8> ok"]}`, json: true},
		row{name: "split and upper case", in: `["SK_LIVE-4F9K","+A/ZQ~YW8>"]`, json: true},
		row{name: "split and reversed", in: `[">8wY~qZ/a+","K9f4-eviL_ks"]`, json: true},
		row{name: "split and escaped", in: `["sk_Live-4f9K","+a\/Zq~Yw8\u003e"]`, json: true},
	)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := redactEchoes(tc.in, sec)
			require.Empty(t, leak(out, sec), "%q → %q", tc.in, out)
			require.Contains(t, out, "[REDACTED]")
			if tc.json {
				require.True(t, json.Valid([]byte(out)), "%q", out)
			}
		})
	}
	t.Run("a short credential as it is", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "x [REDACTED] y", redactEchoes("x abc123 y", "abc123"))
	})
	t.Run("nothing to redact", func(t *testing.T) {
		t.Parallel()
		in := `{"a":["sk_Live","nothing"],"b":"73 6b"}`
		require.Equal(t, in, redactEchoes(in, sec))
	})
}

// TestRedactJSONSplitAcrossBlocks: an MCP upstream that splits the
// credential across two text blocks has both halves redacted.
func TestRedactJSONSplitAcrossBlocks(t *testing.T) {
	t.Parallel()
	res := &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "your key starts sk_Live-4f9K"},
		&mcp.TextContent{Text: "+a/Zq~Yw8> and that is all"},
		&mcp.TextContent{Text: hex.EncodeToString([]byte(echoSecret))},
	}, StructuredContent: map[string]any{"k": asciiUpper(reversed(echoSecret))}}
	out, err := convertResult(res, echoSecret)
	require.NoError(t, err)
	require.Len(t, out.Content, 3)
	var all []string
	for _, b := range out.Content {
		all = append(all, string(b))
	}
	joined := "[" + strings.Join(all, ",") + "]"
	require.Empty(t, leak(joined, echoSecret), joined)
	require.Empty(t, leak(string(out.StructuredContent), echoSecret), string(out.StructuredContent))
	require.JSONEq(t, `{"type":"text","text":"your key starts [REDACTED]"}`, all[0])
}

// TestInvokeHTTPRedactsEchoes: an upstream that echoes the credential
// header it was sent, in every form, as 2xx JSON and as an error body;
// neither the text block nor structuredContent carries it.
func TestInvokeHTTPRedactsEchoes(t *testing.T) {
	t.Parallel()
	for _, status := range []int{200, 400} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got := r.Header.Get("X-Api-Key")
				echo := map[string]any{}
				for _, f := range echoForms(got) {
					echo[f.name] = "seen " + f.s
				}
				echo["split"] = []string{got[:5], got[5:11], got[11:]}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_ = json.NewEncoder(w).Encode(echo)
			}))
			t.Cleanup(srv.Close)
			res, err := newCaller(Options{}).InvokeHTTP(context.Background(), Binding{Method: "GET", URL: srv.URL + "/echo"}, nil,
				&Credential{Kind: "header", HeaderName: "x-api-key", Secret: echoSecret})
			require.NoError(t, err)
			require.Equal(t, status != 200, res.IsError)
			text := blockText(t, res)
			require.Contains(t, text, "seen [REDACTED]")
			require.Empty(t, leak(text, echoSecret), text)
			if status == 200 {
				require.Contains(t, string(res.StructuredContent), "seen [REDACTED]")
				require.Empty(t, leak(string(res.StructuredContent), echoSecret), string(res.StructuredContent))
			}
		})
	}
}

// TestRedactRaw: a secret that starts inside a JSON escape takes the
// escape with it, so a document stays JSON; elsewhere it is replaced as
// it is.
func TestRedactRaw(t *testing.T) {
	for _, tc := range []struct{ in, sec, want string }{
		{`["\u00000000"]`, "00000000", `["[REDACTED]"]`},
		{`["\u0030abcdefgh"]`, "30abcdefgh", `["[REDACTED]"]`},
		{`["a\nabcdefgh"]`, "nabcdefgh", `["a[REDACTED]"]`},
		{`["a\\nabcdefgh"]`, "nabcdefgh", `["a\\[REDACTED]"]`},
		{`["\\\u0041bcdefghi"]`, "0041bcdefghi", `["\\[REDACTED]"]`},
		{`abcdefgh abcdefgh`, "abcdefgh", `[REDACTED] [REDACTED]`},
		{`\x abcdefgh`, "abcdefgh", `\x [REDACTED]`},
		{`nothing here`, "abcdefgh", `nothing here`},
	} {
		got := redactRaw(tc.in, tc.sec)
		require.Equal(t, tc.want, got, tc.in)
		if json.Valid([]byte(tc.in)) {
			require.True(t, json.Valid([]byte(got)), "%s → %s", tc.in, got)
		}
	}
}
