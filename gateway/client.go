package gateway

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/clientaddr"
)

// client is what the gateway knows of a request's client: its address,
// and, for a request through a trusted proxy, the place it holds in the
// connection guard until it authenticates or ends.
type client struct {
	addr    netip.Addr
	release func()
}

type clientKey struct{}

// clientOf is the client withClient found for r (nil outside it).
func clientOf(r *http.Request) *client {
	c, _ := r.Context().Value(clientKey{}).(*client)
	return c
}

// errProxiedBound answers a request through a trusted proxy whose client
// already holds its bound of unauthenticated requests and connections.
var errProxiedBound = &apierr.Error{
	Code:       apierr.CodeRateLimited,
	Message:    "too many unauthenticated requests from this address",
	RetryAfter: time.Second,
}

// withClient finds each request's client address: the TCP peer, or, when
// the peer is a trusted proxy, the client it names in X-Forwarded-For
// (package clientaddr; docs/DECISIONS.md, Reverse proxies). A proxy's
// connection is charged to no address at accept, so its requests are
// charged here instead, each to its client, until it authenticates
// (authenticated) or ends: one client behind the proxy at its bound is
// answered 429 while the others go on. A request of that client that
// carries a valid credential still goes on.
func (g *Gateway) withClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			next.ServeHTTP(w, r) // not a TCP peer (tests): nothing to find
			return
		}
		guard := g.guard()
		proxies := guard.Proxies()
		c := &client{addr: proxies.Client(peer.Addr(), r.Header.Values(clientaddr.Header))}
		if guard != nil && proxies.Trusted(peer.Addr()) {
			release, ok := guard.Hold(c.addr)
			if !ok && g.verified(r) {
				// A credential is no unauthenticated request: it goes on
				// uncounted, as an authenticated connection does.
				release, ok = func() {}, true
			}
			if !ok {
				g.log.DebugContext(r.Context(), "request refused: too many unauthenticated requests from its client",
					"client", c.addr.String(), "proxy", peer.Addr().String(), "max", guard.Max())
				if r.ContentLength != 0 {
					refuseUnread(w)
				}
				writeError(w, g.log, r, errProxiedBound)
				return
			}
			c.release = release
			defer release()
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, c)))
	})
}

// verified reports whether r carries a valid credential; it records
// nothing (the route authenticates again).
func (g *Gateway) verified(r *http.Request) bool {
	if g.authn == nil {
		return false
	}
	_, err := g.authn.Verify(r.Context(), auth.CredentialsFromHeader(r.Header))
	return err == nil
}

// clientAddr is r's client address as a string, "" when unknown.
func clientAddr(r *http.Request) string {
	if c := clientOf(r); c != nil {
		return c.addr.String()
	}
	return ""
}
