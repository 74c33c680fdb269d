package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// channelFields are the keys of a Channel (proto/svc/v1).
var channelFields = []string{"archivedAt", "createdAt", "createdBy", "id", "slug"}

// requireChannel asserts the Channel shape.
func requireChannel(t testing.TB, c obj, slug, createdBy string) obj {
	t.Helper()
	for k := range c {
		require.Contains(t, channelFields, k, "unexpected Channel field %q: %v", k, c)
	}
	require.Equal(t, slug, c["slug"])
	require.Equal(t, createdBy, c["createdBy"])
	id, _ := c["id"].(string)
	require.NotEmpty(t, id)
	created, ok := c["createdAt"].(float64)
	require.True(t, ok, "createdAt is a number: %v", c)
	require.InDelta(t, float64(time.Now().UnixMilli()), created, float64(time.Hour.Milliseconds()))
	return c
}

// channelMembers returns GetChannel's members as name → role.
func channelMembers(t testing.TB, d driver, c cred, channel string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range listOf(t, mustCall(t, d, c, "GetChannel", obj{"channel": channel}), "members") {
		require.Equal(t, []string{"member", "role"}, keys(m))
		out[m["member"].(string)] = m["role"].(string)
	}
	return out
}

// summaries returns ListChannels as slug → summary, and the slugs in order.
func summaries(t testing.TB, d driver, c cred) (map[string]obj, []string) {
	t.Helper()
	bySlug := map[string]obj{}
	var order []string
	for _, s := range listOf(t, mustCall(t, d, c, "ListChannels", nil), "channels") {
		slug := s["slug"].(string)
		bySlug[slug] = s
		order = append(order, slug)
	}
	return bySlug, order
}

func TestChannelSlugs(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bob := bearer(createMember(t, d, admin, "bob"))
		mustCall(t, d, bob, "CreateChannel", obj{"slug": "taken"})
		tests := []struct {
			name string
			slug string
			code string
		}{
			{name: "one letter", slug: "a"},
			{name: "one digit", slug: "7"},
			{name: "letters and digits", slug: "team42"},
			{name: "digit first", slug: "1st"},
			{name: "inner dashes", slug: "a-b-c"},
			{name: "32 characters", slug: strings.Repeat("s", 32)},
			{name: "empty", slug: "", code: "bad_request"},
			{name: "33 characters", slug: strings.Repeat("s", 33), code: "bad_request"},
			{name: "leading dash", slug: "-ops", code: "bad_request"},
			{name: "trailing dash", slug: "ops-", code: "bad_request"},
			{name: "double dash", slug: "a--b", code: "bad_request"},
			{name: "uppercase", slug: "Ops", code: "bad_request"},
			{name: "underscore", slug: "a_b", code: "bad_request"},
			{name: "dot", slug: "a.b", code: "bad_request"},
			{name: "space", slug: "a b", code: "bad_request"},
			{name: "colon", slug: "a:b", code: "bad_request"},
			{name: "non-ASCII", slug: "café", code: "bad_request"},
			{name: "taken", slug: "taken", code: "conflict"},
			{name: "general is reserved", slug: "general", code: "conflict"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if tc.code != "" {
					mustFail(t, d, bob, "CreateChannel", obj{"slug": tc.slug}, tc.code)
					return
				}
				c := requireChannel(t, mustCall(t, d, bob, "CreateChannel", obj{"slug": tc.slug}), tc.slug, "bob")
				require.NotContains(t, c, "archivedAt")
				// A rename obeys the same grammar.
				renamed := ("r" + tc.slug)[:min(32, len(tc.slug)+1)]
				r := requireChannel(t, mustCall(t, d, bob, "RenameChannel", obj{"channel": c["id"], "slug": renamed}), renamed, "bob")
				require.Equal(t, c["id"], r["id"])
			})
		}
		t.Run("rename refused", func(t *testing.T) {
			c := mustCall(t, d, bob, "CreateChannel", obj{"slug": "mine"})
			for _, tc := range tests {
				if tc.code == "" || tc.slug == "" {
					continue
				}
				mustFail(t, d, bob, "RenameChannel", obj{"channel": c["id"], "slug": tc.slug}, tc.code)
			}
		})
	})
}

func TestChannelLifecycle(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		toks := map[string]string{"admin": tokenOf(admin)}
		for _, n := range []string{"alice", "bob", "carol", "dave"} {
			toks[n] = createMember(t, d, admin, n)
		}
		as := func(n string) cred { return bearer(toks[n]) }

		ch := requireChannel(t, mustCall(t, d, as("alice"), "CreateChannel", obj{"slug": "ops"}), "ops", "alice")
		id := ch["id"].(string)
		require.NotEqual(t, "ops", id, "the id is stable, not the slug")

		t.Run("creator is admin", func(t *testing.T) {
			got := mustCall(t, d, as("bob"), "GetChannel", obj{"channel": "ops"})
			require.Equal(t, ch, got["channel"])
			require.Equal(t, map[string]string{"alice": "admin"}, channelMembers(t, d, as("bob"), id))
		})

		t.Run("list per viewer", func(t *testing.T) {
			mustCall(t, d, as("bob"), "CreateChannel", obj{"slug": "aaa"})
			tests := []struct {
				viewer    string
				joined    bool
				myRole    any
				aaaJoined bool
				aaaMyRole any
			}{
				{viewer: "alice", joined: true, myRole: "admin", aaaMyRole: nil},
				{viewer: "bob", joined: false, myRole: nil, aaaJoined: true, aaaMyRole: "admin"},
				{viewer: "carol", joined: false, myRole: nil, aaaMyRole: nil},
			}
			for _, tc := range tests {
				t.Run(tc.viewer, func(t *testing.T) {
					byslug, order := summaries(t, d, as(tc.viewer))
					require.Equal(t, []string{"general", "aaa", "ops"}, order, "general first, then by slug")
					g := byslug["general"]
					require.Equal(t, "general", g["id"])
					require.Equal(t, true, g["joined"])
					require.Equal(t, "member", g["myRole"])
					require.Equal(t, tc.joined, byslug["ops"]["joined"])
					require.Equal(t, tc.myRole, byslug["ops"]["myRole"])
					require.Equal(t, tc.aaaJoined, byslug["aaa"]["joined"])
					require.Equal(t, tc.aaaMyRole, byslug["aaa"]["myRole"])
					require.Equal(t, id, byslug["ops"]["id"])
					require.Equal(t, "alice", byslug["ops"]["createdBy"])
				})
			}
		})

		t.Run("membership", func(t *testing.T) {
			tests := []struct {
				name   string
				caller string
				op     string
				req    obj
				code   string
				want   map[string]string // members after, when set
			}{
				{name: "self join", caller: "bob", op: "AddChannelMember", req: obj{"member": "bob"}, want: map[string]string{"alice": "admin", "bob": "member"}},
				{name: "self join as admin", caller: "carol", op: "AddChannelMember", req: obj{"member": "carol", "role": "admin"}, code: "forbidden"},
				{name: "member adds another", caller: "bob", op: "AddChannelMember", req: obj{"member": "carol"}, code: "forbidden"},
				{name: "outsider adds another", caller: "dave", op: "AddChannelMember", req: obj{"member": "carol"}, code: "forbidden"},
				{name: "channel admin adds another", caller: "alice", op: "AddChannelMember", req: obj{"member": "carol"}, want: map[string]string{"alice": "admin", "bob": "member", "carol": "member"}},
				{name: "unknown member", caller: "alice", op: "AddChannelMember", req: obj{"member": "nobody"}, code: "bad_request"},
				{name: "bad role", caller: "alice", op: "AddChannelMember", req: obj{"member": "dave", "role": "owner"}, code: "bad_request"},
				{name: "manager adds another", caller: "admin", op: "AddChannelMember", req: obj{"member": "dave"}, want: map[string]string{"alice": "admin", "bob": "member", "carol": "member", "dave": "member"}},
				{name: "member removes another", caller: "bob", op: "RemoveChannelMember", req: obj{"name": "carol"}, code: "forbidden"},
				{name: "member promotes itself", caller: "bob", op: "AddChannelMember", req: obj{"member": "bob", "role": "admin"}, code: "forbidden"},
				{name: "admin sets a role", caller: "alice", op: "AddChannelMember", req: obj{"member": "carol", "role": "admin"}, want: map[string]string{"alice": "admin", "bob": "member", "carol": "admin", "dave": "member"}},
				{name: "new admin removes another", caller: "carol", op: "RemoveChannelMember", req: obj{"name": "dave"}, want: map[string]string{"alice": "admin", "bob": "member", "carol": "admin"}},
				{name: "self leave", caller: "bob", op: "RemoveChannelMember", req: obj{"name": "bob"}, want: map[string]string{"alice": "admin", "carol": "admin"}},
				{name: "removing a non-member", caller: "alice", op: "RemoveChannelMember", req: obj{"name": "bob"}, code: "not_found"},
				{name: "manager removes another", caller: "admin", op: "RemoveChannelMember", req: obj{"name": "carol"}, want: map[string]string{"alice": "admin"}},
				{name: "unknown channel", caller: "bob", op: "AddChannelMember", req: obj{"channel": "nope", "member": "bob"}, code: "not_found"},
				{name: "general join", caller: "bob", op: "AddChannelMember", req: obj{"channel": "general", "member": "bob"}, code: "conflict"},
				{name: "general leave", caller: "bob", op: "RemoveChannelMember", req: obj{"channel": "general", "name": "bob"}, code: "conflict"},
				{name: "rejoin", caller: "bob", op: "AddChannelMember", req: obj{"member": "bob"}, want: map[string]string{"alice": "admin", "bob": "member"}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					req := obj{"channel": id}
					for k, v := range tc.req {
						req[k] = v
					}
					if tc.code != "" {
						mustFail(t, d, as(tc.caller), tc.op, req, tc.code)
						return
					}
					mustCall(t, d, as(tc.caller), tc.op, req)
					require.Equal(t, tc.want, channelMembers(t, d, as("dave"), id))
				})
			}
			// A member who leaves can no longer post or read.
			mustCall(t, d, as("bob"), "RemoveChannelMember", obj{"channel": id, "name": "bob"})
			mustFail(t, d, as("bob"), "Push", obj{"body": "x", "data": obj{"thread": "chan:" + id}}, "forbidden")
			mustFail(t, d, as("bob"), "History", obj{"channel": id}, "forbidden")
			mustCall(t, d, as("bob"), "AddChannelMember", obj{"channel": id, "member": "bob"})
		})

		t.Run("rename", func(t *testing.T) {
			mustFail(t, d, as("bob"), "RenameChannel", obj{"channel": id, "slug": "ops2"}, "forbidden")
			r := requireChannel(t, mustCall(t, d, as("alice"), "RenameChannel", obj{"channel": "ops", "slug": "ops2"}), "ops2", "alice")
			require.Equal(t, id, r["id"], "rename keeps the id")
			mustFail(t, d, as("bob"), "GetChannel", obj{"channel": "ops"}, "not_found")
			require.Equal(t, r, mustCall(t, d, as("bob"), "GetChannel", obj{"channel": "ops2"})["channel"])
			// Posts address the id, so they keep working.
			_, msg := mustPush(t, d, as("bob"), obj{"body": "after rename", "data": obj{"thread": "chan:" + id}})
			h := listOf(t, mustCall(t, d, as("alice"), "History", obj{"channel": "ops2"}), "messages")
			require.Equal(t, msg, h[0])
			// members.manage may rename too; taken and reserved slugs are refused.
			r = mustCall(t, d, admin, "RenameChannel", obj{"channel": id, "slug": "ops3"})
			require.Equal(t, "ops3", r["slug"])
			mustCall(t, d, as("carol"), "CreateChannel", obj{"slug": "other"})
			mustFail(t, d, as("alice"), "RenameChannel", obj{"channel": id, "slug": "other"}, "conflict")
			mustFail(t, d, as("alice"), "RenameChannel", obj{"channel": id, "slug": "general"}, "conflict")
			mustFail(t, d, as("alice"), "RenameChannel", obj{"channel": id, "slug": "Bad"}, "bad_request")
			mustFail(t, d, admin, "RenameChannel", obj{"channel": "general", "slug": "lobby"}, "conflict")
			mustFail(t, d, as("alice"), "RenameChannel", obj{"channel": "nope", "slug": "x"}, "not_found")
		})

		t.Run("archive", func(t *testing.T) {
			mustFail(t, d, as("bob"), "ArchiveChannel", obj{"channel": id}, "forbidden")
			mustFail(t, d, admin, "ArchiveChannel", obj{"channel": "general"}, "conflict")
			mustFail(t, d, as("alice"), "ArchiveChannel", obj{"channel": "nope"}, "not_found")
			_, before := mustPush(t, d, as("alice"), obj{"body": "last words", "data": obj{"thread": "chan:" + id}})
			mustCall(t, d, as("alice"), "ArchiveChannel", obj{"channel": id})

			got := mustCall(t, d, as("bob"), "GetChannel", obj{"channel": id})["channel"].(obj)
			archived, ok := got["archivedAt"].(float64)
			require.True(t, ok, "archivedAt is set: %v", got)
			require.InDelta(t, float64(time.Now().UnixMilli()), archived, float64(time.Minute.Milliseconds()))
			byslug, _ := summaries(t, d, as("bob"))
			require.Equal(t, archived, byslug["ops3"]["archivedAt"], "archived channels stay listed")

			mustFail(t, d, as("alice"), "Push", obj{"body": "too late", "data": obj{"thread": "chan:" + id}}, "gone")
			mustFail(t, d, as("alice"), "AddChannelMember", obj{"channel": id, "member": "carol"}, "gone")
			mustFail(t, d, as("alice"), "RenameChannel", obj{"channel": id, "slug": "ops4"}, "gone")
			mustFail(t, d, as("alice"), "RemoveChannelMember", obj{"channel": id, "name": "bob"}, "gone")
			h := listOf(t, mustCall(t, d, as("bob"), "History", obj{"channel": id}), "messages")
			require.Equal(t, before, h[0], "history stays readable")
			// Self-leave is always allowed, archived or not.
			mustCall(t, d, as("bob"), "RemoveChannelMember", obj{"channel": id, "name": "bob"})
			mustFail(t, d, as("bob"), "History", obj{"channel": id}, "forbidden")
			mustFail(t, d, as("carol"), "History", obj{"channel": id}, "forbidden")
			mustFail(t, d, as("dave"), "CreateChannel", obj{"slug": "ops3"}, "conflict")
			require.Equal(t, got, mustCall(t, d, as("dave"), "GetChannel", obj{"channel": "ops3"})["channel"], "an archived channel stays addressable by slug")
		})
	})
}
