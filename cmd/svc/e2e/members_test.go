package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCreateMember(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {

		role := obj{"title": "Builder", "description": "Builds things"}
		b := mustCall(t, d, admin, "CreateMember", obj{"name": "bob", "role": role, "instructions": "the plan", "permissions": []string{"operator"}})
		require.Equal(t, []string{"member", "token"}, keys(b))
		m := b["member"].(obj)
		require.Equal(t, []string{"name", "permissions", "role"}, keys(m), "a Teammate: no instructions, no secrets")
		require.Equal(t, "bob", m["name"])
		require.Equal(t, role, m["role"])
		require.Equal(t, operatorLeaves, sortedStrs(t, m["permissions"]))
		bob := b["token"].(string)
		require.Regexp(t, tokenRE, bob)
		me := mustCall(t, d, bearer(bob), "GetBriefing", nil)["member"].(obj)
		require.Equal(t, "bob", me["name"])
		require.Equal(t, "the plan", me["instructions"], "the briefing carries the caller's own instructions")

		names := []string{"admin", "bob"}
		tests := []struct {
			name      string
			member    string
			perms     []string
			wantCode  string
			wantPerms []string
		}{
			{name: "preset and leaf", member: "eve", perms: []string{"member", "activity.read"}, wantPerms: []string{"activity.read"}},
			{name: "overlapping preset and leaf", member: "ops", perms: []string{"operator", "objectives.create"}, wantPerms: operatorLeaves},
			{name: "admin preset", member: "boss", perms: []string{"admin"}, wantPerms: allLeaves},
			{name: "no permissions", member: "nobody", perms: []string{}, wantPerms: []string{}},
			{name: "64 characters", member: strings.Repeat("x", 64), perms: []string{}, wantPerms: []string{}},
			{name: "every allowed character", member: "A.b_c-9", perms: []string{}, wantPerms: []string{}},
			{name: "digit first", member: "9lives", perms: []string{}, wantPerms: []string{}},
			{name: "duplicate", member: "bob", perms: []string{}, wantCode: "conflict"},
			{name: "duplicate of admin", member: "admin", perms: []string{}, wantCode: "conflict"},
			{name: "unknown permission", member: "x1", perms: []string{"root"}, wantCode: "bad_request"},
			{name: "unknown beside known", member: "x2", perms: []string{"member", "objectives.fly"}, wantCode: "bad_request"},
			{name: "leading dash", member: "-bad", perms: []string{}, wantCode: "bad_request"},
			{name: "leading dot", member: ".bad", perms: []string{}, wantCode: "bad_request"},
			{name: "leading underscore", member: "_bad", perms: []string{}, wantCode: "bad_request"},
			{name: "colon", member: "a:b", perms: []string{}, wantCode: "bad_request"},
			{name: "space", member: "a b", perms: []string{}, wantCode: "bad_request"},
			{name: "slash", member: "a/b", perms: []string{}, wantCode: "bad_request"},
			{name: "non-ASCII", member: "zoë", perms: []string{}, wantCode: "bad_request"},
			{name: "empty", member: "", perms: []string{}, wantCode: "bad_request"},
			{name: "65 characters", member: strings.Repeat("x", 65), perms: []string{}, wantCode: "bad_request"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := d.call(t, admin, "CreateMember", obj{"name": tc.member, "permissions": tc.perms})
				require.Equal(t, tc.wantCode, r.code)
				if tc.wantCode != "" {
					return
				}
				names = append(names, tc.member)
				require.Equal(t, tc.wantPerms, sortedStrs(t, r.body["member"].(obj)["permissions"]))
				requireWorks(t, d, bearer(r.body["token"].(string)), tc.member)
			})
		}
		slices.Sort(names)
		require.Equal(t, names, memberNames(t, d, admin), "refused creates left nothing behind")
	})
}

func TestMemberInstructionsArePrivate(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		mustCall(t, d, admin, "CreateMember", obj{"name": "bob", "instructions": "bob's secret plan", "permissions": []string{"member"}})
		opsTok := createMember(t, d, admin, "ops", "operator")
		// A manager sees every member's instructions.
		for _, m := range listOf(t, mustCall(t, d, admin, "ListMembers", nil), "members") {
			require.Contains(t, m, "instructions", "%v", m)
		}
		require.Equal(t, "bob's secret plan", memberByName(t, d, admin, "bob")["instructions"])

		// Others never see the key, in any member-listing answer.
		ops := bearer(opsTok)
		for _, op := range []string{"ListMembers", "GetRoster", "GetBriefing"} {
			body := mustCall(t, d, ops, op, nil)
			for _, key := range []string{"members", "teammates"} {
				if _, ok := body[key]; !ok {
					continue
				}
				for _, m := range listOf(t, body, key) {
					require.NotContains(t, m, "instructions", "%s %s: %v", op, key, m)
				}
			}
			raw, err := json.Marshal(body)
			require.NoError(t, err)
			require.NotContains(t, string(raw), "secret plan", op)
		}
		require.Len(t, listOf(t, mustCall(t, d, ops, "ListMembers", nil), "members"), 3)
	})
}

func TestUpdateMember(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		role := obj{"title": "Builder", "description": "Builds"}
		b := mustCall(t, d, admin, "CreateMember", obj{"name": "bob", "role": role, "instructions": "v1", "permissions": []string{"operator"}})
		bob := bearer(b["token"].(string))

		// Each step applies to the state the previous one left.
		tests := []struct {
			name      string
			patch     obj
			wantCode  string
			wantRole  obj
			wantInstr string
			wantPerms []string
		}{
			{name: "role only", patch: obj{"role": obj{"title": "Lead", "description": "Leads"}},
				wantRole: obj{"title": "Lead", "description": "Leads"}, wantInstr: "v1", wantPerms: operatorLeaves},
			{name: "instructions only", patch: obj{"instructions": "v2"},
				wantRole: obj{"title": "Lead", "description": "Leads"}, wantInstr: "v2", wantPerms: operatorLeaves},
			{name: "permissions only", patch: obj{"permissions": []string{"member", "activity.read"}},
				wantRole: obj{"title": "Lead", "description": "Leads"}, wantInstr: "v2", wantPerms: []string{"activity.read"}},
			{name: "empty patch", patch: obj{},
				wantRole: obj{"title": "Lead", "description": "Leads"}, wantInstr: "v2", wantPerms: []string{"activity.read"}},
			{name: "unknown permission", patch: obj{"permissions": []string{"root"}, "role": obj{"title": "Nope"}}, wantCode: "bad_request",
				wantRole: obj{"title": "Lead", "description": "Leads"}, wantInstr: "v2", wantPerms: []string{"activity.read"}},
			{name: "all of them", patch: obj{"role": role, "instructions": "", "permissions": []string{"admin"}},
				wantRole: role, wantInstr: "", wantPerms: allLeaves},
			{name: "empty permissions", patch: obj{"permissions": []string{}},
				wantRole: role, wantInstr: "", wantPerms: []string{}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := d.call(t, admin, "UpdateMember", merge(obj{"name": "bob"}, tc.patch))
				require.Equal(t, tc.wantCode, r.code)
				if tc.wantCode == "" {
					require.Equal(t, []string{"name", "permissions", "role"}, keys(r.body), "a Teammate")
					require.Equal(t, "bob", r.body["name"])
					require.Equal(t, tc.wantRole, r.body["role"])
					require.Equal(t, tc.wantPerms, sortedStrs(t, r.body["permissions"]))
				}
				m := memberByName(t, d, admin, "bob")
				require.Equal(t, tc.wantRole, m["role"])
				require.Equal(t, tc.wantInstr, m["instructions"])
				require.Equal(t, tc.wantPerms, sortedStrs(t, m["permissions"]))
			})
		}

		// Permission changes apply to the very next request.
		mustCall(t, d, admin, "UpdateMember", obj{"name": "bob", "permissions": []string{"admin"}})
		createMember(t, d, bob, "carol")
		mustCall(t, d, admin, "UpdateMember", obj{"name": "bob", "permissions": []string{"member"}})
		mustFail(t, d, bob, "CreateMember", obj{"name": "dave"}, "forbidden")

		mustFail(t, d, admin, "UpdateMember", obj{"name": "ghost", "role": role}, "not_found")
	})
}

func merge(a, b obj) obj {
	out := obj{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestDeleteMember(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bob := bearer(createMember(t, d, admin, "bob", "admin"))
		requireWorks(t, d, bob, "bob")

		mustCall(t, d, admin, "DeleteMember", obj{"name": "bob"}) // REST: 204, empty body
		requireRejected(t, d, bob)
		mustFail(t, d, bob, "ListMembers", nil, "unauthenticated")
		require.Equal(t, []string{"admin"}, memberNames(t, d, admin))
		mustFail(t, d, admin, "DeleteMember", obj{"name": "bob"}, "not_found")
		mustFail(t, d, admin, "DeleteMember", obj{"name": "ghost"}, "not_found")
		mustFail(t, d, admin, "ListTokens", obj{"name": "bob"}, "not_found")

		// A new member of the same name does not revive the old token.
		bob2 := bearer(createMember(t, d, admin, "bob"))
		requireWorks(t, d, bob2, "bob")
		requireRejected(t, d, bob)
		require.Len(t, listOf(t, mustCall(t, d, admin, "ListTokens", obj{"name": "bob"}), "tokens"), 1)
	})
}

func TestLastAdminRule(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {

		for _, perms := range [][]string{{"member"}, {}, {"operator", "team.manage", "tools.manage"}} {
			mustFail(t, d, admin, "UpdateMember", obj{"name": "admin", "permissions": perms}, "bad_request")
		}
		mustFail(t, d, admin, "DeleteMember", obj{"name": "admin"}, "bad_request")
		require.Equal(t, allLeaves, sortedStrs(t, memberByName(t, d, admin, "admin")["permissions"]))
		// Changes that keep members.manage pass.
		mustCall(t, d, admin, "UpdateMember", obj{"name": "admin", "role": obj{"title": "Root"}})
		mustCall(t, d, admin, "UpdateMember", obj{"name": "admin", "permissions": []string{"admin"}})

		// With a second manager, the first may step down or go.
		boss := bearer(createMember(t, d, admin, "boss", "members.manage"))
		mustCall(t, d, admin, "UpdateMember", obj{"name": "admin", "permissions": []string{"member"}})
		mustFail(t, d, admin, "CreateMember", obj{"name": "x"}, "forbidden")
		mustFail(t, d, boss, "UpdateMember", obj{"name": "boss", "permissions": []string{"operator"}}, "bad_request")
		mustFail(t, d, boss, "DeleteMember", obj{"name": "boss"}, "bad_request")
		mustCall(t, d, boss, "DeleteMember", obj{"name": "admin"})
		require.Equal(t, []string{"boss"}, memberNames(t, d, boss))
		requireRejected(t, d, admin)
	})
}

func TestMemberChangesPersistAcrossRestart(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{}) // in-memory store: the config is the authority
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	mustCall(t, d, admin, "CreateMember", obj{"name": "bob", "instructions": "plan", "permissions": []string{"operator"}})
	bobTok := createMember(t, d, admin, "bob2", "member")
	mustCall(t, d, admin, "UpdateMember", obj{"name": "bob", "role": obj{"title": "Lead", "description": "Leads"}})
	mustCall(t, d, admin, "UpdateMember", obj{"name": "bob2", "permissions": []string{"activity.read"}})
	carolTok := createMember(t, d, admin, "carol", "admin")
	mustCall(t, d, admin, "DeleteMember", obj{"name": "carol"})
	p.mustStop(t)

	p2 := p.restart(t)
	d2 := restDriver{p2}
	require.Equal(t, []string{"admin", "bob", "bob2"}, memberNames(t, d2, admin))
	bob := memberByName(t, d2, admin, "bob")
	require.Equal(t, obj{"title": "Lead", "description": "Leads"}, bob["role"])
	require.Equal(t, "plan", bob["instructions"])
	require.Equal(t, operatorLeaves, sortedStrs(t, bob["permissions"]))
	require.Equal(t, []string{"activity.read"}, sortedStrs(t, memberByName(t, d2, admin, "bob2")["permissions"]))
	requireWorks(t, d2, bearer(bobTok), "bob2")
	requireRejected(t, d2, bearer(carolTok))
	requireWorks(t, grpcDriver{p2.grpcConn(t)}, admin, "admin")
	p2.mustStop(t)
	require.Empty(t, p2.stdout.String())
	requireAbsent(t, []string{p.opts.configPath}, adminTok, bobTok, carolTok)
}

func TestTokens(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			p := mustStartSvc(t, procOpts{})
			adminTok := p.adminToken(t)
			admin := bearer(adminTok)
			d := tr.connect(t, p)

			tokens := listTokens(t, d, admin, "admin", start)
			require.Len(t, tokens, 1)
			require.Equal(t, "bootstrap", tokens[0]["origin"])
			adminTokenID := tokens[0]["id"].(string)
			requireNoSecrets(t, tokens, adminTok)

			bob1 := createMember(t, d, admin, "bob", "member")
			tokens = listTokens(t, d, bearer(bob1), "bob", start)
			require.Len(t, tokens, 1)
			require.Equal(t, "bootstrap", tokens[0]["origin"])
			require.Equal(t, "admin", tokens[0]["createdBy"])
			requireNoSecrets(t, tokens, bob1)

			// Self-rotation: a new token, every earlier one revoked.
			r := mustCall(t, d, bearer(bob1), "RotateToken", obj{"name": "bob"})
			require.Equal(t, []string{"token", "tokenInfo"}, keys(r))
			bob2 := r["token"].(string)
			require.Regexp(t, tokenRE, bob2)
			require.NotEqual(t, bob1, bob2)
			info := r["tokenInfo"].(obj)
			requireTokenInfo(t, info, start)
			require.Equal(t, "rotate", info["origin"])
			require.Equal(t, "bob", info["createdBy"])
			requireRejected(t, d, bearer(bob1))
			requireWorks(t, d, bearer(bob2), "bob")
			tokens = listTokens(t, d, bearer(bob2), "bob", start)
			require.Len(t, tokens, 1)
			require.Equal(t, info["id"], tokens[0]["id"])
			requireNoSecrets(t, tokens, bob2)

			// A manager rotates another member's token.
			r = mustCall(t, d, admin, "RotateToken", obj{"name": "bob"})
			bob3 := r["token"].(string)
			require.Equal(t, "admin", r["tokenInfo"].(obj)["createdBy"])
			requireRejected(t, d, bearer(bob1))
			requireRejected(t, d, bearer(bob2))
			requireWorks(t, d, bearer(bob3), "bob")
			bob3ID := r["tokenInfo"].(obj)["id"].(string)

			// A token id only revokes under its own member.
			mustFail(t, d, admin, "RevokeToken", obj{"name": "admin", "id": bob3ID}, "not_found")
			mustFail(t, d, bearer(bob3), "RevokeToken", obj{"name": "bob", "id": adminTokenID}, "not_found")
			requireWorks(t, d, bearer(bob3), "bob")
			requireWorks(t, d, admin, "admin")
			mustFail(t, d, admin, "RevokeToken", obj{"name": "bob", "id": "00000000-0000-4000-8000-000000000000"}, "not_found")
			mustFail(t, d, admin, "RevokeToken", obj{"name": "bob", "id": "nope"}, "not_found")
			mustFail(t, d, admin, "RevokeToken", obj{"name": "ghost", "id": bob3ID}, "not_found")
			mustFail(t, d, admin, "RotateToken", obj{"name": "ghost"}, "not_found")
			mustFail(t, d, admin, "ListTokens", obj{"name": "ghost"}, "not_found")
			mustFail(t, d, admin, "EnrollTotp", obj{"name": "ghost"}, "not_found")

			// Revoking the token in use works and takes effect at once.
			mustCall(t, d, bearer(bob3), "RevokeToken", obj{"name": "bob", "id": bob3ID})
			requireRejected(t, d, bearer(bob3))
			mustFail(t, d, admin, "RevokeToken", obj{"name": "bob", "id": bob3ID}, "not_found")
			require.Empty(t, listTokens(t, d, admin, "bob", start))

			// A manager's rotation gives bob a way back in.
			bob4 := mustCall(t, d, admin, "RotateToken", obj{"name": "bob"})["token"].(string)
			requireWorks(t, d, bearer(bob4), "bob")
			requireRejected(t, d, bearer(bob3))
		})
	}
}

// listTokens lists name's tokens as caller and checks every TokenInfo.
func listTokens(t *testing.T, d driver, caller cred, name string, start time.Time) []obj {
	t.Helper()
	body := mustCall(t, d, caller, "ListTokens", obj{"name": name})
	require.Equal(t, []string{"tokens"}, keys(body))
	tokens := listOf(t, body, "tokens")
	for _, tok := range tokens {
		requireTokenInfo(t, tok, start)
	}
	return tokens
}

// requireTokenInfo checks the TokenInfo shape (proto/svc/v1): no plaintext,
// no hash, times as epoch-ms numbers.
func requireTokenInfo(t *testing.T, info obj, start time.Time) {
	t.Helper()
	allowed := map[string]bool{"id": true, "label": true, "origin": true, "createdAt": true, "lastUsedAt": true, "expiresAt": true, "createdBy": true}
	for k := range info {
		require.True(t, allowed[k], "unexpected TokenInfo field %q: %v", k, info)
	}
	require.Regexp(t, uuidRE, info["id"])
	require.IsType(t, "", info["label"])
	require.Contains(t, []any{"bootstrap", "rotate", "enroll"}, info["origin"])
	require.IsType(t, "", info["createdBy"])
	created, ok := info["createdAt"].(float64)
	require.True(t, ok, "createdAt is a number: %v", info)
	require.GreaterOrEqual(t, created, float64(start.Add(-time.Second).UnixMilli()))
	require.LessOrEqual(t, created, float64(time.Now().Add(time.Second).UnixMilli()))
	for _, k := range []string{"lastUsedAt", "expiresAt"} {
		if v, ok := info[k]; ok && v != nil {
			require.IsType(t, float64(0), v, "%s is a number", k)
		}
	}
	if v, ok := info["lastUsedAt"].(float64); ok {
		require.GreaterOrEqual(t, v, created)
	}
}

// requireNoSecrets asserts the plaintext and its hash appear nowhere.
func requireNoSecrets(t *testing.T, tokens []obj, plaintext string) {
	t.Helper()
	raw, err := json.Marshal(tokens)
	require.NoError(t, err)
	hash := strings.TrimPrefix(tokenHash(plaintext), "sha256:")
	require.NotContains(t, string(raw), strings.TrimPrefix(plaintext, "svc_"))
	require.NotContains(t, strings.ToLower(string(raw)), hash)
}

func TestTokenChangesPersistAcrossRestart(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{}) // in-memory store
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bobOld := createMember(t, d, admin, "bob")
	bobNew := mustCall(t, d, admin, "RotateToken", obj{"name": "bob"})["token"].(string)
	carol := createMember(t, d, admin, "carol")
	carolID := listTokens(t, d, bearer(carol), "carol", time.Now().Add(-time.Minute))[0]["id"].(string)
	mustCall(t, d, bearer(carol), "RevokeToken", obj{"name": "carol", "id": carolID})
	p.mustStop(t)

	p2 := p.restart(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			d2 := tr.connect(t, p2)
			requireWorks(t, d2, bearer(bobNew), "bob")
			requireRejected(t, d2, bearer(bobOld))
			requireRejected(t, d2, bearer(carol))
			requireWorks(t, d2, admin, "admin")
		})
	}
}

// TestRotateRevokesEveryToken gives bob two active tokens (a file store
// keeps the first; the config seeds a second) and rotates once.
func TestRotateRevokesEveryToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")}
	p := mustStartSvc(t, opts)
	admin := bearer(p.adminToken(t))
	first := createMember(t, restDriver{p}, admin, "bob")
	p.mustStop(t)

	second := randomToken(t)
	cfg := readJSON(t, opts.configPath)
	for _, m := range listOf(t, cfg["store"].(obj), "members") {
		if m["name"] == "bob" {
			m["tokenHash"] = tokenHash(second)
		}
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(opts.configPath, data, 0o600))

	p2 := p.restart(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			d := tr.connect(t, p2)
			requireWorks(t, d, bearer(first), "bob")
			requireWorks(t, d, bearer(second), "bob")
			require.Len(t, listTokens(t, d, admin, "bob", time.Now().Add(-time.Hour)), 2)
		})
	}
	d := restDriver{p2}
	newTok := mustCall(t, d, admin, "RotateToken", obj{"name": "bob"})["token"].(string)
	requireRejected(t, d, bearer(first))
	requireRejected(t, d, bearer(second))
	requireWorks(t, d, bearer(newTok), "bob")
	require.Len(t, listTokens(t, d, admin, "bob", time.Now().Add(-time.Hour)), 1)
	p2.mustStop(t)

	p3 := p.restart(t)
	d3 := grpcDriver{p3.grpcConn(t)}
	requireRejected(t, d3, bearer(first))
	requireRejected(t, d3, bearer(second))
	requireWorks(t, d3, bearer(newTok), "bob")
}
