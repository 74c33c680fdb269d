package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// gatewayNetwork is the network of the gateway's calls (the peer of a
// local call). No listener produces it, so metadata only the gateway may
// set (the HTTP client's connection, host and user agent) is trusted only
// on calls that carry it.
const gatewayNetwork = "svc-gateway"

// gatewayAddr is the address of the gateway's local calls.
type gatewayAddr struct{}

func (gatewayAddr) Network() string { return gatewayNetwork }
func (gatewayAddr) String() string  { return gatewayNetwork }

var gatewayPeer = &peer.Peer{Addr: gatewayAddr{}, LocalAddr: gatewayAddr{}}

// fromGateway reports whether pr is the gateway's local connection.
func fromGateway(pr *peer.Peer) bool {
	return pr != nil && pr.Addr != nil && pr.Addr.Network() == gatewayNetwork
}

// localConn is the gateway's connection to the services: a
// grpc.ClientConnInterface that calls a unary method's handler in the
// caller's goroutine, through the same interceptor chain as a network call
// (recovery, protocol, authentication, authorization, error mapping).
//
// It replaced a gRPC connection over an in-memory pipe: every REST call
// was encoded, framed, decoded and handed between four goroutines there,
// which cost more CPU than storing the push, and each hop of the answer
// queued behind a fan-out burst on a busy broker.
//
// Only unary methods are served: no REST route maps to a streaming one
// (the SSE routes are hand-written).
type localConn struct {
	unary   grpc.UnaryServerInterceptor
	methods map[string]localMethod // by full method name
}

type localMethod struct {
	impl    any
	handler grpc.MethodHandler
}

func newLocalConn(unary grpc.UnaryServerInterceptor) *localConn {
	return &localConn{unary: unary, methods: map[string]localMethod{}}
}

// RegisterService makes desc's unary methods callable (grpc.ServiceRegistrar).
func (l *localConn) RegisterService(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		l.methods["/"+desc.ServiceName+"/"+m.MethodName] = localMethod{impl: impl, handler: m.Handler}
	}
}

// Invoke calls method with a copy of args and copies its answer into reply.
// The caller's outgoing metadata is the call's incoming metadata; header
// and trailer metadata the handler sets reach the grpc.Header and
// grpc.Trailer call options, as over a network connection.
func (l *localConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	m, ok := l.methods[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	in, ok := args.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: request is not a protobuf message", method)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	// What the caller meant to send is what the handler receives; nothing
	// of it goes further out should the handler call elsewhere.
	ctx = metadata.NewOutgoingContext(ctx, nil)
	ctx = metadata.NewIncomingContext(ctx, md)
	ctx = peer.NewContext(ctx, gatewayPeer)
	st := &localStream{method: method}
	ctx = grpc.NewContextWithServerTransportStream(ctx, st)
	resp, err := m.handler(m.impl, ctx, func(v any) error {
		req, ok := v.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "%s: request is not a protobuf message", method)
		}
		// The handler owns its request: the caller's may be read again.
		proto.Merge(req, in)
		return nil
	}, l.unary)
	st.deliver(opts)
	if err != nil {
		return err
	}
	out, ok := reply.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: reply is not a protobuf message", method)
	}
	if resp, ok := resp.(proto.Message); ok {
		proto.Merge(out, resp)
	}
	return nil
}

// NewStream refuses: the gateway has no streaming route.
func (l *localConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streams are not served on the local connection")
}

// localStream collects the header and trailer metadata of one local call
// (grpc.ServerTransportStream).
type localStream struct {
	method          string
	mu              sync.Mutex
	header, trailer metadata.MD
}

func (s *localStream) Method() string { return s.method }

func (s *localStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *localStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *localStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

// deliver hands the metadata to the call's Header and Trailer options.
func (s *localStream) deliver(opts []grpc.CallOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = s.header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = s.trailer
		}
	}
}
