package connguard

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeConn is a connection from a given remote address.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed bool
}

func (f *fakeConn) RemoteAddr() net.Addr { return f.remote }
func (f *fakeConn) Close() error         { f.closed = true; return nil }

func from(addr string) *fakeConn {
	return &fakeConn{remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))}
}

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
			g.Authenticated("10.0.0.1:1001")
			g.Authenticated("10.0.0.1:1001")
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
