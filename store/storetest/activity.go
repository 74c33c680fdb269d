package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// maxActivityLimit is the default and the cap of ActivityFilter.Limit.
const maxActivityLimit = 1000

// RunActivity runs the conformance suite of store.ActivityStore, one subtest
// per behaviour. newStore must return a fresh, empty store on every call and
// close it when t ends.
func RunActivity(t *testing.T, newStore func(t *testing.T) store.ActivityStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.ActivityStore)
	}{
		{"AppendEmpty", testAppendEmpty},
		{"AppendAssignsIDs", testAppendAssignsIDs},
		{"ListFilters", testListFilters},
		{"ListLimitDefaultAndClamp", testListLimitDefaultAndClamp},
		{"Prune", testPrune},
		{"PruneTelemetry", testPruneTelemetry},
		{"CommitActivity", testCommitActivity},
		{"ActivityAfter", testActivityAfter},
		{"OldestFirstAndMarkers", testOldestFirstAndMarkers},
		{"ActivityUsage", testActivityUsage},
		{"ListMaxBytes", testListMaxBytes},
		{"ActivityUsageJoins", testActivityUsageJoins},
		{"GenAI", testGenAI},
		{"GenAISession", testGenAISession},
		{"GenAIRawBytes", testGenAIRawBytes},
		{"ActivityUsageGroups", testActivityUsageGroups},
		{"MemberUIDs", testMemberUIDs},
		{"AdoptMemberRows", testAdoptMemberRows},
		{"LongResponseID", testActivityLongResponseID},
		{"ActivityBetween", testActivityBetween},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

func event(memberName, kind string, ts time.Time, n int) store.ActivityEvent {
	return store.ActivityEvent{
		Member: memberName,
		Kind:   kind,
		TS:     ts,
		Data:   fmt.Appendf(nil, `{"n":%d}`, n),
	}
}

func testAppendEmpty(t *testing.T, s store.ActivityStore) {
	tests := []struct {
		name   string
		events []store.ActivityEvent
	}{
		{"nil", nil},
		{"empty", []store.ActivityEvent{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.AppendActivity(t.Context(), tc.events)
			require.NoError(t, err)
			require.Empty(t, got)
		})
	}
	got, err := s.ListActivity(t.Context(), store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Empty(t, got)
}

func testAppendAssignsIDs(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	in := []store.ActivityEvent{
		event("alice", "publish", at(2*time.Second), 0),
		event("bob", "read", at(time.Second), 1),
		event("alice", "publish", at(0), 2),
	}
	in[1].ObjectiveID = "obj-1"
	in[2].Data = []byte(`{"nested":{"a":[1,2,"ü"]}}`)

	got, err := s.AppendActivity(ctx, in)
	require.NoError(t, err)
	require.Len(t, got, len(in))
	for i := range in {
		want := viewEvent(in[i])
		want.ID = got[i].ID
		require.Equal(t, want, viewEvent(got[i]), i)
		if i > 0 {
			require.Greater(t, got[i].ID, got[i-1].ID)
		}
	}
	require.Zero(t, in[0].ID, "the input is not modified")

	more, err := s.AppendActivity(ctx, []store.ActivityEvent{event("alice", "publish", at(0), 3)})
	require.NoError(t, err)
	require.Greater(t, more[0].ID, got[len(got)-1].ID)

	// What List returns is what Append returned.
	listed, err := s.ListActivity(ctx, store.ActivityFilter{Member: "bob"})
	require.NoError(t, err)
	require.Equal(t, viewEvents(got[1:2]), viewEvents(listed))
	listed, err = s.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Equal(t, viewEvents([]store.ActivityEvent{got[0], more[0], got[2]}), viewEvents(listed))
}

func testListFilters(t *testing.T, s store.ActivityStore) {
	// Indexes into seeded. Events 1 and 2 share a TS, so id breaks the tie.
	seeded, err := s.AppendActivity(t.Context(), []store.ActivityEvent{
		0: event("alice", "a", at(0), 0),
		1: event("alice", "b", at(time.Second), 1),
		2: event("alice", "a", at(time.Second), 2),
		3: event("alice", "c", at(2*time.Second), 3),
		4: event("alice", "b", at(3*time.Second), 4),
		5: event("bob", "a", at(time.Second), 5),
	})
	require.NoError(t, err)

	tests := []struct {
		name string
		f    store.ActivityFilter
		want []int
	}{
		{"member, newest first, ties by id", store.ActivityFilter{Member: "alice"}, []int{4, 3, 2, 1, 0}},
		{"other member", store.ActivityFilter{Member: "bob"}, []int{5}},
		{"unknown member", store.ActivityFilter{Member: "carol"}, []int{}},
		{"from inclusive", store.ActivityFilter{Member: "alice", From: at(time.Second)}, []int{4, 3, 2, 1}},
		{"to inclusive", store.ActivityFilter{Member: "alice", To: at(time.Second)}, []int{2, 1, 0}},
		{"from equals to", store.ActivityFilter{Member: "alice", From: at(time.Second), To: at(time.Second)}, []int{2, 1}},
		{"from after to", store.ActivityFilter{Member: "alice", From: at(2 * time.Second), To: at(time.Second)}, []int{}},
		{"between rows", store.ActivityFilter{Member: "alice", From: at(1500 * time.Millisecond), To: at(2500 * time.Millisecond)}, []int{3}},
		{"one kind", store.ActivityFilter{Member: "alice", Kinds: []string{"b"}}, []int{4, 1}},
		{"two kinds", store.ActivityFilter{Member: "alice", Kinds: []string{"a", "c"}}, []int{3, 2, 0}},
		{"unknown kind", store.ActivityFilter{Member: "alice", Kinds: []string{"z"}}, []int{}},
		{"limit", store.ActivityFilter{Member: "alice", Limit: 2}, []int{4, 3}},
		{"limit inside a tie", store.ActivityFilter{Member: "alice", Limit: 3}, []int{4, 3, 2}},
		{"limit above count", store.ActivityFilter{Member: "alice", Limit: 50}, []int{4, 3, 2, 1, 0}},
		{
			"everything combined",
			store.ActivityFilter{Member: "alice", From: at(time.Second), To: at(3 * time.Second), Kinds: []string{"a", "b"}, Limit: 2},
			[]int{4, 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListActivity(t.Context(), tc.f)
			require.NoError(t, err)
			want := make([]store.ActivityEvent, 0, len(tc.want))
			for _, i := range tc.want {
				want = append(want, seeded[i])
			}
			require.Equal(t, viewEvents(want), viewEvents(got))
		})
	}
}

func testListLimitDefaultAndClamp(t *testing.T, s store.ActivityStore) {
	const total = maxActivityLimit + 5
	in := make([]store.ActivityEvent, total)
	for i := range in {
		in[i] = event("alice", "k", at(time.Duration(i)*time.Millisecond), i)
	}
	seeded, err := s.AppendActivity(t.Context(), in)
	require.NoError(t, err)

	tests := []struct {
		name  string
		limit int
		want  int
	}{
		{"zero means default", 0, maxActivityLimit},
		{"negative means default", -1, maxActivityLimit},
		{"at the cap", maxActivityLimit, maxActivityLimit},
		{"above the cap is clamped", maxActivityLimit + 1, maxActivityLimit},
		{"far above the cap is clamped", 1 << 30, maxActivityLimit},
		{"below the cap", 7, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListActivity(t.Context(), store.ActivityFilter{Member: "alice", Limit: tc.limit})
			require.NoError(t, err)
			require.Len(t, got, tc.want)
			// Newest first: the last appended comes first.
			require.Equal(t, seeded[total-1].ID, got[0].ID)
			require.Equal(t, seeded[total-tc.want].ID, got[len(got)-1].ID)
		})
	}
}

func testPrune(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	seeded, err := s.AppendActivity(ctx, []store.ActivityEvent{
		event("alice", "k", at(0), 0),
		event("alice", "k", at(time.Second), 1),
		event("alice", "k", at(2*time.Second-time.Millisecond), 2),
		event("alice", "k", at(2*time.Second), 3),
		event("alice", "k", at(3*time.Second), 4),
		event("bob", "k", at(0), 5),
		event("bob", "k", at(5*time.Second), 6),
	})
	require.NoError(t, err)

	n, err := s.PruneActivity(ctx, at(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, store.PruneResult{Activity: 4}, n)

	alice, err := s.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Equal(t, viewEvents([]store.ActivityEvent{seeded[4], seeded[3]}), viewEvents(alice), "a row at the cutoff stays")
	bob, err := s.ListActivity(ctx, store.ActivityFilter{Member: "bob"})
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded[6:7]), viewEvents(bob))

	n, err = s.PruneActivity(ctx, at(2*time.Second))
	require.NoError(t, err)
	require.Zero(t, n)
}

// Pruning takes inference records by capture time, the raw uploads no
// record references any more, and correlation states by update time.
func testPruneTelemetry(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	_, err := s.CommitActivity(ctx, store.ActivityBatch{
		GenAI: []store.GenAIRecord{
			genaiRecord("g1", "alice", at(0), "resp_1", "shared raw"),
			genaiRecord("g2", "alice", at(time.Hour), "resp_2", "shared raw"),
			genaiRecord("g3", "alice", at(0), "resp_3", "own raw"),
		},
		States: []store.CorrelationState{
			{Member: "alice", State: []byte(`{"old":true}`), UpdatedAt: at(0)},
			{Member: "bob", State: []byte(`{"new":true}`), UpdatedAt: at(time.Hour)},
		},
	})
	require.NoError(t, err)
	n, err := s.PruneActivity(ctx, at(time.Minute))
	require.NoError(t, err)
	// Parts are a backend's to count: the pieces records are stored as.
	require.Equal(t, store.PruneResult{GenAI: 2, Raw: 1, States: 1, Parts: n.Parts}, n, "g3's own raw upload went")
	left, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "alice"})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "g2", left[0].ID)
	raw, err := s.GenAIRaw(ctx, "alice", "g2")
	require.NoError(t, err)
	require.Equal(t, "shared raw", string(raw), "the shared raw upload stays with g2")
	n, err = s.PruneActivity(ctx, at(time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "nothing g2 needs goes")
	states, err := s.CorrelationStates(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, "bob", states[0].Member)
}

func genaiRecord(id, member string, ts time.Time, responseID, raw string) store.GenAIRecord {
	return store.GenAIRecord{
		ID: id, Member: member, TS: ts, Provider: "openai", API: "responses", Model: "gpt-test", ResponseID: responseID,
		Usage:              store.GenAIUsage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 5, CacheCreationTokens: 1, ReasoningTokens: 3},
		SystemInstructions: []byte(`[{"type":"text","content":"be brief"}]`),
		InputMessages:      []byte(`[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`),
		OutputMessages:     []byte(`[{"role":"assistant","parts":[{"type":"text","content":"hello"}],"finishReason":"stop"}]`),
		ToolDefinitions:    []byte(`[{"type":"function","name":"shell","parameters":{"type":"object"}}]`),
		Raw:                []byte(raw),
	}
}

// A batch is written all or nothing, and a member's later state wins.
func testCommitActivity(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	out, err := s.CommitActivity(ctx, store.ActivityBatch{
		Events: []store.ActivityEvent{event("alice", "llm_exchange", at(0), 1), event("alice", "tool_action", at(time.Second), 2)},
		States: []store.CorrelationState{
			{Member: "alice", State: []byte(`{"v":1}`), UpdatedAt: at(0)},
			{Member: "alice", State: []byte(`{"v":2}`), UpdatedAt: at(time.Second)},
			{Member: "bob", State: []byte(`{"v":3}`), UpdatedAt: at(0)},
		},
		GenAI: []store.GenAIRecord{genaiRecord("g1", "alice", at(0), "resp_1", "raw")},
	})
	require.NoError(t, err)
	require.Len(t, out, 2)
	require.Positive(t, out[0].ID)
	require.Greater(t, out[1].ID, out[0].ID)
	states, err := s.CorrelationStates(ctx)
	require.NoError(t, err)
	require.Len(t, states, 2)
	require.Equal(t, `{"v":2}`, string(states[0].State), "the later state of a member wins")
	require.Equal(t, ms(at(time.Second)), ms(states[0].UpdatedAt))

	// A nil state deletes it.
	_, err = s.CommitActivity(ctx, store.ActivityBatch{States: []store.CorrelationState{{Member: "bob"}}})
	require.NoError(t, err)
	states, err = s.CorrelationStates(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1)

	// A failing record (no id) rolls the whole batch back.
	last, err := s.LastActivityID(ctx)
	require.NoError(t, err)
	bad := genaiRecord("", "alice", at(0), "resp_x", "raw x")
	_, err = s.CommitActivity(ctx, store.ActivityBatch{Events: []store.ActivityEvent{event("alice", "k", at(0), 3)}, GenAI: []store.GenAIRecord{bad}})
	require.ErrorIs(t, err, store.ErrPrecondition)
	rows, err := s.ActivityAfter(ctx, "alice", "", last, 0)
	require.NoError(t, err)
	require.Empty(t, rows, "nothing of a failed batch is stored")
}

func testActivityAfter(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	last, err := s.LastActivityID(ctx)
	require.NoError(t, err)
	require.Zero(t, last)
	seeded, err := s.AppendActivity(ctx, []store.ActivityEvent{
		event("alice", "k", at(3*time.Second), 0), // out of TS order: ids decide
		event("bob", "k", at(0), 1),
		event("alice", "k", at(time.Second), 2),
		event("alice", "k", at(2*time.Second), 3),
	})
	require.NoError(t, err)
	got, err := s.ActivityAfter(ctx, "alice", "", 0, 0)
	require.NoError(t, err)
	require.Equal(t, viewEvents([]store.ActivityEvent{seeded[0], seeded[2], seeded[3]}), viewEvents(got))
	got, err = s.ActivityAfter(ctx, "alice", "", seeded[0].ID, 1)
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded[2:3]), viewEvents(got))
	last, err = s.LastActivityID(ctx)
	require.NoError(t, err)
	require.Equal(t, seeded[3].ID, last)
	// A prune that empties the store keeps the id sequence.
	_, err = s.PruneActivity(ctx, at(time.Hour))
	require.NoError(t, err)
	last, err = s.LastActivityID(ctx)
	require.NoError(t, err)
	require.Equal(t, seeded[3].ID, last)
}

func testOldestFirstAndMarkers(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	marker := func(member, kind, objective string, ts time.Time) store.ActivityEvent {
		return store.ActivityEvent{Member: member, Kind: kind, TS: ts, ObjectiveID: objective, Data: []byte(`{}`)}
	}
	seeded, err := s.AppendActivity(ctx, []store.ActivityEvent{
		marker("alice", "objective_open", "o1", at(0)),
		marker("alice", "llm_exchange", "o1", at(time.Second)),
		marker("alice", "objective_close", "o1", at(2*time.Second)),
		marker("bob", "objective_open", "o1", at(3*time.Second)),
		marker("bob", "objective_open", "o2", at(3*time.Second)),
	})
	require.NoError(t, err)
	got, err := s.ObjectiveMarkers(ctx, "o1")
	require.NoError(t, err)
	require.Equal(t, viewEvents([]store.ActivityEvent{seeded[0], seeded[2], seeded[3]}), viewEvents(got))
	asc, err := s.ListActivity(ctx, store.ActivityFilter{Member: "alice", OldestFirst: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded[0:2]), viewEvents(asc))
}

func testActivityUsage(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	exchange := func(ts time.Time, responseID string, in, out int64, cost float64) store.ActivityEvent {
		return store.ActivityEvent{Member: "alice", Kind: "llm_exchange", TS: ts, ResponseID: responseID, Data: []byte(fmt.Sprintf(
			`{"model":"m","responseId":%q,"usage":{"inputTokens":%d,"outputTokens":%d,"cacheReadTokens":1,"cacheCreationTokens":2},"costUsd":%g}`,
			responseID, in, out, cost))}
	}
	_, err := s.CommitActivity(ctx, store.ActivityBatch{
		Events: []store.ActivityEvent{
			exchange(at(0), "resp_1", 10, 20, 0.5),
			exchange(at(time.Minute), "resp_2", 30, 40, 0.25),
			{Member: "alice", Kind: "tool_action", TS: at(0), Data: []byte(`{"usage":{"inputTokens":1000}}`)},
			{Member: "bob", Kind: "llm_exchange", TS: at(0), Data: []byte(`{"usage":{"inputTokens":1000}}`)},
		},
		GenAI: []store.GenAIRecord{
			genaiRecord("g1", "alice", at(0), "resp_1", "a"), // carried by an exchange: counted once
			genaiRecord("g2", "alice", at(0), "resp_9", "b"), // on its own
		},
	})
	require.NoError(t, err)
	u := usageOf(t, s, store.UsageFilter{Member: "alice"})
	require.Equal(t, store.Usage{InputTokens: 140, OutputTokens: 70, CacheReadTokens: 7, CacheCreationTokens: 5, CostUSD: 0.75, Exchanges: 3}, u)
	u = usageOf(t, s, store.UsageFilter{Member: "alice", From: at(time.Second)})
	require.Equal(t, store.Usage{InputTokens: 30, OutputTokens: 40, CacheReadTokens: 1, CacheCreationTokens: 2, CostUSD: 0.25, Exchanges: 1}, u)
}

func testGenAI(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	recs := []store.GenAIRecord{
		genaiRecord("g2", "alice", at(time.Second), "resp_2", "same bytes"),
		genaiRecord("g1", "alice", at(0), "resp_1", "same bytes"),
		genaiRecord("g3", "alice", at(2*time.Second), "", "other bytes"),
		genaiRecord("g4", "bob", at(0), "resp_4", "bob bytes"),
	}
	_, err := s.CommitActivity(ctx, store.ActivityBatch{GenAI: recs})
	require.NoError(t, err)
	ids := func(rs []store.GenAIRecord) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	all, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "alice"})
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2", "g3"}, ids(all), "oldest first")
	require.JSONEq(t, string(recs[1].InputMessages), string(all[0].InputMessages))
	require.JSONEq(t, string(recs[1].ToolDefinitions), string(all[0].ToolDefinitions))
	require.Equal(t, recs[1].Usage, all[0].Usage)
	require.Equal(t, ms(at(0)), ms(all[0].TS))
	require.Len(t, all[0].RawSHA, 64)
	require.Equal(t, all[0].RawSHA, all[1].RawSHA, "the same bytes are stored once")
	require.Nil(t, all[0].Raw, "raw bytes are never read back")

	ranged, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "alice", From: at(time.Second), To: at(time.Second), Summary: true})
	require.NoError(t, err)
	require.Equal(t, []string{"g2"}, ids(ranged))
	require.Nil(t, ranged[0].InputMessages, "a summary leaves out the messages")
	require.Nil(t, ranged[0].OutputMessages)
	require.Nil(t, ranged[0].SystemInstructions)
	require.Nil(t, ranged[0].ToolDefinitions)
	limited, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "alice", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2"}, ids(limited))
	size := len(all[0].SystemInstructions) + len(all[0].InputMessages) + len(all[0].OutputMessages) + len(all[0].ToolDefinitions)
	budgeted, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "alice", MaxBytes: size + 1})
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2"}, ids(budgeted), "the record reaching the byte budget is the last")
	budgeted, err = s.ListGenAI(ctx, store.GenAIFilter{Member: "alice", MaxBytes: 1, Summary: true})
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2", "g3"}, ids(budgeted), "summaries carry no arrays to count")

	got, err := s.GetGenAI(ctx, "alice", "g3")
	require.NoError(t, err)
	require.Equal(t, "g3", got.ID)
	_, err = s.GetGenAI(ctx, "alice", "g4")
	require.ErrorIs(t, err, store.ErrNotFound, "another member's record is not found")
	_, err = s.GetGenAI(ctx, "alice", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	raw, err := s.GenAIRaw(ctx, "alice", "g1")
	require.NoError(t, err)
	require.Equal(t, "same bytes", string(raw))
	_, err = s.GenAIRaw(ctx, "alice", "g4")
	require.ErrorIs(t, err, store.ErrNotFound, "another member's raw upload is not found")
	_, err = s.GenAIRaw(ctx, "alice", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	by, err := s.GenAIByResponse(ctx, "alice", "", []string{"resp_2", "resp_4", "", "resp_1"})
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2"}, ids(by))
	_, err = s.CommitActivity(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{genaiRecord("g1", "alice", at(0), "", "x")}})
	require.ErrorIs(t, err, store.ErrConflict, "ids are unique")
}

func testListMaxBytes(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	var evs []store.ActivityEvent
	for i := range 5 {
		evs = append(evs, store.ActivityEvent{Member: "alice", Kind: "tool_action", TS: at(time.Duration(i) * time.Second),
			Data: fmt.Appendf(nil, `{"pad":"%s"}`, strings.Repeat("x", 90))}) // 100 bytes each
	}
	seeded, err := s.AppendActivity(ctx, evs)
	require.NoError(t, err)
	tests := []struct {
		name     string
		maxBytes int
		want     int
	}{
		{"unbounded", 0, 5},
		{"the row reaching the budget is the last", 250, 3},
		{"exactly at a row's end", 200, 2},
		{"at least one row", 1, 1},
		{"over everything", 10_000, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListActivity(ctx, store.ActivityFilter{Member: "alice", OldestFirst: true, MaxBytes: tc.maxBytes})
			require.NoError(t, err)
			require.Equal(t, viewEvents(seeded[:tc.want]), viewEvents(got))
		})
	}
}

// An inference record counts in usage unless an exchange of the range
// carries it: by response id, or by window when either has no response id.
func testActivityUsageJoins(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	exchange := func(member string, ts time.Time, model, responseID string, durationMs int) store.ActivityEvent {
		return store.ActivityEvent{Member: member, Kind: "llm_exchange", TS: ts, ResponseID: responseID, Data: fmt.Appendf(nil,
			`{"model":%q,"responseId":%q,"durationMs":%d,"usage":{"inputTokens":1000}}`, model, responseID, durationMs)}
	}
	record := func(member string, ts time.Time, model, responseID string) store.GenAIRecord {
		r := genaiRecord("g-"+member, member, ts, responseID, member)
		r.Model = model
		return r
	}
	const exchangeOnly, both = 1000, 1100 // input tokens: the exchange's, and with the record's 100
	tests := []struct {
		name     string
		ex       store.ActivityEvent
		rec      store.GenAIRecord
		from, to time.Time
		want     int64
	}{
		{"window: same model, no ids", exchange("w1", at(10*time.Second), "m", "", 0), record("w1", at(11*time.Second), "m", ""), time.Time{}, time.Time{}, exchangeOnly},
		{"window: inside the request's duration", exchange("w2", at(10*time.Second), "m", "", 5000), record("w2", at(4*time.Second), "m", ""), time.Time{}, time.Time{}, exchangeOnly},
		{"window: before the request began", exchange("w3", at(10*time.Second), "m", "", 5000), record("w3", at(2*time.Second), "m", ""), time.Time{}, time.Time{}, both},
		{"window: too long after", exchange("w4", at(10*time.Second), "m", "", 0), record("w4", at(13*time.Second), "m", ""), time.Time{}, time.Time{}, both},
		{"window: another model", exchange("w5", at(10*time.Second), "m", "", 0), record("w5", at(10*time.Second), "other", ""), time.Time{}, time.Time{}, both},
		{"window: the exchange has an id, the record none", exchange("w6", at(10*time.Second), "m", "resp_x", 0), record("w6", at(10*time.Second), "m", ""), time.Time{}, time.Time{}, exchangeOnly},
		{"window: both have ids, different", exchange("w7", at(10*time.Second), "m", "resp_x", 0), record("w7", at(10*time.Second), "m", "resp_y"), time.Time{}, time.Time{}, both},
		{"id: carried", exchange("i1", at(10*time.Second), "m", "resp_1", 0), record("i1", at(time.Hour), "other", "resp_1"), time.Time{}, time.Time{}, exchangeOnly},
		{"id: the exchange is outside the range", exchange("i2", at(10*time.Second), "m", "resp_1", 0), record("i2", at(time.Hour), "m", "resp_1"), at(time.Minute), time.Time{}, 100},
		{"window: the exchange is outside the range", exchange("w8", at(10*time.Second), "m", "", 0), record("w8", at(11*time.Second), "m", ""), at(10500 * time.Millisecond), time.Time{}, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CommitActivity(ctx, store.ActivityBatch{Events: []store.ActivityEvent{tc.ex}, GenAI: []store.GenAIRecord{tc.rec}})
			require.NoError(t, err)
			u := usageOf(t, s, store.UsageFilter{Member: tc.ex.Member, From: tc.from, To: tc.to})
			require.Equal(t, tc.want, u.InputTokens)
		})
	}
}

// sessionTools are the tools every call of a session offers.
func sessionTools() []byte {
	tools := make([]any, 12)
	for i := range tools {
		tools[i] = map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": strings.Repeat("does a thing; ", 40),
			"input_schema": map[string]any{"type": "object"}}
	}
	b, _ := json.Marshal(tools)
	return b
}

// sessionCall is call n of a model session as an agent makes it: the same
// tools and system prompt each time, the messages so far plus two more.
func sessionCall(n int) (raw, input []byte) {
	var tools []any
	_ = json.Unmarshal(sessionTools(), &tools)
	var msgs, parsed []any
	for i := range 2 * n {
		text := fmt.Sprintf("turn %d: %s", i, strings.Repeat("words ", 60+i))
		msgs = append(msgs, map[string]any{"role": []string{"user", "assistant"}[i%2], "content": text})
		parsed = append(parsed, map[string]any{"role": []string{"user", "assistant"}[i%2], "parts": []any{map[string]any{"type": "text", "content": text}}})
	}
	req := map[string]any{"model": "m", "system": strings.Repeat("You are an agent. ", 50), "tools": tools, "messages": msgs}
	raw, _ = json.Marshal(map[string]any{"ts": n, "request": req, "response": map[string]any{"type": "message", "content": []any{}}})
	input, _ = json.Marshal(parsed)
	return raw, input
}

// A session's records, which repeat most of each other, read back exactly
// as written, alone, in lists, by response and after the older ones are
// pruned.
func testGenAISession(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	var want []store.GenAIRecord
	for n := 1; n <= 6; n++ {
		raw, input := sessionCall(n)
		r := genaiRecord(fmt.Sprintf("s%d", n), "alice", at(time.Duration(n)*time.Second), fmt.Sprintf("resp_s%d", n), "")
		r.Raw, r.InputMessages, r.ToolDefinitions = raw, input, sessionTools()
		r.SystemInstructions = []byte(`[{"type":"text","content":"` + strings.Repeat("You are an agent. ", 50) + `"}]`)
		_, err := s.CommitActivity(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{r}})
		require.NoError(t, err)
		want = append(want, r)
	}
	same := func(w, got store.GenAIRecord) {
		t.Helper()
		require.Equal(t, string(w.SystemInstructions), string(got.SystemInstructions))
		require.Equal(t, string(w.InputMessages), string(got.InputMessages), "byte for byte")
		require.Equal(t, string(w.OutputMessages), string(got.OutputMessages))
		require.Equal(t, string(w.ToolDefinitions), string(got.ToolDefinitions), "byte for byte")
		raw, err := s.GenAIRaw(ctx, "alice", w.ID)
		require.NoError(t, err)
		require.Equal(t, string(w.Raw), string(raw))
	}
	list, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "alice"})
	require.NoError(t, err)
	require.Len(t, list, len(want))
	for i := range want {
		same(want[i], list[i])
		got, err := s.GetGenAI(ctx, "alice", want[i].ID)
		require.NoError(t, err)
		same(want[i], got)
	}
	by, err := s.GenAIByResponse(ctx, "alice", "", []string{"resp_s2", "resp_s5"})
	require.NoError(t, err)
	require.Len(t, by, 2)
	same(want[1], by[0])
	same(want[4], by[1])

	n, err := s.PruneActivity(ctx, at(4*time.Second))
	require.NoError(t, err)
	require.Equal(t, int64(3), n.GenAI)
	require.Equal(t, int64(3), n.Raw, "the pruned records' raw uploads")
	require.Positive(t, n.Parts, "what only the pruned records held is deleted")
	list, err = s.ListGenAI(ctx, store.GenAIFilter{Member: "alice"})
	require.NoError(t, err)
	require.Len(t, list, 3)
	for i, got := range list {
		same(want[3+i], got)
	}
	n, err = s.PruneActivity(ctx, at(4*time.Second))
	require.NoError(t, err)
	require.Zero(t, n, "nothing the remaining records need goes")
}

// Raw uploads of any bytes come back as they were: JSON with white space
// anywhere, JSON that is not valid, no JSON at all, nothing.
func testGenAIRawBytes(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	big := strings.Repeat("x", 600)
	raws := []string{
		"",
		"not json at all " + big,
		"\x00\xff binary " + big,
		`{ "a" : [ "` + big + `" ,  {"b":"` + big + `"}  ] , "c":"` + big + `" }` + "\n",
		`{"a":["` + big + `",}`,
		`["` + big + `", "` + big + `"]  trailing`,
		`{"k\"ey":"` + big + `\"\\","n":[1,2,3,"` + big + `"]}`,
	}
	for i, raw := range raws {
		r := genaiRecord(fmt.Sprintf("r%d", i), "alice", at(0), "", raw)
		r.InputMessages = []byte(`[ {"role":"user","parts":[]} , "` + big + `" ]`)
		_, err := s.CommitActivity(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{r}})
		require.NoError(t, err)
		got, err := s.GenAIRaw(ctx, "alice", r.ID)
		require.NoError(t, err)
		require.Equal(t, raw, string(got), "raw %d", i)
		rec, err := s.GetGenAI(ctx, "alice", r.ID)
		require.NoError(t, err)
		require.Equal(t, string(r.InputMessages), string(rec.InputMessages))
	}
}

// usageOf sums the groups ActivityUsage returns for f.
func usageOf(t *testing.T, s store.ActivityStore, f store.UsageFilter) store.Usage {
	t.Helper()
	gs, err := s.ActivityUsage(t.Context(), f)
	require.NoError(t, err)
	var u store.Usage
	for _, g := range gs {
		u = u.Add(g.Usage)
	}
	return u
}

// Usage is grouped by member id, model and prompt bucket; what carried a
// cost is told apart from what did not; counts that are not numbers, or
// are negative, count as 0.
func testActivityUsageGroups(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	ex := func(uid, data string) store.ActivityEvent {
		return store.ActivityEvent{Member: "alice", MemberUID: uid, Kind: "llm_exchange", TS: at(0), Data: []byte(data)}
	}
	rec := genaiRecord("g1", "alice", at(time.Hour), "resp_g", "g")
	rec.MemberUID, rec.Model = "u1", "m2"
	_, err := s.CommitActivity(ctx, store.ActivityBatch{Events: []store.ActivityEvent{
		ex("u1", `{"model":"m1","usage":{"inputTokens":10,"outputTokens":1},"costUsd":0.5}`),
		ex("u1", `{"model":"m1","usage":{"inputTokens":20,"outputTokens":2}}`),
		ex("u1", `{"model":"m1","usage":{"inputTokens":300,"cacheReadTokens":100}}`), // above 250
		ex("u1", `{"model":"m1","usage":{"inputTokens":-5,"outputTokens":"x"},"costUsd":"free"}`),
		ex("u1", `{"model":"m1"}`), // no tokens: nothing to price
		ex("u1", `{"model":{"not":"a string"},"usage":{"inputTokens":7}}`), // no model
		ex("u2", `{"model":"m1","usage":{"inputTokens":40,"outputTokens":4},"costUsd":0}`),
		{Member: "bob", MemberUID: "u3", Kind: "llm_exchange", TS: at(0), Data: []byte(`{"model":"m1","usage":{"inputTokens":1}}`)},
	}, GenAI: []store.GenAIRecord{rec}})
	require.NoError(t, err)

	type key struct {
		uid, model string
		bucket     int
	}
	collect := func(f store.UsageFilter) map[key]store.UsageGroup {
		gs, err := s.ActivityUsage(ctx, f)
		require.NoError(t, err)
		out := map[key]store.UsageGroup{}
		for _, g := range gs {
			k := key{g.MemberUID, g.Model, g.Bucket}
			_, dup := out[k]
			require.False(t, dup, "one group per member, model and bucket: %+v", k)
			out[k] = g
		}
		return out
	}
	got := collect(store.UsageFilter{Member: "alice", Thresholds: []int64{250, 1000}})
	require.Len(t, got, 5)
	require.Equal(t, store.UsageGroup{MemberUID: "u1", Model: "m1", Bucket: 0,
		Usage:           store.Usage{InputTokens: 30, OutputTokens: 3, CostUSD: 0.5, Exchanges: 4},
		NoCost:          store.UsageTokens{InputTokens: 20, OutputTokens: 2},
		NoCostExchanges: 1,
	}, got[key{"u1", "m1", 0}])
	require.Equal(t, store.UsageGroup{MemberUID: "u1", Model: "m1", Bucket: 1,
		Usage:           store.Usage{InputTokens: 300, CacheReadTokens: 100, Exchanges: 1},
		NoCost:          store.UsageTokens{InputTokens: 300, CacheReadTokens: 100},
		NoCostExchanges: 1,
	}, got[key{"u1", "m1", 1}])
	require.Equal(t, int64(7), got[key{"u1", "", 0}].NoCost.InputTokens)
	require.Equal(t, store.UsageGroup{MemberUID: "u2", Model: "m1",
		Usage: store.Usage{InputTokens: 40, OutputTokens: 4, Exchanges: 1},
	}, got[key{"u2", "m1", 0}], "a cost of 0 is a cost")
	g := got[key{"u1", "m2", 0}]
	require.Equal(t, int64(1), g.Exchanges, "an inference record no exchange carries counts")
	require.Equal(t, int64(1), g.NoCostExchanges)
	require.Equal(t, int64(100), g.NoCost.InputTokens)

	// Without thresholds every group is bucket 0; a member id keeps its
	// rows only.
	got = collect(store.UsageFilter{Member: "alice", MemberUID: "u2"})
	require.Len(t, got, 1)
	require.Equal(t, int64(40), got[key{"u2", "m1", 0}].InputTokens)
	got = collect(store.UsageFilter{Member: "alice"})
	require.Equal(t, int64(330), got[key{"u1", "m1", 0}].InputTokens)
}

// Rows and records carry the id of the member of their name; filters by
// it keep that member's only, and an exchange of one member never carries
// another's record.
func testMemberUIDs(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	old := store.ActivityEvent{Member: "bob", MemberUID: "old", Kind: "llm_exchange", TS: at(0), ResponseID: "resp_1",
		Data: []byte(`{"model":"m","responseId":"resp_1","usage":{"inputTokens":10}}`)}
	cur := old
	cur.MemberUID, cur.TS = "new", at(time.Second)
	oldRec := genaiRecord("g-old", "bob", at(0), "resp_1", "o")
	oldRec.MemberUID = "old"
	newRec := genaiRecord("g-new", "bob", at(time.Second), "resp_1", "n")
	newRec.MemberUID = "new"
	seeded, err := s.CommitActivity(ctx, store.ActivityBatch{Events: []store.ActivityEvent{old, cur}, GenAI: []store.GenAIRecord{oldRec, newRec}})
	require.NoError(t, err)
	require.Equal(t, "old", seeded[0].MemberUID)

	all, err := s.ListActivity(ctx, store.ActivityFilter{Member: "bob", OldestFirst: true})
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded), viewEvents(all))
	mine, err := s.ListActivity(ctx, store.ActivityFilter{Member: "bob", MemberUID: "new"})
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded[1:]), viewEvents(mine))
	after, err := s.ActivityAfter(ctx, "bob", "new", 0, 0)
	require.NoError(t, err)
	require.Equal(t, viewEvents(seeded[1:]), viewEvents(after))
	markers, err := s.ActivityAfter(ctx, "bob", "", 0, 0)
	require.NoError(t, err)
	require.Len(t, markers, 2)

	recs, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "bob", MemberUID: "new"})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "g-new", recs[0].ID)
	require.Equal(t, "new", recs[0].MemberUID)
	got, err := s.GetGenAI(ctx, "bob", "g-old")
	require.NoError(t, err)
	require.Equal(t, "old", got.MemberUID)
	by, err := s.GenAIByResponse(ctx, "bob", "old", []string{"resp_1"})
	require.NoError(t, err)
	require.Len(t, by, 1)
	require.Equal(t, "g-old", by[0].ID)

	// Each exchange carries its own member's record: neither record counts
	// again.
	u := usageOf(t, s, store.UsageFilter{Member: "bob"})
	require.Equal(t, int64(20), u.InputTokens)
	require.Equal(t, int64(2), u.Exchanges)
	u = usageOf(t, s, store.UsageFilter{Member: "bob", MemberUID: "old"})
	require.Equal(t, int64(10), u.InputTokens)

	// A record whose member's exchange is another member's stands alone.
	lone := genaiRecord("g-lone", "bob", at(2*time.Second), "resp_2", "l")
	lone.MemberUID = "old"
	_, err = s.CommitActivity(ctx, store.ActivityBatch{
		Events: []store.ActivityEvent{{Member: "bob", MemberUID: "new", Kind: "llm_exchange", TS: at(2 * time.Second), ResponseID: "resp_2",
			Data: []byte(`{"model":"m","responseId":"resp_2"}`)}},
		GenAI: []store.GenAIRecord{lone},
	})
	require.NoError(t, err)
	u = usageOf(t, s, store.UsageFilter{Member: "bob", MemberUID: "old"})
	require.Equal(t, int64(110), u.InputTokens)
}

// Rows without a member id are given one: their name's current member's,
// or the orphan id for a name no member has now.
func testAdoptMemberRows(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	_, err := s.CommitActivity(ctx, store.ActivityBatch{
		Events: []store.ActivityEvent{
			event("alice", "k", at(0), 1),
			event("gone.member", "k", at(0), 2),
			{Member: "alice", MemberUID: "kept", Kind: "k", TS: at(0), Data: []byte(`{}`)},
		},
		GenAI: []store.GenAIRecord{genaiRecord("g1", "alice", at(0), "", "a"), genaiRecord("g2", "gone.member", at(0), "", "b")},
	})
	require.NoError(t, err)
	_, err = s.AdoptMemberRows(ctx, map[string]string{"alice": "a1"}, "")
	require.ErrorIs(t, err, store.ErrPrecondition)
	n, err := s.AdoptMemberRows(ctx, map[string]string{"alice": "a1", "carol": "c1"}, "orphan")
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	rows, err := s.ActivityAfter(ctx, "alice", "", 0, 0)
	require.NoError(t, err)
	require.Equal(t, "a1", rows[0].MemberUID)
	require.Equal(t, "kept", rows[1].MemberUID)
	gone, err := s.ListActivity(ctx, store.ActivityFilter{Member: "gone.member"})
	require.NoError(t, err)
	require.Equal(t, "orphan", gone[0].MemberUID)
	recs, err := s.ListGenAI(ctx, store.GenAIFilter{Member: "gone.member", MemberUID: "orphan"})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	recs, err = s.ListGenAI(ctx, store.GenAIFilter{Member: "alice", MemberUID: "a1"})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	n, err = s.AdoptMemberRows(ctx, map[string]string{"alice": "other"}, "orphan")
	require.NoError(t, err)
	require.Zero(t, n, "rows with an id keep it")
}
