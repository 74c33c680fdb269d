package e2e

// End-to-end test of a deleted member's data (docs/DECISIONS.md, "A
// deleted member's data stays its own"): a member deleted and created
// again under its name is a new member, which reads none of what the
// deleted one left, holds none of its objectives and gets none of its
// notifications, while a holder of activity.read still reads the deleted
// member's rows, labelled as its.

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// eventsOf returns the audit events of objective id, oldest first.
func eventsOf(t testing.TB, d driver, c cred, id string) []obj {
	t.Helper()
	return listOf(t, mustCall(t, d, c, "GetObjective", obj{"id": id}), "events")
}

func TestDeletedMemberDataStaysItsOwn(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		h := newHookPolicyEnv(t, p)
		reader := bearer(createMember(t, d, admin, "reader", "activity.read"))
		carol := bearer(createMember(t, d, admin, "carol"))
		old := bearer(createMember(t, d, admin, "dora"))

		// What the first dora leaves: activity, a GenAI record, an
		// objective she works on (its markers), a watch, a notification
		// endpoint that targets her with a copy queued while she is
		// offline.
		work := mustCall(t, d, admin, "CreateObjective", obj{"title": "Old work", "outcome": "done", "assignee": "dora"})
		watched := mustCall(t, d, admin, "CreateObjective", obj{"title": "Carol's", "outcome": "done", "assignee": "carol", "watchers": []string{"dora"}})
		mustUpload(t, d, old, "dora",
			actEvObj("llm_exchange", actNow(), work["id"].(string), codexExchange("old-exchange", "gpt-5-codex", 100, 10, 0)),
			actEv("tool_action", 0, obj{"label": "old-tool", "tool": "Bash"}))
		rec := mustUploadGenAI(t, p, d, old, "dora", genaiBodyOf(t, actNow(), responsesFixture.req, responsesFixture.resp))
		// Telemetry still waiting for its partner: a request body whose
		// accounting record has not come.
		waiting := otReqBody(time.Now(), "sess-old", 1, "claude-haiku-4-5",
			otAnthropicRequest(t, "claude-haiku-4-5", "old system", []any{obj{"role": "user", "content": "waiting"}}))
		require.Zero(t, otHTTPExport(otCTJSON, false)(t, p, strings.TrimPrefix(old.authorization, "Bearer "), otLogsReq(otNamings[3], waiting)))
		h.endpoint(t, "alerts", obj{"ifOffline": "queue"}, "dora", "carol")
		h.post(t, "alerts", "", `{"n":1}`, "pending")

		mustCall(t, d, admin, "DeleteMember", obj{"name": "dora"})
		requireRejected(t, d, old)

		// No member has the name now: a holder of activity.read still reads
		// what she left, as a deleted member's; a name nobody ever had is
		// unknown.
		gone := byLabel(mustList(t, p, d, reader, "dora", actQuery{}))
		require.Equal(t, true, gone["old-tool"]["memberDeleted"], "%v", gone)
		require.Len(t, listGenAI(t, d, reader, "dora", obj{}), 1)
		require.Equal(t, float64(3), mustCall(t, d, reader, "GetUsage", obj{"name": "dora"})["usage"].(obj)["exchanges"])
		mustFail(t, d, reader, "ListActivity", obj{"name": "nobody"}, "not_found")
		mustFail(t, d, carol, "ListActivity", obj{"name": "dora"}, "forbidden")

		// Released by the rule of docs/DECISIONS.md: the open objective is
		// cancelled by the admin who deleted her, with the reason; she no
		// longer watches; the endpoint lost her as a target.
		w := mustCall(t, d, admin, "GetObjective", obj{"id": work["id"]})["objective"].(obj)
		require.Equal(t, "cancelled", w["status"])
		evs := eventsOf(t, d, admin, work["id"].(string))
		last := evs[len(evs)-1]
		require.Equal(t, "cancelled", last["kind"])
		require.Equal(t, "admin", last["actor"])
		require.Equal(t, obj{"reason": "assignee dora was deleted"}, last["payload"])
		wt := mustCall(t, d, admin, "GetObjective", obj{"id": watched["id"]})["objective"].(obj)
		require.Equal(t, "active", wt["status"], "an objective she only watched goes on")
		require.Equal(t, []any{}, wt["watchers"])
		evs = eventsOf(t, d, admin, watched["id"].(string))
		require.Equal(t, obj{"watcher": "dora"}, evs[len(evs)-1]["payload"])
		ep := mustCall(t, d, admin, "GetNotificationEndpoint", obj{"slug": "alerts"})
		require.Equal(t, []any{obj{"member": "carol"}}, ep["targets"])
		updates := listOf(t, mustCall(t, d, admin, "History", obj{"thread": "hook:alerts"}), "messages")
		require.Equal(t, "updated", updates[0]["data"].(obj)["event"], "the registry event of the target's removal")

		// The name again: a new member.
		fresh := bearer(createMember(t, d, admin, "dora"))
		mustUpload(t, d, fresh, "dora", actEv("tool_action", 0, obj{"label": "new-tool", "tool": "Read"}))

		// It reads nothing of the first dora's: activity, records, usage,
		// the trace of her objective.
		own := mustList(t, p, d, fresh, "dora", actQuery{})
		require.Len(t, own, 1, "only its own row: %v", own)
		require.Equal(t, "new-tool", own[0]["data"].(obj)["label"])
		require.Equal(t, false, own[0]["memberDeleted"])
		newMemberID := own[0]["memberId"].(string)
		require.NotEmpty(t, newMemberID)
		require.Empty(t, listGenAI(t, d, fresh, "dora", obj{}))
		mustFail(t, d, fresh, "GetGenAi", obj{"name": "dora", "id": rec["id"]}, "not_found")
		u := mustCall(t, d, fresh, "GetUsage", obj{"name": "dora"})
		require.Equal(t, float64(0), u["usage"].(obj)["exchanges"])
		require.Len(t, listOf(t, u, "members"), 1)
		mustFail(t, d, fresh, "GetObjectiveTrace", obj{"id": work["id"]}, "forbidden")
		mustFail(t, d, fresh, "GetObjectiveUsage", obj{"id": work["id"]}, "forbidden")

		// It holds none of her objectives: it cannot complete, block or
		// discuss the old one, nor read its thread.
		mustFail(t, d, fresh, "CompleteObjective", obj{"id": work["id"], "result": "mine now"}, "forbidden")
		mustFail(t, d, fresh, "UpdateObjective", obj{"id": work["id"], "status": "blocked", "blockReason": "x"}, "forbidden")
		mustFail(t, d, fresh, "DiscussObjective", obj{"id": work["id"], "body": "hello"}, "forbidden")
		mustFail(t, d, fresh, "History", obj{"thread": "obj:" + work["id"].(string)}, "forbidden")

		// It gets none of her notifications: online, it receives no copy of
		// what was queued for her, nor of what comes in now.
		s := p.openSSE(t, "/subscribe?name=dora", sseOpts{}, withAuthorization(fresh.authorization))
		s.requireReady(t, "dora")
		id := h.post(t, "alerts", "", `{"n":2}`, "pending") // queued for carol, offline
		sc := p.openSSE(t, "/subscribe?name=carol", sseOpts{}, withAuthorization(carol.authorization))
		sc.requireReady(t, "carol")
		require.Equal(t, "hook:alerts", sc.nextMessage(t)["from"], "carol's queued copies arrive")
		h.eventually(t, "alerts", id, "delivered")
		// Messages reach a stream in commit order: a copy for dora would
		// come before this DM.
		mustCall(t, d, admin, "Push", obj{"to": "dora", "body": "marker"})
		m := s.nextMessage(t)
		require.Equal(t, "admin", m["from"], "the new dora got a hook copy: %v", m)
		require.Equal(t, "marker", m["body"])
		s.close()
		sc.close()
		mustFail(t, d, fresh, "History", obj{"thread": "hook:alerts"}, "forbidden")

		// A holder of activity.read still reads the first dora's rows, as
		// hers: a deleted member, with the date.
		all := mustList(t, p, d, reader, "dora", actQuery{})
		labels := map[string]obj{}
		for _, r := range all {
			if l, ok := r["data"].(obj)["label"].(string); ok {
				labels[l] = r
			}
		}
		for _, l := range []string{"old-exchange", "old-tool"} {
			r := labels[l]
			require.NotNil(t, r, "%s: %v", l, all)
			require.Equal(t, true, r["memberDeleted"], "%s: %v", l, r)
			require.NotEqual(t, newMemberID, r["memberId"])
			require.Positive(t, actWhole(t, r["memberDeletedAt"], "memberDeletedAt"))
		}
		require.Equal(t, false, labels["new-tool"]["memberDeleted"])
		// What her telemetry had waiting was stored as hers when she was
		// deleted, not left for the name's next member.
		var drained bool
		for _, r := range all {
			if r["kind"] == "llm_exchange" && r["data"].(obj)["requestOnly"] == true {
				drained = true
				require.Equal(t, true, r["memberDeleted"], "%v", r)
				require.Equal(t, "claude-haiku-4-5", r["data"].(obj)["model"])
			}
		}
		require.True(t, drained, "the waiting request body is a row of the deleted member: %v", all)
		require.NotContains(t, labels["new-tool"], "memberDeletedAt")
		// The cancellation closed her hold on the objective in her stream.
		var closed bool
		for _, r := range all {
			if r["kind"] == "objective_close" && r["objectiveId"] == work["id"] {
				closed = true
				require.Equal(t, "cancelled", r["data"].(obj)["reason"])
				require.Equal(t, true, r["memberDeleted"])
			}
		}
		require.True(t, closed, "an objective_close marker in the deleted member's stream: %v", all)
		recs := listGenAI(t, d, reader, "dora", obj{})
		require.Len(t, recs, 1)
		require.Equal(t, true, recs[0]["memberDeleted"])
		trace := listOf(t, mustCall(t, d, reader, "GetObjectiveTrace", obj{"id": work["id"]}), "rows")
		require.NotEmpty(t, trace)
		for _, r := range trace {
			require.Equal(t, true, r["memberDeleted"], "the trace is the deleted member's: %v", r)
		}
		usage := mustCall(t, d, reader, "GetUsage", obj{"name": "dora"})
		members := listOf(t, usage, "members")
		require.Len(t, members, 2, "the new dora and the deleted one, apart: %v", members)
		require.Equal(t, false, members[0]["memberDeleted"])
		require.Equal(t, newMemberID, members[0]["memberId"])
		require.Equal(t, true, members[1]["memberDeleted"])
		require.Equal(t, float64(3), members[1]["usage"].(obj)["exchanges"], "her exchange, her record and her drained request")
	})
}

// A config rewritten without member ids (by hand, or by a tool that
// templates it) keeps its members: each gets its id back from the database,
// so it still reads its own activity and holds its own objectives.
func TestConfigWithoutMemberIDsKeepsMembers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	d := restDriver{p}
	admin := bearer(p.adminToken(t))
	bob := bearer(createMember(t, d, admin, "bob"))
	work := mustCall(t, d, admin, "CreateObjective", obj{"title": "Bob's", "outcome": "done", "assignee": "bob"})
	mustUpload(t, d, bob, "bob", actEv("tool_action", 0, obj{"label": "before", "tool": "Bash"}))
	p.mustStop(t)

	cfg := readJSON(t, p.opts.configPath)
	ids := map[string]any{}
	for _, m := range listOf(t, cfg["store"].(obj), "members") {
		require.NotEmpty(t, m["id"], "%v", m)
		ids[m["name"].(string)] = m["id"]
		delete(m, "id")
	}
	writeConfig(t, p.opts.configPath, cfg)

	p = p.restart(t)
	d = restDriver{p}
	require.Contains(t, p.stderr.String(), "member ids missing from the team config taken back from the database")
	for name, m := range configMembers(t, readJSON(t, p.opts.configPath)) {
		require.Equal(t, ids[name], m["id"], "%s keeps its id in the config", name)
	}
	rows := mustList(t, p, d, bob, "bob", actQuery{})
	require.Len(t, rows, 2, "its objective_open marker and its row: %v", rows)
	for _, r := range rows {
		require.Equal(t, false, r["memberDeleted"], "%v", r)
		require.Equal(t, ids["bob"], r["memberId"], "%v", r)
	}
	require.Equal(t, "before", byLabel(rows)["before"]["data"].(obj)["label"])
	done := mustCall(t, d, bob, "CompleteObjective", obj{"id": work["id"], "result": "still mine"})
	require.Equal(t, "done", done["status"], "%v", done)
}
