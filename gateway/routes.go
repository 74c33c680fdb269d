package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"svc/gen/openapi"
	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
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
	// The team stream: presence, live activity, channel and objective
	// changes, as the roster, channels and objectives show any member.
	"GET /team/stream": {plane: planeDual, rule: auth.AnyMember},
	"POST /fs/write":   {plane: planeDual, rule: auth.AnyMember},
	// Dispatched before the mux (see withFsRead); HEAD shares it.
	"GET /fs/read/": {plane: planeDual, rule: auth.AnyMember},
	// Telemetry: the services check self and read/self.
	"GET /members/{name}/activity/stream": {plane: planeDual, rule: auth.AnyMember},
	"POST /members/{name}/genai":          {plane: planeDual, rule: auth.AnyMember},
	"POST /otlp/v1/logs":                  {plane: planeBearer, rule: auth.AnyMember},
	"POST /otlp/v1/metrics":               {plane: planeBearer, rule: auth.AnyMember},
	// Inbound notifications: no credential; the endpoint's verifier is the
	// only check (hooks.md: Authentication).
	"POST /hooks/{slug}": {plane: planeNone, rule: auth.Public},
	// The web app (webui.go): its files are public, as is the redirect of
	// a browser's GET /; drawing a TOTP QR code takes a credential.
	"GET /{$}":    {plane: planeNone, rule: auth.Public},
	"GET /ui/":    {plane: planeNone, rule: auth.Public},
	"POST /ui/qr": {plane: planeDual, rule: auth.AnyMember},
	// Prometheus metrics: open to a loopback peer (unless switched off),
	// else a bearer holding metrics.read; handleMetrics checks both, as
	// the rule cannot say "loopback".
	"GET /metrics": {plane: planeNone, rule: auth.Public},
}

// publicMaxBody caps the bodies of public routes ({code, member} for a
// login): whoever sends them holds no credential, so a body may not be
// large, and with the pace guard it cannot be slow for long either.
const publicMaxBody = 4 << 10

// rpcRoutes maps each REST route of the gRPC services ("POST
// /members/{name}/rotate-token") to its gRPC method, read from the OpenAPI
// document the same build generated.
func rpcRoutes() (map[string]string, error) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		return nil, fmt.Errorf("gateway: read the OpenAPI document: %w", err)
	}
	out := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			svc, name, ok := strings.Cut(op.OperationID, "_")
			if !ok {
				return nil, fmt.Errorf("gateway: operationId %q is not Service_Method", op.OperationID)
			}
			out[strings.ToUpper(method)+" "+path] = "/" + string(apiv1.File_svc_v1_broker_proto.Package()) + "." + svc + "/" + name
		}
	}
	return out, nil
}

// patternVarRE matches a variable of a grpc-gateway pattern ("{name=*}").
var patternVarRE = regexp.MustCompile(`\{([^=}]+)=\*\}`)

// authBeforeBody is the gRPC-backed routes' middleware: it runs once the
// route is matched (an unknown route stays 404) and before anything reads
// the body. A request with a body to a route that is not public is
// authenticated first: whoever holds no credential is answered 401 at once,
// never by reading (and waiting for) what it sends. This check records
// nothing (Verify): the interceptors authenticate again once the body is in
// (it may have taken minutes, and a revoke answered meanwhile counts), and
// the permission table decides what the caller may do. A public route takes
// at most publicMaxBody.
func (g *Gateway) authBeforeBody(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if r.ContentLength == 0 {
			next(w, r, params)
			return
		}
		if g.isPublic(r) {
			if r.ContentLength > publicMaxBody {
				refuseUnread(w)
				writeError(w, g.log, r, apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", publicMaxBody))
				return
			}
			r = r.WithContext(r.Context())
			r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, publicMaxBody), limit: publicMaxBody}
			next(w, r, params)
			return
		}
		p, err := g.authn.Verify(r.Context(), auth.CredentialsFromHeader(r.Header))
		if err != nil {
			refuseUnread(w)
			writeError(w, g.log, r, err)
			return
		}
		g.authenticated(r, p)
		next(w, r, params)
	}
}

// isPublic reports whether r's matched route is a public method's; a route
// the table does not know is not (fail closed).
func (g *Gateway) isPublic(r *http.Request) bool {
	pat, ok := runtime.HTTPPattern(r.Context())
	if !ok {
		return false
	}
	method, ok := g.rpcRoutes[r.Method+" "+patternVarRE.ReplaceAllString(pat.String(), "{$1}")]
	if !ok {
		return false
	}
	rule, ok := auth.RuleFor(method)
	return ok && rule.Public
}

// authenticated counts r's connection, and r itself when it came through
// a trusted proxy, out of the unauthenticated ones.
func (g *Gateway) authenticated(r *http.Request, _ *auth.Principal) {
	if guard := g.guard(); guard != nil {
		guard.Authenticated(connKey(r))
	}
	if c := clientOf(r); c != nil && c.release != nil {
		c.release()
	}
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
	g.authenticated(r, p)
	if c := p.RefreshedCookie(); c != "" {
		if r.TLS != nil {
			c += "; Secure"
		}
		w.Header().Add("Set-Cookie", c)
	}
	return p, nil
}
