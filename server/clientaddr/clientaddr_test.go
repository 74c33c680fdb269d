package clientaddr

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, list, want, err string
	}{
		{name: "empty", list: "", want: ""},
		{name: "spaces and empty entries", list: " , ,", want: ""},
		{name: "address and ranges", list: "127.0.0.1, 10.0.0.0/8,fd00::/8 ,::1", want: "127.0.0.1/32,10.0.0.0/8,fd00::/8,::1/128"},
		{name: "mapped address", list: "::ffff:10.1.2.3", want: "10.1.2.3/32"},
		{name: "host bits", list: "10.0.0.1/8", err: "did you mean 10.0.0.0/8"},
		{name: "mapped range", list: "::ffff:10.0.0.0/104", err: "as IPv4"},
		{name: "hostname", list: "proxy.local", err: `"proxy.local": not an IP address`},
		{name: "zone", list: "fe80::1%eth0", err: "not an IP address"},
		{name: "bad prefix", list: "10.0.0.0/33", err: "not an IP address"},
		{name: "port", list: "10.0.0.1:80", err: "not an IP address"},
		{name: "too many", list: strings.Repeat("10.0.0.1,", MaxProxies+1), err: "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.list)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, p.String())
		})
	}
}

func TestClient(t *testing.T) {
	p, err := Parse("127.0.0.1, 10.0.0.0/8, fd00::/8")
	require.NoError(t, err)
	tests := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{name: "direct, no header", peer: "203.0.113.9", want: "203.0.113.9"},
		{name: "untrusted peer: header ignored", peer: "203.0.113.9", xff: []string{"198.51.100.1"}, want: "203.0.113.9"},
		{name: "trusted peer, no header", peer: "127.0.0.1", want: "127.0.0.1"},
		{name: "trusted peer, one client", peer: "127.0.0.1", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "a client's forged entry is left of the real one", peer: "127.0.0.1", xff: []string{"1.1.1.1, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "chain of trusted proxies", peer: "10.0.0.2", xff: []string{"1.1.1.1, 198.51.100.1, 10.0.0.7"}, want: "198.51.100.1"},
		{name: "repeated header lines are one list", peer: "127.0.0.1", xff: []string{"1.1.1.1", "198.51.100.1,10.9.9.9"}, want: "198.51.100.1"},
		{name: "mapped peer", peer: "::ffff:127.0.0.1", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "mapped client", peer: "127.0.0.1", xff: []string{"::ffff:198.51.100.1"}, want: "198.51.100.1"},
		{name: "ipv6 client", peer: "fd00::1", xff: []string{"2001:db8::5"}, want: "2001:db8::5"},
		{name: "ipv6 client with zone", peer: "fd00::1", xff: []string{"fe80::5%eth0"}, want: "fe80::5"},
		{name: "client with port", peer: "127.0.0.1", xff: []string{"198.51.100.1:5555"}, want: "198.51.100.1"},
		{name: "garbage where the client should be: the peer", peer: "127.0.0.1", xff: []string{"198.51.100.1, not-an-ip"}, want: "127.0.0.1"},
		{name: "unspecified: the peer", peer: "127.0.0.1", xff: []string{"0.0.0.0"}, want: "127.0.0.1"},
		{name: "empty header: the peer", peer: "127.0.0.1", xff: []string{""}, want: "127.0.0.1"},
		{name: "only trusted entries: the peer", peer: "127.0.0.1", xff: []string{"10.1.1.1, 10.2.2.2"}, want: "127.0.0.1"},
		{name: "garbage left of the client is never read", peer: "127.0.0.1", xff: []string{"<script>, ;;, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "oversized: the right end is read", peer: "127.0.0.1", xff: []string{strings.Repeat("1.1.1.1, ", 100000) + "198.51.100.1"}, want: "198.51.100.1"},
		{name: "oversized single entry: the peer", peer: "127.0.0.1", xff: []string{strings.Repeat("9", 3*MaxHeader)}, want: "127.0.0.1"},
		{name: "oversized, all trusted at the right end: the peer", peer: "127.0.0.1", xff: []string{"198.51.100.1, " + strings.Repeat("10.0.0.1, ", 1000) + "10.0.0.1"}, want: "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Client(netip.MustParseAddr(tc.peer), tc.xff)
			require.Equal(t, tc.want, got.String())
		})
	}
}

func TestNilTrustsNone(t *testing.T) {
	var p *Proxies
	peer := netip.MustParseAddr("127.0.0.1")
	require.False(t, p.Trusted(peer))
	require.Equal(t, peer, p.Client(peer, []string{"198.51.100.1"}))
	require.Zero(t, p.Len())
	empty, err := Parse("")
	require.NoError(t, err)
	require.Equal(t, peer, empty.Client(peer, []string{"198.51.100.1"}))
}

// FuzzClient: whatever the header, an untrusted peer is its own client,
// and a trusted peer's client is the peer or an address written in the
// header; nothing panics.
func FuzzClient(f *testing.F) {
	f.Add("127.0.0.1", "198.51.100.1", "")
	f.Add("127.0.0.1", "1.1.1.1, 10.0.0.1", "2001:db8::1")
	f.Add("10.0.0.9", "[2001:db8::1]:80, for=1.2.3.4", "\x00,,,")
	f.Add("203.0.113.1", "198.51.100.1", "")
	f.Add("127.0.0.1", strings.Repeat("1.2.3.4,", 1000), "fe80::1%25eth0")
	p, err := Parse("127.0.0.1, 10.0.0.0/8, fd00::/8")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, peer, h1, h2 string) {
		a, err := netip.ParseAddr(peer)
		if err != nil {
			return
		}
		a = a.Unmap().WithZone("")
		got := p.Client(a, []string{h1, h2})
		if !p.Trusted(a) {
			if got != a {
				t.Fatalf("untrusted peer %s became %s", a, got)
			}
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %v", got)
		}
		if got != a && !inHeader(h1+","+h2, got) {
			t.Fatalf("client %s is neither the peer nor in the header %q %q", got, h1, h2)
		}
	})
}

// inHeader reports whether got is written in the header h in some form
// (mapped, zoned, bracketed, with a port), read as leniently as the
// X-Forwarded-For parser reads it.
func inHeader(h string, got netip.Addr) bool {
	for _, e := range strings.Split(h, ",") {
		e = strings.TrimSpace(e)
		if host, _, err := net.SplitHostPort(e); err == nil {
			e = host
		}
		e = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")
		if i := strings.LastIndexByte(e, '%'); i > 0 {
			e = e[:i] // a zone, possibly empty
		}
		if a, err := netip.ParseAddr(e); err == nil && a.Unmap().WithZone("") == got {
			return true
		}
	}
	return false
}
