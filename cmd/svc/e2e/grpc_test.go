package e2e

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
)

func TestGRPCReflectionListsServices(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	// Reflection needs no token: it only describes the API.
	stream, err := grpc_reflection_v1.NewServerReflectionClient(p.grpcConn(t)).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&grpc_reflection_v1.ServerReflectionRequest{
		MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{},
	}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	require.NoError(t, stream.CloseSend())
	var svc, other []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		if slices.Contains([]string{"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}, s.GetName()) {
			other = append(other, s.GetName())
			continue
		}
		svc = append(svc, s.GetName())
	}
	slices.Sort(svc)
	require.Equal(t, []string{
		"opentelemetry.proto.collector.logs.v1.LogsService", "opentelemetry.proto.collector.metrics.v1.MetricsService",
		"svc.v1.Activity", "svc.v1.Approvals", "svc.v1.Broker", "svc.v1.Enrollment", "svc.v1.Fs", "svc.v1.Notifications", "svc.v1.Objectives",
		"svc.v1.Platform", "svc.v1.Secrets", "svc.v1.ToolSources",
	}, svc)
	require.Contains(t, other, "grpc.reflection.v1.ServerReflection")

	// The file of a service resolves too.
	stream2, err := grpc_reflection_v1.NewServerReflectionClient(p.grpcConn(t)).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, stream2.Send(&grpc_reflection_v1.ServerReflectionRequest{
		MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "svc.v1.Broker"},
	}))
	resp2, err := stream2.Recv()
	require.NoError(t, err)
	require.NotEmpty(t, resp2.GetFileDescriptorResponse().GetFileDescriptorProto())
	require.NoError(t, stream2.CloseSend())
}

func TestGRPCAuthAndProtocol(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	tok := p.adminToken(t)
	c := apiv1.NewBrokerClient(p.grpcConn(t))
	base, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	authed := metadata.AppendToOutgoingContext(base, "authorization", "Bearer "+tok)

	h, err := c.Health(base, &apiv1.HealthRequest{})
	require.NoError(t, err, "Health needs no token")
	require.Equal(t, "ok", h.GetStatus())
	require.Regexp(t, semverRE, h.GetVersion())

	_, err = c.GetBriefing(base, &apiv1.GetBriefingRequest{})
	require.Equal(t, codes.Unauthenticated, status.Code(err))
	requireGRPCError(t, err, "unauthenticated")

	b, err := c.GetBriefing(authed, &apiv1.GetBriefingRequest{})
	require.NoError(t, err)
	require.Equal(t, "admin", b.GetMember().GetName())
	require.Equal(t, "team", b.GetTeam().GetName())

	tests := []struct {
		name     string
		protocol string
		wantCode codes.Code
	}{
		{name: "1 passes", protocol: "1", wantCode: codes.OK},
		{name: "2 is refused", protocol: "2", wantCode: codes.InvalidArgument},
		{name: "1.0 is refused", protocol: "1.0", wantCode: codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.GetBriefing(metadata.AppendToOutgoingContext(authed, "x-svc-protocol", tc.protocol), &apiv1.GetBriefingRequest{})
			require.Equal(t, tc.wantCode, status.Code(err), "%v", err)
			_, err = c.Health(metadata.AppendToOutgoingContext(base, "x-svc-protocol", tc.protocol), &apiv1.HealthRequest{})
			require.Equal(t, tc.wantCode, status.Code(err), "%v", err)
			if tc.wantCode != codes.OK {
				requireGRPCError(t, err, "unsupported_protocol")
			}
		})
	}
}
