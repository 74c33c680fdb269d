package auth

import (
	"fmt"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	apiv1 "svc/gen/svc/v1"
)

// Rule is what a method demands of its caller.
type Rule struct {
	// Public methods need no credentials.
	Public bool
	// Leaf, when set, is the permission the caller must hold. An empty Leaf
	// on a non-public rule admits any authenticated member; ownership checks
	// (self, assignee, channel admin) stay in the service layer.
	Leaf string
}

// Rules.
var (
	Public    = Rule{Public: true}
	AnyMember = Rule{}
)

// Require demands a permission leaf.
func Require(leaf string) Rule { return Rule{Leaf: leaf} }

// methodRules is the per-method permission table. A method missing here is
// refused (fail closed); TestEveryMethodHasARule walks every generated
// service so a new RPC cannot ship without a rule.
var methodRules = map[string]Rule{
	apiv1.Broker_Health_FullMethodName:        Public,
	apiv1.Broker_GetBriefing_FullMethodName:   AnyMember,
	apiv1.Broker_GetRoster_FullMethodName:     AnyMember,
	apiv1.Broker_ListMembers_FullMethodName:   AnyMember,
	apiv1.Broker_CreateMember_FullMethodName:  Require(MembersManage),
	apiv1.Broker_UpdateMember_FullMethodName:  Require(MembersManage),
	apiv1.Broker_DeleteMember_FullMethodName:  Require(MembersManage),
	apiv1.Broker_RotateToken_FullMethodName:   AnyMember, // manage/self, checked in the service
	apiv1.Broker_ListTokens_FullMethodName:    AnyMember, // manage/self
	apiv1.Broker_RevokeToken_FullMethodName:   AnyMember, // manage/self
	apiv1.Broker_EnrollTotp_FullMethodName:    AnyMember, // manage/self
	apiv1.Broker_CreateSession_FullMethodName: Public,
	apiv1.Broker_GetSession_FullMethodName:    AnyMember,
	apiv1.Broker_ListSessions_FullMethodName:  AnyMember, // manage/self
	apiv1.Broker_RevokeSession_FullMethodName: AnyMember, // manage/self
	apiv1.Broker_Logout_FullMethodName:        AnyMember,

	apiv1.Broker_Push_FullMethodName:                   AnyMember,
	apiv1.Broker_Subscribe_FullMethodName:              AnyMember, // self, checked in the service
	apiv1.Broker_StreamTeam_FullMethodName:             AnyMember, // what the roster, channels and objectives show any member
	apiv1.Broker_History_FullMethodName:                AnyMember, // visibility checked in the service
	apiv1.Broker_ListChannels_FullMethodName:           AnyMember,
	apiv1.Broker_CreateChannel_FullMethodName:          AnyMember,
	apiv1.Broker_GetChannel_FullMethodName:             AnyMember,
	apiv1.Broker_RenameChannel_FullMethodName:          AnyMember, // channel admin or members.manage
	apiv1.Broker_ArchiveChannel_FullMethodName:         AnyMember, // channel admin or members.manage
	apiv1.Broker_AddChannelMember_FullMethodName:       AnyMember, // channel admin, self or members.manage
	apiv1.Broker_RemoveChannelMember_FullMethodName:    AnyMember, // channel admin, self or members.manage
	apiv1.Broker_SetActivity_FullMethodName:            AnyMember, // bearer only, checked in the service
	apiv1.Broker_GetVapidPublicKey_FullMethodName:      Public,
	apiv1.Broker_CreatePushSubscription_FullMethodName: AnyMember,
	apiv1.Broker_DeletePushSubscription_FullMethodName: AnyMember, // own subscriptions only
	apiv1.Broker_GetDelivery_FullMethodName:            AnyMember, // manage/self, checked in the service
	apiv1.Broker_UpdateDelivery_FullMethodName:         AnyMember, // self, bearer only, checked in the service

	apiv1.Objectives_ListObjectives_FullMethodName:    AnyMember,
	apiv1.Objectives_CreateObjective_FullMethodName:   Require(ObjectivesCreate),
	apiv1.Objectives_GetObjective_FullMethodName:      AnyMember,
	apiv1.Objectives_UpdateObjective_FullMethodName:   AnyMember, // assignee or members.manage
	apiv1.Objectives_CompleteObjective_FullMethodName: AnyMember, // assignee only
	apiv1.Objectives_CancelObjective_FullMethodName:   AnyMember, // objectives.cancel or originator
	apiv1.Objectives_ReassignObjective_FullMethodName: Require(MembersManage),
	apiv1.Objectives_DiscussObjective_FullMethodName:  AnyMember, // thread member
	apiv1.Objectives_UpdateWatchers_FullMethodName:    AnyMember, // objectives.watch or originator

	apiv1.Fs_ListFiles_FullMethodName:  AnyMember, // visibility checked in the service
	apiv1.Fs_StatFile_FullMethodName:   AnyMember,
	apiv1.Fs_MakeDir_FullMethodName:    AnyMember, // own home or members.manage
	apiv1.Fs_Remove_FullMethodName:     AnyMember,
	apiv1.Fs_Move_FullMethodName:       AnyMember,
	apiv1.Fs_ListShared_FullMethodName: AnyMember,

	apiv1.Activity_UploadActivity_FullMethodName:    AnyMember, // self, checked in the service
	apiv1.Activity_ListActivity_FullMethodName:      AnyMember, // activity.read or self
	apiv1.Activity_StreamActivity_FullMethodName:    AnyMember, // activity.read or self
	apiv1.Activity_UploadGenAi_FullMethodName:       AnyMember, // self
	apiv1.Activity_ListGenAi_FullMethodName:         AnyMember, // activity.read or self
	apiv1.Activity_GetGenAi_FullMethodName:          AnyMember, // activity.read or self
	apiv1.Activity_GetUsage_FullMethodName:          AnyMember, // activity.read or self
	apiv1.Activity_GetObjectiveTrace_FullMethodName: AnyMember, // activity.read or a holder of the objective
	apiv1.Activity_GetObjectiveUsage_FullMethodName: AnyMember, // activity.read or a holder of the objective

	// Device enrollment: start and poll need no credential (docs/ENROLLMENT.md).
	apiv1.Enrollment_StartEnrollment_FullMethodName:        Public,
	apiv1.Enrollment_PollEnrollment_FullMethodName:         Public,
	apiv1.Enrollment_ListPendingEnrollments_FullMethodName: Require(MembersManage),
	apiv1.Enrollment_ApproveEnrollment_FullMethodName:      Require(MembersManage),
	apiv1.Enrollment_RejectEnrollment_FullMethodName:       Require(MembersManage),

	apiv1.Secrets_ListSecrets_FullMethodName:         AnyMember, // per-viewer summaries
	apiv1.Secrets_CreateSecret_FullMethodName:        Require(SecretsManage),
	apiv1.Secrets_GetSecret_FullMethodName:           AnyMember, // boundMembers for secrets.manage only
	apiv1.Secrets_ResolveSecrets_FullMethodName:      AnyMember, // the caller's own environment
	apiv1.Secrets_UpdateSecret_FullMethodName:        Require(SecretsManage),
	apiv1.Secrets_DeleteSecret_FullMethodName:        Require(SecretsManage),
	apiv1.Secrets_SetSecretValue_FullMethodName:      Require(SecretsManage),
	apiv1.Secrets_DeleteSecretValue_FullMethodName:   Require(SecretsManage),
	apiv1.Secrets_AddSecretBinding_FullMethodName:    Require(SecretsManage),
	apiv1.Secrets_RemoveSecretBinding_FullMethodName: Require(SecretsManage),

	apiv1.ToolSources_ListToolSources_FullMethodName:      AnyMember, // per-viewer summaries
	apiv1.ToolSources_CreateToolSource_FullMethodName:     Require(ToolsManage),
	apiv1.ToolSources_GetToolSource_FullMethodName:        AnyMember, // boundMembers and bindings for tools.manage only
	apiv1.ToolSources_UpdateToolSource_FullMethodName:     Require(ToolsManage),
	apiv1.ToolSources_DeleteToolSource_FullMethodName:     Require(ToolsManage),
	apiv1.ToolSources_SetToolCredential_FullMethodName:    Require(ToolsManage),
	apiv1.ToolSources_DeleteToolCredential_FullMethodName: Require(ToolsManage),
	apiv1.ToolSources_AddToolBinding_FullMethodName:       Require(ToolsManage),
	apiv1.ToolSources_RemoveToolBinding_FullMethodName:    Require(ToolsManage),
	apiv1.ToolSources_PutTool_FullMethodName:              Require(ToolsManage),
	apiv1.ToolSources_DeleteTool_FullMethodName:           Require(ToolsManage),
	apiv1.ToolSources_RefreshToolSource_FullMethodName:    Require(ToolsManage),
	apiv1.ToolSources_InvokeTool_FullMethodName:           AnyMember, // bound or allMembers, checked in the service

	// Notifications (hooks.md: Admin API): non-manage members list and view
	// only the endpoints that reach them, checked in the service.
	apiv1.Notifications_ListNotificationEndpoints_FullMethodName:        AnyMember,
	apiv1.Notifications_GetNotificationEndpoint_FullMethodName:          AnyMember,
	apiv1.Notifications_CreateNotificationEndpoint_FullMethodName:       Require(NotificationsManage),
	apiv1.Notifications_UpdateNotificationEndpoint_FullMethodName:       Require(NotificationsManage),
	apiv1.Notifications_DeleteNotificationEndpoint_FullMethodName:       Require(NotificationsManage),
	apiv1.Notifications_SetNotificationEndpointSecret_FullMethodName:    Require(NotificationsManage),
	apiv1.Notifications_DeleteNotificationEndpointSecret_FullMethodName: Require(NotificationsManage),
	apiv1.Notifications_ListNotificationDeliveries_FullMethodName:       Require(NotificationsManage),
	apiv1.Notifications_GetNotificationDelivery_FullMethodName:          Require(NotificationsManage),
	apiv1.Notifications_ReplayNotificationDelivery_FullMethodName:       Require(NotificationsManage),
	apiv1.Notifications_ListNotificationProfiles_FullMethodName:         Require(NotificationsManage),
	apiv1.Notifications_CreateNotificationProfile_FullMethodName:        Require(NotificationsManage),
	apiv1.Notifications_UpdateNotificationProfile_FullMethodName:        Require(NotificationsManage),
	apiv1.Notifications_DeleteNotificationProfile_FullMethodName:        Require(NotificationsManage),
	apiv1.Notifications_SetNotificationProfileSecret_FullMethodName:     Require(NotificationsManage),
	apiv1.Notifications_DeleteNotificationProfileSecret_FullMethodName:  Require(NotificationsManage),

	// Platform connect: minting a code hands out this broker's trust, and a
	// bind changes whose JWTs it accepts, so both need members.manage; bind
	// is session only, checked in the service. The lookup is public (spec:
	// Authentication rule 6), guarded by the code.
	apiv1.Platform_CreatePairingCode_FullMethodName: Require(MembersManage),
	apiv1.Platform_LookupPairingCode_FullMethodName: Public,
	apiv1.Platform_Bind_FullMethodName:              Require(MembersManage),

	apiv1.Approvals_ListApprovals_FullMethodName:    AnyMember, // own requests and those the caller may decide
	apiv1.Approvals_CreateApproval_FullMethodName:   AnyMember, // bearer, for the caller itself
	apiv1.Approvals_GetApproval_FullMethodName:      AnyMember, // requester or decider
	apiv1.Approvals_DecideApproval_FullMethodName:   AnyMember, // deciders, checked in the service
	apiv1.Approvals_WithdrawApproval_FullMethodName: AnyMember, // the requester
	apiv1.Approvals_GetApprovers_FullMethodName:     AnyMember, // manage/self
	apiv1.Approvals_SetApprovers_FullMethodName:     Require(MembersManage),

	// OTLP: bearer only, checked in the service; the member is the token's.
	collogspb.LogsService_Export_FullMethodName:       AnyMember,
	colmetricspb.MetricsService_Export_FullMethodName: AnyMember,

	// Reflection only describes the API, which /openapi.json publishes too.
	grpc_reflection_v1.ServerReflection_ServerReflectionInfo_FullMethodName:      Public,
	grpc_reflection_v1alpha.ServerReflection_ServerReflectionInfo_FullMethodName: Public,
}

// RuleFor returns the rule of a full method name; ok is false for a method
// the table does not know, which callers must refuse.
func RuleFor(fullMethod string) (Rule, bool) {
	r, ok := methodRules[fullMethod]
	return r, ok
}

// Authorize checks p against the method's rule. p may be nil for public
// methods only.
func Authorize(fullMethod string, p *Principal) error {
	r, ok := RuleFor(fullMethod)
	if !ok {
		return fmt.Errorf("%w: method %s has no permission rule", ErrForbidden, fullMethod)
	}
	return r.Admit(p)
}

// Admit checks p against the rule. p may be nil for public rules only.
func (r Rule) Admit(p *Principal) error {
	if r.Public {
		return nil
	}
	if p == nil {
		return ErrUnauthenticated
	}
	if r.Leaf != "" && !p.Has(r.Leaf) {
		return fmt.Errorf("%w: requires %s", ErrForbidden, r.Leaf)
	}
	return nil
}
