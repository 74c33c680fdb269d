package gateway

import (
	"fmt"
	"net/http"
	"time"

	"svc/server/auth"
)

// plane is how a hand-written route takes its credential (spec:
// Authentication).
type plane int

const (
	// planeNone reads no credential: the route is public, or checks what it
	// receives itself (a hook's signature).
	planeNone plane = iota
	// planeBearer reads only Authorization: Bearer.
	planeBearer
	// planeSession reads only the session cookie.
	planeSession
	// planeDual reads a bearer token or the session cookie.
	planeDual
)

// routeRule is what a hand-written route demands of its caller.
type routeRule struct {
	plane plane
	// rule is the permission rule after authentication; ownership checks
	// (self, read/self) stay in the service, as for gRPC methods.
	rule auth.Rule
}

// routeRules declares every hand-written HTTP route (the REST routes of the
// gRPC services are covered by the services' permission table): pattern in
// http.ServeMux syntax → plane and rule. Registering a route that has no
// entry fails New (fail closed); TestEveryRouteIsDeclared checks that every
// entry is registered and every registered route declared.
var routeRules = map[string]routeRule{
	"GET /openapi.json": {plane: planeNone, rule: auth.Public},
	"GET /subscribe":    {plane: planeDual, rule: auth.AnyMember},
	"POST /fs/write":    {plane: planeDual, rule: auth.AnyMember},
	// Dispatched before the mux (see withFsRead); HEAD shares it.
	"GET /fs/read/": {plane: planeDual, rule: auth.AnyMember},
}

// publicBodyRoutes are the REST routes of public gRPC methods that take a
// body: every other request with a body is authenticated before its body
// is read (withAuthBeforeBody). TestPublicBodyRoutes derives the list from
// the OpenAPI document and the permission table.
var publicBodyRoutes = map[string]bool{
	"POST /session/totp": true,
}

// withAuthBeforeBody authenticates a request to a gRPC-backed route that
// carries a body before anything reads the body: whoever holds no
// credential is answered 401 at once, never by reading (and waiting for)
// what it sends. The interceptors authenticate again, as for every call;
// the services' table decides what the caller may do.
func (g *Gateway) withAuthBeforeBody(next http.Handler) http.Handler {
	anyMember := routeRule{plane: planeDual, rule: auth.AnyMember}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && !publicBodyRoutes[r.Method+" "+r.URL.Path] {
			if _, err := g.admit(w, r, anyMember); err != nil {
				refuseUnread(w)
				writeError(w, g.log, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuseUnread closes the connection after this response without reading
// its request body: net/http would otherwise wait for (up to 256 KiB of)
// the body, at whatever pace the client sends it, before answering and
// again before closing.
func refuseUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// routeFunc is a hand-written route's handler: p is the authenticated
// caller, nil on planeNone.
type routeFunc func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error

// route returns the handler of a declared route: it authenticates on the
// route's plane, admits the rule, slides a session cookie, then runs h.
func (g *Gateway) route(pattern string, h routeFunc) (http.Handler, error) {
	rr, ok := routeRules[pattern]
	if !ok {
		return nil, fmt.Errorf("gateway: route %q is not declared in routeRules", pattern)
	}
	g.registered = append(g.registered, pattern)
	return g.handle(func(w http.ResponseWriter, r *http.Request) error {
		p, err := g.admit(w, r, rr)
		if err != nil {
			if r.ContentLength != 0 {
				refuseUnread(w)
			}
			return err
		}
		return h(w, r, p)
	}), nil
}

// admit authenticates r on the rule's plane and checks the rule. A
// credential of another plane is not read: a cookie on a bearer route is no
// credential at all.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, rr routeRule) (*auth.Principal, error) {
	if rr.plane == planeNone {
		return nil, rr.rule.Admit(nil)
	}
	creds := auth.CredentialsFromHeader(r.Header)
	switch rr.plane {
	case planeBearer:
		creds.Session = ""
	case planeSession:
		creds.Bearer = ""
	}
	p, err := g.authn.Authenticate(r.Context(), creds)
	if err != nil {
		return nil, err
	}
	if err := rr.rule.Admit(p); err != nil {
		return nil, err
	}
	if guard := g.guard(); guard != nil {
		guard.Authenticated(r.RemoteAddr)
	}
	if c := p.RefreshedCookie(); c != "" {
		if r.TLS != nil {
			c += "; Secure"
		}
		w.Header().Add("Set-Cookie", c)
	}
	return p, nil
}
