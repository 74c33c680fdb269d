package server

import (
	"context"
	"errors"
	"log/slog"
	"svc/server/apierr"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
	"svc/store/sqlite"
)

// lookupFunc is a MemberLookup with a function field.
type lookupFunc func(name string) ([]string, bool)

func (f lookupFunc) MemberPermissions(name string) ([]string, bool) { return f(name) }

// chainEnv is an interceptor chain over an in-memory store holding members
// alice (no leaves) and root (every leaf), each with a bearer token.
type chainEnv struct {
	c     *chain
	alice string
	root  string
}

func newChainEnv(t *testing.T) *chainEnv {
	t.Helper()
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	db, err := sqlite.Open(ctx, "", sqlite.WithNow(now))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	perms := map[string][]string{"alice": {}, "root": auth.Leaves}
	env := &chainEnv{}
	for _, name := range []string{"alice", "root"} {
		require.NoError(t, db.PutMember(ctx, store.Member{Name: name, Permissions: perms[name]}))
		plain, hash, err := auth.NewToken()
		require.NoError(t, err)
		require.NoError(t, db.CreateToken(ctx, store.Token{ID: "tok-" + name, Member: name, Hash: hash, Origin: "rotate"}))
		if name == "alice" {
			env.alice = plain
		} else {
			env.root = plain
		}
	}
	members := lookupFunc(func(name string) ([]string, bool) {
		p, ok := perms[name]
		return p, ok
	})
	log := slog.New(slog.DiscardHandler)
	env.c = &chain{authn: auth.NewAuthenticator(db, db, members, now, log), log: log}
	return env
}

// reason returns the svc ErrorInfo reason of err's status.
func reason(t *testing.T, err error) apierr.Code {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "interceptors return statuses: %v", err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == "svc" {
			return apierr.Code(ei.GetReason())
		}
	}
	return ""
}

func TestUnaryInterceptor(t *testing.T) {
	env := newChainEnv(t)
	ok := func(ctx context.Context, _ any) (any, error) { return "ok", nil }

	tests := []struct {
		name          string
		method        string
		md            metadata.MD
		handler       grpc.UnaryHandler
		wantCode      codes.Code
		wantReason    apierr.Code // checked when set
		wantPrincipal string      // member seen by the handler; "" for none
	}{
		{name: "public without credentials", method: apiv1.Broker_Health_FullMethodName, wantCode: codes.OK},
		{name: "public with protocol 1", method: apiv1.Broker_Health_FullMethodName, md: metadata.Pairs("x-svc-protocol", "1"), wantCode: codes.OK},
		{name: "protocol 2 refused", method: apiv1.Broker_Health_FullMethodName, md: metadata.Pairs("x-svc-protocol", "2"), wantCode: codes.InvalidArgument, wantReason: apierr.CodeUnsupportedProtocol},
		{name: "empty protocol refused", method: apiv1.Broker_Health_FullMethodName, md: metadata.Pairs("x-svc-protocol", ""), wantCode: codes.InvalidArgument, wantReason: apierr.CodeUnsupportedProtocol},
		{name: "protocol checked before auth", method: apiv1.Broker_CreateMember_FullMethodName, md: metadata.Pairs("x-svc-protocol", "2"), wantCode: codes.InvalidArgument, wantReason: apierr.CodeUnsupportedProtocol},
		{name: "unknown method fails closed", method: "/svc.v1.Broker/Secret", md: metadata.Pairs("authorization", "Bearer "+env.root), wantCode: codes.PermissionDenied, wantReason: apierr.CodeForbidden},
		{name: "member method without credentials", method: apiv1.Broker_GetBriefing_FullMethodName, wantCode: codes.Unauthenticated, wantReason: apierr.CodeUnauthenticated},
		{name: "member method with bad bearer", method: apiv1.Broker_GetBriefing_FullMethodName, md: metadata.Pairs("authorization", "Bearer svc_nope"), wantCode: codes.Unauthenticated, wantReason: apierr.CodeUnauthenticated},
		{name: "member method with bearer", method: apiv1.Broker_GetBriefing_FullMethodName, md: metadata.Pairs("authorization", "Bearer "+env.alice), wantCode: codes.OK, wantPrincipal: "alice"},
		{name: "leaf method lacking leaf", method: apiv1.Broker_CreateMember_FullMethodName, md: metadata.Pairs("authorization", "Bearer "+env.alice), wantCode: codes.PermissionDenied, wantReason: apierr.CodeForbidden},
		{name: "leaf method holding leaf", method: apiv1.Broker_CreateMember_FullMethodName, md: metadata.Pairs("authorization", "Bearer "+env.root), wantCode: codes.OK, wantPrincipal: "root"},
		{name: "public method ignores bad credentials", method: apiv1.Broker_Health_FullMethodName, md: metadata.Pairs("authorization", "Bearer svc_nope"), wantCode: codes.OK},
		{
			name: "handler store error mapped", method: apiv1.Broker_Health_FullMethodName,
			handler:  func(context.Context, any) (any, error) { return nil, store.ErrNotFound },
			wantCode: codes.NotFound, wantReason: apierr.CodeNotFound,
		},
		{
			name: "handler internal error hidden", method: apiv1.Broker_Health_FullMethodName,
			handler:  func(context.Context, any) (any, error) { return nil, errors.New("secret path /x") },
			wantCode: codes.Internal, wantReason: apierr.CodeInternal,
		},
		{
			name: "handler panic recovered", method: apiv1.Broker_Health_FullMethodName,
			handler:  func(context.Context, any) (any, error) { panic("boom") },
			wantCode: codes.Internal, wantReason: apierr.CodeInternal,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tc.md)
			}
			var seen string
			h := tc.handler
			if h == nil {
				h = func(ctx context.Context, req any) (any, error) {
					if p, ok := auth.PrincipalFrom(ctx); ok {
						seen = p.Member
					}
					return ok(ctx, req)
				}
			}
			resp, err := env.c.unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: tc.method}, h)
			require.Equal(t, tc.wantCode, status.Code(err), "err: %v", err)
			if tc.wantCode == codes.OK {
				require.Equal(t, "ok", resp)
				require.Equal(t, tc.wantPrincipal, seen)
				return
			}
			require.Nil(t, resp)
			if tc.wantReason != "" {
				require.Equal(t, tc.wantReason, reason(t, err))
			}
			if tc.wantCode == codes.Internal {
				require.Equal(t, "internal error", status.Convert(err).Message())
			}
		})
	}
}

// fakeStream is a grpc.ServerStream carrying ctx.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *fakeStream) Context() context.Context { return s.ctx }

func TestStreamInterceptor(t *testing.T) {
	env := newChainEnv(t)
	tests := []struct {
		name          string
		method        string
		md            metadata.MD
		panics        bool
		wantCode      codes.Code
		wantPrincipal string
	}{
		{name: "reflection is public", method: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", wantCode: codes.OK},
		{name: "unknown stream fails closed", method: "/svc.v1.Broker/Watch", md: metadata.Pairs("authorization", "Bearer "+env.root), wantCode: codes.PermissionDenied},
		{name: "protocol refused", method: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", md: metadata.Pairs("x-svc-protocol", "9"), wantCode: codes.InvalidArgument},
		{name: "panic recovered", method: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", panics: true, wantCode: codes.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tc.md)
			}
			called := false
			err := env.c.stream(nil, &fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: tc.method, IsServerStream: true},
				func(_ any, ss grpc.ServerStream) error {
					called = true
					if tc.panics {
						panic("boom")
					}
					require.NotNil(t, ss.Context())
					return nil
				})
			require.Equal(t, tc.wantCode, status.Code(err), "err: %v", err)
			require.Equal(t, tc.wantCode == codes.OK || tc.panics, called)
		})
	}
}

// TestGatewayPrincipalHandOver: a principal already in a call's context is
// never taken, not even on the gateway's local connection: the call's own
// credentials are resolved after the body arrived, which may be minutes
// after the gateway checked them, and a revoke answered meanwhile must
// count. Nothing can vouch for a caller.
func TestGatewayPrincipalHandOver(t *testing.T) {
	env := newChainEnv(t)
	root := &auth.Principal{Member: "root", Permissions: auth.Leaves, Via: auth.ViaBearer}
	tcp := &peer.Peer{Addr: &fakeAddr{"tcp"}, LocalAddr: &fakeAddr{"tcp"}}
	tests := []struct {
		name     string
		peer     *peer.Peer
		md       metadata.MD
		wantCode codes.Code
		wantWho  string
	}{
		{name: "gateway, same credentials", peer: gatewayPeer, md: metadata.Pairs("authorization", "Bearer "+env.root), wantCode: codes.OK, wantWho: "root"},
		{name: "gateway, credentials gone since", peer: gatewayPeer, wantCode: codes.Unauthenticated},
		{name: "gateway, the credentials decide, not the principal", peer: gatewayPeer, md: metadata.Pairs("authorization", "Bearer "+env.alice), wantCode: codes.PermissionDenied},
		{name: "network, no credentials", peer: tcp, wantCode: codes.Unauthenticated},
		{name: "network, own bearer decides", peer: tcp, md: metadata.Pairs("authorization", "Bearer "+env.alice), wantCode: codes.PermissionDenied},
		{name: "no peer", wantCode: codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := auth.WithPrincipal(metadata.NewIncomingContext(context.Background(), tt.md), root)
			if tt.peer != nil {
				ctx = peer.NewContext(ctx, tt.peer)
			}
			var who string
			_, err := env.c.unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: apiv1.Broker_CreateMember_FullMethodName},
				func(ctx context.Context, _ any) (any, error) {
					who = mustPrincipal(ctx).Member
					return "ok", nil
				})
			require.Equal(t, tt.wantCode, status.Code(err), "err: %v", err)
			require.Equal(t, tt.wantWho, who)
		})
	}
}
