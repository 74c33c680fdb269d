package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/egress"
)

const testSecret = "sEcReT-7f3a9c"

func newCaller(o Options) *Caller {
	return New(egress.NewClient(egress.Options{Policy: egress.AllowAll}), o)
}

// seen is what a test upstream received.
type seen struct {
	mu      sync.Mutex
	method  string
	uri     string
	headers http.Header
	body    string
}

func (s *seen) get() seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seen{method: s.method, uri: s.uri, headers: s.headers.Clone(), body: s.body}
}

// upstream serves status and body to every request, recording it.
func upstream(t *testing.T, status int, contentType, body string) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.method, s.uri, s.headers, s.body = r.Method, r.RequestURI, r.Header.Clone(), string(b)
		s.mu.Unlock()
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

func blockText(t *testing.T, r Result) string {
	t.Helper()
	require.Len(t, r.Content, 1)
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(r.Content[0], &b))
	require.Equal(t, "text", b.Type)
	return b.Text
}

func TestInvokeHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		contentType string
		respBody    string
		isError     bool
		text        string // the text block, or a substring with contains
		contains    bool
		structured  string
	}{
		{name: "2xx json object", status: 200, contentType: "application/json", respBody: `{"ok":true,"n":1.50}`,
			text: `{"ok":true,"n":1.50}`, structured: `{"n":1.50,"ok":true}`},
		{name: "2xx json array has no structured content", status: 200, contentType: "application/json", respBody: `[1,2]`, text: `[1,2]`},
		{name: "2xx text", status: 201, contentType: "text/plain", respBody: "created", text: "created"},
		{name: "2xx empty", status: 204, text: ""},
		{name: "2xx invalid utf-8", status: 200, respBody: "a\xffb", text: "a\uFFFDb"},
		{name: "2xx echoes the secret", status: 200, contentType: "application/json", respBody: `{"auth":"Bearer ` + testSecret + `"}`,
			text: `{"auth":"Bearer [REDACTED]"}`, structured: `{"auth":"Bearer [REDACTED]"}`},
		{name: "4xx", status: 404, contentType: "application/json", respBody: `{"error":"no such user"}`, isError: true,
			text: `upstream answered 404 Not Found: {"error":"no such user"}`},
		{name: "5xx", status: 503, respBody: "down for maintenance", isError: true, text: "upstream answered 503 Service Unavailable: down for maintenance"},
		{name: "5xx no body", status: 500, isError: true, text: "upstream answered 500 Internal Server Error"},
		{name: "4xx echoes the secret", status: 401, respBody: "bad token " + testSecret, isError: true, text: "upstream answered 401 Unauthorized: bad token [REDACTED]"},
		{name: "4xx long body is clipped", status: 400, respBody: strings.Repeat("x", 3*maxErrorBody), isError: true,
			text: "upstream answered 400 Bad Request: " + strings.Repeat("x", maxErrorBody) + "…"},
		{name: "3xx is not followed and is an error", status: 302, isError: true, text: "upstream answered 302 Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := upstream(t, tc.status, tc.contentType, tc.respBody)
			res, err := newCaller(Options{}).InvokeHTTP(context.Background(),
				Binding{Method: "GET", URL: srv.URL + "/x"}, nil, &Credential{Kind: "bearer", Secret: testSecret})
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError)
			require.Equal(t, tc.text, blockText(t, res))
			if tc.structured == "" {
				require.Empty(t, res.StructuredContent)
			} else {
				require.JSONEq(t, tc.structured, string(res.StructuredContent))
			}
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			require.NotContains(t, string(raw), testSecret)
		})
	}
}

func TestInvokeHTTPRequest(t *testing.T) {
	t.Parallel()
	srv, s := upstream(t, 200, "", "ok")
	b := Binding{
		Method:  "POST",
		URL:     srv.URL + "/users/{{args.user}}/notes?tag={{args.tag}}&v=1",
		Headers: map[string]string{"X-Request": "r-{{args.n}}"},
		Body:    json.RawMessage(`{"text":"{{args.text}}","n":"{{args.n}}","title":"note {{args.n}}"}`),
	}
	res, err := newCaller(Options{}).InvokeHTTP(context.Background(), b, map[string]any{
		"user": "a/b c", "tag": "x&y=z#w", "n": json.Number("7"), "text": "line1\nline2 \"q\"",
	}, &Credential{Kind: "header", HeaderName: "x-api-key", Secret: testSecret})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s", res.Content)
	got := s.get()
	require.Equal(t, "POST", got.method)
	require.Equal(t, "/users/a%2Fb%20c/notes?tag=x%26y%3Dz%23w&v=1", got.uri)
	require.Equal(t, testSecret, got.headers.Get("X-Api-Key"))
	require.Empty(t, got.headers.Get("Authorization"))
	require.Equal(t, "r-7", got.headers.Get("X-Request"))
	require.Equal(t, "application/json", got.headers.Get("Content-Type"))
	require.JSONEq(t, `{"text":"line1\nline2 \"q\"","n":7,"title":"note 7"}`, got.body)
}

func TestInvokeHTTPCredential(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cred   *Credential
		header string
		want   string
	}{
		{name: "bearer", cred: &Credential{Kind: "bearer", Secret: testSecret}, header: "Authorization", want: "Bearer " + testSecret},
		{name: "header", cred: &Credential{Kind: "header", HeaderName: "X-Key", Secret: testSecret}, header: "X-Key", want: testSecret},
		{name: "cookie header", cred: &Credential{Kind: "header", HeaderName: "cookie", Secret: "sid=" + testSecret}, header: "Cookie", want: "sid=" + testSecret},
		{name: "none", cred: nil, header: "Authorization", want: ""},
		{name: "empty secret", cred: &Credential{Kind: "bearer"}, header: "Authorization", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, s := upstream(t, 200, "", "ok")
			res, err := newCaller(Options{}).InvokeHTTP(context.Background(), Binding{Method: "GET", URL: srv.URL + "/"}, nil, tc.cred)
			require.NoError(t, err)
			require.False(t, res.IsError)
			require.Equal(t, tc.want, s.get().headers.Get(tc.header))
		})
	}
}

func TestInvokeHTTPBadCredential(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t, 200, "", "ok")
	for _, cred := range []*Credential{
		{Kind: "header", HeaderName: "Bad Name", Secret: testSecret},
		{Kind: "bearer", Secret: testSecret + "\r\nX: y"},
		{Kind: "other", Secret: testSecret},
		{Kind: "header", HeaderName: "host", Secret: testSecret},
		{Kind: "header", HeaderName: "Content-Length", Secret: testSecret},
	} {
		res, err := newCaller(Options{}).InvokeHTTP(context.Background(), Binding{Method: "GET", URL: srv.URL + "/"}, nil, cred)
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.NotContains(t, blockText(t, res), testSecret)
	}
}

func TestInvokeHTTPRefusals(t *testing.T) {
	t.Parallel()
	c := newCaller(Options{})
	// A binding that would not validate (the credential's header) and
	// arguments that cannot be substituted are *InvalidError.
	_, err := c.InvokeHTTP(context.Background(), Binding{Method: "GET", URL: "http://127.0.0.1:1/", Headers: map[string]string{"X-Key": "1"}},
		nil, &Credential{Kind: "header", HeaderName: "x-key", Secret: testSecret})
	var ie *InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "headers.X-Key", ie.Field)

	_, err = c.InvokeHTTP(context.Background(), Binding{Method: "GET", URL: "http://127.0.0.1:1/{{args.a}}"}, map[string]any{}, nil)
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "args.a", ie.Field)

	_, err = c.InvokeHTTP(context.Background(), Binding{Method: "GET", URL: "http://127.0.0.1:1/", Headers: map[string]string{"X-A": "{{args.a}}"}},
		map[string]any{"a": "x\r\nHost: evil"}, nil)
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "headers.X-A", ie.Field)
}

func TestInvokeHTTPTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	start := time.Now()
	res, err := newCaller(Options{Timeout: 200 * time.Millisecond}).InvokeHTTP(context.Background(),
		Binding{Method: "GET", URL: srv.URL + "/"}, nil, &Credential{Kind: "bearer", Secret: testSecret})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "the upstream did not answer within 200ms", blockText(t, res))
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestInvokeHTTPCancelled(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := newCaller(Options{}).InvokeHTTP(ctx, Binding{Method: "GET", URL: srv.URL + "/"}, nil, nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestInvokeHTTPOversized(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		size    int
		isError bool
	}{
		{name: "at the limit", size: 1000},
		{name: "over the limit", size: 1001, isError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := upstream(t, 200, "", strings.Repeat("a", tc.size))
			res, err := newCaller(Options{MaxResponse: 1000}).InvokeHTTP(context.Background(), Binding{Method: "GET", URL: srv.URL + "/"}, nil, nil)
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError)
			if tc.isError {
				require.Equal(t, "the upstream's answer (200) is larger than 1000 bytes", blockText(t, res))
			} else {
				require.Len(t, blockText(t, res), tc.size)
			}
		})
	}
}

func TestInvokeHTTPTransportErrors(t *testing.T) {
	t.Parallel()
	// A closed port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	// A server that hangs up mid-answer.
	hangup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
			conn.Close()
		}
	}))
	t.Cleanup(hangup.Close)

	public := New(egress.NewClient(egress.Options{}), Options{}) // loopback refused
	for _, tc := range []struct {
		name   string
		c      *Caller
		url    string
		prefix string
	}{
		{name: "refused", c: newCaller(Options{}), url: "http://" + addr + "/{{args.p}}", prefix: "the upstream could not be reached: "},
		{name: "egress policy", c: public, url: "http://" + addr + "/{{args.p}}", prefix: "the upstream could not be reached: "},
		{name: "truncated answer", c: newCaller(Options{}), url: hangup.URL + "/{{args.p}}", prefix: "reading the upstream's answer (200): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := tc.c.InvokeHTTP(context.Background(), Binding{Method: "GET", URL: tc.url},
				map[string]any{"p": testSecret}, &Credential{Kind: "bearer", Secret: testSecret})
			require.NoError(t, err)
			require.True(t, res.IsError)
			text := blockText(t, res)
			require.True(t, strings.HasPrefix(text, tc.prefix), "text = %q", text)
			require.NotContains(t, text, testSecret)
			if tc.name == "egress policy" {
				require.Contains(t, text, "not public and not allowed")
			}
		})
	}
}

func TestInvalidErrorIsError(t *testing.T) {
	t.Parallel()
	var err error = &InvalidError{Field: "url", Message: "bad"}
	require.Equal(t, "url: bad", err.Error())
	uerr := &UpstreamError{Err: errors.New("down")}
	require.Equal(t, "upstream: down", uerr.Error())
	require.ErrorIs(t, uerr, uerr.Err)
}
