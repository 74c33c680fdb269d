package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cspDirective is the value of directive name in policy.
func cspDirective(t *testing.T, policy, name string) string {
	t.Helper()
	for d := range strings.SplitSeq(policy, ";") {
		f := strings.Fields(d)
		if len(f) > 0 && f[0] == name {
			return strings.Join(f[1:], " ")
		}
	}
	t.Fatalf("no %s in %q", name, policy)
	return ""
}

// TestUICSPScriptsOnlyFromStatic: the app's pages allow scripts and
// workers from /ui/static/ on the host the browser reached and nowhere else
// on the origin, so a member's upload under /fs/read cannot run as the app.
func TestUICSPScriptsOnlyFromStatic(t *testing.T) {
	g, _ := newMuxGateway(t)
	tests := []struct {
		name string
		host string
		want string
	}{
		{name: "loopback with a port", host: "127.0.0.1:8080", want: "127.0.0.1:8080/ui/static/"},
		{name: "a name on the default port", host: "broker.example.com", want: "broker.example.com/ui/static/"},
		{name: "IPv6 with a port", host: "[::1]:9000", want: "[::1]:9000/ui/static/"},
		{name: "a host that could bend the header", host: "a;script-src *", want: "'none'"},
		{name: "a host with a space", host: "a b", want: "'none'"},
		{name: "no host", host: "", want: "'none'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range []string{"/ui/", "/ui/static/js/app.js", "/ui/static/nope.js"} {
				req := httptest.NewRequest("GET", p, nil)
				req.Host = tt.host
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, req)
				csp := rec.Header().Get("Content-Security-Policy")
				require.Equal(t, tt.want, cspDirective(t, csp, "script-src"), "%s: %s", p, csp)
				require.Equal(t, tt.want, cspDirective(t, csp, "worker-src"), "%s: %s", p, csp)
				require.NotContains(t, cspDirective(t, csp, "script-src"), "'self'")
				require.NotContains(t, csp, "unsafe")
			}
		})
	}
}

// TestFsReadServedType: a stored file whose type a browser would run or
// apply as a script, worker or stylesheet goes out as
// application/octet-stream (nosniff then refuses it as any of them); other
// types go out as stored.
func TestFsReadServedType(t *testing.T) {
	tests := []struct {
		stored string
		want   string
	}{
		{"text/javascript", "application/octet-stream"},
		{"text/javascript; charset=utf-8", "application/octet-stream"},
		{"Text/JavaScript", "application/octet-stream"},
		{"application/javascript", "application/octet-stream"},
		{"application/x-javascript", "application/octet-stream"},
		{"application/ecmascript", "application/octet-stream"},
		{"text/ecmascript", "application/octet-stream"},
		{"text/jscript", "application/octet-stream"},
		{"text/livescript", "application/octet-stream"},
		{"text/javascript1.5", "application/octet-stream"},
		{"text/x-javascript", "application/octet-stream"},
		{"text/css", "application/octet-stream"},
		{"text/css; charset=utf-8", "application/octet-stream"},
		{"text/javascript;;", "application/octet-stream"},
		{"text/plain", "text/plain"},
		{"text/plain; charset=utf-8", "text/plain; charset=utf-8"},
		{"image/png", "image/png"},
		{"application/json", "application/json"},
		{"text/html", "text/html"},
		{"image/svg+xml", "image/svg+xml"},
		{"application/octet-stream", "application/octet-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.stored, func(t *testing.T) {
			require.Equal(t, tt.want, servedType(tt.stored))
		})
	}
}
