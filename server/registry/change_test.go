package registry

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAudience(t *testing.T) {
	everyone := []string{"admin", "alice", "bob"}
	tests := []struct {
		name  string
		all   bool
		bound []string
		want  []string
	}{
		{"all members", true, []string{"bob"}, everyone},
		{"bound only", false, []string{"bob"}, []string{"bob"}},
		{"nobody bound", false, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Audience(tc.all, tc.bound, everyone)
			require.Equal(t, tc.want, got)
			if len(got) > 0 {
				// A copy: the caller's lists never change under it.
				got[0] = "x"
				require.NotEqual(t, "x", everyone[0])
				if len(tc.bound) > 0 {
					require.NotEqual(t, "x", tc.bound[0])
				}
			}
		})
	}
}

// msg is what a test reads of one event message.
type msg struct {
	To    []string
	Title string
	Body  string
	Data  map[string]any
}

func TestChangeMessages(t *testing.T) {
	tests := []struct {
		name string
		ch   Change
		want []msg
	}{
		{
			name: "nobody to tell",
			ch:   Change{Kind: Secrets, Slug: "gh", Event: "created", Actor: "admin"},
		},
		{
			name: "created, to the audience and the managers, each once and sorted",
			ch:   Change{Kind: ToolSources, Slug: "gh", Event: "created", Actor: "admin", After: []string{"bob", "admin", "alice"}, Managers: []string{"admin"}},
			want: []msg{{
				To: []string{"admin", "alice", "bob"}, Title: "tool source gh", Body: "admin created tool source gh",
				Data: map[string]any{"thread": "tool:gh", "kind": "tool_source", "event": "created", "slug": "gh"},
			}},
		},
		{
			name: "deleted tells who could use it before",
			ch:   Change{Kind: Secrets, Slug: "db", Event: "deleted", Actor: "admin", Before: []string{"bob"}},
			want: []msg{{
				To: []string{"bob"}, Title: "secret db", Body: "admin deleted secret db",
				Data: map[string]any{"thread": "secret:db", "kind": "secret", "event": "deleted", "slug": "db"},
			}},
		},
		{
			name: "a binding names its member to that member and the managers only",
			ch: Change{Kind: Secrets, Slug: "db", Event: "binding_added", Actor: "admin", Member: "bob",
				Before: []string{"alice"}, After: []string{"alice", "bob"}, Managers: []string{"admin"}},
			want: []msg{
				{
					To: []string{"admin", "bob"}, Title: "secret db", Body: "admin bound bob to secret db",
					Data: map[string]any{"thread": "secret:db", "kind": "secret", "event": "binding_added", "slug": "db", "member": "bob"},
				},
				{
					To: []string{"alice"}, Title: "secret db", Body: "admin changed the bindings of secret db",
					Data: map[string]any{"thread": "secret:db", "kind": "secret", "event": "binding_added", "slug": "db"},
				},
			},
		},
		{
			name: "an unbinding told to the member alone",
			ch: Change{Kind: ToolSources, Slug: "gh", Event: "binding_removed", Actor: "admin", Member: "bob",
				Before: []string{"bob"}},
			want: []msg{{
				To: []string{"bob"}, Title: "tool source gh", Body: "admin unbound bob from tool source gh",
				Data: map[string]any{"thread": "tool:gh", "kind": "tool_source", "event": "binding_removed", "slug": "gh", "member": "bob"},
			}},
		},
		{
			name: "a tool definition names its tool",
			ch:   Change{Kind: ToolSources, Slug: "gh", Event: "tool_defined", Actor: "admin", Tool: "search", Managers: []string{"admin"}},
			want: []msg{{
				To: []string{"admin"}, Title: "tool source gh", Body: "admin defined a tool of tool source gh (search)",
				Data: map[string]any{"thread": "tool:gh", "kind": "tool_source", "event": "tool_defined", "slug": "gh", "tool": "search"},
			}},
		},
		{
			name: "an endpoint's secret set",
			ch:   Change{Kind: NotificationEndpoints, Slug: "ci", Event: NotificationEndpoints.SecretSet(), Actor: "admin", Before: []string{"alice"}, After: []string{"alice"}},
			want: []msg{{
				To: []string{"alice"}, Title: "notification endpoint ci", Body: "admin set the secret of notification endpoint ci",
				Data: map[string]any{"thread": "hook:ci", "kind": "notification_endpoint", "event": "secret_set", "slug": "ci"},
			}},
		},
		{
			name: "an unknown event is an update",
			ch:   Change{Kind: Secrets, Slug: "db", Event: "updated", Actor: "admin", Managers: []string{"admin"}},
			want: []msg{{
				To: []string{"admin"}, Title: "secret db", Body: "admin updated secret db",
				Data: map[string]any{"thread": "secret:db", "kind": "secret", "event": "updated", "slug": "db"},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := tc.ch.Messages()
			require.NoError(t, err)
			var got []msg
			for _, m := range ms {
				require.Equal(t, tc.ch.Actor, m.From)
				require.Equal(t, tc.ch.Kind.Thread(tc.ch.Slug), m.Thread)
				require.Equal(t, "info", m.Level)
				var data map[string]any
				require.NoError(t, json.Unmarshal(m.Data, &data))
				got = append(got, msg{To: m.Recipients, Title: m.Title, Body: m.Body, Data: data})
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestVerb(t *testing.T) {
	for _, k := range Kinds {
		require.NotEqual(t, "updated", Verb(k.SecretSet()), k.Name)
		require.NotEqual(t, "updated", Verb(k.SecretDeleted()), k.Name)
	}
	require.Equal(t, "refreshed the tools of", Verb("refreshed"))
	require.Equal(t, "updated", Verb("anything else"))
}
