package auth_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
)

// serviceDescs lists every service the gRPC server registers.
var serviceDescs = []*grpc.ServiceDesc{
	&apiv1.Broker_ServiceDesc,
	&apiv1.Objectives_ServiceDesc,
	&apiv1.Fs_ServiceDesc,
	&apiv1.Notifications_ServiceDesc,
	&apiv1.Enrollment_ServiceDesc,
	&apiv1.Secrets_ServiceDesc,
	&apiv1.ToolSources_ServiceDesc,
	&apiv1.Approvals_ServiceDesc,
	&grpc_reflection_v1.ServerReflection_ServiceDesc,
	&grpc_reflection_v1alpha.ServerReflection_ServiceDesc,
}

// fullMethods returns "/service/method" for every unary and streaming method
// of the descriptors.
func fullMethods(descs []*grpc.ServiceDesc) []string {
	var out []string
	for _, sd := range descs {
		for _, m := range sd.Methods {
			out = append(out, "/"+sd.ServiceName+"/"+m.MethodName)
		}
		for _, s := range sd.Streams {
			out = append(out, "/"+sd.ServiceName+"/"+s.StreamName)
		}
	}
	return out
}

func TestEveryMethodHasARule(t *testing.T) {
	methods := fullMethods(serviceDescs)
	// The Broker alone has more than a dozen RPCs; an empty walk would
	// make this test vacuous.
	require.GreaterOrEqual(t, len(methods), len(apiv1.Broker_ServiceDesc.Methods)+2)

	var missing []string
	for _, m := range methods {
		if _, ok := auth.RuleFor(m); !ok {
			missing = append(missing, m)
		}
	}
	require.Empty(t, missing, "methods without a permission rule (add them to methodRules)")
}

func TestRuleLeavesAreKnown(t *testing.T) {
	for _, m := range fullMethods(serviceDescs) {
		r, ok := auth.RuleFor(m)
		require.True(t, ok, m)
		if r.Leaf != "" {
			require.True(t, auth.IsLeaf(r.Leaf), "%s requires unknown leaf %q", m, r.Leaf)
			require.False(t, r.Public, "%s is public yet requires %q", m, r.Leaf)
		}
	}
}

func TestAuthorize(t *testing.T) {
	admin := &auth.Principal{Member: "root", Permissions: auth.Leaves}
	plain := &auth.Principal{Member: "bob", Permissions: []string{auth.ObjectivesWatch}}
	empty := &auth.Principal{Member: "nobody"}

	tests := []struct {
		name      string
		method    string
		principal *auth.Principal
		wantErr   error // nil: admitted
	}{
		{name: "unknown method refused without principal", method: "/svc.v1.Broker/NoSuchMethod", principal: nil, wantErr: auth.ErrForbidden},
		{name: "unknown method refused even for admin", method: "/svc.v1.Broker/NoSuchMethod", principal: admin, wantErr: auth.ErrForbidden},
		{name: "empty method refused", method: "", principal: admin, wantErr: auth.ErrForbidden},
		{name: "method name case matters", method: "/svc.v1.broker/health", principal: admin, wantErr: auth.ErrForbidden},
		{name: "public admits nil principal", method: apiv1.Broker_Health_FullMethodName, principal: nil},
		{name: "public login admits nil principal", method: apiv1.Broker_CreateSession_FullMethodName, principal: nil},
		{name: "public reflection v1 admits nil principal", method: grpc_reflection_v1.ServerReflection_ServerReflectionInfo_FullMethodName, principal: nil},
		{name: "public reflection v1alpha admits nil principal", method: grpc_reflection_v1alpha.ServerReflection_ServerReflectionInfo_FullMethodName, principal: nil},
		{name: "public admits any principal", method: apiv1.Broker_Health_FullMethodName, principal: empty},
		{name: "any member admits principal without leaves", method: apiv1.Broker_GetBriefing_FullMethodName, principal: empty},
		{name: "any member refuses nil principal", method: apiv1.Broker_GetBriefing_FullMethodName, principal: nil, wantErr: auth.ErrUnauthenticated},
		{name: "leaf rule refuses nil principal as unauthenticated", method: apiv1.Broker_CreateMember_FullMethodName, principal: nil, wantErr: auth.ErrUnauthenticated},
		{name: "leaf rule refuses principal lacking leaf", method: apiv1.Broker_CreateMember_FullMethodName, principal: plain, wantErr: auth.ErrForbidden},
		{name: "leaf rule refuses principal with no permissions", method: apiv1.Broker_DeleteMember_FullMethodName, principal: empty, wantErr: auth.ErrForbidden},
		{name: "leaf rule admits principal holding leaf", method: apiv1.Broker_UpdateMember_FullMethodName, principal: &auth.Principal{Member: "m", Permissions: []string{auth.MembersManage}}},
		{name: "leaf rule admits admin", method: apiv1.Broker_CreateMember_FullMethodName, principal: admin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := auth.Authorize(tc.method, tc.principal)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			// 401 and 403 must never be confused.
			if tc.wantErr == auth.ErrForbidden {
				require.NotErrorIs(t, err, auth.ErrUnauthenticated)
			} else {
				require.NotErrorIs(t, err, auth.ErrForbidden)
			}
		})
	}
}

func TestAuthorizeEveryLeafRule(t *testing.T) {
	// Every method guarded by a leaf refuses a principal holding every
	// other leaf, and admits one holding just that leaf.
	for _, m := range fullMethods(serviceDescs) {
		r, _ := auth.RuleFor(m)
		if r.Public || r.Leaf == "" {
			continue
		}
		t.Run(m, func(t *testing.T) {
			var others []string
			for _, l := range auth.Leaves {
				if l != r.Leaf {
					others = append(others, l)
				}
			}
			require.ErrorIs(t, auth.Authorize(m, &auth.Principal{Member: "x", Permissions: others}), auth.ErrForbidden)
			require.NoError(t, auth.Authorize(m, &auth.Principal{Member: "x", Permissions: []string{r.Leaf}}))
		})
	}
}
