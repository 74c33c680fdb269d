package registry

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
)

func TestKinds(t *testing.T) {
	tests := []struct {
		kind                 Kind
		thread, purpose      string
		manage               string
		secretSet, secretDel string
		name, noun           string
	}{
		{ToolSources, "tool:gh", "svc/tool-credential/gh", auth.ToolsManage, "credential_set", "credential_deleted", "tool_source", "tool source"},
		{Secrets, "secret:gh", "svc/secret/gh", auth.SecretsManage, "value_set", "value_deleted", "secret", "secret"},
		{NotificationEndpoints, "hook:gh", "svc/hook/endpoint/gh", auth.NotificationsManage, "secret_set", "secret_deleted", "notification_endpoint", "notification endpoint"},
		{NotificationProfiles, "hook-profile:gh", "svc/hook/profile/gh", auth.NotificationsManage, "secret_set", "secret_deleted", "notification_profile", "notification profile"},
	}
	for _, tc := range tests {
		t.Run(tc.kind.Name, func(t *testing.T) {
			require.Equal(t, tc.thread, tc.kind.Thread("gh"))
			require.Equal(t, tc.purpose, tc.kind.PurposeOf("gh"))
			require.Equal(t, tc.manage, tc.kind.Manage)
			require.Equal(t, tc.secretSet, tc.kind.SecretSet())
			require.Equal(t, tc.secretDel, tc.kind.SecretDeleted())
			require.Equal(t, tc.name, tc.kind.Name)
			require.Equal(t, tc.noun, tc.kind.Noun)
			got, ok := KindOfThread(tc.kind.Prefix)
			require.True(t, ok)
			require.Equal(t, tc.kind, got)
		})
	}
	for _, prefix := range []string{"", "obj", "dm", "chan", "loop", "tools", "Tool"} {
		_, ok := KindOfThread(prefix)
		require.False(t, ok, prefix)
	}
}

// Distinct kinds never share a thread prefix, an event kind or a seal
// purpose: a value sealed for one registry's entry never opens as
// another's, and a thread names one registry.
func TestKindsDistinct(t *testing.T) {
	for i, a := range Kinds {
		for _, b := range Kinds[i+1:] {
			require.NotEqual(t, a.Prefix, b.Prefix)
			require.NotEqual(t, a.Name, b.Name)
			require.NotEqual(t, a.Purpose, b.Purpose)
			require.NotEqual(t, a.Noun, b.Noun)
		}
	}
}
