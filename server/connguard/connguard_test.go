package connguard

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/clientaddr"
)

// fakeConn is a connection from a given remote address to a given local
// one.
type fakeConn struct {
	net.Conn
	local, remote net.Addr
	closed        bool
}

func (f *fakeConn) LocalAddr() net.Addr  { return f.local }
func (f *fakeConn) RemoteAddr() net.Addr { return f.remote }
func (f *fakeConn) Close() error         { f.closed = true; return nil }

func tcp(addr string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr)) }

func from(addr string) *fakeConn { return &fakeConn{local: tcp("127.0.0.1:7433"), remote: tcp(addr)} }

// key is the Key of a connection from addr to the default local address.
func key(addr string) string { return Key("127.0.0.1:7433", addr) }

func TestGuard(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	tests := []struct {
		name string
		run  func(t *testing.T, g *Guard)
	}{
		{"bounded per address", func(t *testing.T, g *Guard) {
			for port := range 3 {
				_, ok := g.Accept(from("10.0.0.1:" + strconv.Itoa(1000+port)))
				require.True(t, ok)
			}
			_, ok := g.Accept(from("10.0.0.1:2000"))
			require.False(t, ok, "a fourth unauthenticated connection of one address is refused")
			_, ok = g.Accept(from("10.0.0.2:1000"))
			require.True(t, ok, "other addresses are not affected")
			require.Equal(t, 3, g.Pending(a))
			require.Equal(t, 1, g.Pending(b))
			require.EqualValues(t, 1, g.Refused())
		}},
		{"closing releases", func(t *testing.T, g *Guard) {
			var conns []net.Conn
			for port := range 3 {
				c, ok := g.Accept(from("10.0.0.1:" + strconv.Itoa(1000+port)))
				require.True(t, ok)
				conns = append(conns, c)
			}
			require.NoError(t, conns[0].Close())
			require.NoError(t, conns[0].Close(), "closing twice releases once")
			require.Equal(t, 2, g.Pending(a))
			_, ok := g.Accept(from("10.0.0.1:2000"))
			require.True(t, ok)
			require.True(t, conns[0].(*conn).Conn.(*fakeConn).closed)
		}},
		{"authenticated connections do not count", func(t *testing.T, g *Guard) {
			var conns []net.Conn
			for port := range 3 {
				c, ok := g.Accept(from("10.0.0.1:" + strconv.Itoa(1000+port)))
				require.True(t, ok)
				conns = append(conns, c)
			}
			g.Authenticated(key("10.0.0.1:1001"))
			g.Authenticated(key("10.0.0.1:1001"))
			g.Authenticated("bufconn")
			require.Equal(t, 2, g.Pending(a))
			_, ok := g.Accept(from("10.0.0.1:2000"))
			require.True(t, ok)
			require.NoError(t, conns[1].Close())
			require.Equal(t, 3, g.Pending(a), "closing an authenticated connection releases nothing more")
		}},
		{"ipv4-mapped and plain are one address", func(t *testing.T, g *Guard) {
			_, ok := g.Accept(from("[::ffff:10.0.0.1]:1000"))
			require.True(t, ok)
			require.Equal(t, 1, g.Pending(a))
		}},
		{"an ipv6 /64 is one address", func(t *testing.T, g *Guard) {
			for _, ip := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"} {
				_, ok := g.Accept(from("[" + ip + "]:1000"))
				require.True(t, ok)
			}
			_, ok := g.Accept(from("[2001:db8:1:2:aaaa::1]:1000"))
			require.False(t, ok, "a fourth from the same /64 is refused")
			_, ok = g.Accept(from("[2001:db8:1:3::1]:1000"))
			require.True(t, ok, "another /64 is another address")
		}},
		{"one remote address on two listeners is two connections", func(t *testing.T, g *Guard) {
			// SO_REUSEADDR lets a client reuse its source port towards the
			// broker's cleartext and TLS ports at once.
			c1, ok := g.Accept(&fakeConn{local: tcp("127.0.0.1:7433"), remote: tcp("10.0.0.1:1000")})
			require.True(t, ok)
			c2, ok := g.Accept(&fakeConn{local: tcp("127.0.0.1:7443"), remote: tcp("10.0.0.1:1000")})
			require.True(t, ok)
			require.Equal(t, 2, g.Pending(a))
			g.Authenticated(Key("127.0.0.1:7443", "10.0.0.1:1000"))
			require.Equal(t, 1, g.Pending(a), "authenticating one leaves the other counted")
			require.NoError(t, c1.Close())
			require.NoError(t, c2.Close())
			require.Equal(t, 0, g.Pending(a), "both are released")
		}},
		{"a connection key is counted once", func(t *testing.T, g *Guard) {
			_, ok := g.Accept(from("10.0.0.1:1000"))
			require.True(t, ok)
			_, ok = g.Accept(from("10.0.0.1:1000"))
			require.False(t, ok)
			require.Equal(t, 1, g.Pending(a))
		}},
		{"bounded in all", func(t *testing.T, g *Guard) {
			for i := range g.Total() {
				_, ok := g.Accept(from(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 256), byte(i % 256)}), 1000).String()))
				require.True(t, ok)
			}
			_, ok := g.Accept(from("10.2.0.1:1000"))
			require.False(t, ok, "past the total a fresh address is refused too")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, New(3)) })
	}
	t.Run("no bound", func(t *testing.T) {
		g := New(0)
		for port := range 100 {
			_, ok := g.Accept(from("10.0.0.1:" + strconv.Itoa(1000+port)))
			require.True(t, ok)
		}
	})
}

func TestGuardProxies(t *testing.T) {
	proxies, err := clientaddr.Parse("127.0.0.1, 10.9.0.0/16")
	require.NoError(t, err)
	proxy := netip.MustParseAddr("127.0.0.1")
	c1, c2 := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	tests := []struct {
		name string
		run  func(t *testing.T, g *Guard)
	}{
		{"a proxy's connections are charged to no address", func(t *testing.T, g *Guard) {
			for port := range 10 {
				_, ok := g.Accept(from("127.0.0.1:" + strconv.Itoa(1000+port)))
				require.True(t, ok, "connection %d from the proxy", port)
			}
			require.Zero(t, g.Pending(proxy))
			_, ok := g.Accept(from("10.0.0.1:1000"))
			require.True(t, ok, "an untrusted address is charged as before")
			require.Equal(t, 1, g.Pending(netip.MustParseAddr("10.0.0.1")))
		}},
		{"a proxy's connections count toward the total", func(t *testing.T, g *Guard) {
			for i := range g.Total() {
				_, ok := g.Accept(from(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i / 256), byte(i % 256)}), 1000).String()))
				require.True(t, ok)
			}
			_, ok := g.Accept(from("127.0.0.1:1000"))
			require.False(t, ok, "a proxy cannot hold more than all connections together")
			_, ok = g.Accept(from("10.0.0.1:1000"))
			require.False(t, ok)
		}},
		{"closing and authenticating a proxy's connection", func(t *testing.T, g *Guard) {
			c, ok := g.Accept(from("127.0.0.1:1000"))
			require.True(t, ok)
			_, ok = g.Accept(from("127.0.0.1:1001"))
			require.True(t, ok)
			g.Authenticated(key("127.0.0.1:1001"))
			require.NoError(t, c.Close())
			require.Zero(t, g.all)
		}},
		{"requests are charged to the client the proxy names", func(t *testing.T, g *Guard) {
			var releases []func()
			for range 3 {
				release, ok := g.Hold(c1)
				require.True(t, ok)
				releases = append(releases, release)
			}
			_, ok := g.Hold(c1)
			require.False(t, ok, "a fourth unauthenticated request of one client is refused")
			release, ok := g.Hold(c2)
			require.True(t, ok, "another client behind the same proxy is not affected")
			release()
			require.Equal(t, 3, g.Pending(c1))
			require.Zero(t, g.Pending(c2))
			releases[0]()
			releases[0]()
			require.Equal(t, 2, g.Pending(c1), "releasing twice releases once")
			_, ok = g.Hold(c1)
			require.True(t, ok)
			require.EqualValues(t, 1, g.RefusedRequests())
			require.Zero(t, g.Refused())
		}},
		{"a client's direct connections and proxied requests share its bound", func(t *testing.T, g *Guard) {
			for port := range 2 {
				_, ok := g.Accept(from("198.51.100.1:" + strconv.Itoa(1000+port)))
				require.True(t, ok)
			}
			_, ok := g.Hold(c1)
			require.True(t, ok)
			_, ok = g.Hold(c1)
			require.False(t, ok)
			_, ok = g.Accept(from("198.51.100.1:2000"))
			require.False(t, ok)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, New(3, WithProxies(proxies))) })
	}
	t.Run("no bound", func(t *testing.T) {
		g := New(0, WithProxies(proxies))
		for range 100 {
			_, ok := g.Hold(c1)
			require.True(t, ok)
		}
	})
	t.Run("no proxies: a loopback peer is an ordinary address", func(t *testing.T) {
		g := New(3)
		for port := range 3 {
			_, ok := g.Accept(from("127.0.0.1:" + strconv.Itoa(1000+port)))
			require.True(t, ok)
		}
		_, ok := g.Accept(from("127.0.0.1:2000"))
		require.False(t, ok)
	})
}
