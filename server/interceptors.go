package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/connguard"
)

// ProtocolVersion is the only X-SVC-Protocol value served.
const ProtocolVersion = "1"

// protocolMD is the metadata key of the protocol header.
const protocolMD = "x-svc-protocol"

// setHTTPStatus asks the gateway to answer a REST call with code
// (apierr.SetHTTPStatus, which the capabilities call).
func setHTTPStatus(ctx context.Context, code int) { apierr.SetHTTPStatus(ctx, code) }

// ConnKeyMD carries the HTTP client's connection (connguard.Key) from the
// gateway to the interceptors over the local connection, for the
// connection guard. It is trusted only there: on any other connection the
// peer's own addresses are used.
const ConnKeyMD = "x-svc-conn"

// chain holds what the interceptors need.
type chain struct {
	authn *auth.Authenticator
	guard *connguard.Guard // nil: connections are not counted
	log   *slog.Logger
}

// The interceptor chain, in order: recovery, protocol, authn, authz, then the
// handler; errors are mapped to statuses on the way out, once.
func (c *chain) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			err = c.panicked(ctx, info.FullMethod, r)
		}
		err = c.finish(ctx, info.FullMethod, start, err)
	}()
	ctx, err = c.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if m, ok := req.(proto.Message); ok {
		if err := checkNesting(m); err != nil {
			return nil, err
		}
	}
	if p, ok := auth.PrincipalFrom(ctx); ok && info.FullMethod != logoutMethod {
		if c := p.RefreshedCookie(); c != "" {
			_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", c))
		}
	}
	return handler(ctx, req)
}

func (c *chain) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	ctx := ss.Context()
	defer func() {
		if r := recover(); r != nil {
			err = c.panicked(ctx, info.FullMethod, r)
		}
		err = c.finish(ctx, info.FullMethod, start, err)
	}()
	ctx, err = c.admit(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx})
}

// checkProtocol refuses a call that names a protocol other than ours. It
// comes before credentials, in admit and in preauth alike.
func checkProtocol(md metadata.MD) error {
	if v := md.Get(protocolMD); len(v) > 0 && v[0] != ProtocolVersion {
		return apierr.Errorf(apierr.CodeUnsupportedProtocol, "unsupported X-SVC-Protocol %q; this server speaks %s", v[0], ProtocolVersion)
	}
	return nil
}

// admit checks the protocol header, authenticates and authorizes.
func (c *chain) admit(ctx context.Context, method string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if err := checkProtocol(md); err != nil {
		return ctx, err
	}
	rule, known := auth.RuleFor(method)
	if !known {
		return ctx, auth.Authorize(method, nil)
	}
	if rule.Public {
		return ctx, nil
	}
	p, err := c.authn.Authenticate(ctx, auth.CredentialsFromMetadata(md))
	if err != nil {
		return ctx, err
	}
	if c.guard != nil {
		c.guard.Authenticated(connKey(ctx, md))
	}
	if err := rule.Admit(p); err != nil {
		return ctx, err
	}
	return auth.WithPrincipal(ctx, p), nil
}

// connKey names the connection a call came on: the peer's, or, on the
// gateway's local connection, the HTTP client's the gateway named.
func connKey(ctx context.Context, md metadata.MD) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil || p.LocalAddr == nil {
		return ""
	}
	if fromGateway(p) {
		if v := md.Get(ConnKeyMD); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return connguard.Key(p.LocalAddr.String(), p.Addr.String())
}

func (c *chain) panicked(ctx context.Context, method string, r any) error {
	c.log.ErrorContext(ctx, "panic in handler", "method", method, "panic", r, "stack", string(debug.Stack()))
	return apierr.Errorf(apierr.CodeInternal, "internal error")
}

// finish maps the error to a status and logs the call.
func (c *chain) finish(ctx context.Context, method string, start time.Time, err error) error {
	if err == nil {
		c.log.DebugContext(ctx, "rpc", "method", method, "duration", time.Since(start))
		return nil
	}
	st := apierr.ToStatus(err)
	if apierr.IsInternal(err) {
		c.log.ErrorContext(ctx, "rpc failed", "method", method, "err", err)
	} else {
		c.log.DebugContext(ctx, "rpc refused", "method", method, "code", st.Code().String(), "err", err)
	}
	return st.Err()
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

const logoutMethod = apiv1.Broker_Logout_FullMethodName

// mustPrincipal returns the caller; the interceptor guarantees one on every
// non-public method.
func mustPrincipal(ctx context.Context) *auth.Principal {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		panic("server: non-public method reached without a principal")
	}
	return p
}
