package auth_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
)

func TestResolve(t *testing.T) {
	presets := map[string][]string{
		"ops":   {auth.ObjectivesCreate, auth.ObjectivesCancel},
		"watch": {auth.ObjectivesWatch, auth.ObjectivesCancel},
		"none":  {},
	}
	tests := []struct {
		name    string
		entries []string
		want    []string
		wantErr string
	}{
		{name: "nil", entries: nil, want: []string{}},
		{name: "leaves sorted and deduplicated", entries: []string{auth.TeamManage, auth.ActivityRead, auth.TeamManage}, want: []string{auth.ActivityRead, auth.TeamManage}},
		{name: "presets expand and merge", entries: []string{"ops", "watch"}, want: []string{auth.ObjectivesCancel, auth.ObjectivesCreate, auth.ObjectivesWatch}},
		{name: "leaves and presets mixed", entries: []string{auth.ToolsManage, "ops"}, want: []string{auth.ObjectivesCancel, auth.ObjectivesCreate, auth.ToolsManage}},
		{name: "empty preset", entries: []string{"none"}, want: []string{}},
		{name: "unknown entry", entries: []string{"ops", "nope"}, wantErr: `"nope"`},
		{name: "empty string entry", entries: []string{""}, wantErr: `""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.Resolve(tc.entries, presets)
			if tc.wantErr != "" {
				var upe *auth.UnknownPermissionError
				require.ErrorAs(t, err, &upe)
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.False(t, auth.HasPreset(got), "resolved lists hold leaves only")
		})
	}
}

func TestDefaultPresets(t *testing.T) {
	p := auth.DefaultPresets()
	require.ElementsMatch(t, auth.Leaves, p["admin"])
	require.ElementsMatch(t, []string{auth.ObjectivesCreate, auth.ObjectivesCancel, auth.ObjectivesWatch}, p["operator"])
	require.NotNil(t, p["member"])
	require.Empty(t, p["member"])
	// Callers may mutate the result without touching Leaves.
	p["admin"][0] = "mutated"
	require.Equal(t, auth.TeamManage, auth.Leaves[0])
}
