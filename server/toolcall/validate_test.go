package toolcall

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := func(u string) Binding { return Binding{Method: "GET", URL: u} }
	tests := []struct {
		name       string
		b          Binding
		credHeader string
		field      string // "" means valid
	}{
		// Valid bindings.
		{name: "plain https", b: ok("https://api.example.com/v1/items")},
		{name: "plain http with port", b: ok("http://127.0.0.1:8080/x")},
		{name: "no path", b: ok("https://api.example.com")},
		{name: "query only", b: ok("https://api.example.com?q={{args.q}}")},
		{name: "upper-case scheme", b: ok("HTTPS://api.example.com/")},
		{name: "ipv6 literal", b: ok("http://[::1]:9000/a")},
		{name: "template in path", b: ok("https://api.example.com/users/{{args.id}}/repos")},
		{name: "template with spaces", b: ok("https://api.example.com/users/{{ args.id }}")},
		{name: "template part of segment", b: ok("https://api.example.com/u-{{args.id}}.json")},
		{name: "array index", b: ok("https://api.example.com/{{args.items.0.id}}")},
		{name: "template in query", b: ok("https://api.example.com/s?q={{args.q}}&n={{args.n}}")},
		{name: "@ in path is a path", b: ok("https://api.example.com/@evil.com")},
		{name: "percent escape in path", b: ok("https://api.example.com/a%20b")},
		{name: "encoded slash in query", b: ok("https://api.example.com/a?p=%2F")},
		{name: "post with body", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`{"q":"{{args.q}}","n":[1,"{{args.n}}"]}`)}},
		{name: "null body on GET", b: Binding{Method: "GET", URL: "https://x.example/", Body: json.RawMessage(`null`)}},
		{name: "headers", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-Trace": "t-{{args.id}}", "Accept": "application/json"}}},
		{name: "header differs from cred header", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-Other": "1"}}, credHeader: "X-Api-Key"},

		// Method.
		{name: "empty method", b: Binding{URL: "https://x.example/"}, field: "method"},
		{name: "lower-case method", b: Binding{Method: "get", URL: "https://x.example/"}, field: "method"},
		{name: "HEAD", b: Binding{Method: "HEAD", URL: "https://x.example/"}, field: "method"},
		{name: "CONNECT", b: Binding{Method: "CONNECT", URL: "https://x.example/"}, field: "method"},

		// Origin.
		{name: "empty url", b: ok(""), field: "url"},
		{name: "relative url", b: ok("/a/b"), field: "url"},
		{name: "ftp", b: ok("ftp://x.example/"), field: "url"},
		{name: "javascript", b: ok("javascript:alert(1)"), field: "url"},
		{name: "scheme-relative", b: ok("//x.example/"), field: "url"},
		{name: "one slash", b: ok("http:/x.example/"), field: "url"},
		{name: "template in scheme", b: ok("{{args.s}}://x.example/"), field: "url"},
		{name: "template in scheme tail", b: ok("http{{args.s}}://x.example/"), field: "url"},
		{name: "template as host", b: ok("https://{{args.host}}/"), field: "url"},
		{name: "template in host", b: ok("https://api.{{args.host}}.com/"), field: "url"},
		{name: "template at host end", b: ok("https://api.example.com{{args.x}}/"), field: "url"},
		{name: "template as port", b: ok("https://api.example.com:{{args.port}}/"), field: "url"},
		{name: "template right after host", b: ok("https://api.example.com{{args.path}}"), field: "url"},
		{name: "userinfo", b: ok("http://evil@good.example/"), field: "url"},
		{name: "userinfo with password", b: ok("http://good.example:80@evil.example/"), field: "url"},
		{name: "templated userinfo", b: ok("http://{{args.u}}@good.example/"), field: "url"},
		{name: "encoded at", b: ok("http://evil%40good.example/"), field: "url"},
		{name: "encoded host", b: ok("http://%65vil.example/"), field: "url"},
		{name: "backslash host", b: ok("http://good.example\\@evil.example/"), field: "url"},
		{name: "backslash in path", b: ok("http://good.example/a\\b"), field: "url"},
		{name: "encoded slash in path", b: ok("http://good.example/a%2Fb"), field: "url"},
		{name: "encoded lower slash in path", b: ok("http://good.example/a%2fb"), field: "url"},
		{name: "encoded backslash in path", b: ok("http://good.example/a%5cb"), field: "url"},
		{name: "encoded dot in path", b: ok("http://good.example/%2e%2e/admin"), field: "url"},
		{name: "dot-dot segment", b: ok("http://good.example/a/../admin"), field: "url"},
		{name: "dot segment", b: ok("http://good.example/./a"), field: "url"},
		{name: "trailing dot-dot", b: ok("http://good.example/a/.."), field: "url"},
		{name: "nul escape", b: ok("http://good.example/a?b=%00"), field: "url"},
		{name: "bad escape", b: ok("http://good.example/a%zz"), field: "url"},
		{name: "truncated escape", b: ok("http://good.example/a%2"), field: "url"},
		{name: "fragment", b: ok("http://good.example/a#frag"), field: "url"},
		{name: "fragment right after host", b: ok("http://good.example#{{args.x}}"), field: "url"},
		{name: "space", b: ok("http://good.example/a b"), field: "url"},
		{name: "CR in url", b: ok("http://good.example/a\r\nHost: evil"), field: "url"},
		{name: "tab in host", b: ok("http://good.exa\tmple/"), field: "url"},
		{name: "non-ascii host", b: ok("http://gööd.example/"), field: "url"},
		{name: "empty host", b: ok("http:///a"), field: "url"},
		{name: "empty port", b: ok("http://good.example:/a"), field: "url"},
		{name: "port zero", b: ok("http://good.example:0/a"), field: "url"},
		{name: "port too large", b: ok("http://good.example:65536/a"), field: "url"},
		{name: "signed port", b: ok("http://good.example:+80/a"), field: "url"},
		{name: "two ports", b: ok("http://good.example:80:81/a"), field: "url"},
		{name: "ipv6 zone", b: ok("http://[fe80::1%25eth0]/a"), field: "url"},
		{name: "bad ipv6", b: ok("http://[::g]/a"), field: "url"},
		{name: "ipv4 in brackets", b: ok("http://[127.0.0.1]/a"), field: "url"},
		{name: "too long", b: ok("https://x.example/" + strings.Repeat("a", maxURLLen)), field: "url"},

		// Templates.
		{name: "unknown template", b: ok("https://x.example/{{env.HOME}}"), field: "url"},
		{name: "bare args", b: ok("https://x.example/{{args}}"), field: "url"},
		{name: "unterminated", b: ok("https://x.example/{{args.a"), field: "url"},
		{name: "stray close", b: ok("https://x.example/a?b=}}"), field: "url"},
		{name: "empty segment", b: ok("https://x.example/{{args..a}}"), field: "url"},
		{name: "bracket index", b: ok("https://x.example/{{args.a[0]}}"), field: "url"},
		{name: "nested", b: ok("https://x.example/{{args.{{args.a}}}}"), field: "url"},
		{name: "triple braces", b: ok("https://x.example/{{{args.a}}}"), field: "url"},
		{name: "single brace", b: ok("https://x.example/{a}"), field: "url"},

		// Headers.
		{name: "authorization", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"Authorization": "Bearer x"}}, field: "headers.Authorization"},
		{name: "authorization any case", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"aUtHoRiZaTiOn": "x"}}, field: "headers.aUtHoRiZaTiOn"},
		{name: "cookie", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"cookie": "a=b"}}, field: "headers.cookie"},
		{name: "host", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"HOST": "evil"}}, field: "headers.HOST"},
		{name: "proxy-authorization", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"Proxy-Authorization": "x"}}, field: "headers.Proxy-Authorization"},
		{name: "content-length", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"Content-Length": "5"}}, field: "headers.Content-Length"},
		{name: "transfer-encoding", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"transfer-encoding": "chunked"}}, field: "headers.transfer-encoding"},
		{name: "connection", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"Connection": "close"}}, field: "headers.Connection"},
		{name: "credential header", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"x-api-key": "{{args.k}}"}}, credHeader: "X-Api-Key", field: "headers.x-api-key"},
		{name: "invalid header name", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X Bad": "1"}}, field: "headers.X Bad"},
		{name: "header name with colon", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-A:": "1"}}, field: "headers.X-A:"},
		{name: "empty header name", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"": "1"}}, field: "headers."},
		{name: "CRLF in header value", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-A": "a\r\nHost: evil"}}, field: "headers.X-A"},
		{name: "LF in header value", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-A": "a\nb"}}, field: "headers.X-A"},
		{name: "NUL in header value", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-A": "a\x00b"}}, field: "headers.X-A"},
		{name: "bad template in header", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-A": "{{args.a"}}, field: "headers.X-A"},
		{name: "duplicate header", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-A": "1", "x-a": "2"}}, field: "headers.x-a"},

		// Body.
		{name: "invalid json body", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`{"a":`)}, field: "body"},
		{name: "two json values", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`{} {}`)}, field: "body"},
		{name: "GET with body", b: Binding{Method: "GET", URL: "https://x.example/", Body: json.RawMessage(`{"a":1}`)}, field: "body"},
		{name: "bad template in body", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`{"a":"{{args.}}"}`)}, field: "body"},
		{name: "template in body key", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`{"{{args.k}}":1}`)}, field: "body"},
		{name: "body too long", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`"` + strings.Repeat("a", maxBodyLen) + `"`)}, field: "body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.b.Validate(tc.credHeader)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ie *InvalidError
			require.True(t, errors.As(err, &ie), "err = %v", err)
			require.Equal(t, tc.field, ie.Field, "message: %s", ie.Message)
			require.NotEmpty(t, ie.Message)
		})
	}
}

func TestValidateTooManyHeaders(t *testing.T) {
	t.Parallel()
	h := map[string]string{}
	for i := range maxHeaders + 1 {
		h["X-H"+strings.Repeat("a", i)] = "1"
	}
	err := Binding{Method: "GET", URL: "https://x.example/", Headers: h}.Validate("")
	var ie *InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "headers", ie.Field)
}

func TestSubstitute(t *testing.T) {
	t.Parallel()
	args := map[string]any{
		"id":     "a/b?c#d&e=f g%2F..",
		"dots":   "..",
		"dot":    ".",
		"n":      json.Number("42"),
		"f":      1.5,
		"big":    1e21,
		"t":      true,
		"null":   nil,
		"obj":    map[string]any{"k": "v", "html": "<&>"},
		"arr":    []any{"x", map[string]any{"id": "y"}},
		"crlf":   "a\r\nX-Evil: 1",
		"lf":     "a\nb",
		"uni":    "é 雪",
		"quote":  `he said "hi"\`,
		"host":   "evil.example",
		"at":     "@evil.example",
		"secret": "s",
	}
	tests := []struct {
		name    string
		b       Binding
		url     string
		headers map[string]string
		body    string
		field   string // an *InvalidError on this field
	}{
		{name: "path value is one encoded segment", b: Binding{Method: "GET", URL: "https://x.example/u/{{args.id}}/r"},
			url: "https://x.example/u/a%2Fb%3Fc%23d%26e%3Df%20g%252F../r"},
		{name: "query value cannot add parameters", b: Binding{Method: "GET", URL: "https://x.example/s?q={{args.id}}&n={{args.n}}"},
			url: "https://x.example/s?q=a%2Fb%3Fc%23d%26e%3Df%20g%252F..&n=42"},
		{name: "value after host stays in path", b: Binding{Method: "GET", URL: "https://x.example/{{args.at}}"},
			url: "https://x.example/%40evil.example"},
		{name: "unicode", b: Binding{Method: "GET", URL: "https://x.example/{{args.uni}}"},
			url: "https://x.example/%C3%A9%20%E9%9B%AA"},
		{name: "numbers and bools in path", b: Binding{Method: "GET", URL: "https://x.example/{{args.n}}/{{args.f}}/{{args.big}}/{{args.t}}"},
			url: "https://x.example/42/1.5/1e%2B21/true"},
		{name: "null is empty", b: Binding{Method: "GET", URL: "https://x.example/a?x={{args.null}}"},
			url: "https://x.example/a?x="},
		{name: "object in query is its JSON", b: Binding{Method: "GET", URL: "https://x.example/a?o={{args.obj}}"},
			url: "https://x.example/a?o=" + url.QueryEscape(`{"html":"<&>","k":"v"}`)},
		{name: "array index", b: Binding{Method: "GET", URL: "https://x.example/{{args.arr.1.id}}/{{args.arr.0}}"},
			url: "https://x.example/y/x"},
		{name: "dot-dot value refused", b: Binding{Method: "GET", URL: "https://x.example/a/{{args.dots}}/b"}, field: "url"},
		{name: "dot value refused", b: Binding{Method: "GET", URL: "https://x.example/a/{{args.dot}}"}, field: "url"},
		{name: "dot value and static dot refused", b: Binding{Method: "GET", URL: "https://x.example/a/{{args.dot}}."}, field: "url"},
		{name: "dot-dot inside a segment is fine", b: Binding{Method: "GET", URL: "https://x.example/a/x{{args.dots}}"},
			url: "https://x.example/a/x.."},
		{name: "dot-dot in query is fine", b: Binding{Method: "GET", URL: "https://x.example/a?p={{args.dots}}"},
			url: "https://x.example/a?p=.."},
		{name: "missing arg", b: Binding{Method: "GET", URL: "https://x.example/{{args.nope}}"}, field: "args.nope"},
		{name: "missing nested arg", b: Binding{Method: "GET", URL: "https://x.example/{{args.obj.nope}}"}, field: "args.obj.nope"},
		{name: "index out of range", b: Binding{Method: "GET", URL: "https://x.example/{{args.arr.2}}"}, field: "args.arr.2"},
		{name: "non-canonical index", b: Binding{Method: "GET", URL: "https://x.example/{{args.arr.01}}"}, field: "args.arr.01"},
		{name: "step into scalar", b: Binding{Method: "GET", URL: "https://x.example/{{args.n.x}}"}, field: "args.n.x"},
		{name: "header substituted raw", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"x-id": "id={{args.uni}}; {{args.n}}"}},
			url: "https://x.example/", headers: map[string]string{"X-Id": "id=é 雪; 42"}},
		{name: "CRLF in header refused", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-Id": "{{args.crlf}}"}}, field: "headers.X-Id"},
		{name: "LF in header refused", b: Binding{Method: "GET", URL: "https://x.example/", Headers: map[string]string{"X-Id": "{{args.lf}}"}}, field: "headers.X-Id"},
		{name: "body keeps types of whole templates", b: Binding{Method: "POST", URL: "https://x.example/",
			Body: json.RawMessage(`{"n":"{{args.n}}","f":"{{ args.f }}","t":"{{args.t}}","z":"{{args.null}}","o":"{{args.obj}}","a":"{{args.arr}}","s":"{{args.id}}","k":1.50,"big":12345678901234567890}`)},
			url: "https://x.example/", headers: map[string]string{"Content-Type": "application/json"},
			body: `{"a":["x",{"id":"y"}],"big":12345678901234567890,"f":1.5,"k":1.50,"n":42,"o":{"html":"<&>","k":"v"},"s":"a/b?c#d&e=f g%2F..","t":true,"z":null}`},
		{name: "body string form inside longer strings", b: Binding{Method: "PUT", URL: "https://x.example/",
			Body: json.RawMessage(`["n={{args.n}}","q={{args.quote}}","o={{args.obj}}","z={{args.null}}","{{args.crlf}}!"]`)},
			url: "https://x.example/", headers: map[string]string{"Content-Type": "application/json"},
			body: `["n=42","q=he said \"hi\"\\","o={\"html\":\"<&>\",\"k\":\"v\"}","z=","a\r\nX-Evil: 1!"]`},
		{name: "body keeps the binding's content type", b: Binding{Method: "POST", URL: "https://x.example/", Headers: map[string]string{"Content-Type": "application/vnd.x+json"},
			Body: json.RawMessage(`"{{args.uni}}"`)},
			url: "https://x.example/", headers: map[string]string{"Content-Type": "application/vnd.x+json"}, body: `"é 雪"`},
		{name: "missing arg in body", b: Binding{Method: "POST", URL: "https://x.example/", Body: json.RawMessage(`{"a":["{{args.nope}}"]}`)}, field: "args.nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := compile(tc.b, "")
			require.NoError(t, err)
			r, err := c.substitute(args)
			if tc.field != "" {
				var ie *InvalidError
				require.ErrorAs(t, err, &ie)
				require.Equal(t, tc.field, ie.Field)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.url, r.url)
			require.Equal(t, tc.b.Method, r.method)
			got := map[string]string{}
			for k := range r.headers {
				got[k] = r.headers.Get(k)
			}
			if tc.headers == nil {
				tc.headers = map[string]string{}
			}
			require.Equal(t, tc.headers, got)
			require.Equal(t, tc.body, string(r.body))
		})
	}
}

func TestSubstituteBoundsURL(t *testing.T) {
	t.Parallel()
	c, err := compile(Binding{Method: "GET", URL: "https://x.example/{{args.a}}"}, "")
	require.NoError(t, err)
	_, err = c.substitute(map[string]any{"a": strings.Repeat("/", maxSentURLLen/3)})
	var ie *InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "url", ie.Field)
}

func TestCheckCredentialHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"X-Api-Key", true},
		{"x-api-key", true},
		{"Authorization", true},
		{"Cookie", true},
		{"", false},
		{"Bad Header", false},
		{"X-Key\r\n", false},
		{"host", false},
		{"Content-Type", false},
		{"content-length", false},
		{"Transfer-Encoding", false},
		{"Connection", false},
		{"TE", false},
		{"Upgrade", false},
		{strings.Repeat("x", 129), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCredentialHeader(tc.name)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}
