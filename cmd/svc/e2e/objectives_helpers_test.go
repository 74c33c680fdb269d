package e2e

// Helpers of the objectives end-to-end tests: a team whose members cover
// every gate of the objective endpoints, objectives brought into each state,
// shape assertions for Objective and ObjectiveEvent (proto/svc/v1/
// objectives.proto), raw filesystem calls for attachments, and a fenced watch of
// the obj:<id> thread on live streams.

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// objectiveFields are the keys an Objective may carry (core.md Objective).
var objectiveFields = []string{
	"assignee", "attachments", "blockReason", "body", "completedAt", "createdAt", "id",
	"originator", "outcome", "result", "status", "title", "updatedAt", "watchers",
}

// objectiveRequired are the keys every Objective carries; body,
// completedAt, result and blockReason may be absent.
var objectiveRequired = []string{
	"assignee", "attachments", "createdAt", "id", "originator", "outcome", "status", "title", "updatedAt", "watchers",
}

// objEventFields are the keys of an ObjectiveEvent (proto/svc/v1); payload may be
// absent or null.
var objEventFields = []string{"actor", "createdAt", "id", "kind", "objectiveId", "payload"}

// objEventKinds are the audit event kinds (core.md ObjectiveEvent).
var objEventKinds = []string{
	"assigned", "blocked", "unblocked", "completed", "cancelled", "reassigned", "watcher_added", "watcher_removed",
}

// objAttachmentFields are the keys of an objective Attachment.
var objAttachmentFields = []string{"mimeType", "name", "path", "size"}

// isUnset reports a field that is null or absent (docs/DECISIONS.md, Wire).
func isUnset(o obj, key string) bool {
	v, ok := o[key]
	return !ok || v == nil
}

// requireRecentMillis asserts an epoch-ms time near now.
func objRecentMillis(t testing.TB, v any, what string) float64 {
	t.Helper()
	ms, ok := v.(float64)
	require.True(t, ok, "%s is a JSON number, got %#v", what, v)
	require.Equal(t, float64(int64(ms)), ms, "%s is whole milliseconds", what)
	require.InDelta(t, float64(time.Now().UnixMilli()), ms, float64(time.Hour.Milliseconds()), "%s is epoch ms", what)
	return ms
}

// requireObjective asserts the Objective shape and the invariants of the
// state table: completedAt and result iff done, blockReason iff blocked.
func requireObjective(t testing.TB, o obj) obj {
	t.Helper()
	require.NotNil(t, o, "objective")
	for k := range o {
		require.Contains(t, objectiveFields, k, "unexpected Objective field %q: %v", k, o)
	}
	for _, k := range objectiveRequired {
		require.Contains(t, o, k, "Objective lacks %q: %v", k, o)
	}
	id, _ := o["id"].(string)
	require.NotEmpty(t, id, "id is a non-empty string: %v", o)
	for _, k := range []string{"title", "outcome", "assignee", "originator"} {
		s, _ := o[k].(string)
		require.NotEmpty(t, s, "%s is a non-empty string: %v", k, o)
	}
	created := objRecentMillis(t, o["createdAt"], "createdAt")
	updated := objRecentMillis(t, o["updatedAt"], "updatedAt")
	require.GreaterOrEqual(t, updated, created, "updatedAt >= createdAt")
	strs(t, o["watchers"])
	for _, a := range listOf(t, o, "attachments") {
		require.Equal(t, objAttachmentFields, keys(a), "Attachment shape: %v", a)
	}
	status, _ := o["status"].(string)
	require.Contains(t, []string{"active", "blocked", "done", "cancelled"}, status)
	if status == "done" {
		completed := objRecentMillis(t, o["completedAt"], "completedAt")
		require.GreaterOrEqual(t, completed, created)
		_, ok := o["result"].(string)
		require.True(t, ok, "a done objective has its result: %v", o)
	} else {
		require.True(t, isUnset(o, "completedAt"), "completedAt is set iff done: %v", o)
		require.True(t, isUnset(o, "result"), "result is set only by completion: %v", o)
	}
	if status == "blocked" {
		r, _ := o["blockReason"].(string)
		require.NotEmpty(t, strings.TrimSpace(r), "a blocked objective has its reason: %v", o)
	} else {
		require.True(t, isUnset(o, "blockReason"), "blockReason is set only while blocked: %v", o)
	}
	return o
}

// requireEvent asserts the ObjectiveEvent shape.
func requireEvent(t testing.TB, ev obj, objectiveID string) obj {
	t.Helper()
	for k := range ev {
		require.Contains(t, objEventFields, k, "unexpected ObjectiveEvent field %q: %v", k, ev)
	}
	for _, k := range []string{"id", "objectiveId", "kind", "actor", "createdAt"} {
		require.Contains(t, ev, k, "ObjectiveEvent lacks %q: %v", k, ev)
	}
	id, _ := ev["id"].(string)
	require.NotEmpty(t, id, "event id is a non-empty string: %v", ev)
	require.Equal(t, objectiveID, ev["objectiveId"])
	require.Contains(t, objEventKinds, ev["kind"])
	actor, _ := ev["actor"].(string)
	require.NotEmpty(t, actor)
	objRecentMillis(t, ev["createdAt"], "event createdAt")
	if !isUnset(ev, "payload") {
		_, ok := ev["payload"].(obj)
		require.True(t, ok, "payload is an object: %v", ev)
	}
	return ev
}

// getObjective returns an objective and its events, oldest first, checking
// both shapes and the order.
func getObjective(t testing.TB, d driver, c cred, id string) (obj, []obj) {
	t.Helper()
	b := mustCall(t, d, c, "GetObjective", obj{"id": id})
	require.Equal(t, []string{"events", "objective"}, keys(b))
	o := requireObjective(t, b["objective"].(obj))
	require.Equal(t, id, o["id"])
	evs := listOf(t, b, "events")
	seen := map[string]bool{}
	var last float64
	for i, ev := range evs {
		requireEvent(t, ev, id)
		require.False(t, seen[ev["id"].(string)], "event ids are unique: %v", evs)
		seen[ev["id"].(string)] = true
		at := ev["createdAt"].(float64)
		require.GreaterOrEqual(t, at, last, "events are oldest first: %v", evs)
		last = at
		if i == 0 {
			require.Equal(t, "assigned", ev["kind"], "the log starts with assigned")
		}
	}
	return o, evs
}

// kindsOf lists the events' kinds in order.
func kindsOf(evs []obj) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev["kind"].(string))
	}
	return out
}

// payloadStrings collects every string in an event payload, nested ones
// included: the payload's key names are not part of the contract, its
// values are.
func payloadStrings(ev obj) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case obj:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(ev["payload"])
	return out
}

// requirePayloadHas asserts the event's payload names each value.
func requirePayloadHas(t testing.TB, ev obj, values ...string) {
	t.Helper()
	got := payloadStrings(ev)
	for _, v := range values {
		require.Contains(t, got, v, "the %s event's payload names %q: %v", ev["kind"], v, ev["payload"])
	}
}

// sorted returns a sorted copy.
func sortedNames(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// objTeam is a broker with members covering every objective gate:
//
//	admin  every leaf (members.manage, objectives.*)
//	alice  objectives.create: the originator of the fixtures
//	bob    nothing: the assignee of the fixtures
//	carol  nothing: the watcher of the fixtures
//	dave   nothing: outside every thread
//	erin   nothing: a reassignment target
//	olga   the operator preset: objectives.create, .cancel, .watch
//	mgr    members.manage only
//	rita   objectives.reassign only (the reassign gate is members.manage)
//	fence  nothing: sends the fencing DMs
type objTeam struct {
	p    *proc
	d    driver
	toks map[string]string
}

var objTeamPerms = map[string][]string{
	"alice": {"objectives.create"},
	"bob":   nil,
	"carol": nil,
	"dave":  nil,
	"erin":  nil,
	"olga":  operatorLeaves,
	"mgr":   {"members.manage"},
	"rita":  {"objectives.reassign"},
	"fence": nil,
}

func newObjTeam(t testing.TB, p *proc, admin cred, d driver) *objTeam {
	t.Helper()
	tm := &objTeam{p: p, d: d, toks: map[string]string{"admin": tokenOf(admin)}}
	for _, n := range sortedNames(objKeysOf(objTeamPerms)) {
		tm.toks[n] = createMember(t, d, admin, n, objTeamPerms[n]...)
	}
	return tm
}

func objKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (tm *objTeam) as(name string) cred {
	tok, ok := tm.toks[name]
	if !ok {
		panic("no member " + name)
	}
	return bearer(tok)
}

// create creates an objective as caller: alice's fixture (assignee bob,
// watcher carol) with the fields of req on top. It checks the answer and
// the single assigned event and returns the objective.
func (tm *objTeam) create(t testing.TB, caller string, req obj) obj {
	t.Helper()
	full := obj{"title": "Ship the report", "outcome": "report.pdf is in /bob/out", "assignee": "bob", "watchers": []string{"carol"}}
	for k, v := range req {
		full[k] = v
	}
	o := requireObjective(t, mustCall(t, tm.d, tm.as(caller), "CreateObjective", full))
	require.Equal(t, "active", o["status"])
	require.Equal(t, caller, o["originator"])
	require.Equal(t, full["assignee"], o["assignee"])
	got, evs := getObjective(t, tm.d, tm.as("dave"), o["id"].(string))
	require.Equal(t, o, got, "GET answers the objective as created")
	require.Len(t, evs, 1, "a new objective has one event: %v", evs)
	require.Equal(t, caller, evs[0]["actor"])
	return o
}

// objectiveIn returns the id of a fresh fixture objective in status:
// blocked by bob, done by bob, cancelled by alice.
func (tm *objTeam) objectiveIn(t testing.TB, status string) string {
	t.Helper()
	id := tm.create(t, "alice", obj{"title": "In " + status})["id"].(string)
	var o obj
	switch status {
	case "active":
		return id
	case "blocked":
		o = mustCall(t, tm.d, tm.as("bob"), "UpdateObjective", obj{"id": id, "status": "blocked", "blockReason": "waiting on access"})
	case "done":
		o = mustCall(t, tm.d, tm.as("bob"), "CompleteObjective", obj{"id": id, "result": "it shipped"})
	case "cancelled":
		o = mustCall(t, tm.d, tm.as("alice"), "CancelObjective", obj{"id": id, "reason": "not needed"})
	default:
		t.Fatalf("no fixture in status %q", status)
	}
	require.Equal(t, status, requireObjective(t, o)["status"])
	return id
}

// ids lists the objectives' ids in order.
func objectiveIDs(t testing.TB, os []obj) []string {
	t.Helper()
	out := make([]string, 0, len(os))
	for _, o := range os {
		out = append(out, requireObjective(t, o)["id"].(string))
	}
	return out
}

// --- Filesystem (raw REST, docs/API.md Files) ------------------------------

// objContentType sets (not adds) the Content-Type of a request.
func objContentType(v string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Content-Type", v) }
}

// fsPath renders a virtual path for /fs/read/<path>: each segment escaped.
func objFsPath(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// writeFile writes bytes at path as the member (POST /fs/write) and returns
// the FsEntry written.
func objWriteFile(t testing.TB, p *proc, tok, path, contentType string, content []byte) obj {
	t.Helper()
	r := p.do(t, http.MethodPost, "/fs/write?path="+url.QueryEscape(path)+"&collide=overwrite", content,
		withBearer(tok), objContentType(contentType))
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.status,
		"POST /fs/write?path=%s (the filesystem endpoint this test needs): %s", path, r.raw)
	entry, _ := r.body["entry"].(obj)
	require.NotNil(t, entry, "write answers {entry, renamed}: %s", r.raw)
	require.Equal(t, path, entry["path"])
	return entry
}

// readFile is GET /fs/read/<path> as the member.
func objReadFile(t testing.TB, p *proc, tok, path string) httpResp {
	t.Helper()
	return p.do(t, http.MethodGet, "/fs/read/"+objFsPath(path), nil, withBearer(tok))
}

// requireReads asserts the member reads content at path.
func objRequireReads(t testing.TB, p *proc, tok, who, path string, content []byte) {
	t.Helper()
	r := objReadFile(t, p, tok, path)
	require.Equal(t, http.StatusOK, r.status, "%s reads %s: %s", who, path, r.raw)
	require.Equal(t, content, r.raw, "%s reads %s", who, path)
}

// requireCannotRead asserts the member is refused path.
func objRequireCannotRead(t testing.TB, p *proc, tok, who, path string) {
	t.Helper()
	r := objReadFile(t, p, tok, path)
	require.NotEqual(t, http.StatusOK, r.status, "%s must not read %s", who, path)
	requireRESTError(t, r, "forbidden")
}

// sharedPaths lists GET /fs/shared as the member.
func objSharedPaths(t testing.TB, p *proc, tok string) []string {
	t.Helper()
	r := p.do(t, http.MethodGet, "/fs/shared", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "GET /fs/shared: %s", r.raw)
	var out []string
	for _, e := range listOf(t, r.body, "entries") {
		out = append(out, e["path"].(string))
	}
	return out
}

// --- The thread on live streams --------------------------------------------

// threadWatch holds a live stream per member and reads them up to a fence,
// so each step can require exactly who received what on one thread.
type threadWatch struct {
	tm      *objTeam
	streams map[string]msgStream
	n       int
}

func (tm *objTeam) watch(t testing.TB, members ...string) *threadWatch {
	t.Helper()
	w := &threadWatch{tm: tm, streams: map[string]msgStream{}}
	for _, m := range members {
		w.streams[m] = subscribeOn(t, tm.p, transportOf(tm.d), tm.toks[m], m)
	}
	return w
}

// since returns, per member, the messages on thread received since the last
// fence. Anything else received is a failure: these streams see only the
// objective traffic of the test.
func (w *threadWatch) since(t testing.TB, thread string) map[string][]obj {
	t.Helper()
	w.n++
	got := fence(t, w.tm.d, w.tm.as("fence"), w.streams, fmt.Sprintf("objective fence %d", w.n))
	out := map[string][]obj{}
	for name, msgs := range got {
		for _, m := range msgs {
			data, _ := m["data"].(obj)
			require.Equal(t, thread, data["thread"], "%s received a message off the thread: %v", name, m)
			out[name] = append(out[name], requireMessage(t, m))
		}
	}
	return out
}

// expectEvent requires the lifecycle event kind by actor to have reached
// exactly the members in want, once each, as one identical message, and
// returns it.
func (w *threadWatch) expectEvent(t testing.TB, id, kind, actor string, want ...string) obj {
	t.Helper()
	thread := "obj:" + id
	got := w.since(t, thread)
	var msg obj
	for name := range w.streams {
		if !slices.Contains(want, name) {
			require.Empty(t, got[name], "%s is outside the thread of the %s event", name, kind)
			continue
		}
		require.Len(t, got[name], 1, "%s receives the %s event once: %v", name, kind, got[name])
		m := got[name][0]
		if msg == nil {
			msg = m
		}
		require.Equal(t, msg, m, "every recipient gets the same message")
	}
	require.NotNil(t, msg, "someone watched receives the %s event", kind)
	require.Equal(t, actor, msg["from"], "the event is from its actor")
	data, _ := msg["data"].(obj)
	require.Equal(t, "objective_event", data["kind"], "data: %v", data)
	require.Equal(t, kind, data["event"], "data: %v", data)
	require.Equal(t, thread, data["thread"], "data: %v", data)
	require.Equal(t, id, data["objectiveId"], "data: %v", data)
	return msg
}

// expectPost requires a discussion post by poster to have reached exactly
// the members in want other than the poster (whose own stream may or may not
// echo it), and returns it.
func (w *threadWatch) expectPost(t testing.TB, id string, posted obj, poster string, want ...string) {
	t.Helper()
	got := w.since(t, "obj:"+id)
	for name := range w.streams {
		switch {
		case name == poster:
			for _, m := range got[name] {
				require.Equal(t, posted, m, "the poster's echo is the post")
			}
			require.LessOrEqual(t, len(got[name]), 1)
		case slices.Contains(want, name):
			require.Equal(t, []obj{posted}, got[name], "%s receives the post once, as posted", name)
		default:
			require.Empty(t, got[name], "%s is outside the thread", name)
		}
	}
}

// expectNothing requires no stream to have received anything on the thread.
func (w *threadWatch) expectNothing(t testing.TB, id string) {
	t.Helper()
	for name, msgs := range w.since(t, "obj:"+id) {
		require.Empty(t, msgs, "%s received a message", name)
	}
}

// pauseMillis lets the clock move past the current millisecond, so the next
// write gets a later createdAt.
func pauseMillis() { time.Sleep(3 * time.Millisecond) }
