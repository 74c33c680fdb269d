package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Input that is not UTF-8 once decoded, in a path or query, is 400
// bad_request on every route, authenticated or not, and is never an
// internal error.
func TestInvalidUTF8IsBadRequest(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	routes := []struct{ method, path string }{
		{http.MethodGet, "/objectives/%FF"},
		{http.MethodGet, "/history?channel=%FF"},
		{http.MethodGet, "/history?with=%FF"},
		{http.MethodGet, "/history?thread=obj:%FF"},
		{http.MethodGet, "/history?%FF=1"},
		{http.MethodGet, "/fs/ls?path=%FF"},
		{http.MethodGet, "/fs/stat?path=/admin/%FF"},
		{http.MethodGet, "/fs/read/admin/%FF"},
		{http.MethodPost, "/fs/write?path=/admin/%FF"},
		{http.MethodGet, "/channels/%FF"},
		{http.MethodPatch, "/channels/%FF"},
		{http.MethodGet, "/members/%FF/tokens"},
		{http.MethodPatch, "/members/%FF"},
		{http.MethodDelete, "/members/%C0%AF"},
		{http.MethodDelete, "/push/subscriptions/%FF"},
		{http.MethodGet, "/subscribe?name=%FF"},
		{http.MethodGet, "/objectives?assignee=%FF"},
	}
	for _, rt := range routes {
		for _, who := range []string{"admin", "anonymous"} {
			t.Run(rt.method+" "+rt.path+" as "+who, func(t *testing.T) {
				var opts []reqOpt
				if who == "admin" {
					opts = append(opts, withBearer(admin))
				}
				var body any
				if rt.method == http.MethodPatch || rt.method == http.MethodPost {
					body = obj{}
				}
				requireRESTError(t, p.do(t, rt.method, rt.path, body, opts...), "bad_request")
			})
		}
	}
	require.NotContains(t, p.stderr.String(), "level=ERROR")
}

// JSON values in a request nest at most 64 levels: deeper is 400, over REST
// and gRPC, however deep.
func TestDeepNestingIsBadRequest(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	tok := p.adminToken(t)
	admin := bearer(tok)
	// data of depth levels: the object itself, and depth-1 more inside.
	data := func(depth int) obj {
		v := `1`
		for range depth - 1 {
			v = `{"a":` + v + `}`
		}
		var o obj
		require.NoError(t, json.Unmarshal([]byte(`{"v":`+v+`}`), &o))
		return o
	}
	for _, tr := range transports {
		d := tr.connect(t, p)
		t.Run(tr.name, func(t *testing.T) {
			mustCall(t, d, admin, "Push", obj{"body": "deep enough", "data": data(64)})
			mustFail(t, d, admin, "Push", obj{"body": "too deep", "data": data(65)}, "bad_request")
			mustFail(t, d, admin, "Push", obj{"body": "far too deep", "data": data(300)}, "bad_request")
		})
	}
	// REST bodies far past any decoder's comfort are refused while decoding.
	deep := strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000)
	r := p.do(t, http.MethodPost, "/push", []byte(`{"body":"x","data":`+deep+`}`), withBearer(tok))
	requireRESTError(t, r, "bad_request")
	require.NotContains(t, p.stderr.String(), "level=ERROR")
}
