package gateway

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Only a direct loopback peer is exempt: not another address, nor a
// request a proxy says it forwards.
func TestLoopbackPeer(t *testing.T) {
	for _, tc := range []struct {
		remote string
		header string
		want   bool
	}{
		{"127.0.0.1:5000", "", true},
		{"127.8.9.10:5000", "", true},
		{"[::1]:5000", "", true},
		{"10.0.0.1:5000", "", false},
		{"[2001:db8::1]:5000", "", false},
		{"localhost:5000", "", false}, // a name is not an address
		{"127.0.0.1", "", false},
		{"127.0.0.1:5000", "Forwarded", false},
		{"127.0.0.1:5000", "X-Forwarded-For", false},
		{"127.0.0.1:5000", "X-Real-Ip", false},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = tc.remote
		if tc.header != "" {
			r.Header.Set(tc.header, "203.0.113.9")
		}
		require.Equal(t, tc.want, loopbackPeer(r), "%s %s", tc.remote, tc.header)
	}
}
