package connguard

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"svc/server/clientaddr"
)

// Key names one TCP connection: its local and remote addresses together,
// unique while it is open even when one guard serves several listeners.
// net/http gives both (http.LocalAddrContextKey, Request.RemoteAddr), and
// so does gRPC (peer.Peer).
func Key(local, remote string) string { return local + "|" + remote }

// totalFactor sets the bound on all unauthenticated connections together:
// this many client addresses at their bound.
const totalFactor = 16

// Guard counts the unauthenticated connections of each client address. A
// client address is an IPv4 address or an IPv6 /64 (one host usually
// holds a whole /64, so a bound per /128 would bound nothing).
//
// A connection from a trusted reverse proxy carries many clients, so it
// is charged to no client address: it counts only toward the bound on all
// connections. Its requests are charged instead, each to the client the
// proxy names, from the moment it arrives until it authenticates or ends
// (Hold).
type Guard struct {
	max, total int
	proxies    *clientaddr.Proxies

	mu      sync.Mutex
	pending map[string]netip.Prefix // connection key -> client address (invalid: a proxy's)
	perAddr map[netip.Prefix]int    // connections and held requests
	all     int
	refused atomic.Int64
	held    atomic.Int64 // requests refused by Hold
}

// Option configures a Guard.
type Option func(*Guard)

// WithProxies names the reverse proxies whose connections carry other
// clients' requests.
func WithProxies(p *clientaddr.Proxies) Option { return func(g *Guard) { g.proxies = p } }

// New returns a guard that admits at most max unauthenticated connections
// (and requests held through proxies) per client address, and 16 x max
// connections in all; max <= 0 admits any number.
func New(max int, opts ...Option) *Guard {
	g := &Guard{max: max, total: max * totalFactor, pending: map[string]netip.Prefix{}, perAddr: map[netip.Prefix]int{}}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Proxies are the trusted reverse proxies; nil when there are none (or
// no guard).
func (g *Guard) Proxies() *clientaddr.Proxies {
	if g == nil {
		return nil
	}
	return g.proxies
}

// Max is the bound per client address; <= 0 when there is none.
func (g *Guard) Max() int { return g.max }

// Total is the bound on all unauthenticated connections together; <= 0
// when there is none.
func (g *Guard) Total() int { return g.total }

// clientAddr is what a connection from ip counts against.
func clientAddr(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// Accept admits a newly accepted connection: it returns c wrapped so that
// closing it releases its place, and ok false (with c untouched) when its
// client address, or the broker as a whole, is at its bound; the caller
// then closes c.
func (g *Guard) Accept(c net.Conn) (net.Conn, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		// Not an IP connection (a test pipe): nothing to count by.
		return c, true
	}
	key := Key(c.LocalAddr().String(), c.RemoteAddr().String())
	var addr netip.Prefix // a proxy's connection: no client address
	if !g.proxies.Trusted(ap.Addr()) {
		addr = clientAddr(ap.Addr())
	}
	g.mu.Lock()
	if _, dup := g.pending[key]; dup || g.max > 0 && (addr.IsValid() && g.perAddr[addr] >= g.max || g.all >= g.total) {
		g.mu.Unlock()
		g.refused.Add(1)
		return c, false
	}
	g.pending[key] = addr
	if addr.IsValid() {
		g.perAddr[addr]++
	}
	g.all++
	g.mu.Unlock()
	return &conn{Conn: c, g: g, key: key}, true
}

// Authenticated records that a request on the connection named key (see
// Key) presented a valid credential: the connection no longer counts.
// Unknown keys (in-process connections, connections already counted out)
// are ignored.
func (g *Guard) Authenticated(key string) { g.release(key) }

// Hold charges a request that came through a trusted proxy to client, the
// address the proxy named: ok false when that address is at its bound
// (the caller refuses the request). release, which the caller runs when
// the request authenticates or ends, frees the place; running it again
// does nothing.
func (g *Guard) Hold(client netip.Addr) (release func(), ok bool) {
	if g.max <= 0 || !client.IsValid() {
		return func() {}, true
	}
	addr := clientAddr(client)
	g.mu.Lock()
	if g.perAddr[addr] >= g.max {
		g.mu.Unlock()
		g.held.Add(1)
		return nil, false
	}
	g.perAddr[addr]++
	g.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { g.mu.Lock(); g.drop(addr); g.mu.Unlock() }) }, true
}

// Pending is how many unauthenticated connections (and requests held
// through proxies) the client address of ip holds.
func (g *Guard) Pending(ip netip.Addr) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.perAddr[clientAddr(ip)]
}

// Open is how many unauthenticated connections the guard counts now
// (proxies' connections included).
func (g *Guard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.all
}

// Refused is how many connections Accept has refused.
func (g *Guard) Refused() int64 { return g.refused.Load() }

// RefusedRequests is how many proxied requests Hold has refused.
func (g *Guard) RefusedRequests() int64 { return g.held.Load() }

func (g *Guard) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	addr, ok := g.pending[key]
	if !ok {
		return
	}
	delete(g.pending, key)
	g.all--
	if addr.IsValid() {
		g.drop(addr)
	}
}

// drop gives back one place of addr; g.mu is held.
func (g *Guard) drop(addr netip.Prefix) {
	if g.perAddr[addr]--; g.perAddr[addr] <= 0 {
		delete(g.perAddr, addr)
	}
}

// conn releases its place when closed.
type conn struct {
	net.Conn
	g    *Guard
	key  string
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.g.release(c.key) })
	return c.Conn.Close()
}
