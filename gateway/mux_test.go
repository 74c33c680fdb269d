package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	apiv1 "svc/gen/svc/v1"
	"svc/server"
	"svc/server/apierr"
	"svc/server/auth"
)

// fakeBroker answers a few Broker RPCs the way the real services do: status
// and cookies through response headers, errors through apierr.ToStatus.
type fakeBroker struct {
	apiv1.UnimplementedBrokerServer

	mu   sync.Mutex
	seen metadata.MD // incoming metadata of the last call
}

func (b *fakeBroker) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	b.mu.Lock()
	b.seen = md.Copy()
	b.mu.Unlock()
}

func (b *fakeBroker) lastMD() metadata.MD {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen
}

func (b *fakeBroker) Health(ctx context.Context, _ *apiv1.HealthRequest) (*apiv1.HealthResponse, error) {
	b.record(ctx)
	// Headers a service sets for itself never reach HTTP clients.
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-internal", "secret"))
	return &apiv1.HealthResponse{Status: "ok", Version: "1.2.3"}, nil
}

func (b *fakeBroker) CreateMember(ctx context.Context, req *apiv1.CreateMemberRequest) (*apiv1.CreateMemberResponse, error) {
	b.record(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-http-code", "201"))
	return &apiv1.CreateMemberResponse{Member: &apiv1.Teammate{Name: req.GetName()}, Token: "svc_x"}, nil
}

func (b *fakeBroker) DeleteMember(ctx context.Context, _ *apiv1.DeleteMemberRequest) (*apiv1.DeleteMemberResponse, error) {
	b.record(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-http-code", "204"))
	return &apiv1.DeleteMemberResponse{}, nil
}

func (b *fakeBroker) RevokeToken(ctx context.Context, _ *apiv1.RevokeTokenRequest) (*apiv1.RevokeTokenResponse, error) {
	b.record(ctx)
	return nil, apierr.ToStatus(apierr.Errorf(apierr.CodeGone, "token already revoked")).Err()
}

func (b *fakeBroker) CreateSession(ctx context.Context, _ *apiv1.CreateSessionRequest) (*apiv1.CreateSessionResponse, error) {
	b.record(ctx)
	return nil, apierr.ToStatus(&apierr.Error{Code: apierr.CodeRateLimited, Message: "too many failed logins; retry later", RetryAfter: 61500 * time.Millisecond}).Err()
}

func (b *fakeBroker) Logout(ctx context.Context, _ *apiv1.LogoutRequest) (*apiv1.LogoutResponse, error) {
	b.record(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.ClearSessionCookie(), "x-http-code", "204"))
	return &apiv1.LogoutResponse{}, nil
}

// newMuxGateway serves fakeBroker over bufconn and returns the gateway in
// front of it, authenticating with newTestCreds's credentials (bob's
// bearer is in testBearer).
func newMuxGateway(t *testing.T) (*Gateway, *fakeBroker) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	fb := &fakeBroker{}
	apiv1.RegisterBrokerServer(srv, fb)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, conn.Close())
		srv.Stop()
		<-done
	})
	g, err := New(context.Background(), conn, nil)
	require.NoError(t, err)
	creds := newTestCreds(t)
	g.authn = creds.authn
	testBearer = creds.bobBearer
	return g, fb
}

// testBearer is the bearer of the last newMuxGateway.
var testBearer string

func TestGatewayRoutes(t *testing.T) {
	g, _ := newMuxGateway(t)
	session := auth.SessionCookieName + "=" + strings.Repeat("A", 43)

	tests := []struct {
		name        string
		method      string
		path        string
		body        string
		chunked     bool
		header      map[string]string
		tls         bool
		wantStatus  int
		wantCode    apierr.Code // error responses
		wantBody    string      // JSON success body, checked when set
		wantEmpty   bool
		wantRetry   string
		wantCookies []string
		anonymous   bool // no Authorization header
	}{
		{name: "health", method: http.MethodGet, path: "/healthz", anonymous: true, wantStatus: 200, wantBody: `{"status":"ok","version":"1.2.3"}`},
		{name: "a body without credentials is refused before it is read", method: http.MethodPost, path: "/members", body: `{"name":"bob"}`, anonymous: true, wantStatus: 401, wantCode: apierr.CodeUnauthenticated},
		{name: "a body with a bad credential is refused before it is read", method: http.MethodPost, path: "/members", body: `{"name":"bob"}`, header: map[string]string{"Authorization": "Bearer svc_nope"}, wantStatus: 401, wantCode: apierr.CodeUnauthenticated},
		{name: "a public route takes a body without credentials", method: http.MethodGet, path: "/healthz", body: `{}`, anonymous: true, wantStatus: 200},
		{name: "an unknown route with a body is still 404", method: http.MethodPost, path: "/nope", body: `{}`, anonymous: true, wantStatus: 404, wantCode: apierr.CodeNotFound},
		{name: "a public route takes a small body only", method: http.MethodPost, path: "/session/totp", body: `{"code":"` + strings.Repeat("1", publicMaxBody) + `"}`, anonymous: true, wantStatus: 413, wantCode: apierr.CodePayloadTooLarge},
		{name: "a public route takes a small body only, chunked too", method: http.MethodPost, path: "/session/totp", body: `{"code":"` + strings.Repeat("1", publicMaxBody) + `"}`, chunked: true, anonymous: true, wantStatus: 413, wantCode: apierr.CodePayloadTooLarge},
		{name: "create answers 201", method: http.MethodPost, path: "/members", body: `{"name":"bob"}`, wantStatus: 201},
		{name: "delete answers 204 with an empty body", method: http.MethodDelete, path: "/members/bob", wantStatus: 204, wantEmpty: true},
		{name: "logout clears the cookie", method: http.MethodPost, path: "/session/logout", body: `{}`, wantStatus: 204, wantEmpty: true, wantCookies: []string{auth.ClearSessionCookie()}},
		{name: "logout over tls marks the cookie Secure", method: http.MethodPost, path: "/session/logout", body: `{}`, tls: true, wantStatus: 204, wantEmpty: true, wantCookies: []string{auth.ClearSessionCookie() + "; Secure"}},
		{name: "domain error keeps its code", method: http.MethodDelete, path: "/members/bob/tokens/t1", wantStatus: 410, wantCode: apierr.CodeGone},
		{name: "rate limit sets Retry-After", method: http.MethodPost, path: "/session/totp", body: `{"code":"123456"}`, anonymous: true, wantStatus: 429, wantCode: apierr.CodeRateLimited, wantRetry: "62"},
		{name: "unknown route", method: http.MethodGet, path: "/no/such/route", wantStatus: 404, wantCode: apierr.CodeNotFound},
		{name: "wrong method", method: http.MethodPut, path: "/healthz", wantStatus: 404, wantCode: apierr.CodeNotFound},
		{name: "unimplemented rpc", method: http.MethodGet, path: "/roster", wantStatus: 404, wantCode: apierr.CodeNotFound},
		{name: "malformed json", method: http.MethodPost, path: "/members", body: `{"name":`, wantStatus: 400, wantCode: apierr.CodeBadRequest},
		{name: "unsupported protocol", method: http.MethodGet, path: "/healthz", header: map[string]string{"X-SVC-Protocol": "2"}, wantStatus: 400, wantCode: apierr.CodeUnsupportedProtocol},
		{name: "cross-origin cookie write", method: http.MethodPost, path: "/members", body: `{"name":"bob"}`, anonymous: true, header: map[string]string{"Cookie": session, "Origin": "https://evil.example"}, wantStatus: 403, wantCode: apierr.CodeForbidden},
		{name: "declared oversize body", method: http.MethodPost, path: "/members", body: `{"name":"` + strings.Repeat("x", DefaultMaxBody) + `"}`, wantStatus: 413, wantCode: apierr.CodePayloadTooLarge},
		{name: "chunked oversize body", method: http.MethodPost, path: "/members", body: `{"name":"` + strings.Repeat("x", DefaultMaxBody) + `"}`, chunked: true, wantStatus: 413, wantCode: apierr.CodePayloadTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
				if tc.chunked {
					body = io.MultiReader(body) // hides the length
				}
			}
			req := httptest.NewRequest(tc.method, "http://broker.test"+tc.path, body)
			if tc.chunked {
				req.ContentLength = -1
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if !tc.anonymous {
				req.Header.Set("Authorization", testBearer)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)

			require.Equal(t, tc.wantStatus, rec.Code, "body: %s", rec.Body.String())
			require.Equal(t, server.ProtocolVersion, rec.Header().Get("X-SVC-Protocol"))
			require.Equal(t, tc.wantRetry, rec.Header().Get("Retry-After"))
			require.Equal(t, tc.wantCookies, rec.Header().Values("Set-Cookie"))
			for k := range rec.Header() {
				require.False(t, strings.HasPrefix(strings.ToLower(k), "grpc-metadata-"), "metadata header %s leaked", k)
			}
			switch {
			case tc.wantCode != "":
				require.Equal(t, tc.wantCode, errorBody(t, rec).Error)
			case tc.wantEmpty:
				require.Empty(t, rec.Body.String())
				require.Empty(t, rec.Header().Get("Content-Type"))
			case tc.wantBody != "":
				require.JSONEq(t, tc.wantBody, rec.Body.String())
			}
		})
	}
}

func TestGatewayForwardsOnlyKnownHeaders(t *testing.T) {
	g, fb := newMuxGateway(t)
	req := httptest.NewRequest(http.MethodGet, "http://broker.test/healthz", nil)
	req.Header.Set("Authorization", "Bearer svc_abc")
	req.Header.Set("Cookie", "svc_session=xyz")
	req.Header.Set("X-SVC-Protocol", "1")
	req.Header.Set("Grpc-Metadata-X-Member", "root")
	req.Header.Set("Grpc-Metadata-Authorization", "Bearer forged")
	req.Header.Set("Grpc-Metadata-X-Svc-Conn", "127.0.0.1:7433|10.9.9.9:1")
	req.Header.Set("Grpc-Metadata-X-Svc-Client", "10.9.9.9")
	req.Header.Set("X-Svc-Client", "10.9.9.9")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("X-Http-Code", "201")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)

	md := fb.lastMD()
	require.Equal(t, []string{"Bearer svc_abc"}, md.Get("authorization"))
	require.Equal(t, []string{"svc_session=xyz"}, md.Get("grpcgateway-cookie"))
	require.Equal(t, []string{"1"}, md.Get("x-svc-protocol"))
	require.Empty(t, md.Get("x-member"))
	require.Empty(t, md.Get("x-http-code"))
	require.Empty(t, md.Get("cookie"))
	require.Equal(t, []string{""}, md.Get(server.ConnKeyMD), "the client's own connection (none on a recorder), never a forged one")
	require.Equal(t, []string{"192.0.2.1"}, md.Get(server.ClientAddrMD), "the client's own address (no trusted proxies), never a forged one")

	// The credentials the services read are exactly what the client sent.
	creds := auth.CredentialsFromMetadata(md)
	require.Equal(t, auth.Credentials{Bearer: "svc_abc", Session: "xyz"}, creds)

	// Service-internal response headers stay internal.
	require.Empty(t, rec.Header().Get("X-Internal"))
	require.Empty(t, rec.Header().Get("Grpc-Metadata-X-Internal"))
}

func TestGatewayOpenAPI(t *testing.T) {
	g, _ := newMuxGateway(t)
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://broker.test/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.True(t, json.Valid(rec.Body.Bytes()))
}
