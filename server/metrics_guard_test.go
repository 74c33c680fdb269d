package server

import (
	"net"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"svc/server/connguard"
)

// tcpConn is an accepted connection as the guard sees it: only its
// addresses matter.
type tcpConn struct {
	net.Conn
	local, remote net.Addr
}

func (c *tcpConn) LocalAddr() net.Addr  { return c.local }
func (c *tcpConn) RemoteAddr() net.Addr { return c.remote }
func (c *tcpConn) Close() error         { return nil }

func connFrom(t *testing.T, remote string) net.Conn {
	t.Helper()
	return &tcpConn{local: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:7433")),
		remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(remote))}
}

// The broker's /metrics shows what the connection guard holds and what it
// turned away, connections and proxied requests apart.
func TestMetricsConnGuard(t *testing.T) {
	g := connguard.New(1)
	s := startTestServer(t, mustMemStore(t), nil, Deps{}, WithConnGuard(g))
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		fams, err := s.Metrics().Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
		next:
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if labels[l.GetName()] != l.GetValue() {
						continue next
					}
				}
				if f.GetType().String() == "GAUGE" {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no %s%v on /metrics", name, labels)
		return 0
	}
	open := func() float64 { return value("svc_unauthenticated_connections", nil) }
	refused := func(kind string) float64 {
		return value("svc_unauthenticated_refused_total", map[string]string{"kind": kind})
	}
	require.Zero(t, open())

	first, ok := g.Accept(connFrom(t, "10.0.0.1:1000"))
	require.True(t, ok)
	_, ok = g.Accept(connFrom(t, "10.0.0.2:1000"))
	require.True(t, ok)
	require.EqualValues(t, 2, open())
	_, ok = g.Accept(connFrom(t, "10.0.0.1:1001"))
	require.False(t, ok, "the address is at its bound")
	require.EqualValues(t, 1, refused("connection"))
	require.Zero(t, refused("request"))

	release, ok := g.Hold(netip.MustParseAddr("198.51.100.7"))
	require.True(t, ok)
	_, ok = g.Hold(netip.MustParseAddr("198.51.100.7"))
	require.False(t, ok, "the proxied client is at its bound")
	require.EqualValues(t, 1, refused("request"))
	release()

	require.NoError(t, first.Close())
	require.EqualValues(t, 1, open(), "a closed connection gives its place back")
	require.EqualValues(t, 1, testutil.ToFloat64(guardMetrics(g)[1]), "the counters read the guard")
}
