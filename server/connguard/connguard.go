package connguard

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Guard counts the unauthenticated connections of each client address.
// Connections are known by their remote address ("ip:port"), which is
// unique per open TCP connection and is what both net/http (Request.
// RemoteAddr) and gRPC (peer.Addr) report.
type Guard struct {
	max int

	mu      sync.Mutex
	pending map[string]netip.Addr // remote address -> client address
	perIP   map[netip.Addr]int
	refused atomic.Int64
}

// New returns a guard that admits at most max unauthenticated connections
// per client address; max <= 0 admits any number.
func New(max int) *Guard {
	return &Guard{max: max, pending: map[string]netip.Addr{}, perIP: map[netip.Addr]int{}}
}

// Max is the bound per client address; <= 0 when there is none.
func (g *Guard) Max() int { return g.max }

// Accept admits a newly accepted connection: it returns c wrapped so that
// closing it releases its place, and ok false (with c untouched) when the
// client address is at its bound, in which case the caller closes c.
func (g *Guard) Accept(c net.Conn) (net.Conn, bool) {
	remote := c.RemoteAddr().String()
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		// Not an IP connection (a test pipe): nothing to count by.
		return c, true
	}
	ip := ap.Addr().Unmap()
	g.mu.Lock()
	if g.max > 0 && g.perIP[ip] >= g.max {
		g.mu.Unlock()
		g.refused.Add(1)
		return c, false
	}
	g.pending[remote] = ip
	g.perIP[ip]++
	g.mu.Unlock()
	return &conn{Conn: c, g: g, remote: remote}, true
}

// Authenticated records that a request on the connection from remote
// presented a valid credential: the connection no longer counts. Unknown
// addresses (in-process connections, connections already counted out) are
// ignored.
func (g *Guard) Authenticated(remote string) { g.release(remote) }

// Pending is how many unauthenticated connections the client address ip
// holds.
func (g *Guard) Pending(ip netip.Addr) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.perIP[ip.Unmap()]
}

// Refused is how many connections Accept has refused.
func (g *Guard) Refused() int64 { return g.refused.Load() }

func (g *Guard) release(remote string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ip, ok := g.pending[remote]
	if !ok {
		return
	}
	delete(g.pending, remote)
	if g.perIP[ip]--; g.perIP[ip] <= 0 {
		delete(g.perIP, ip)
	}
}

// conn releases its place when closed.
type conn struct {
	net.Conn
	g      *Guard
	remote string
	once   sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.g.release(c.remote) })
	return c.Conn.Close()
}
