package e2e

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var semverRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func TestHealthz(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})

	r := p.do(t, http.MethodGet, "/healthz", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, "1", r.header.Get("X-SVC-Protocol"))
	require.Equal(t, []string{"status", "version"}, keys(r.body))
	require.Equal(t, "ok", r.body["status"])
	require.Regexp(t, semverRE, r.body["version"])

	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			b := mustCall(t, tr.connect(t, p), anonymous, "Health", nil)
			require.Equal(t, r.body, b, "both transports report the same health")
		})
	}
}

func TestProtocolHeader(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tests := []struct {
			name     string
			protocol string // "" sends none
			wantCode string
		}{
			{name: "absent means 1"},
			{name: "1", protocol: "1"},
			{name: "2", protocol: "2", wantCode: "unsupported_protocol"},
			{name: "0", protocol: "0", wantCode: "unsupported_protocol"},
			{name: "1.0", protocol: "1.0", wantCode: "unsupported_protocol"},
			{name: "v1", protocol: "v1", wantCode: "unsupported_protocol"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				for _, call := range []struct {
					op string
					c  cred
				}{
					{"Health", anonymous},
					{"GetBriefing", admin},
				} {
					r := d.call(t, call.c.withProtocol(tc.protocol), call.op, nil)
					require.Equal(t, tc.wantCode, r.code, "%s", call.op)
				}
			})
		}
		// The protocol is checked before credentials.
		mustFail(t, d, anonymous.withProtocol("2"), "GetBriefing", nil, "unsupported_protocol")
	})
}

// TestProtocolHeaderOutsideTheAPI covers REST routes that never reach a
// gRPC method: the rule holds for every request.
func TestProtocolHeaderOutsideTheAPI(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	for _, path := range []string{"/openapi.json", "/nope"} {
		t.Run(path, func(t *testing.T) {
			r := p.do(t, http.MethodGet, path, nil, withHeader("X-SVC-Protocol", "2"))
			requireRESTError(t, r, "unsupported_protocol")
			r = p.do(t, http.MethodGet, path, nil, withHeader("X-SVC-Protocol", "1"))
			require.Equal(t, "1", r.header.Get("X-SVC-Protocol"))
			require.NotEqual(t, http.StatusBadRequest, r.status)
		})
	}
}

func TestUnknownRouteIsJSON404(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	tok := p.adminToken(t)
	tests := []struct {
		name   string
		method string
		path   string
	}{
		{name: "unknown path", method: http.MethodGet, path: "/nope"},
		{name: "unknown sub-path", method: http.MethodGet, path: "/members/admin/tokens/x/y"},
		{name: "unknown method on a known path", method: http.MethodDelete, path: "/healthz"},
		{name: "gRPC path over HTTP/1.1", method: http.MethodPost, path: "/svc.v1.Broker/Health"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireRESTError(t, p.do(t, tc.method, tc.path, nil), "not_found")
			requireRESTError(t, p.do(t, tc.method, tc.path, nil, withBearer(tok)), "not_found")
		})
	}
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	r := p.do(t, http.MethodGet, "/openapi.json", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, "1", r.header.Get("X-SVC-Protocol"))
	require.NotNil(t, r.body, "a JSON object: %.200s", r.raw)
	_, swagger := r.body["swagger"]
	_, openapi := r.body["openapi"]
	require.True(t, swagger || openapi, "swagger or openapi key: %v", keys(r.body))
	paths, ok := r.body["paths"].(obj)
	require.True(t, ok)
	for _, path := range []string{"/healthz", "/briefing", "/roster", "/members", "/members/{name}", "/members/{name}/tokens", "/session/totp", "/session/logout"} {
		require.Contains(t, paths, path)
	}
}

func TestErrorBodies(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	tok := p.adminToken(t)
	tests := []struct {
		name     string
		body     any
		wantCode string
	}{
		{name: "malformed name", body: obj{"name": "-bad", "permissions": []string{}}, wantCode: "bad_request"},
		{name: "unknown permission", body: obj{"name": "bob", "permissions": []string{"root"}}, wantCode: "bad_request"},
		{name: "not JSON", body: []byte("{"), wantCode: "bad_request"},
		{name: "wrong field type", body: []byte(`{"name": 5}`), wantCode: "bad_request"},
		{name: "body over 1 MiB", body: bytes.Repeat([]byte(" "), 2<<20), wantCode: "payload_too_large"},
		{name: "chunked body over 1 MiB", body: io.MultiReader(strings.NewReader(`{"name": "bob", "instructions": "`), strings.NewReader(strings.Repeat("x", 2<<20)), strings.NewReader(`"}`)), wantCode: "payload_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireRESTError(t, p.do(t, http.MethodPost, "/members", tc.body, withBearer(tok)), tc.wantCode)
		})
	}

	// A validation error names the offending field.
	r := p.do(t, http.MethodPost, "/members", obj{"name": "a:b"}, withBearer(tok))
	requireRESTError(t, r, "bad_request")
	details := listOf(t, r.body, "details")
	require.Len(t, details, 1)
	require.Equal(t, "name", details[0]["field"])
	require.NotEmpty(t, details[0]["description"])
	require.Equal(t, []string{"admin"}, memberNames(t, restDriver{p}, bearer(tok)), "no refused create took effect")
}
