package server

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
)

// localBroker answers Push from what the local connection handed it.
type localBroker struct {
	apiv1.UnimplementedBrokerServer
	got struct {
		md      metadata.MD
		out     bool // outgoing metadata was still set
		gateway bool
		title   string
	}
}

func (b *localBroker) Push(ctx context.Context, req *apiv1.PushRequest) (*apiv1.PushResponse, error) {
	b.got.md, _ = metadata.FromIncomingContext(ctx)
	out, _ := metadata.FromOutgoingContext(ctx)
	b.got.out = len(out) > 0
	pr, _ := peer.FromContext(ctx)
	b.got.gateway = fromGateway(pr)
	b.got.title = req.GetTitle()
	req.Title = "changed by the handler"
	if req.GetBody() == "fail" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-t", "1"))
		return nil, status.Error(codes.PermissionDenied, "no")
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-h", "1"))
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-h", "2"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-t", "3"))
	return &apiv1.PushResponse{Message: &apiv1.Message{Id: "0000000000000007"}}, nil
}

func TestLocalConn(t *testing.T) {
	var intercepted []string
	l := newLocalConn(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		intercepted = append(intercepted, info.FullMethod)
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("deny")) > 0 {
			return nil, status.Error(codes.Unauthenticated, "denied by the chain")
		}
		return h(ctx, req)
	})
	b := &localBroker{}
	apiv1.RegisterBrokerServer(l, b)
	client := apiv1.NewBrokerClient(l)

	tests := []struct {
		name     string
		md       metadata.MD
		body     string
		code     codes.Code
		header   []string
		trailer  []string
		reachedB bool
	}{
		{name: "answered", md: metadata.Pairs("k", "v"), code: codes.OK, header: []string{"1", "2"}, trailer: []string{"3"}, reachedB: true},
		{name: "handler refuses", md: metadata.Pairs("k", "v"), body: "fail", code: codes.PermissionDenied, trailer: []string{"1"}, reachedB: true},
		{name: "chain refuses", md: metadata.Pairs("k", "v", "deny", "1"), code: codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			*b = localBroker{}
			intercepted = nil
			req := &apiv1.PushRequest{Title: "hello", Body: tt.body}
			var header, trailer metadata.MD
			ctx := metadata.NewOutgoingContext(context.Background(), tt.md)
			resp, err := client.Push(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
			if got := status.Code(err); got != tt.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tt.code)
			}
			if len(intercepted) != 1 || intercepted[0] != apiv1.Broker_Push_FullMethodName {
				t.Errorf("interceptor saw %v, want one %s", intercepted, apiv1.Broker_Push_FullMethodName)
			}
			if tt.code == codes.OK && resp.GetMessage().GetId() != "0000000000000007" {
				t.Errorf("reply id = %q", resp.GetMessage().GetId())
			}
			if got := header.Get("x-h"); !equalStrings(got, tt.header) {
				t.Errorf("header x-h = %v, want %v", got, tt.header)
			}
			if got := trailer.Get("x-t"); !equalStrings(got, tt.trailer) {
				t.Errorf("trailer x-t = %v, want %v", got, tt.trailer)
			}
			if req.GetTitle() != "hello" {
				t.Errorf("the caller's request was changed to %q: the handler must get a copy", req.GetTitle())
			}
			if !tt.reachedB {
				if b.got.md != nil {
					t.Error("the handler ran though the chain refused")
				}
				return
			}
			if b.got.title != "hello" || !b.got.gateway || b.got.out || !equalStrings(b.got.md.Get("k"), []string{"v"}) {
				t.Errorf("handler got title %q, gateway peer %v, outgoing md %v, incoming k %v", b.got.title, b.got.gateway, b.got.out, b.got.md.Get("k"))
			}
		})
	}
}

func TestLocalConnRefusesUnknownAndStreams(t *testing.T) {
	l := newLocalConn(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	})
	apiv1.RegisterBrokerServer(l, &localBroker{})
	err := l.Invoke(context.Background(), "/svc.v1.Broker/Nope", &apiv1.PushRequest{}, &apiv1.PushResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v, want Unimplemented", err)
	}
	_, err = apiv1.NewBrokerClient(l).Subscribe(context.Background(), &apiv1.SubscribeRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("stream: %v, want Unimplemented", err)
	}
	// Unimplemented methods of a registered service answer as over gRPC.
	_, err = apiv1.NewBrokerClient(l).History(context.Background(), &apiv1.HistoryRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || errors.Is(err, context.Canceled) {
		t.Errorf("unimplemented method: %v", err)
	}
}

func TestFromGateway(t *testing.T) {
	for _, tt := range []struct {
		name string
		pr   *peer.Peer
		want bool
	}{
		{"nil", nil, false},
		{"no address", &peer.Peer{}, false},
		{"tcp", &peer.Peer{Addr: &fakeAddr{"tcp"}}, false},
		{"old in-memory pipe", &peer.Peer{Addr: &fakeAddr{"bufconn"}}, false},
		{"gateway", gatewayPeer, true},
	} {
		if got := fromGateway(tt.pr); got != tt.want {
			t.Errorf("%s: fromGateway = %v, want %v", tt.name, got, tt.want)
		}
	}
}

type fakeAddr struct{ network string }

func (a *fakeAddr) Network() string { return a.network }
func (a *fakeAddr) String() string  { return "127.0.0.1:1" }

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }
