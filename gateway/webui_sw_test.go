package gateway

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The service worker is served from /ui/static/ but may control /ui/ (its
// notifications open app pages); no other file gets that header.
func TestWebUIServiceWorkerScope(t *testing.T) {
	g, _ := newMuxGateway(t)
	for path, want := range map[string]string{
		"/ui/static/sw.js":     "/ui/",
		"/ui/static/js/app.js": "",
		"/ui/chat":             "",
	} {
		req := httptest.NewRequest("GET", path, nil)
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		require.Equal(t, 200, rec.Code, path)
		require.Equal(t, want, rec.Header().Get("Service-Worker-Allowed"), path)
	}
	req := httptest.NewRequest("GET", "/ui/static/sw.js", nil)
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	require.Equal(t, "text/javascript; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "worker-src example.com/ui/static/;")
}
