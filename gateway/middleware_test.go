package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"svc/server"
	"svc/server/apierr"
	"svc/server/auth"
)

func newTestGateway() *Gateway {
	return &Gateway{log: slog.New(slog.DiscardHandler)}
}

// okHandler records that it ran and answers 200 "ok".
type okHandler struct{ called bool }

func (h *okHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.called = true
	_, _ = io.WriteString(w, "ok")
}

// errorBody decodes the JSON error body of a recorded response.
func errorBody(t *testing.T, rec *httptest.ResponseRecorder) apierr.RenderedBody {
	t.Helper()
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var b apierr.RenderedBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b), "body: %s", rec.Body.String())
	require.NotEmpty(t, b.Message)
	return b
}

func TestWithProtocol(t *testing.T) {
	tests := []struct {
		name   string
		values []string // X-SVC-Protocol header lines
		ok     bool
	}{
		{name: "absent is 1", values: nil, ok: true},
		{name: "1", values: []string{"1"}, ok: true},
		{name: "2", values: []string{"2"}},
		{name: "empty", values: []string{""}},
		{name: "1.0", values: []string{"1.0"}},
		{name: "padded", values: []string{" 1"}},
		{name: "list in one line", values: []string{"1, 1"}},
		{name: "two header lines", values: []string{"1", "1"}},
		{name: "two different header lines", values: []string{"1", "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := &okHandler{}
			h := newTestGateway().withProtocol(next)
			req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			for _, v := range tc.values {
				req.Header.Add("X-SVC-Protocol", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			require.Equal(t, server.ProtocolVersion, rec.Header().Get("X-SVC-Protocol"), "every answer names the protocol")
			require.Equal(t, tc.ok, next.called)
			if tc.ok {
				require.Equal(t, http.StatusOK, rec.Code)
				return
			}
			require.Equal(t, http.StatusBadRequest, rec.Code)
			require.Equal(t, apierr.CodeUnsupportedProtocol, errorBody(t, rec).Error)
		})
	}
}

func TestWithOrigin(t *testing.T) {
	cookie := auth.SessionCookieName + "=" + strings.Repeat("A", 43)
	tests := []struct {
		name    string
		method  string
		cookie  string
		bearer  string
		origin  string
		allowed bool
	}{
		{name: "cookie and foreign origin on POST", method: http.MethodPost, cookie: cookie, origin: "https://evil.example", allowed: false},
		{name: "cookie and foreign origin on PATCH", method: http.MethodPatch, cookie: cookie, origin: "https://evil.example", allowed: false},
		{name: "cookie and foreign origin on PUT", method: http.MethodPut, cookie: cookie, origin: "https://evil.example", allowed: false},
		{name: "cookie and foreign origin on DELETE", method: http.MethodDelete, cookie: cookie, origin: "https://evil.example", allowed: false},
		{name: "cookie and other port", method: http.MethodPost, cookie: cookie, origin: "http://broker.test:9999", allowed: false},
		{name: "cookie and subdomain", method: http.MethodPost, cookie: cookie, origin: "http://a.broker.test:7433", allowed: false},
		{name: "cookie and null origin", method: http.MethodPost, cookie: cookie, origin: "null", allowed: false},
		{name: "cookie and unparsable origin", method: http.MethodPost, cookie: cookie, origin: "http://[::1", allowed: false},
		{name: "cookie among others and foreign origin", method: http.MethodPost, cookie: "theme=dark; " + cookie, origin: "https://evil.example", allowed: false},
		{name: "cookie and same host", method: http.MethodPost, cookie: cookie, origin: "http://broker.test:7433", allowed: true},
		{name: "cookie and same host over https", method: http.MethodPost, cookie: cookie, origin: "https://broker.test:7433", allowed: true},
		{name: "cookie without origin", method: http.MethodPost, cookie: cookie, allowed: true},
		{name: "bearer and foreign origin", method: http.MethodPost, bearer: "Bearer svc_x", origin: "https://evil.example", allowed: true},
		{name: "bearer, cookie and foreign origin", method: http.MethodPost, cookie: cookie, bearer: "Bearer svc_x", origin: "https://evil.example", allowed: true},
		{name: "no credentials and foreign origin", method: http.MethodPost, origin: "https://evil.example", allowed: true},
		{name: "empty session cookie and foreign origin", method: http.MethodPost, cookie: auth.SessionCookieName + "=", origin: "https://evil.example", allowed: true},
		{name: "GET with cookie and foreign origin", method: http.MethodGet, cookie: cookie, origin: "https://evil.example", allowed: true},
		{name: "HEAD with cookie and foreign origin", method: http.MethodHead, cookie: cookie, origin: "https://evil.example", allowed: true},
		{name: "OPTIONS with cookie and foreign origin", method: http.MethodOptions, cookie: cookie, origin: "https://evil.example", allowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := &okHandler{}
			h := newTestGateway().withOrigin(next)
			req := httptest.NewRequest(tc.method, "http://broker.test:7433/members", nil)
			if tc.cookie != "" {
				req.Header.Set("Cookie", tc.cookie)
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", tc.bearer)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			require.Equal(t, tc.allowed, next.called)
			if tc.allowed {
				require.Equal(t, http.StatusOK, rec.Code)
				return
			}
			require.Equal(t, http.StatusForbidden, rec.Code)
			require.Equal(t, apierr.CodeForbidden, errorBody(t, rec).Error)
		})
	}
}

func TestWithBodyLimit(t *testing.T) {
	const limit = 16
	tests := []struct {
		name          string
		body          string
		contentLength int64 // -1: unknown (chunked)
		wantStatus    int
		wantReadErr   bool // the handler ran but could not read the whole body
	}{
		{name: "declared over", body: strings.Repeat("x", limit+1), contentLength: limit + 1, wantStatus: http.StatusRequestEntityTooLarge},
		{name: "declared far over", body: "", contentLength: 1 << 40, wantStatus: http.StatusRequestEntityTooLarge},
		{name: "declared at the limit", body: strings.Repeat("x", limit), contentLength: limit, wantStatus: http.StatusOK},
		{name: "empty", body: "", contentLength: 0, wantStatus: http.StatusOK},
		{name: "chunked under", body: "small", contentLength: -1, wantStatus: http.StatusOK},
		{name: "chunked over is cut off", body: strings.Repeat("x", limit+1), contentLength: -1, wantStatus: http.StatusOK, wantReadErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				called  bool
				readErr error
				read    []byte
			)
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				read, readErr = io.ReadAll(r.Body)
				w.WriteHeader(http.StatusOK)
			})
			h := newTestGateway().withBodyLimit(limit, next)
			req := httptest.NewRequest(http.MethodPost, "/members", strings.NewReader(tc.body))
			req.ContentLength = tc.contentLength
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			require.Equal(t, tc.wantStatus, rec.Code)
			if tc.wantStatus == http.StatusRequestEntityTooLarge {
				require.False(t, called, "the body is refused before the handler")
				require.Equal(t, apierr.CodePayloadTooLarge, errorBody(t, rec).Error)
				return
			}
			require.True(t, called)
			if tc.wantReadErr {
				var mbe *http.MaxBytesError
				require.ErrorAs(t, readErr, &mbe)
				require.Equal(t, int64(limit), mbe.Limit)
				require.LessOrEqual(t, len(read), limit)
				return
			}
			require.NoError(t, readErr)
			require.Equal(t, tc.body, string(read))
		})
	}
}

func TestHandleMapsMaxBytesError(t *testing.T) {
	g := newTestGateway()
	h := g.withBodyLimit(8, g.handle(func(_ http.ResponseWriter, r *http.Request) error {
		_, err := io.ReadAll(r.Body)
		return err
	}))
	req := httptest.NewRequest(http.MethodPost, "/fs/x", strings.NewReader(strings.Repeat("x", 100)))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	b := errorBody(t, rec)
	require.Equal(t, apierr.CodePayloadTooLarge, b.Error)
	require.Contains(t, b.Message, "8 bytes")
}

func TestHandleWritesReturnedError(t *testing.T) {
	g := newTestGateway()
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   apierr.Code
	}{
		{name: "nil writes nothing", err: nil, wantStatus: http.StatusOK},
		{name: "domain error", err: apierr.Errorf(apierr.CodeGone, "archived"), wantStatus: http.StatusGone, wantCode: apierr.CodeGone},
		{name: "unauthenticated", err: auth.ErrUnauthenticated, wantStatus: http.StatusUnauthorized, wantCode: apierr.CodeUnauthenticated},
		{name: "internal", err: errors.New("secret"), wantStatus: http.StatusInternalServerError, wantCode: apierr.CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			g.handle(func(http.ResponseWriter, *http.Request) error { return tc.err }).
				ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
			require.Equal(t, tc.wantStatus, rec.Code)
			if tc.err == nil {
				require.Empty(t, rec.Body.String())
				return
			}
			b := errorBody(t, rec)
			require.Equal(t, tc.wantCode, b.Error)
			require.NotContains(t, b.Message, "secret")
		})
	}
}

func TestBodyless(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		wantBody string
	}{
		{name: "204 swallows the body", status: http.StatusNoContent, wantBody: ""},
		{name: "200 keeps the body", status: http.StatusOK, wantBody: `{"a":1}`},
		{name: "201 keeps the body", status: http.StatusCreated, wantBody: `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var writeN int
			var writeErr error
			h := bodyless(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				writeN, writeErr = io.WriteString(w, `{"a":1}`)
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/members/x", nil))
			require.Equal(t, tc.status, rec.Code)
			require.Equal(t, tc.wantBody, rec.Body.String())
			// The gateway is told its write succeeded either way.
			require.NoError(t, writeErr)
			require.Equal(t, len(`{"a":1}`), writeN)
		})
	}

	t.Run("implicit 200 keeps the body", func(t *testing.T) {
		h := bodyless(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hello")
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		require.Equal(t, "hello", rec.Body.String())
	})

	t.Run("response controller reaches the real writer", func(t *testing.T) {
		h := bodyless(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			require.NoError(t, http.NewResponseController(w).Flush())
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		require.True(t, rec.Flushed)
	})
}

// statusSpy records the status passed to WriteHeader.
type statusSpy struct {
	http.ResponseWriter
	wrote int
}

func (s *statusSpy) WriteHeader(code int) {
	s.wrote = code
	s.ResponseWriter.WriteHeader(code)
}

func TestForwardResponse(t *testing.T) {
	tests := []struct {
		name        string
		httpCode    []string // x-http-code values; nil: no server metadata
		tls         bool
		cookies     []string
		wantStatus  int
		wantWritten bool // forwardResponse itself wrote the status
		wantCookies []string
	}{
		{name: "no metadata", wantStatus: http.StatusOK},
		{name: "metadata without code", httpCode: []string{}, wantStatus: http.StatusOK},
		{name: "201", httpCode: []string{"201"}, wantStatus: http.StatusCreated, wantWritten: true},
		{name: "204 drops content type", httpCode: []string{"204"}, wantStatus: http.StatusNoContent, wantWritten: true},
		{name: "first value wins", httpCode: []string{"202", "201"}, wantStatus: http.StatusAccepted, wantWritten: true},
		{name: "not a number ignored", httpCode: []string{"created"}, wantStatus: http.StatusOK},
		{name: "error status ignored", httpCode: []string{"500"}, wantStatus: http.StatusOK},
		{name: "redirect ignored", httpCode: []string{"302"}, wantStatus: http.StatusOK},
		{name: "informational ignored", httpCode: []string{"101"}, wantStatus: http.StatusOK},
		{name: "cookie over plain http untouched", cookies: []string{"svc_session=a; Path=/; HttpOnly"}, wantStatus: http.StatusOK, wantCookies: []string{"svc_session=a; Path=/; HttpOnly"}},
		{name: "cookie over tls gets Secure", tls: true, cookies: []string{"svc_session=a; Path=/; HttpOnly"}, wantStatus: http.StatusOK, wantCookies: []string{"svc_session=a; Path=/; HttpOnly; Secure"}},
		{name: "every cookie over tls gets Secure", tls: true, cookies: []string{"a=1", "b=2"}, httpCode: []string{"201"}, wantStatus: http.StatusCreated, wantWritten: true, wantCookies: []string{"a=1; Secure", "b=2; Secure"}},
		{name: "tls without cookies", tls: true, wantStatus: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.httpCode != nil {
				md := metadata.MD{}
				if len(tc.httpCode) > 0 {
					md.Set("x-http-code", tc.httpCode...)
				}
				ctx = runtime.NewServerMetadataContext(ctx, runtime.ServerMetadata{HeaderMD: md})
			}
			if tc.tls {
				ctx = context.WithValue(ctx, tlsKey{}, true)
			}
			rec := httptest.NewRecorder()
			rec.Header().Set("Content-Type", "application/json")
			for _, c := range tc.cookies {
				rec.Header().Add("Set-Cookie", c)
			}
			spy := &statusSpy{ResponseWriter: rec}
			require.NoError(t, forwardResponse(ctx, spy, nil))
			require.Equal(t, tc.wantWritten, spy.wrote != 0, "forwardResponse wrote status %d", spy.wrote)
			require.Equal(t, tc.wantStatus, rec.Code)
			require.Equal(t, tc.wantCookies, rec.Header().Values("Set-Cookie"))
			if tc.wantStatus == http.StatusNoContent {
				require.Empty(t, rec.Header().Get("Content-Type"))
			} else {
				require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestWithTLSFlag(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		var flagged bool
		h := withTLSFlag(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			flagged = r.Context().Value(tlsKey{}) == true
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if withTLS {
			req.TLS = &tls.ConnectionState{}
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		require.Equal(t, withTLS, flagged)
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantStatus  int
		wantRetry   string
		wantBody    string
		presetLenOK bool
	}{
		{
			name:       "rate limited sets Retry-After rounded up",
			err:        &apierr.Error{Code: apierr.CodeRateLimited, Message: "too many failed logins; retry later", RetryAfter: 1500 * time.Millisecond},
			wantStatus: http.StatusTooManyRequests, wantRetry: "2",
			wantBody: `{"error":"rate_limited","message":"too many failed logins; retry later"}`,
		},
		{
			name:       "retry of the whole window",
			err:        &apierr.Error{Code: apierr.CodeRateLimited, Message: "slow down", RetryAfter: auth.TOTPWindow},
			wantStatus: http.StatusTooManyRequests, wantRetry: "900",
			wantBody: `{"error":"rate_limited","message":"slow down"}`,
		},
		{
			name:       "no retry, no header",
			err:        apierr.Errorf(apierr.CodeNotFound, "no such member"),
			wantStatus: http.StatusNotFound,
			wantBody:   `{"error":"not_found","message":"no such member"}`,
		},
		{
			name:       "unknown route",
			err:        errNotFound,
			wantStatus: http.StatusNotFound,
			wantBody:   `{"error":"not_found","message":"no such route"}`,
		},
		{
			name:       "internal hides the cause",
			err:        errors.New("open /var/lib/svc/secret.db: permission denied"),
			wantStatus: http.StatusInternalServerError,
			wantBody:   `{"error":"internal","message":"internal error"}`,
		},
		{
			name:       "stale content length is dropped",
			err:        apierr.Errorf(apierr.CodeConflict, "taken"),
			wantStatus: http.StatusConflict, presetLenOK: true,
			wantBody: `{"error":"conflict","message":"taken"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if tc.presetLenOK {
				rec.Header().Set("Content-Length", "99999")
			}
			writeError(rec, slog.New(slog.DiscardHandler), httptest.NewRequest(http.MethodPost, "/x", nil), tc.err)
			require.Equal(t, tc.wantStatus, rec.Code)
			require.Equal(t, tc.wantRetry, rec.Header().Get("Retry-After"))
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
			require.Empty(t, rec.Header().Get("Content-Length"))
			require.JSONEq(t, tc.wantBody, rec.Body.String())
		})
	}
}

func TestWithRecovery(t *testing.T) {
	g := newTestGateway()
	t.Run("panic becomes internal", func(t *testing.T) {
		h := g.withRecovery(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("secret detail") }))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		require.Equal(t, http.StatusInternalServerError, rec.Code)
		b := errorBody(t, rec)
		require.Equal(t, apierr.CodeInternal, b.Error)
		require.NotContains(t, rec.Body.String(), "secret")
	})
	t.Run("ErrAbortHandler propagates", func(t *testing.T) {
		h := g.withRecovery(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
		require.PanicsWithValue(t, http.ErrAbortHandler, func() {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		})
	})
}

func TestHeaderMatchers(t *testing.T) {
	incoming := []struct {
		name   string
		header string
		want   string
		ok     bool
	}{
		{name: "cookie", header: "Cookie", want: "grpcgateway-cookie", ok: true},
		{name: "cookie lower", header: "cookie", want: "grpcgateway-cookie", ok: true},
		{name: "protocol", header: "X-Svc-Protocol", want: "x-svc-protocol", ok: true},
		{name: "grpc metadata identity header", header: "Grpc-Metadata-X-Member"},
		{name: "forwarded for", header: "X-Forwarded-For"},
		{name: "http code", header: "X-Http-Code"},
		{name: "user agent", header: "User-Agent", want: "grpcgateway-user-agent", ok: true},
	}
	for _, tc := range incoming {
		t.Run("incoming "+tc.name, func(t *testing.T) {
			got, ok := incomingHeader(tc.header)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
	outgoing := []struct {
		name string
		key  string
		want string
		ok   bool
	}{
		{name: "set-cookie", key: "set-cookie", want: "Set-Cookie", ok: true},
		{name: "http code stays internal", key: "x-http-code"},
		{name: "content type", key: "content-type"},
		{name: "anything else", key: "x-internal"},
	}
	for _, tc := range outgoing {
		t.Run("outgoing "+tc.name, func(t *testing.T) {
			got, ok := outgoingHeader(tc.key)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}
