package egress

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPermits(t *testing.T) {
	lan := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("::1/128")}}
	tests := []struct {
		ip     string
		policy Policy
		want   bool
	}{
		{"93.184.216.34", Policy{}, true},
		{"2606:2800:220:1::1", Policy{}, true},
		{"127.0.0.1", Policy{}, false},
		{"::1", Policy{}, false},
		{"10.1.2.3", Policy{}, false},
		{"172.16.0.1", Policy{}, false},
		{"192.168.1.1", Policy{}, false},
		{"169.254.169.254", Policy{}, false},
		{"fe80::1", Policy{}, false},
		{"fd00::1", Policy{}, false},
		{"0.0.0.0", Policy{}, false},
		{"::", Policy{}, false},
		{"224.0.0.1", Policy{}, false},
		{"::ffff:127.0.0.1", Policy{}, false},
		{"100.64.0.1", Policy{}, false},
		{"100.127.255.254", Policy{}, false},
		{"100.128.0.1", Policy{}, true},
		{"198.18.0.1", Policy{}, false},
		{"198.19.255.255", Policy{}, false},
		{"198.20.0.1", Policy{}, true},
		{"192.0.0.170", Policy{}, false},
		{"192.0.2.1", Policy{}, false},
		{"198.51.100.7", Policy{}, false},
		{"203.0.113.9", Policy{}, false},
		{"240.0.0.1", Policy{}, false},
		{"255.255.255.255", Policy{}, false},
		{"64:ff9b::7f00:1", Policy{}, false},
		{"64:ff9b::5db8:d822", Policy{}, false},
		{"64:ff9b:1::a00:1", Policy{}, false},
		{"2002:7f00:1::1", Policy{}, false},
		{"2001::1", Policy{}, false},
		{"2001:db8::1", Policy{}, false},
		{"100::1", Policy{}, false},
		{"::7f00:1", Policy{}, false},
		{"fec0::1", Policy{}, false},
		{"ff02::1", Policy{}, false},
		{"3fff::1", Policy{}, false},
		{"2a00:1450:4001:81b::200e", Policy{}, true},
		{"8.8.8.8", Policy{}, true},
		{"1.1.1.1", Policy{}, true},
		{"10.1.2.3", lan, true},
		{"10.2.0.1", lan, false},
		{"::1", lan, true},
		{"127.0.0.1", lan, false},
		{"127.0.0.1", AllowAll, true},
		{"fd00::1", AllowAll, true},
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			require.Equal(t, tc.want, tc.policy.Permits(netip.MustParseAddr(tc.ip)))
		})
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "127.0.0.0/8", want: []string{"127.0.0.0/8"}},
		{in: " 10.0.0.1 , ::1", want: []string{"10.0.0.1/32", "::1/128"}},
		{in: "10.1.2.3/16", want: []string{"10.1.0.0/16"}},
		{in: "localhost", wantErr: true},
		{in: "10.0.0.0/33", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParsePolicy(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, pr := range p.Allow {
				got = append(got, pr.String())
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// The policy holds at dial time: a refused address is never contacted,
// and an allowed one is.
func TestClientDial(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + lis.Addr().String() + "/push"

	_, err = NewClient(Options{}).Post(url, "text/plain", strings.NewReader("x"))
	var refused *RefusedError
	require.True(t, errors.As(err, &refused), "got %v", err)
	require.Equal(t, "127.0.0.1", refused.Addr.String())

	allowed, err := ParsePolicy("127.0.0.0/8")
	require.NoError(t, err)
	resp, err := NewClient(Options{Policy: allowed}).Post(url, "text/plain", strings.NewReader("x"))
	require.NoError(t, err, "allowed when the policy names the range")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
}

// A redirect is never followed: it could lead anywhere.
func TestClientNoRedirect(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.RedirectHandler("http://10.0.0.1/", http.StatusFound), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	resp, err := NewClient(Options{Policy: AllowAll}).Get("http://" + lis.Addr().String())
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
}

// Whatever Public admits is none of what the standard library calls
// local, and no IPv4 address hides behind an IPv6 form of it.
func FuzzPublic(f *testing.F) {
	for _, s := range []string{"8.8.8.8", "127.0.0.1", "::1", "64:ff9b::a00:1", "::ffff:10.0.0.1", "fe80::1", "100.64.1.1"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, ok := netip.AddrFromSlice(b)
		if !ok || !Public(ip) {
			return
		}
		u := ip.Unmap()
		require.False(t, u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() || u.IsLinkLocalMulticast() ||
			u.IsUnspecified() || u.IsMulticast() || u.IsInterfaceLocalMulticast(), "%s", ip)
		require.True(t, Public(u), "an IPv4-mapped address is judged as its IPv4 address")
	})
}
