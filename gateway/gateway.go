package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"svc/gen/openapi"
	apiv1 "svc/gen/svc/v1"
	"svc/server"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/connguard"
	"svc/server/toolsources"
)

// maxDecodeDepth bounds how deeply messages of a JSON request body may
// nest while the gateway decodes it.
const maxDecodeDepth = 1000

// DefaultMaxBody caps JSON request bodies of REST routes. Routes with other
// caps (file writes, tool args) set their own.
const DefaultMaxBody = 1 << 20

// Gateway is the HTTP handler of every non-gRPC request.
type Gateway struct {
	log     *slog.Logger
	srv     *server.Server
	authn   *auth.Authenticator
	handler http.Handler
	// rpcRoutes maps the REST routes of the gRPC services to their methods.
	rpcRoutes map[string]string
	// registered are the hand-written routes New registered, for the test
	// that holds them to routeRules.
	registered []string
	// ui are the web app's embedded files (webui.go).
	ui *uiAssets
	// metricsClosed refuses GET /metrics to loopback peers without
	// metrics.read too (WithMetricsLoopbackOpen).
	metricsClosed bool
	// ping, when positive, replaces pingInterval (tests).
	ping time.Duration
	// writeWait, when positive, replaces writeTimeout (tests).
	writeWait time.Duration
	// genericPush leaves POST /push to grpc-gateway's generic route, as
	// before handlePush (tests hold the two to each other).
	genericPush bool
	// pushesServed counts the requests handlePush served itself (tests).
	pushesServed atomic.Int64
}

// Option sets an optional setting.
type Option func(*Gateway)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(g *Gateway) { g.log = l } }

// WithMetricsLoopbackOpen sets whether GET /metrics answers a loopback
// peer without a credential (the default) or asks it for a bearer with
// metrics.read like anyone else.
func WithMetricsLoopbackOpen(open bool) Option { return func(g *Gateway) { g.metricsClosed = !open } }

// New builds the REST facade over conn, a connection to the server's
// services through their interceptors (so auth always runs): the server's
// Local connection, or a client connection to its gRPC server.
func New(ctx context.Context, conn grpc.ClientConnInterface, srv *server.Server, opts ...Option) (*Gateway, error) {
	routes, err := rpcRoutes()
	if err != nil {
		return nil, err
	}
	g := &Gateway{log: slog.New(slog.NewTextHandler(io.Discard, nil)), srv: srv, rpcRoutes: routes}
	if srv != nil {
		g.authn = srv.Authenticator()
	}
	for _, o := range opts {
		o(g)
	}
	if g.ui, err = loadUIAssets(); err != nil {
		return nil, err
	}
	pb := &runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{EmitDefaultValues: true},
		// Deeper than this is refused while decoding (400); the
		// services refuse JSON values past 64 levels with a clearer
		// message, and the decoders' own limit (10,000) is never
		// reached.
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: maxDecodeDepth},
	}
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, pb),
		runtime.WithErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			// grpc-gateway reports a body cut off by the cap as a decoding
			// error (400); the client must see 413.
			if b, ok := r.Body.(*limitedBody); ok && b.hit {
				err = apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", b.limit)
			}
			if bodyTooSlow(r) {
				err = errBodyTooSlow
			}
			writeError(w, g.log, r, err)
		}),
		runtime.WithRoutingErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
			switch code {
			case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
				writeError(w, g.log, r, errNotFound)
			default:
				writeError(w, g.log, r, apierr.Errorf(apierr.CodeBadRequest, "%s", http.StatusText(code)))
			}
		}),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		// The client's connection, for the services' connection
		// accounting: the interceptors trust it only on the local
		// connection.
		runtime.WithMetadata(func(_ context.Context, r *http.Request) metadata.MD {
			md := metadata.Pairs(server.ConnKeyMD, connKey(r))
			// The request's own host and scheme, for enrollment
			// verification URIs (trusted only on this connection too).
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			md.Append(server.ForwardedHostMD, r.Host)
			md.Append(server.ForwardedSchemeMD, scheme)
			// The client's address (a trusted proxy's client): per-address
			// limits and what approvers are shown.
			md.Append(server.ClientAddrMD, clientAddr(r))
			return md
		}),
		runtime.WithOutgoingHeaderMatcher(outgoingHeader),
		runtime.WithForwardResponseOption(forwardResponse),
		runtime.WithMiddlewares(g.authBeforeBody),
	)
	for _, register := range []func(context.Context, *runtime.ServeMux, grpc.ClientConnInterface) error{
		over(apiv1.NewBrokerClient, apiv1.RegisterBrokerHandlerClient),
		over(apiv1.NewObjectivesClient, apiv1.RegisterObjectivesHandlerClient),
		over(apiv1.NewFsClient, apiv1.RegisterFsHandlerClient),
		over(apiv1.NewActivityClient, apiv1.RegisterActivityHandlerClient),
		over(apiv1.NewEnrollmentClient, apiv1.RegisterEnrollmentHandlerClient),
		over(apiv1.NewSecretsClient, apiv1.RegisterSecretsHandlerClient),
		over(apiv1.NewToolSourcesClient, apiv1.RegisterToolSourcesHandlerClient),
		over(apiv1.NewPlatformClient, apiv1.RegisterPlatformHandlerClient),
		over(apiv1.NewNotificationsClient, apiv1.RegisterNotificationsHandlerClient),
		over(apiv1.NewApprovalsClient, apiv1.RegisterApprovalsHandlerClient),
	} {
		if err := register(ctx, gw, conn); err != nil {
			return nil, fmt.Errorf("register gateway: %w", err)
		}
	}

	mux := http.NewServeMux()
	for pattern, h := range map[string]routeFunc{
		"GET /openapi.json":                   handleOpenAPI,
		"GET /subscribe":                      g.handleSubscribe,
		"GET /team/stream":                    g.handleTeamStream,
		"POST /fs/write":                      g.handleFsWrite,
		"GET /members/{name}/activity/stream": g.handleActivityStream,
		"POST /members/{name}/genai":          g.handleGenAIUpload,
		"POST /otlp/v1/logs":                  g.handleOTLPLogs,
		"POST /otlp/v1/metrics":               g.handleOTLPMetrics,
		"POST /hooks/{slug}":                  g.handleHook,
		"GET /{$}":                            g.handleRoot,
		"GET /ui/":                            g.handleUI,
		"POST /ui/qr":                         g.handleQR,
		"GET /metrics":                        g.handleMetrics,
	} {
		rh, err := g.route(pattern, h)
		if err != nil {
			return nil, err
		}
		mux.Handle(pattern, rh)
	}
	mux.Handle("/", g.withBodyLimit(DefaultMaxBody, bodyless(gw)))
	// Broker.Push's route, served by hand (push.go); gw keeps its generic
	// route, which handlePush hands what it does not serve.
	if !g.genericPush {
		mux.Handle("POST /push", g.withBodyLimit(DefaultMaxBody, bodyless(g.handlePush(gw, pb, apiv1.NewBrokerClient(conn)))))
	}
	// A tool call carries up to 1 MiB of args: its route takes that and the
	// envelope (the service measures the args themselves).
	mux.Handle("POST /tool-sources/{slug}/tools/{name}/invoke", g.withBodyLimit(toolsources.MaxInvokeBody, bodyless(gw)))
	fsRead, err := g.route(fsReadRoute, g.handleFsRead)
	if err != nil {
		return nil, err
	}
	g.handler = g.withRecovery(g.withClient(g.withProtocol(g.withUTF8(g.withOrigin(withTLSFlag(withBodyGuard(withFsRead(fsRead, mux))))))))
	return g, nil
}

// handleOpenAPI serves GET /openapi.json: the generated description of the
// REST surface.
func handleOpenAPI(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapi.JSON)
	return err
}

// connKey names the connection r came on (connguard.Key).
func connKey(r *http.Request) string {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return ""
	}
	return connguard.Key(local.String(), r.RemoteAddr)
}

// guard is the connection guard of the server, nil when there is none.
func (g *Gateway) guard() *connguard.Guard {
	if g.srv == nil {
		return nil
	}
	return g.srv.ConnGuard()
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// over registers a service's REST routes over a client of conn.
func over[C any](client func(grpc.ClientConnInterface) C, register func(context.Context, *runtime.ServeMux, C) error) func(context.Context, *runtime.ServeMux, grpc.ClientConnInterface) error {
	return func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
		return register(ctx, mux, client(conn))
	}
}

// incomingHeader forwards only what the services read: the cookie (the
// gateway's special case already forwards Authorization) and the protocol
// header. Nothing identity-bearing is taken from Grpc-Metadata-* headers.
func incomingHeader(key string) (string, bool) {
	switch strings.ToLower(key) {
	case "cookie":
		return "grpcgateway-cookie", true
	case "x-svc-protocol":
		return "x-svc-protocol", true
	case "user-agent":
		// Shown to approvers of a device enrollment; never identity.
		return "grpcgateway-user-agent", true
	}
	return "", false
}

// outgoingHeader forwards only Set-Cookie from service metadata.
func outgoingHeader(key string) (string, bool) {
	if key == "set-cookie" {
		return "Set-Cookie", true
	}
	return "", false
}

type tlsKey struct{}

func withTLSFlag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			r = r.WithContext(context.WithValue(r.Context(), tlsKey{}, true))
		}
		next.ServeHTTP(w, r)
	})
}

// forwardResponse applies the status a service asked for (201, 204) and marks
// cookies Secure over HTTPS.
func forwardResponse(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
	if ctx.Value(tlsKey{}) == true {
		cookies := w.Header().Values("Set-Cookie")
		w.Header().Del("Set-Cookie")
		for _, c := range cookies {
			if !strings.HasSuffix(c, "; Secure") {
				c += "; Secure"
			}
			w.Header().Add("Set-Cookie", c)
		}
	}
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return nil
	}
	vals := md.HeaderMD.Get("x-http-code")
	if len(vals) == 0 {
		return nil
	}
	code, err := strconv.Atoi(vals[0])
	if err != nil || code < 200 || code > 299 {
		return nil
	}
	if code == http.StatusNoContent {
		w.Header().Del("Content-Type")
	}
	w.WriteHeader(code)
	return nil
}

// bodyless drops the body the gateway writes after a 204.
func bodyless(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&noBodyAfter204{ResponseWriter: w}, r)
	})
}

type noBodyAfter204 struct {
	http.ResponseWriter
	noBody bool
}

func (w *noBodyAfter204) WriteHeader(code int) {
	w.noBody = code == http.StatusNoContent
	w.ResponseWriter.WriteHeader(code)
}

func (w *noBodyAfter204) Write(b []byte) (int, error) {
	if w.noBody {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *noBodyAfter204) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withProtocol enforces X-SVC-Protocol: absent means 1, anything else is 400.
func (g *Gateway) withProtocol(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-SVC-Protocol", server.ProtocolVersion)
		if v := r.Header.Values("X-SVC-Protocol"); len(v) > 0 && (len(v) > 1 || v[0] != server.ProtocolVersion) {
			writeError(w, g.log, r, apierr.Errorf(apierr.CodeUnsupportedProtocol, "unsupported X-SVC-Protocol %q; this server speaks %s", strings.Join(v, ","), server.ProtocolVersion))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withUTF8 refuses (400) a request whose path or query, once decoded, is
// not UTF-8: every path and query value becomes a protobuf string, which
// must be, and the refusal belongs before anything else looks at them.
func (g *Gateway) withUTF8(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !utf8.ValidString(r.URL.Path) {
			writeError(w, g.log, r, apierr.Errorf(apierr.CodeBadRequest, "path: must be UTF-8 once decoded"))
			return
		}
		// Pairs that do not parse (a stray '%', a ';') are dropped, as the
		// routes' own query parsing drops them; only what parses is read.
		q, _ := url.ParseQuery(r.URL.RawQuery)
		for k, vs := range q {
			if !utf8.ValidString(k) || !allUTF8(vs) {
				writeError(w, g.log, r, apierr.Errorf(apierr.CodeBadRequest, "query: parameters must be UTF-8 once decoded"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func allUTF8(vs []string) bool {
	for _, v := range vs {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// withOrigin refuses cross-origin state changes carried by the session
// cookie (defence in depth beside SameSite=Strict). Bearer requests carry no
// ambient credential and pass.
func (g *Gateway) withOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			_, hasCookie := auth.SessionFromCookies(r.Header.Values("Cookie"))
			origin := r.Header.Get("Origin")
			if hasCookie && r.Header.Get("Authorization") == "" && origin != "" {
				u, err := url.Parse(origin)
				if err != nil || u.Host != r.Host {
					writeError(w, g.log, r, apierr.Errorf(apierr.CodeForbidden, "cross-origin request refused"))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// withBodyLimit answers 413 for declared oversize bodies and caps the rest.
func (g *Gateway) withBodyLimit(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			writeError(w, g.log, r, apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", limit))
			return
		}
		// A shallow copy, as in withBodyGuard.
		r = r.WithContext(r.Context())
		r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), limit: limit}
		next.ServeHTTP(w, r)
	})
}

// limitedBody is a capped request body that remembers hitting its cap, for
// bodies without a declared length.
type limitedBody struct {
	io.ReadCloser
	limit int64
	hit   bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		b.hit = true
	}
	return n, err
}

func (g *Gateway) withRecovery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				g.log.ErrorContext(r.Context(), "panic in http handler", "panic", v, "stack", string(debug.Stack()))
				writeError(w, g.log, r, apierr.Errorf(apierr.CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
