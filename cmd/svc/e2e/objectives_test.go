package e2e

// End-to-end tests of objectives (docs/API.md, Objectives; docs/DECISIONS.md,
// Objectives), black-box over REST and
// native gRPC. The members of objTeam (objectives_helpers_test.go) cover
// every gate: alice originates, bob is assigned, carol watches, dave is
// outside, olga holds the operator leaves, mgr only members.manage, and
// admin every leaf.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"ListObjectives":    {http.MethodGet, "/objectives", http.StatusOK, "", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.ListObjectives)},
		"CreateObjective":   {http.MethodPost, "/objectives", http.StatusOK, "objective", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.CreateObjective)},
		"GetObjective":      {http.MethodGet, "/objectives/{id}", http.StatusOK, "", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.GetObjective)},
		"UpdateObjective":   {http.MethodPatch, "/objectives/{id}", http.StatusOK, "objective", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.UpdateObjective)},
		"CompleteObjective": {http.MethodPost, "/objectives/{id}/complete", http.StatusOK, "objective", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.CompleteObjective)},
		"CancelObjective":   {http.MethodPost, "/objectives/{id}/cancel", http.StatusOK, "objective", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.CancelObjective)},
		"ReassignObjective": {http.MethodPost, "/objectives/{id}/reassign", http.StatusOK, "objective", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.ReassignObjective)},
		"DiscussObjective":  {http.MethodPost, "/objectives/{id}/discuss", http.StatusOK, "message", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.DiscussObjective)},
		"UpdateWatchers":    {http.MethodPatch, "/objectives/{id}/watchers", http.StatusOK, "objective", unaryOn(apiv1.NewObjectivesClient, apiv1.ObjectivesClient.UpdateWatchers)},
	} {
		rpcs[name] = spec
	}
	queryOps["ListObjectives"] = true
}

func TestObjectiveCreate(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)

		t.Run("fields", func(t *testing.T) {
			o := tm.create(t, "alice", obj{
				"title": "Migrate the wiki", "outcome": "every page answers 200 on the new host",
				"body": "longer context", "watchers": []string{"carol", "olga", "carol"},
			})
			require.Equal(t, "Migrate the wiki", o["title"])
			require.Equal(t, "every page answers 200 on the new host", o["outcome"])
			require.Equal(t, "longer context", o["body"])
			require.Equal(t, "bob", o["assignee"])
			require.Equal(t, "alice", o["originator"])
			require.Equal(t, "active", o["status"])
			w := strs(t, o["watchers"])
			require.Len(t, w, 2, "watchers are de-duplicated: %v", w)
			require.Equal(t, []string{"carol", "olga"}, sortedNames(w))
			require.Empty(t, listOf(t, o, "attachments"))
			_, evs := getObjective(t, d, tm.as("bob"), o["id"].(string))
			require.Equal(t, []string{"assigned"}, kindsOf(evs))
			require.Equal(t, "alice", evs[0]["actor"])
		})

		t.Run("only the required fields", func(t *testing.T) {
			o := requireObjective(t, mustCall(t, d, tm.as("alice"), "CreateObjective",
				obj{"title": "t", "outcome": "o", "assignee": "carol"}))
			require.Equal(t, "active", o["status"])
			require.Equal(t, "carol", o["assignee"])
			require.Empty(t, strs(t, o["watchers"]))
			require.Empty(t, listOf(t, o, "attachments"))
			if !isUnset(o, "body") {
				require.Equal(t, "", o["body"])
			}
		})

		t.Run("ids are opaque and distinct", func(t *testing.T) {
			a := tm.create(t, "alice", nil)["id"].(string)
			b := tm.create(t, "alice", nil)["id"].(string)
			require.NotEqual(t, a, b)
		})

		t.Run("every holder of objectives.create", func(t *testing.T) {
			for _, who := range []string{"olga", "admin"} {
				o := tm.create(t, who, obj{"assignee": "dave", "watchers": []string{}})
				require.Equal(t, who, o["originator"])
			}
			// Assigning to oneself is plain assignment.
			o := tm.create(t, "olga", obj{"assignee": "olga"})
			require.Equal(t, "olga", o["assignee"])
		})

		t.Run("refused", func(t *testing.T) {
			countBefore := len(listOf(t, mustCall(t, d, admin, "ListObjectives", nil), "objectives"))
			full := func(over obj) obj {
				req := obj{"title": "t", "outcome": "o", "assignee": "bob", "watchers": []string{"carol"}}
				for k, v := range over {
					if v == nil {
						delete(req, k)
					} else {
						req[k] = v
					}
				}
				return req
			}
			tests := []struct {
				name   string
				caller string
				req    obj
				code   string
			}{
				{name: "without objectives.create", caller: "bob", req: full(nil), code: "forbidden"},
				{name: "members.manage is not objectives.create", caller: "mgr", req: full(nil), code: "forbidden"},
				{name: "watcher without objectives.create", caller: "carol", req: full(nil), code: "forbidden"},
				{name: "forbidden before validation", caller: "bob", req: obj{}, code: "forbidden"},
				{name: "missing title", caller: "alice", req: full(obj{"title": nil}), code: "bad_request"},
				{name: "empty title", caller: "alice", req: full(obj{"title": ""}), code: "bad_request"},
				{name: "missing outcome", caller: "alice", req: full(obj{"outcome": nil}), code: "bad_request"},
				{name: "empty outcome", caller: "alice", req: full(obj{"outcome": ""}), code: "bad_request"},
				{name: "missing assignee", caller: "alice", req: full(obj{"assignee": nil}), code: "bad_request"},
				{name: "unknown assignee", caller: "alice", req: full(obj{"assignee": "nobody"}), code: "bad_request"},
				{name: "unknown watcher", caller: "alice", req: full(obj{"watchers": []string{"carol", "nobody"}}), code: "bad_request"},
				{name: "empty watcher name", caller: "alice", req: full(obj{"watchers": []string{""}}), code: "bad_request"},
				{name: "unauthenticated", caller: "", req: full(nil), code: "unauthenticated"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					c := anonymous
					if tc.caller != "" {
						c = tm.as(tc.caller)
					}
					mustFail(t, d, c, "CreateObjective", tc.req, tc.code)
				})
			}
			require.Len(t, listOf(t, mustCall(t, d, admin, "ListObjectives", nil), "objectives"), countBefore,
				"no refused create took effect")
		})

		if transportOf(d) == "rest" {
			t.Run("the server stamps what the body cannot set", func(t *testing.T) {
				r := p.do(t, http.MethodPost, "/objectives", obj{
					"title": "forged", "outcome": "o", "assignee": "bob",
					"originator": "mallory", "id": "chosen-id", "status": "done",
					"result": "r", "completedAt": 5, "blockReason": "b",
				}, withBearer(tm.toks["alice"]))
				require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
				o := requireObjective(t, r.body)
				require.Equal(t, "alice", o["originator"], "originator is the caller")
				require.Equal(t, "active", o["status"])
				require.NotEqual(t, "chosen-id", o["id"], "the server assigns ids")
			})
		}
	})
}

func TestObjectiveList(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		// Created in this order; a pause keeps every createdAt distinct, so
		// newest first has one answer.
		mk := func(caller, assignee string) string {
			id := tm.create(t, caller, obj{"assignee": assignee, "title": "for " + assignee})["id"].(string)
			pauseMillis()
			return id
		}
		o1 := mk("alice", "bob")
		o2 := mk("alice", "carol")
		o3 := mk("alice", "bob")
		o4 := mk("olga", "bob")
		mustCall(t, d, tm.as("bob"), "CompleteObjective", obj{"id": o1, "result": "r"})
		mustCall(t, d, tm.as("alice"), "CancelObjective", obj{"id": o2})
		mustCall(t, d, tm.as("bob"), "UpdateObjective", obj{"id": o3, "status": "blocked", "blockReason": "why"})

		tests := []struct {
			name  string
			query obj
			want  []string
		}{
			{name: "all", query: nil, want: []string{o4, o3, o2, o1}},
			{name: "by assignee", query: obj{"assignee": "bob"}, want: []string{o4, o3, o1}},
			{name: "another assignee", query: obj{"assignee": "carol"}, want: []string{o2}},
			{name: "an assignee with none", query: obj{"assignee": "erin"}, want: []string{}},
			{name: "active", query: obj{"status": "active"}, want: []string{o4}},
			{name: "blocked", query: obj{"status": "blocked"}, want: []string{o3}},
			{name: "done", query: obj{"status": "done"}, want: []string{o1}},
			{name: "cancelled", query: obj{"status": "cancelled"}, want: []string{o2}},
			{name: "assignee and status", query: obj{"assignee": "bob", "status": "done"}, want: []string{o1}},
			{name: "assignee and another status", query: obj{"assignee": "carol", "status": "active"}, want: []string{}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				// Any member may list: dave holds no permission and is in
				// no thread.
				list := listOf(t, mustCall(t, d, tm.as("dave"), "ListObjectives", tc.query), "objectives")
				require.Equal(t, tc.want, objectiveIDs(t, list))
				for _, o := range list {
					got, _ := getObjective(t, d, tm.as("dave"), o["id"].(string))
					require.Equal(t, got, o, "the list holds the objectives as stored")
				}
			})
		}

		t.Run("refused", func(t *testing.T) {
			for _, s := range []string{"bogus", "ACTIVE", "open", "done,active"} {
				mustFail(t, d, tm.as("dave"), "ListObjectives", obj{"status": s}, "bad_request")
			}
			mustFail(t, d, anonymous, "ListObjectives", nil, "unauthenticated")
			mustFail(t, d, tm.as("dave"), "GetObjective", obj{"id": "no-such-objective"}, "not_found")
			mustFail(t, d, anonymous, "GetObjective", obj{"id": o1}, "unauthenticated")
		})
	})
}

// objWantEvent is one audit event a change appends.
type objWantEvent struct {
	kind string
	has  []string // values its payload names
}

// TestObjectiveTransitions walks the Objective state table (docs/API.md,
// Objectives: States): every trigger from every status, by
// every kind of caller. Each row starts from a fresh fixture objective
// (originator alice, assignee bob, watcher carol) in status from.
func TestObjectiveTransitions(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)

		type check func(t *testing.T, before, after obj)
		field := func(k string, v any) check {
			return func(t *testing.T, _, after obj) { require.Equal(t, v, after[k], "%s: %v", k, after) }
		}
		watchers := func(w ...string) check {
			return func(t *testing.T, _, after obj) {
				got := strs(t, after["watchers"])
				require.Len(t, got, len(w), "watchers are unique: %v", got)
				require.Equal(t, sortedNames(w), sortedNames(got))
			}
		}
		blocked := func(reason string) objWantEvent { return objWantEvent{"blocked", []string{reason}} }
		unblocked := objWantEvent{kind: "unblocked"}
		completed := func(result string) objWantEvent { return objWantEvent{"completed", []string{result}} }
		cancelled := func(reason ...string) objWantEvent { return objWantEvent{"cancelled", reason} }
		reassigned := func(from, to string) objWantEvent { return objWantEvent{"reassigned", []string{from, to}} }
		added := func(n string) objWantEvent { return objWantEvent{"watcher_added", []string{n}} }
		removed := func(n string) objWantEvent { return objWantEvent{"watcher_removed", []string{n}} }
		block := obj{"status": "blocked", "blockReason": "waiting on keys"}
		unblock := obj{"status": "active"}

		tests := []struct {
			name   string
			from   string // fixture status; "" addresses an unknown id
			caller string
			op     string
			req    obj
			code   string         // wire error; "" for success
			status string         // status after a success
			events []objWantEvent // appended by a success, in any order
			checks []check
		}{
			// PATCH /objectives/:id: block.
			{name: "block by the assignee", from: "active", caller: "bob", op: "UpdateObjective", req: block, status: "blocked", events: []objWantEvent{blocked("waiting on keys")}, checks: []check{field("blockReason", "waiting on keys")}},
			{name: "block by a manager", from: "active", caller: "admin", op: "UpdateObjective", req: block, status: "blocked", events: []objWantEvent{blocked("waiting on keys")}},
			{name: "block with members.manage alone", from: "active", caller: "mgr", op: "UpdateObjective", req: block, status: "blocked", events: []objWantEvent{blocked("waiting on keys")}},
			{name: "block by the originator", from: "active", caller: "alice", op: "UpdateObjective", req: block, code: "forbidden"},
			{name: "block by a watcher", from: "active", caller: "carol", op: "UpdateObjective", req: block, code: "forbidden"},
			{name: "block by an operator", from: "active", caller: "olga", op: "UpdateObjective", req: block, code: "forbidden"},
			{name: "block by an outsider", from: "active", caller: "dave", op: "UpdateObjective", req: block, code: "forbidden"},
			{name: "block without a reason", from: "active", caller: "bob", op: "UpdateObjective", req: obj{"status": "blocked"}, code: "bad_request"},
			{name: "block with an empty reason", from: "active", caller: "bob", op: "UpdateObjective", req: obj{"status": "blocked", "blockReason": ""}, code: "bad_request"},
			{name: "block with a blank reason", from: "active", caller: "bob", op: "UpdateObjective", req: obj{"status": "blocked", "blockReason": " \t "}, code: "bad_request"},
			{name: "block a blocked objective", from: "blocked", caller: "bob", op: "UpdateObjective", req: block, code: "conflict"},
			{name: "block a done objective", from: "done", caller: "bob", op: "UpdateObjective", req: block, code: "conflict"},
			{name: "block a cancelled objective", from: "cancelled", caller: "bob", op: "UpdateObjective", req: block, code: "conflict"},
			{name: "block an unknown objective", caller: "admin", op: "UpdateObjective", req: block, code: "not_found"},
			// PATCH /objectives/:id: unblock.
			{name: "unblock by the assignee", from: "blocked", caller: "bob", op: "UpdateObjective", req: unblock, status: "active", events: []objWantEvent{unblocked}},
			{name: "unblock by a manager", from: "blocked", caller: "admin", op: "UpdateObjective", req: unblock, status: "active", events: []objWantEvent{unblocked}},
			{name: "unblock with members.manage alone", from: "blocked", caller: "mgr", op: "UpdateObjective", req: unblock, status: "active", events: []objWantEvent{unblocked}},
			{name: "unblock by the originator", from: "blocked", caller: "alice", op: "UpdateObjective", req: unblock, code: "forbidden"},
			{name: "unblock by a watcher", from: "blocked", caller: "carol", op: "UpdateObjective", req: unblock, code: "forbidden"},
			{name: "unblock an active objective", from: "active", caller: "bob", op: "UpdateObjective", req: unblock, code: "conflict"},
			{name: "unblock a done objective", from: "done", caller: "bob", op: "UpdateObjective", req: unblock, code: "conflict"},
			{name: "unblock a cancelled objective", from: "cancelled", caller: "bob", op: "UpdateObjective", req: unblock, code: "conflict"},
			// PATCH /objectives/:id: statuses it cannot set.
			{name: "patch to done", from: "active", caller: "bob", op: "UpdateObjective", req: obj{"status": "done"}, code: "bad_request"},
			{name: "patch to cancelled", from: "active", caller: "bob", op: "UpdateObjective", req: obj{"status": "cancelled"}, code: "bad_request"},
			{name: "patch to an unknown status", from: "active", caller: "bob", op: "UpdateObjective", req: obj{"status": "paused"}, code: "bad_request"},
			{name: "patch to a capitalised status", from: "blocked", caller: "bob", op: "UpdateObjective", req: obj{"status": "Active"}, code: "bad_request"},

			// POST /objectives/:id/complete.
			{name: "complete an active objective", from: "active", caller: "bob", op: "CompleteObjective", req: obj{"result": "shipped in v2"}, status: "done", events: []objWantEvent{completed("shipped in v2")}, checks: []check{field("result", "shipped in v2")}},
			{name: "complete a blocked objective", from: "blocked", caller: "bob", op: "CompleteObjective", req: obj{"result": "worked around it"}, status: "done", events: []objWantEvent{completed("worked around it")}, checks: []check{field("result", "worked around it")}},
			{name: "complete by a manager", from: "active", caller: "admin", op: "CompleteObjective", req: obj{"result": "r"}, code: "forbidden"},
			{name: "complete with members.manage alone", from: "active", caller: "mgr", op: "CompleteObjective", req: obj{"result": "r"}, code: "forbidden"},
			{name: "complete by the originator", from: "active", caller: "alice", op: "CompleteObjective", req: obj{"result": "r"}, code: "forbidden"},
			{name: "complete by a watcher", from: "active", caller: "carol", op: "CompleteObjective", req: obj{"result": "r"}, code: "forbidden"},
			{name: "complete by an operator", from: "blocked", caller: "olga", op: "CompleteObjective", req: obj{"result": "r"}, code: "forbidden"},
			{name: "complete without a result", from: "active", caller: "bob", op: "CompleteObjective", req: obj{}, code: "bad_request"},
			{name: "complete with an empty result", from: "active", caller: "bob", op: "CompleteObjective", req: obj{"result": ""}, code: "bad_request"},
			{name: "complete a done objective", from: "done", caller: "bob", op: "CompleteObjective", req: obj{"result": "again"}, code: "conflict"},
			{name: "complete a cancelled objective", from: "cancelled", caller: "bob", op: "CompleteObjective", req: obj{"result": "late"}, code: "conflict"},
			{name: "complete an unknown objective", caller: "bob", op: "CompleteObjective", req: obj{"result": "r"}, code: "not_found"},

			// POST /objectives/:id/cancel.
			{name: "cancel by the originator", from: "active", caller: "alice", op: "CancelObjective", req: obj{"reason": "superseded"}, status: "cancelled", events: []objWantEvent{cancelled("superseded")}},
			{name: "cancel without a reason", from: "active", caller: "alice", op: "CancelObjective", req: obj{}, status: "cancelled", events: []objWantEvent{cancelled()}},
			{name: "cancel a blocked objective", from: "blocked", caller: "alice", op: "CancelObjective", req: obj{"reason": "stuck for good"}, status: "cancelled", events: []objWantEvent{cancelled("stuck for good")}},
			{name: "cancel with objectives.cancel", from: "active", caller: "olga", op: "CancelObjective", req: obj{"reason": "ops call"}, status: "cancelled", events: []objWantEvent{cancelled("ops call")}},
			{name: "cancel a blocked objective with objectives.cancel", from: "blocked", caller: "olga", op: "CancelObjective", req: obj{}, status: "cancelled", events: []objWantEvent{cancelled()}},
			{name: "cancel by a manager with every leaf", from: "active", caller: "admin", op: "CancelObjective", req: obj{}, status: "cancelled", events: []objWantEvent{cancelled()}},
			{name: "cancel by the assignee", from: "active", caller: "bob", op: "CancelObjective", req: obj{}, code: "forbidden"},
			{name: "cancel by a watcher", from: "active", caller: "carol", op: "CancelObjective", req: obj{}, code: "forbidden"},
			{name: "cancel with members.manage alone", from: "active", caller: "mgr", op: "CancelObjective", req: obj{}, code: "forbidden"},
			{name: "cancel by an outsider", from: "blocked", caller: "dave", op: "CancelObjective", req: obj{}, code: "forbidden"},
			{name: "cancel a done objective", from: "done", caller: "alice", op: "CancelObjective", req: obj{}, code: "conflict"},
			{name: "cancel a cancelled objective", from: "cancelled", caller: "alice", op: "CancelObjective", req: obj{}, code: "conflict"},
			{name: "cancel an unknown objective", caller: "admin", op: "CancelObjective", req: obj{}, code: "not_found"},

			// POST /objectives/:id/reassign.
			{name: "reassign an active objective", from: "active", caller: "admin", op: "ReassignObjective", req: obj{"to": "erin", "note": "bob is out"}, status: "active", events: []objWantEvent{reassigned("bob", "erin")}, checks: []check{field("assignee", "erin"), watchers("carol")}},
			{name: "reassign a blocked objective", from: "blocked", caller: "admin", op: "ReassignObjective", req: obj{"to": "erin"}, status: "active", events: []objWantEvent{reassigned("bob", "erin")}, checks: []check{field("assignee", "erin")}},
			{name: "reassign with members.manage alone", from: "active", caller: "mgr", op: "ReassignObjective", req: obj{"to": "carol"}, status: "active", events: []objWantEvent{reassigned("bob", "carol")}, checks: []check{field("assignee", "carol")}},
			{name: "reassign to the originator", from: "blocked", caller: "mgr", op: "ReassignObjective", req: obj{"to": "alice"}, status: "active", events: []objWantEvent{reassigned("bob", "alice")}, checks: []check{field("assignee", "alice")}},
			{name: "reassign with objectives.reassign alone", from: "active", caller: "rita", op: "ReassignObjective", req: obj{"to": "erin"}, code: "forbidden"},
			{name: "reassign by an operator", from: "active", caller: "olga", op: "ReassignObjective", req: obj{"to": "erin"}, code: "forbidden"},
			{name: "reassign by the originator", from: "active", caller: "alice", op: "ReassignObjective", req: obj{"to": "erin"}, code: "forbidden"},
			{name: "reassign by the assignee", from: "active", caller: "bob", op: "ReassignObjective", req: obj{"to": "erin"}, code: "forbidden"},
			{name: "reassign to an unknown member", from: "active", caller: "admin", op: "ReassignObjective", req: obj{"to": "nobody"}, code: "bad_request"},
			{name: "reassign to nobody", from: "active", caller: "admin", op: "ReassignObjective", req: obj{}, code: "bad_request"},
			{name: "reassign to the assignee", from: "active", caller: "admin", op: "ReassignObjective", req: obj{"to": "bob"}, code: "conflict"},
			{name: "reassign a blocked objective to its assignee", from: "blocked", caller: "admin", op: "ReassignObjective", req: obj{"to": "bob"}, code: "conflict"},
			{name: "reassign a done objective", from: "done", caller: "admin", op: "ReassignObjective", req: obj{"to": "erin"}, code: "conflict"},
			{name: "reassign a cancelled objective", from: "cancelled", caller: "admin", op: "ReassignObjective", req: obj{"to": "erin"}, code: "conflict"},
			{name: "reassign an unknown objective", caller: "admin", op: "ReassignObjective", req: obj{"to": "erin"}, code: "not_found"},

			// PATCH /objectives/:id/watchers: allowed from any status.
			{name: "add a watcher as the originator", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"dave"}}, status: "active", events: []objWantEvent{added("dave")}, checks: []check{watchers("carol", "dave")}},
			{name: "add a watcher with objectives.watch", from: "active", caller: "olga", op: "UpdateWatchers", req: obj{"add": []string{"olga"}}, status: "active", events: []objWantEvent{added("olga")}, checks: []check{watchers("carol", "olga")}},
			{name: "add watchers as a manager with every leaf", from: "blocked", caller: "admin", op: "UpdateWatchers", req: obj{"add": []string{"dave", "erin"}}, status: "blocked", events: []objWantEvent{added("dave"), added("erin")}, checks: []check{watchers("carol", "dave", "erin")}},
			{name: "remove a watcher", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"remove": []string{"carol"}}, status: "active", events: []objWantEvent{removed("carol")}, checks: []check{watchers()}},
			{name: "add and remove at once", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"dave", "erin"}, "remove": []string{"carol"}}, status: "active", events: []objWantEvent{added("dave"), added("erin"), removed("carol")}, checks: []check{watchers("dave", "erin")}},
			{name: "add a name twice", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"dave", "dave"}}, status: "active", events: []objWantEvent{added("dave")}, checks: []check{watchers("carol", "dave")}},
			{name: "add an existing watcher", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"carol"}}, status: "active", checks: []check{watchers("carol")}},
			{name: "remove a non-watcher", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"remove": []string{"dave"}}, status: "active", checks: []check{watchers("carol")}},
			{name: "add an existing and a new watcher", from: "active", caller: "olga", op: "UpdateWatchers", req: obj{"add": []string{"carol", "dave"}}, status: "active", events: []objWantEvent{added("dave")}, checks: []check{watchers("carol", "dave")}},
			{name: "watchers of a done objective", from: "done", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"dave"}}, status: "done", events: []objWantEvent{added("dave")}, checks: []check{watchers("carol", "dave")}},
			{name: "watchers of a cancelled objective", from: "cancelled", caller: "olga", op: "UpdateWatchers", req: obj{"remove": []string{"carol"}}, status: "cancelled", events: []objWantEvent{removed("carol")}, checks: []check{watchers()}},
			{name: "watchers by the assignee", from: "active", caller: "bob", op: "UpdateWatchers", req: obj{"add": []string{"dave"}}, code: "forbidden"},
			{name: "watchers by a watcher", from: "active", caller: "carol", op: "UpdateWatchers", req: obj{"remove": []string{"carol"}}, code: "forbidden"},
			{name: "watchers with members.manage alone", from: "active", caller: "mgr", op: "UpdateWatchers", req: obj{"add": []string{"mgr"}}, code: "forbidden"},
			{name: "watchers by an outsider", from: "active", caller: "dave", op: "UpdateWatchers", req: obj{"add": []string{"dave"}}, code: "forbidden"},
			{name: "neither add nor remove", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{}, code: "bad_request"},
			{name: "empty add and remove", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{}, "remove": []string{}}, code: "bad_request"},
			{name: "add an unknown member", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"dave", "nobody"}}, code: "bad_request"},
			{name: "remove an unknown member", from: "active", caller: "alice", op: "UpdateWatchers", req: obj{"remove": []string{"nobody"}}, code: "bad_request"},
			{name: "watchers of an unknown objective", caller: "admin", op: "UpdateWatchers", req: obj{"add": []string{"dave"}}, code: "not_found"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				id := "no-such-objective"
				var before obj
				var evsBefore []obj
				if tc.from != "" {
					id = tm.objectiveIn(t, tc.from)
					before, evsBefore = getObjective(t, d, tm.as("dave"), id)
				}
				req := obj{"id": id}
				for k, v := range tc.req {
					req[k] = v
				}
				if tc.code != "" {
					mustFail(t, d, tm.as(tc.caller), tc.op, req, tc.code)
					if tc.from != "" {
						after, evsAfter := getObjective(t, d, tm.as("dave"), id)
						require.Equal(t, before, after, "a refused change changes nothing")
						require.Equal(t, evsBefore, evsAfter, "a refused change logs nothing")
					}
					return
				}
				got := requireObjective(t, mustCall(t, d, tm.as(tc.caller), tc.op, req))
				after, evsAfter := getObjective(t, d, tm.as("dave"), id)
				require.Equal(t, after, got, "the answer is the objective as stored")
				require.Equal(t, tc.status, after["status"])
				for _, k := range []string{"id", "title", "outcome", "body", "originator", "createdAt", "attachments"} {
					require.Equal(t, before[k], after[k], "%s never changes", k)
				}
				require.GreaterOrEqual(t, after["updatedAt"].(float64), before["updatedAt"].(float64))
				if tc.status == "done" && before["status"] != "done" {
					require.GreaterOrEqual(t, after["completedAt"].(float64), before["updatedAt"].(float64))
				}
				if tc.op != "ReassignObjective" {
					require.Equal(t, before["assignee"], after["assignee"])
				}
				if tc.op != "UpdateWatchers" {
					require.Equal(t, before["watchers"], after["watchers"])
				}
				require.Equal(t, evsBefore, evsAfter[:len(evsBefore)], "the log is append-only")
				fresh := evsAfter[len(evsBefore):]
				require.Len(t, fresh, len(tc.events), "events appended: %v", fresh)
				unmatched := slices.Clone(fresh)
				for _, w := range tc.events {
					i := slices.IndexFunc(unmatched, func(ev obj) bool {
						if ev["kind"] != w.kind {
							return false
						}
						for _, v := range w.has {
							if !slices.Contains(payloadStrings(ev), v) {
								return false
							}
						}
						return true
					})
					require.GreaterOrEqual(t, i, 0, "want a %s event naming %v among %v", w.kind, w.has, fresh)
					unmatched = slices.Delete(unmatched, i, i+1)
				}
				for _, ev := range fresh {
					require.Equal(t, tc.caller, ev["actor"], "the actor is the caller")
				}
				for _, c := range tc.checks {
					c(t, before, after)
				}
			})
		}

		t.Run("reassignment moves the assignee's rights", func(t *testing.T) {
			id := tm.objectiveIn(t, "blocked")
			o := mustCall(t, d, tm.as("mgr"), "ReassignObjective", obj{"id": id, "to": "erin"})
			require.Equal(t, "erin", o["assignee"])
			mustFail(t, d, tm.as("bob"), "UpdateObjective", obj{"id": id, "status": "blocked", "blockReason": "r"}, "forbidden")
			mustFail(t, d, tm.as("bob"), "CompleteObjective", obj{"id": id, "result": "r"}, "forbidden")
			mustCall(t, d, tm.as("erin"), "UpdateObjective", obj{"id": id, "status": "blocked", "blockReason": "new eyes"})
			// The originator keeps its rights.
			mustCall(t, d, tm.as("alice"), "UpdateWatchers", obj{"id": id, "add": []string{"bob"}})
			o = mustCall(t, d, tm.as("erin"), "CompleteObjective", obj{"id": id, "result": "r"})
			require.Equal(t, "done", requireObjective(t, o)["status"])
			_, evs := getObjective(t, d, tm.as("bob"), id)
			require.Equal(t, []string{"assigned", "blocked", "reassigned", "blocked", "watcher_added", "completed"}, kindsOf(evs))
			require.Equal(t, []string{"alice", "bob", "mgr", "erin", "alice", "erin"}, actorsOf(evs))
		})

		t.Run("no transition leaves a terminal status", func(t *testing.T) {
			for _, from := range []string{"done", "cancelled"} {
				id := tm.objectiveIn(t, from)
				before, evsBefore := getObjective(t, d, admin, id)
				mustFail(t, d, tm.as("bob"), "UpdateObjective", obj{"id": id, "status": "active"}, "conflict")
				mustFail(t, d, tm.as("bob"), "UpdateObjective", obj{"id": id, "status": "blocked", "blockReason": "r"}, "conflict")
				mustFail(t, d, admin, "UpdateObjective", obj{"id": id, "status": "active"}, "conflict")
				mustFail(t, d, tm.as("bob"), "CompleteObjective", obj{"id": id, "result": "r"}, "conflict")
				mustFail(t, d, tm.as("alice"), "CancelObjective", obj{"id": id}, "conflict")
				mustFail(t, d, admin, "CancelObjective", obj{"id": id}, "conflict")
				mustFail(t, d, admin, "ReassignObjective", obj{"id": id, "to": "erin"}, "conflict")
				after, evsAfter := getObjective(t, d, admin, id)
				require.Equal(t, before, after)
				require.Equal(t, evsBefore, evsAfter)
			}
		})
	})
}

// actorsOf lists the events' actors in order.
func actorsOf(evs []obj) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev["actor"].(string))
	}
	return out
}

func TestObjectiveBlockUnblockRepeats(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		id := tm.objectiveIn(t, "active")
		wantKinds := []string{"assigned"}
		wantActors := []string{"alice"}
		const rounds = 12
		for i := range rounds {
			blocker, unblocker := "bob", "mgr"
			if i%2 == 1 {
				blocker, unblocker = "admin", "bob"
			}
			reason := fmt.Sprintf("blocked, round %d", i)
			o := requireObjective(t, mustCall(t, d, tm.as(blocker), "UpdateObjective", obj{"id": id, "status": "blocked", "blockReason": reason}))
			require.Equal(t, "blocked", o["status"])
			require.Equal(t, reason, o["blockReason"])
			o = requireObjective(t, mustCall(t, d, tm.as(unblocker), "UpdateObjective", obj{"id": id, "status": "active"}))
			require.Equal(t, "active", o["status"])
			wantKinds = append(wantKinds, "blocked", "unblocked")
			wantActors = append(wantActors, blocker, unblocker)
		}
		_, evs := getObjective(t, d, tm.as("carol"), id)
		require.Equal(t, wantKinds, kindsOf(evs))
		require.Equal(t, wantActors, actorsOf(evs))
		for i := range rounds {
			requirePayloadHas(t, evs[1+2*i], fmt.Sprintf("blocked, round %d", i))
		}
		// Still a live objective after all that.
		o := mustCall(t, d, tm.as("bob"), "CompleteObjective", obj{"id": id, "result": "finally"})
		require.Equal(t, "done", requireObjective(t, o)["status"])
	})
}

// TestObjectiveThreadEvents follows one objective through every kind of
// change on live streams (SSE over REST, Subscribe over gRPC) and requires
// each lifecycle event to reach exactly the thread: originator, assignee,
// watchers and the members.manage holders, the actor included. A member
// joining or leaving the thread by the change (watcher added or removed, old
// and new assignee) receives that change's event.
func TestObjectiveThreadEvents(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		w := tm.watch(t, "admin", "alice", "bob", "carol", "dave", "erin", "olga", "mgr")
		// aliceSaw is everything alice received on the thread, in order.
		var aliceSaw []obj

		o := tm.create(t, "alice", obj{"title": "Rotate the certs", "outcome": "no cert expires within 30 days", "watchers": []string{"carol"}})
		id := o["id"].(string)
		thread := "obj:" + id
		msg := w.expectEvent(t, id, "assigned", "alice", "alice", "bob", "carol", "admin", "mgr")
		text := msg["title"].(string) + "\n" + msg["body"].(string)
		require.Contains(t, text, "Rotate the certs", "the announcement carries the title")
		require.Contains(t, text, "no cert expires within 30 days", "the announcement carries the outcome")
		aliceSaw = append(aliceSaw, msg)

		steps := []struct {
			name   string
			caller string
			op     string
			req    obj
			kind   string
			want   []string
		}{
			{name: "watcher added", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"olga"}}, kind: "watcher_added", want: []string{"alice", "bob", "carol", "olga", "admin", "mgr"}},
			{name: "blocked", caller: "bob", op: "UpdateObjective", req: obj{"status": "blocked", "blockReason": "CA is down"}, kind: "blocked", want: []string{"alice", "bob", "carol", "olga", "admin", "mgr"}},
			{name: "unblocked", caller: "admin", op: "UpdateObjective", req: obj{"status": "active"}, kind: "unblocked", want: []string{"alice", "bob", "carol", "olga", "admin", "mgr"}},
			{name: "reassigned", caller: "mgr", op: "ReassignObjective", req: obj{"to": "erin"}, kind: "reassigned", want: []string{"alice", "bob", "erin", "carol", "olga", "admin", "mgr"}},
			{name: "blocked after reassignment", caller: "erin", op: "UpdateObjective", req: obj{"status": "blocked", "blockReason": "need a hand"}, kind: "blocked", want: []string{"alice", "erin", "carol", "olga", "admin", "mgr"}},
			{name: "watcher removed", caller: "olga", op: "UpdateWatchers", req: obj{"remove": []string{"olga"}}, kind: "watcher_removed", want: []string{"alice", "erin", "carol", "olga", "admin", "mgr"}},
			{name: "completed", caller: "erin", op: "CompleteObjective", req: obj{"result": "all renewed"}, kind: "completed", want: []string{"alice", "erin", "carol", "admin", "mgr"}},
			{name: "watcher added when done", caller: "alice", op: "UpdateWatchers", req: obj{"add": []string{"dave"}}, kind: "watcher_added", want: []string{"alice", "erin", "carol", "dave", "admin", "mgr"}},
		}
		for _, s := range steps {
			req := obj{"id": id}
			for k, v := range s.req {
				req[k] = v
			}
			mustCall(t, d, tm.as(s.caller), s.op, req)
			aliceSaw = append(aliceSaw, w.expectEvent(t, id, s.kind, s.caller, s.want...))
			if s.name == "unblocked" {
				// A discussion post travels the thread too, without an
				// audit event.
				post := mustCall(t, d, tm.as("carol"), "DiscussObjective", obj{"id": id, "body": "renewal in progress?"})
				w.expectPost(t, id, requireMessage(t, post), "carol", "alice", "bob", "carol", "olga", "admin", "mgr")
				aliceSaw = append(aliceSaw, post)
			}
		}
		// Refused changes announce nothing.
		mustFail(t, d, tm.as("erin"), "CompleteObjective", obj{"id": id, "result": "x"}, "conflict")
		mustFail(t, d, tm.as("dave"), "CancelObjective", obj{"id": id}, "forbidden")
		// A watcher change that changes nothing is no event either.
		mustCall(t, d, tm.as("alice"), "UpdateWatchers", obj{"id": id, "add": []string{"carol"}})
		mustCall(t, d, tm.as("alice"), "UpdateWatchers", obj{"id": id, "remove": []string{"olga"}})
		w.expectNothing(t, id)

		_, evs := getObjective(t, d, tm.as("dave"), id)
		require.Equal(t, []string{"assigned", "watcher_added", "blocked", "unblocked", "reassigned", "blocked", "watcher_removed", "completed", "watcher_added"}, kindsOf(evs),
			"the discussion post is not an audit event")

		t.Run("cancelled", func(t *testing.T) {
			o2 := tm.create(t, "olga", obj{"assignee": "dave", "watchers": []string{}})
			id2 := o2["id"].(string)
			w.expectEvent(t, id2, "assigned", "olga", "olga", "dave", "admin", "mgr")
			mustCall(t, d, admin, "CancelObjective", obj{"id": id2, "reason": "dup"})
			w.expectEvent(t, id2, "cancelled", "admin", "olga", "dave", "admin", "mgr")
		})

		t.Run("history of the thread", func(t *testing.T) {
			h := listOf(t, mustCall(t, d, tm.as("alice"), "History", obj{"thread": thread, "limit": 500}), "messages")
			want := slices.Clone(aliceSaw)
			slices.Reverse(want)
			require.Equal(t, want, h, "the originator's history of obj:<id> is what it received, newest first")
			h = listOf(t, mustCall(t, d, tm.as("carol"), "History", obj{"thread": thread, "limit": 500}), "messages")
			require.Len(t, h, len(aliceSaw), "a watcher throughout sees the whole thread")
			h = listOf(t, mustCall(t, d, tm.as("mgr"), "History", obj{"thread": thread, "limit": 500}), "messages")
			require.Len(t, h, len(aliceSaw), "a members.manage holder sees the whole thread")
			h = listOf(t, mustCall(t, d, tm.as("dave"), "History", obj{"thread": thread, "limit": 500}), "messages")
			require.Len(t, h, 1, "a watcher added late reads what reached it")
			// Those who are not in the thread now are refused, not shown
			// it empty: fence never was, olga left it, bob was reassigned
			// off it.
			for _, outsider := range []string{"fence", "olga", "bob"} {
				mustFail(t, d, tm.as(outsider), "History", obj{"thread": thread}, "forbidden")
			}
		})
	})
}

func TestObjectiveDiscuss(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		w := tm.watch(t, "admin", "alice", "bob", "carol", "dave", "erin", "olga", "mgr")
		id := tm.create(t, "alice", nil)["id"].(string)
		thread := "obj:" + id
		w.expectEvent(t, id, "assigned", "alice", "alice", "bob", "carol", "admin", "mgr")
		members := []string{"alice", "bob", "carol", "admin", "mgr"}

		discuss := func(t *testing.T, poster string, req obj) obj {
			t.Helper()
			full := obj{"id": id}
			for k, v := range req {
				full[k] = v
			}
			m := requireMessage(t, mustCall(t, d, tm.as(poster), "DiscussObjective", full))
			require.Equal(t, poster, m["from"])
			require.Equal(t, req["body"], m["body"])
			if title, ok := req["title"]; ok {
				require.Equal(t, title, m["title"])
			}
			data, _ := m["data"].(obj)
			require.Equal(t, thread, data["thread"], "a discussion post is on obj:<id>: %v", m)
			require.NotEqual(t, "objective_event", data["kind"], "a post is not a lifecycle event")
			require.True(t, isUnset(m, "to"), "a thread post has no DM recipient: %v", m)
			return m
		}

		t.Run("thread members post", func(t *testing.T) {
			for _, poster := range members {
				m := discuss(t, poster, obj{"body": "a word from " + poster, "title": "note"})
				w.expectPost(t, id, m, poster, members...)
			}
			m := discuss(t, "bob", obj{"body": "no title"})
			w.expectPost(t, id, m, "bob", members...)
		})

		t.Run("refused", func(t *testing.T) {
			tests := []struct {
				name   string
				caller cred
				req    obj
				code   string
			}{
				{name: "outsider", caller: tm.as("dave"), req: obj{"id": id, "body": "x"}, code: "forbidden"},
				{name: "objectives.watch is not membership", caller: tm.as("olga"), req: obj{"id": id, "body": "x"}, code: "forbidden"},
				{name: "another outsider", caller: tm.as("erin"), req: obj{"id": id, "body": "x"}, code: "forbidden"},
				{name: "missing body", caller: tm.as("alice"), req: obj{"id": id, "title": "t"}, code: "bad_request"},
				{name: "empty body", caller: tm.as("bob"), req: obj{"id": id, "body": ""}, code: "bad_request"},
				{name: "unknown objective", caller: admin, req: obj{"id": "no-such-objective", "body": "x"}, code: "not_found"},
				{name: "unauthenticated", caller: anonymous, req: obj{"id": id, "body": "x"}, code: "unauthenticated"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					mustFail(t, d, tc.caller, "DiscussObjective", tc.req, tc.code)
				})
			}
			w.expectNothing(t, id)
		})

		t.Run("posts are not audit events", func(t *testing.T) {
			_, evs := getObjective(t, d, tm.as("carol"), id)
			require.Equal(t, []string{"assigned"}, kindsOf(evs))
		})

		t.Run("membership follows watchers and the assignee", func(t *testing.T) {
			mustCall(t, d, tm.as("alice"), "UpdateWatchers", obj{"id": id, "add": []string{"dave"}})
			w.expectEvent(t, id, "watcher_added", "alice", "alice", "bob", "carol", "dave", "admin", "mgr")
			members := []string{"alice", "bob", "carol", "dave", "admin", "mgr"}
			m := discuss(t, "dave", obj{"body": "now I may speak"})
			w.expectPost(t, id, m, "dave", members...)

			mustCall(t, d, admin, "ReassignObjective", obj{"id": id, "to": "erin"})
			w.expectEvent(t, id, "reassigned", "admin", "alice", "bob", "erin", "carol", "dave", "admin", "mgr")
			members = []string{"alice", "erin", "carol", "dave", "admin", "mgr"}
			m = discuss(t, "erin", obj{"body": "taking over"})
			w.expectPost(t, id, m, "erin", members...)
			mustFail(t, d, tm.as("bob"), "DiscussObjective", obj{"id": id, "body": "still here?"}, "forbidden")

			mustCall(t, d, tm.as("alice"), "UpdateWatchers", obj{"id": id, "remove": []string{"dave"}})
			w.expectEvent(t, id, "watcher_removed", "alice", "alice", "erin", "carol", "dave", "admin", "mgr")
			mustFail(t, d, tm.as("dave"), "DiscussObjective", obj{"id": id, "body": "and me?"}, "forbidden")
			w.expectNothing(t, id)
		})
	})
}

func TestObjectiveAttachments(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		specBytes := []byte("# The spec\n\nAll of it.\n")
		dataBytes := []byte{0, 1, 2, 3, 4, 5, 6, 7}
		specEntry := objWriteFile(t, p, tm.toks["alice"], "/alice/spec.md", "text/markdown", specBytes)
		dataEntry := objWriteFile(t, p, tm.toks["alice"], "/alice/data.bin", "application/octet-stream", dataBytes)
		objWriteFile(t, p, tm.toks["alice"], "/alice/dir/inner.txt", "text/plain", []byte("inner"))
		privBytes := []byte("bob's own")
		objWriteFile(t, p, tm.toks["bob"], "/bob/private.txt", "text/plain", privBytes)

		t.Run("thread members can read", func(t *testing.T) {
			o := tm.create(t, "alice", obj{"attachments": []any{"/alice/spec.md", obj{"path": "/alice/data.bin"}}})
			at := listOf(t, o, "attachments")
			require.Len(t, at, 2)
			byPath := map[string]obj{}
			for _, a := range at {
				byPath[a["path"].(string)] = a
			}
			require.Equal(t, obj{"path": "/alice/spec.md", "name": "spec.md", "size": float64(len(specBytes)), "mimeType": specEntry["mimeType"]}, byPath["/alice/spec.md"])
			require.Equal(t, obj{"path": "/alice/data.bin", "name": "data.bin", "size": float64(len(dataBytes)), "mimeType": dataEntry["mimeType"]}, byPath["/alice/data.bin"])

			for _, who := range []string{"alice", "bob", "carol", "admin", "mgr"} {
				objRequireReads(t, p, tm.toks[who], who, "/alice/spec.md", specBytes)
				objRequireReads(t, p, tm.toks[who], who, "/alice/data.bin", dataBytes)
			}
			for _, who := range []string{"bob", "carol"} {
				shared := objSharedPaths(t, p, tm.toks[who])
				require.Contains(t, shared, "/alice/spec.md", "%s's shared files", who)
				require.Contains(t, shared, "/alice/data.bin", "%s's shared files", who)
				require.NotContains(t, shared, "/alice/dir/inner.txt", "an unattached file is not shared")
			}
			for _, who := range []string{"dave", "erin", "olga"} {
				objRequireCannotRead(t, p, tm.toks[who], who, "/alice/spec.md")
				require.NotContains(t, objSharedPaths(t, p, tm.toks[who]), "/alice/spec.md", "%s is outside the thread", who)
			}
		})

		t.Run("a manager attaches from any home", func(t *testing.T) {
			o := tm.create(t, "admin", obj{"assignee": "carol", "watchers": []string{}, "attachments": []string{"/bob/private.txt"}})
			require.Equal(t, "/bob/private.txt", listOf(t, o, "attachments")[0]["path"])
			objRequireReads(t, p, tm.toks["carol"], "carol", "/bob/private.txt", privBytes)
			objRequireCannotRead(t, p, tm.toks["dave"], "dave", "/bob/private.txt")
		})

		t.Run("64 attachments", func(t *testing.T) {
			var paths []string
			for i := range 65 {
				path := fmt.Sprintf("/alice/many/f%02d.txt", i)
				objWriteFile(t, p, tm.toks["alice"], path, "text/plain", []byte(path))
				paths = append(paths, path)
			}
			mustFail(t, d, tm.as("alice"), "CreateObjective", obj{"title": "t", "outcome": "o", "assignee": "bob", "attachments": paths}, "bad_request")
			o := tm.create(t, "alice", obj{"attachments": paths[:64]})
			require.Len(t, listOf(t, o, "attachments"), 64)
		})

		t.Run("refused", func(t *testing.T) {
			secret := []byte("not for dave")
			objWriteFile(t, p, tm.toks["alice"], "/alice/secret.txt", "text/plain", secret)
			tests := []struct {
				name        string
				attachments []any
				watchers    []string
				code        string
			}{
				{name: "another member's file", attachments: []any{"/bob/private.txt"}, code: "forbidden"},
				{name: "another member's file as an object", attachments: []any{obj{"path": "/bob/private.txt"}}, code: "forbidden"},
				{name: "absent file", attachments: []any{"/alice/nope.md"}, code: "bad_request"},
				{name: "a directory", attachments: []any{"/alice/dir"}, code: "bad_request"},
				{name: "relative path", attachments: []any{"alice/spec.md"}, code: "bad_request"},
				{name: "one bad among good", attachments: []any{"/alice/spec.md", "/alice/nope.md"}, code: "bad_request"},
				// A create refused for another reason grants nothing. (That
				// a refusal inside the commit rolls its grants back is
				// pinned in server: TestChangeFailingApplyRollsBackAlone.)
				{name: "refused for an unknown watcher", attachments: []any{"/alice/secret.txt"}, watchers: []string{"nobody"}, code: "bad_request"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					w := tc.watchers
					if w == nil {
						w = []string{}
					}
					mustFail(t, d, tm.as("alice"), "CreateObjective", obj{"title": "t", "outcome": "o", "assignee": "dave", "watchers": w, "attachments": tc.attachments}, tc.code)
				})
			}
			objRequireCannotRead(t, p, tm.toks["dave"], "dave", "/alice/secret.txt")
			objRequireCannotRead(t, p, tm.toks["dave"], "dave", "/bob/private.txt")
			require.NotContains(t, objSharedPaths(t, p, tm.toks["dave"]), "/alice/secret.txt")
		})

		t.Run("discussion attachments reach the thread", func(t *testing.T) {
			id := tm.create(t, "alice", nil)["id"].(string)
			notes := []byte("bob's notes")
			objWriteFile(t, p, tm.toks["bob"], "/bob/notes.txt", "text/plain", notes)
			m := mustCall(t, d, tm.as("bob"), "DiscussObjective", obj{"id": id, "body": "see notes", "attachments": []string{"/bob/notes.txt"}})
			require.Equal(t, []any{"/bob/notes.txt"}, m["attachments"])
			for _, who := range []string{"alice", "carol", "mgr"} {
				objRequireReads(t, p, tm.toks[who], who, "/bob/notes.txt", notes)
			}
			objRequireCannotRead(t, p, tm.toks["dave"], "dave", "/bob/notes.txt")
			mustFail(t, d, tm.as("bob"), "DiscussObjective", obj{"id": id, "body": "x", "attachments": []string{"/alice/secret.txt"}}, "forbidden")
		})
	})
}

func TestObjectiveBriefing(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		open := func(t *testing.T, who string) map[string]obj {
			t.Helper()
			b := mustCall(t, d, tm.as(who), "GetBriefing", nil)
			out := map[string]obj{}
			for _, o := range listOf(t, b, "openObjectives") {
				requireObjective(t, o)
				out[o["id"].(string)] = o
			}
			return out
		}
		requireOpen := func(t *testing.T, who string, want ...string) {
			t.Helper()
			got := open(t, who)
			require.Equal(t, sortedNames(want), sortedNames(objKeysOf(got)), "%s's open objectives", who)
			for id, o := range got {
				stored, _ := getObjective(t, d, tm.as(who), id)
				require.Equal(t, stored, o, "the briefing holds the objective as stored")
				require.Equal(t, who, o["assignee"])
			}
		}
		active := tm.objectiveIn(t, "active")
		blocked := tm.objectiveIn(t, "blocked")
		tm.objectiveIn(t, "done")
		tm.objectiveIn(t, "cancelled")
		carols := tm.create(t, "alice", obj{"assignee": "carol", "watchers": []string{"bob"}})["id"].(string)

		requireOpen(t, "bob", active, blocked)
		requireOpen(t, "carol", carols)
		requireOpen(t, "alice") // originator of all of them, assignee of none
		requireOpen(t, "admin")

		mustCall(t, d, admin, "ReassignObjective", obj{"id": active, "to": "carol"})
		requireOpen(t, "bob", blocked)
		requireOpen(t, "carol", carols, active)
		mustCall(t, d, tm.as("carol"), "CompleteObjective", obj{"id": carols, "result": "r"})
		mustCall(t, d, tm.as("alice"), "CancelObjective", obj{"id": blocked})
		requireOpen(t, "bob")
		requireOpen(t, "carol", active)
	})
}

// decodeNumbers decodes a JSON body keeping numbers as written.
func decodeNumbers(t testing.TB, raw []byte) obj {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var o obj
	require.NoError(t, dec.Decode(&o), "body %s", raw)
	return o
}

// requireCamelKeys walks a decoded body and requires lowerCamelCase keys,
// skipping the free-form payload and data objects.
func requireCamelKeys(t testing.TB, v any, where string) {
	t.Helper()
	switch x := v.(type) {
	case obj:
		for k, e := range x {
			require.NotEmpty(t, k)
			require.False(t, strings.ContainsAny(k, "_- "), "key %q in %s is lowerCamelCase", k, where)
			require.True(t, unicode.IsLower(rune(k[0])), "key %q in %s is lowerCamelCase", k, where)
			if k == "payload" || k == "data" || k == "meta" {
				continue
			}
			requireCamelKeys(t, e, where+"."+k)
		}
	case []any:
		for _, e := range x {
			requireCamelKeys(t, e, where)
		}
	}
}

// requireMillisNumber requires a JSON number of whole milliseconds.
func requireMillisNumber(t testing.TB, v any, what string) {
	t.Helper()
	n, ok := v.(json.Number)
	require.True(t, ok, "%s is a JSON number, got %#v", what, v)
	_, err := n.Int64()
	require.NoError(t, err, "%s is whole epoch milliseconds, written %q", what, n)
}

// TestObjectiveRESTShapes pins the exact JSON of the objective routes.
func TestObjectiveRESTShapes(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	tm := newObjTeam(t, p, bearer(p.adminToken(t)), d)
	alice := withBearer(tm.toks["alice"])
	bob := withBearer(tm.toks["bob"])
	requireJSON := func(t *testing.T, r httpResp, status int) obj {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.raw)
		require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "application/json"), "Content-Type %q", r.header.Get("Content-Type"))
		o := decodeNumbers(t, r.raw)
		requireCamelKeys(t, o, "body")
		return o
	}
	requireOpenShape := func(t *testing.T, o obj) {
		t.Helper()
		for _, k := range []string{"completedAt", "result", "blockReason"} {
			require.True(t, isUnset(o, k), "%s is null or absent while unset: %v", k, o)
		}
	}

	r := p.do(t, http.MethodPost, "/objectives", obj{"title": "t", "outcome": "o", "assignee": "bob", "watchers": []string{"carol"}}, alice)
	created := requireJSON(t, r, http.StatusOK)
	id, ok := created["id"].(string)
	require.True(t, ok, "id is a JSON string: %s", r.raw)
	require.Equal(t, "active", created["status"])
	requireMillisNumber(t, created["createdAt"], "createdAt")
	requireMillisNumber(t, created["updatedAt"], "updatedAt")
	requireOpenShape(t, created)
	require.Equal(t, []any{"carol"}, created["watchers"])
	require.Equal(t, []any{}, created["attachments"])
	// The plain decode agrees with the harness's shape checks.
	requireObjective(t, r.body)

	r = p.do(t, http.MethodGet, "/objectives/"+id, nil, bob)
	got := requireJSON(t, r, http.StatusOK)
	require.Equal(t, []string{"events", "objective"}, keys(got))
	events, _ := got["events"].([]any)
	require.Len(t, events, 1)
	ev := events[0].(obj)
	for k := range ev {
		require.Contains(t, objEventFields, k, "ObjectiveEvent field %q", k)
	}
	evID, ok := ev["id"].(string)
	require.True(t, ok, "an event id is a JSON string: %s", r.raw)
	require.NotEmpty(t, evID)
	require.Equal(t, id, ev["objectiveId"])
	require.Equal(t, "assigned", ev["kind"])
	require.Equal(t, "alice", ev["actor"])
	requireMillisNumber(t, ev["createdAt"], "event createdAt")
	requireOpenShape(t, got["objective"].(obj))

	r = p.do(t, http.MethodPatch, "/objectives/"+id, obj{"status": "blocked", "blockReason": "why not"}, bob)
	o := requireJSON(t, r, http.StatusOK)
	require.Equal(t, "blocked", o["status"])
	require.Equal(t, "why not", o["blockReason"])
	require.True(t, isUnset(o, "completedAt") && isUnset(o, "result"), "%s", r.raw)

	r = p.do(t, http.MethodPatch, "/objectives/"+id+"/watchers", obj{"add": []string{"dave"}}, alice)
	o = requireJSON(t, r, http.StatusOK)
	require.ElementsMatch(t, []any{"carol", "dave"}, o["watchers"])

	r = p.do(t, http.MethodPost, "/objectives/"+id+"/discuss", obj{"body": "hello"}, bob)
	m := requireJSON(t, r, http.StatusOK)
	require.Equal(t, "hello", m["body"])
	requireMessage(t, r.body)

	r = p.do(t, http.MethodPost, "/objectives/"+id+"/complete", obj{"result": "done it"}, bob)
	o = requireJSON(t, r, http.StatusOK)
	require.Equal(t, "done", o["status"])
	require.Equal(t, "done it", o["result"])
	requireMillisNumber(t, o["completedAt"], "completedAt")
	require.True(t, isUnset(o, "blockReason"), "completion clears blockReason: %s", r.raw)

	r = p.do(t, http.MethodGet, "/objectives?status=done&assignee=bob", nil, bob)
	list := requireJSON(t, r, http.StatusOK)
	require.Equal(t, []string{"objectives"}, keys(list))
	require.Len(t, list["objectives"], 1)

	r = p.do(t, http.MethodGet, "/objectives?assignee=carol", nil, bob)
	require.Equal(t, []any{}, requireJSON(t, r, http.StatusOK)["objectives"], "an empty list is [], not absent")

	r = p.do(t, http.MethodPost, "/objectives", obj{"title": "t", "outcome": "o", "assignee": "bob"}, alice)
	o2 := requireJSON(t, r, http.StatusOK)
	r = p.do(t, http.MethodPost, "/objectives/"+o2["id"].(string)+"/cancel", obj{}, alice)
	o = requireJSON(t, r, http.StatusOK)
	require.Equal(t, "cancelled", o["status"])
	require.True(t, isUnset(o, "completedAt") && isUnset(o, "result") && isUnset(o, "blockReason"), "%s", r.raw)

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		code   string
	}{
		{name: "unknown objective", method: http.MethodGet, path: "/objectives/no-such-objective", code: "not_found"},
		{name: "bad status filter", method: http.MethodGet, path: "/objectives?status=bogus", code: "bad_request"},
		{name: "malformed body", method: http.MethodPost, path: "/objectives", body: []byte("{"), code: "bad_request"},
		{name: "wrong type", method: http.MethodPost, path: "/objectives", body: obj{"title": 5, "outcome": "o", "assignee": "bob"}, code: "bad_request"},
		{name: "watchers not a list", method: http.MethodPost, path: "/objectives", body: obj{"title": "t", "outcome": "o", "assignee": "bob", "watchers": "carol"}, code: "bad_request"},
		{name: "terminal patch", method: http.MethodPatch, path: "/objectives/" + id, body: obj{"status": "active"}, code: "conflict"},
		{name: "no route", method: http.MethodDelete, path: "/objectives/" + id, code: "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p.do(t, tc.method, tc.path, tc.body, bob)
			requireRESTError(t, r, tc.code)
		})
	}
}

func TestObjectiveUnauthenticated(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tm := newObjTeam(t, p, admin, d)
		id := tm.objectiveIn(t, "active")
		before, evsBefore := getObjective(t, d, admin, id)
		calls := []struct {
			op  string
			req obj
		}{
			{op: "ListObjectives"},
			{op: "CreateObjective", req: obj{"title": "t", "outcome": "o", "assignee": "bob"}},
			{op: "GetObjective", req: obj{"id": id}},
			{op: "UpdateObjective", req: obj{"id": id, "status": "blocked", "blockReason": "r"}},
			{op: "CompleteObjective", req: obj{"id": id, "result": "r"}},
			{op: "CancelObjective", req: obj{"id": id}},
			{op: "ReassignObjective", req: obj{"id": id, "to": "erin"}},
			{op: "DiscussObjective", req: obj{"id": id, "body": "x"}},
			{op: "UpdateWatchers", req: obj{"id": id, "add": []string{"dave"}}},
		}
		for _, c := range []cred{anonymous, bearer(randomToken(t)), {authorization: "Bearer garbage"}} {
			for _, call := range calls {
				mustFail(t, d, c, call.op, call.req, "unauthenticated")
			}
		}
		after, evsAfter := getObjective(t, d, admin, id)
		require.Equal(t, before, after)
		require.Equal(t, evsBefore, evsAfter)
		require.Len(t, listOf(t, mustCall(t, d, admin, "ListObjectives", nil), "objectives"), 1)
	})
}

// TestObjectiveSurvivesKill9 changes objectives on a file store, kills the
// broker with SIGKILL and requires every acknowledged change, audit log
// included, after a restart on the same files.
func TestObjectiveSurvivesKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	tm := newObjTeam(t, p, admin, d)

	o1 := tm.create(t, "alice", obj{"body": "survives", "watchers": []string{"carol", "olga"}})["id"].(string)
	mustCall(t, d, tm.as("bob"), "UpdateObjective", obj{"id": o1, "status": "blocked", "blockReason": "held"})
	mustCall(t, d, tm.as("alice"), "UpdateWatchers", obj{"id": o1, "add": []string{"dave"}, "remove": []string{"olga"}})
	post := mustCall(t, d, tm.as("carol"), "DiscussObjective", obj{"id": o1, "body": "noted"})
	o2 := tm.objectiveIn(t, "done")
	o3 := tm.objectiveIn(t, "active")
	mustCall(t, d, admin, "ReassignObjective", obj{"id": o3, "to": "erin"})

	type snap struct {
		o   obj
		evs []obj
	}
	before := map[string]snap{}
	for _, id := range []string{o1, o2, o3} {
		o, evs := getObjective(t, d, tm.as("dave"), id)
		before[id] = snap{o, evs}
	}
	listBefore := listOf(t, mustCall(t, d, tm.as("dave"), "ListObjectives", nil), "objectives")
	histBefore := listOf(t, mustCall(t, d, tm.as("alice"), "History", obj{"thread": "obj:" + o1}), "messages")
	require.Equal(t, post, histBefore[0])

	p.kill(t)
	p2 := p.restart(t)
	d2 := restDriver{p2}
	tm2 := &objTeam{p: p2, d: d2, toks: tm.toks}

	for _, id := range []string{o1, o2, o3} {
		o, evs := getObjective(t, d2, tm2.as("dave"), id)
		require.Equal(t, before[id].o, o, "objective %s after kill -9", id)
		require.Equal(t, before[id].evs, evs, "events of %s after kill -9", id)
	}
	require.Equal(t, listBefore, listOf(t, mustCall(t, d2, tm2.as("dave"), "ListObjectives", nil), "objectives"))
	require.Equal(t, histBefore, listOf(t, mustCall(t, d2, tm2.as("alice"), "History", obj{"thread": "obj:" + o1}), "messages"))
	b := mustCall(t, d2, tm2.as("bob"), "GetBriefing", nil)
	require.Equal(t, []string{o1}, objectiveIDs(t, listOf(t, b, "openObjectives")))

	// The log goes on where it stopped; event ids never repeat.
	mustCall(t, d2, tm2.as("bob"), "UpdateObjective", obj{"id": o1, "status": "active"})
	_, evs := getObjective(t, d2, tm2.as("dave"), o1)
	require.Equal(t, before[o1].evs, evs[:len(evs)-1])
	require.Equal(t, "unblocked", evs[len(evs)-1]["kind"])
	// States are enforced on the reloaded objectives too.
	mustFail(t, d2, tm2.as("bob"), "CompleteObjective", obj{"id": o2, "result": "again"}, "conflict")
	mustFail(t, d2, tm2.as("bob"), "UpdateObjective", obj{"id": o3, "status": "blocked", "blockReason": "r"}, "forbidden")
}
