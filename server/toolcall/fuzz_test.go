package toolcall

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// argsFor builds arguments that give every template of c the value v
// (conflicting paths, like a and a.b, are left to fail as missing).
func argsFor(c *compiled, v string) map[string]any {
	args := map[string]any{}
	put := func(path []string) {
		m := args
		for i, seg := range path {
			if i == len(path)-1 {
				if _, ok := m[seg]; !ok {
					m[seg] = v
				}
				return
			}
			next, ok := m[seg].(map[string]any)
			if !ok {
				if _, taken := m[seg]; taken {
					return
				}
				next = map[string]any{}
				m[seg] = next
			}
			m = next
		}
	}
	each := func(parts []part) {
		for _, p := range parts {
			if p.Path != nil {
				put(p.Path)
			}
		}
	}
	each(c.path)
	each(c.query)
	for _, h := range c.headers {
		each(h.value)
	}
	var walk func(any)
	walk = func(t any) {
		switch x := t.(type) {
		case bodyString:
			each(x.parts)
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(c.body)
	return args
}

var anyTemplate = regexp.MustCompile(`\{\{[^{}]*\}\}`)

func FuzzValidate(f *testing.F) {
	seeds := []struct{ method, u, hname, hval, body, arg string }{
		{"GET", "https://api.example.com/users/{{args.id}}?q={{args.q}}", "X-A", "{{args.h}}", "", "../../evil.com/x?y#z"},
		{"POST", "http://127.0.0.1:8080/{{args.a.b}}/{{args.a.c}}", "Content-Type", "application/json", `{"x":"{{args.x}}","y":"a{{args.y}}"}`, "@evil.com:80"},
		{"GET", "https://{{args.h}}/", "", "", "", "evil.com"},
		{"GET", "http://evil@good/", "", "", "", ""},
		{"GET", "http://good/a%2Fb", "", "", "", ""},
		{"GET", "http://good\\evil/", "", "", "", ""},
		{"GET", "http://[::1]:80/{{args.x}}", "x-k", "a\r\nb", "", "\r\n"},
		{"DELETE", "https://good.example{{args.x}}", "", "", "", "/.."},
		{"PUT", "https://good.example/{{ args.x }}.", "X", "", `"{{args.x}}"`, "."},
		{"GET", "", "", "", "", "\x00"},
		{"PATCH", "HTTP://GOOD.example:65535?{{args.q}}", "", "", "[1,{}]", "%00%2F\\/"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.u, s.hname, s.hval, s.body, s.arg)
	}
	f.Fuzz(func(t *testing.T, method, u, hname, hval, body, arg string) {
		b := Binding{Method: method, URL: u}
		if hname != "" {
			b.Headers = map[string]string{hname: hval}
		}
		if body != "" {
			b.Body = json.RawMessage(body)
		}
		if err := b.Validate("X-Api-Key"); err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Validate error %T %v is not an *InvalidError", err, err)
			}
			return
		}
		// What the binding's origin is, read with net/url from the URL
		// with every template replaced by a harmless word.
		want, err := url.Parse(anyTemplate.ReplaceAllString(u, "x"))
		if err != nil {
			t.Fatalf("valid binding URL %q does not parse: %v", u, err)
		}
		if want.User != nil || want.Fragment != "" || want.Host == "" {
			t.Fatalf("valid binding URL %q has userinfo, a fragment or no host", u)
		}
		c, err := compile(b, "X-Api-Key")
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.substitute(argsFor(c, arg))
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("substitute error %T %v is not an *InvalidError", err, err)
			}
			return
		}
		got, err := url.Parse(r.url)
		if err != nil {
			t.Fatalf("substituted URL %q does not parse: %v", r.url, err)
		}
		if got.Scheme != strings.ToLower(want.Scheme) || !strings.EqualFold(got.Host, want.Host) ||
			got.Hostname() != want.Hostname() || got.Port() != want.Port() || got.User != nil || got.Fragment != "" {
			t.Fatalf("origin moved: binding %q, arg %q, sent %q", u, arg, r.url)
		}
		for _, seg := range strings.Split(got.EscapedPath(), "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("dot segment sent: %q", r.url)
			}
		}
		req, err := http.NewRequest(r.method, r.url, nil)
		if err != nil {
			t.Fatalf("request for %q: %v", r.url, err)
		}
		if req.URL.Host != got.Host {
			t.Fatalf("request host %q, want %q", req.URL.Host, got.Host)
		}
		for k, vs := range r.headers {
			for _, v := range vs {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("header %s: invalid value %q", k, v)
				}
			}
			if forbiddenHeaders[k] || strings.EqualFold(k, "X-Api-Key") {
				t.Fatalf("forbidden header %s sent", k)
			}
		}
		if r.body != nil && !json.Valid(r.body) {
			t.Fatalf("body is not JSON: %q", r.body)
		}
	})
}

func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{"", "a", "../x", "..", ".", "a/b?c#d&e=f", "%2F%2e", "\r\n", "é雪", "\x00\xff", `"\`, "{{args.v}}", " "} {
		f.Add(s)
	}
	c, err := compile(Binding{
		Method:  "POST",
		URL:     "https://good.example:8443/p/{{args.v}}/q?a={{args.v}}&b=1",
		Headers: map[string]string{"X-V": "<{{args.v}}>"},
		Body:    json.RawMessage(`{"whole":"{{args.v}}","part":"[{{args.v}}]"}`),
	}, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r, err := c.substitute(map[string]any{"v": v})
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T %v", err, err)
			}
			switch ie.Field {
			case "url":
				if v != "." && v != ".." {
					t.Fatalf("url refused for %q: %v", v, err)
				}
			case "headers.X-V":
				if httpguts.ValidHeaderFieldValue("<" + v + ">") {
					t.Fatalf("header refused for %q: %v", v, err)
				}
			default:
				t.Fatalf("unexpected refusal for %q: %v", v, err)
			}
			return
		}
		u, err := url.Parse(r.url)
		if err != nil {
			t.Fatalf("%q: %v", r.url, err)
		}
		if u.Scheme != "https" || u.Host != "good.example:8443" || u.User != nil || u.Fragment != "" {
			t.Fatalf("origin moved: %q", r.url)
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 4 || segs[1] != "p" || segs[3] != "q" {
			t.Fatalf("path segments changed: %q", u.EscapedPath())
		}
		if got, err := url.PathUnescape(segs[2]); err != nil || got != v {
			t.Fatalf("path value %q, want %q (%v)", got, v, err)
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil || len(q) != 2 || len(q["a"]) != 1 || q.Get("b") != "1" {
			t.Fatalf("query changed: %q (%v)", u.RawQuery, err)
		}
		// Query values decode with '+' as space; ours encode space as %20.
		if q.Get("a") != v {
			t.Fatalf("query value %q, want %q", q.Get("a"), v)
		}
		if got := r.headers.Get("X-V"); got != "<"+v+">" {
			t.Fatalf("header %q", got)
		}
		var body struct{ Whole, Part string }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("body %q: %v", r.body, err)
		}
		// JSON carries valid UTF-8 only: each invalid byte becomes U+FFFD.
		wantV := string([]rune(v))
		if body.Whole != wantV || body.Part != "["+wantV+"]" {
			t.Fatalf("body %q for %q", r.body, v)
		}
	})
}

// FuzzRedactEchoes puts a credential, in one of the forms an upstream
// may echo it in (echoForms, or split across two JSON strings), at any
// place of any text, and checks that no form of it survives redactEchoes
// and that JSON stays JSON.
func FuzzRedactEchoes(f *testing.F) {
	f.Add("some text around", echoSecret, uint(5), uint8(0))
	f.Add(`{"a":"b"}`, "Pa55word!xyz", uint(3), uint8(6))
	f.Add("", "ÉtéÉtéÉté-KEY", uint(0), uint8(4))
	f.Add("AAAA", "abcdefgh", uint(1), uint8(8))
	f.Add("x", "aaaaaaaaaaaa", uint(9), uint8(13))
	f.Add("%%%", "a b c d e f", uint(2), uint8(11))
	f.Add("tail", "token with ' and <", uint(4), uint8(14))
	f.Fuzz(func(t *testing.T, text, sec string, pos uint, form uint8) {
		if len(sec) < 8 || len(sec) > 256 || len(text) > 2048 || !utf8.ValidString(sec) || !utf8.ValidString(text) ||
			strings.ContainsFunc(sec, func(r rune) bool { return r < ' ' || r == 0x7f || r == utf8.RuneError }) ||
			strings.ContainsAny(sec, `[]"\`) || strings.Contains(asciiLower(sec), "redacted") {
			return
		}
		forms := echoForms(sec)
		p := int(pos % uint(len(text)+1))
		for p > 0 && p < len(text) && !utf8.RuneStart(text[p]) {
			p--
		}
		var doc string
		isJSON := false
		if n := int(form) % (len(forms) + 2); n < len(forms) {
			doc = text[:p] + forms[n].s + text[p:]
		} else {
			// Split in two JSON strings, after a string of the text.
			k := int(pos % uint(len(sec)))
			for k > 0 && !utf8.RuneStart(sec[k]) {
				k--
			}
			parts := []string{text, sec[:k], sec[k:]}
			if n == len(forms)+1 {
				parts = []string{text, reversed(sec)[:len(sec)-k], reversed(sec)[len(sec)-k:]}
			}
			b, err := json.Marshal(parts)
			if err != nil {
				t.Fatal(err)
			}
			doc, isJSON = string(b), true
		}
		out := redactEchoes(doc, sec)
		if l := leak(out, sec); l != "" {
			t.Fatalf("%s survived: %q → %q", l, doc, out)
		}
		if isJSON && !json.Valid([]byte(out)) {
			t.Fatalf("not JSON: %q → %q", doc, out)
		}
	})
}
