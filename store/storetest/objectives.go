package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// objectiveTests are the subtests of ObjectiveStore; RunAll runs them. Each
// scenario runs twice, on the store and inside WithTx, because services call
// these methods both ways.
var objectiveTests = objectiveSuite()

func objectiveSuite() []suiteTest {
	scenarios := []struct {
		name string
		run  func(t *testing.T, s store.ObjectiveStore)
	}{
		{"CreateGet", testObjectiveCreateGet},
		{"CreateConflict", testObjectiveCreateConflict},
		{"NotFound", testObjectiveNotFound},
		{"Update", testObjectiveUpdate},
		{"CompletedIffDone", testObjectiveCompletedIffDone},
		{"List", testObjectiveList},
		{"Events", testObjectiveEvents},
		{"AdoptMembers", testObjectiveAdoptMembers},
	}
	var out []suiteTest
	for _, sc := range scenarios {
		out = append(out,
			suiteTest{"Objective" + sc.name, func(t *testing.T, s store.Store) { sc.run(t, s) }},
			suiteTest{"Objective" + sc.name + "InTx", func(t *testing.T, s store.Store) {
				require.NoError(t, s.WithTx(t.Context(), func(tx store.Tx) error {
					sc.run(t, tx)
					return nil
				}))
			}},
		)
	}
	return append(out,
		suiteTest{"ObjectiveEventsAtomic", testObjectiveEventsAtomic},
		suiteTest{"ObjectiveSavepoint", testObjectiveSavepoint},
	)
}

func ptr(s string) *string { return &s }

// objective is an active objective with every optional field set, created
// at at(d).
func objective(id string, d time.Duration) store.Objective {
	return store.Objective{
		ID:           id,
		Title:        "Title of " + id,
		Outcome:      "Outcome of " + id + ".",
		Body:         "Body of " + id + ".",
		Status:       store.StatusActive,
		Assignee:     "alice",
		Originator:   "olga",
		AssigneeID:   "alice-1",
		OriginatorID: "olga-1",
		Watchers:     []string{"bob", "carol"},
		Attachments: []store.Attachment{
			{Path: "/olga/" + id + ".txt", Name: id + ".txt", Size: 5, MimeType: "text/plain", EntryID: 7},
			{Path: "/olga/d/ü b.png", Name: "ü b.png", Size: 1 << 40, MimeType: "image/png", EntryID: 1<<53 + 1}, // beyond float64 precision
		},
		CreatedAt: at(d),
		UpdatedAt: at(d + time.Second),
	}
}

// objectiveView is an Objective with comparable times; nil and empty
// watchers and attachments compare equal.
type objectiveView struct {
	ID, Title, Outcome, Body, Status, Assignee, Originator string
	AssigneeID, OriginatorID                               string
	Watchers                                               []string
	Attachments                                            []store.Attachment
	CreatedAt, UpdatedAt, CompletedAt                      int64
	Result, BlockReason                                    *string
}

func viewObjective(o store.Objective) objectiveView {
	v := objectiveView{
		ID: o.ID, Title: o.Title, Outcome: o.Outcome, Body: o.Body, Status: o.Status,
		Assignee: o.Assignee, Originator: o.Originator, AssigneeID: o.AssigneeID, OriginatorID: o.OriginatorID,
		Watchers: o.Watchers, Attachments: o.Attachments,
		CreatedAt: ms(o.CreatedAt), UpdatedAt: ms(o.UpdatedAt), CompletedAt: ms(o.CompletedAt),
		Result: o.Result, BlockReason: o.BlockReason,
	}
	if v.Watchers == nil {
		v.Watchers = []string{}
	}
	if v.Attachments == nil {
		v.Attachments = []store.Attachment{}
	}
	return v
}

func objectiveIDs(os []store.Objective) []string {
	out := make([]string, 0, len(os))
	for _, o := range os {
		out = append(out, o.ID)
	}
	return out
}

func mustCreateObjectives(t *testing.T, s store.ObjectiveStore, os ...store.Objective) {
	t.Helper()
	for _, o := range os {
		require.NoError(t, s.CreateObjective(t.Context(), o), o.ID)
	}
}

// requireObjective checks that the stored objective equals want.
func requireObjective(t *testing.T, s store.ObjectiveStore, want store.Objective) {
	t.Helper()
	got, err := s.GetObjective(t.Context(), want.ID)
	require.NoError(t, err)
	require.Equal(t, viewObjective(want), viewObjective(got))
}

// objectiveEventView is an ObjectiveEvent with a comparable time and nil
// payload told apart from an empty one.
type objectiveEventView struct {
	ID                       int64
	ObjectiveID, Kind, Actor string
	CreatedAt                int64
	Payload                  string
	NilPayload               bool
}

func viewObjectiveEvents(evs []store.ObjectiveEvent) []objectiveEventView {
	out := make([]objectiveEventView, 0, len(evs))
	for _, e := range evs {
		out = append(out, objectiveEventView{
			ID: e.ID, ObjectiveID: e.ObjectiveID, Kind: e.Kind, Actor: e.Actor,
			CreatedAt: ms(e.CreatedAt), Payload: string(e.Payload), NilPayload: e.Payload == nil,
		})
	}
	return out
}

func testObjectiveCreateGet(t *testing.T, s store.ObjectiveStore) {
	minimal := store.Objective{
		ID: "minimal", Title: "t", Outcome: "o", Status: store.StatusActive,
		Assignee: "alice", Originator: "alice", CreatedAt: at(0), UpdatedAt: at(0),
	}
	done := objective("done", time.Minute)
	done.Status, done.CompletedAt, done.Result = store.StatusDone, at(time.Hour), ptr("Shipped.")
	blocked := objective("blocked", time.Minute)
	blocked.Status, blocked.BlockReason = store.StatusBlocked, ptr("Waiting on bob.")
	emptyResult := objective("empty result", time.Minute)
	emptyResult.Status, emptyResult.CompletedAt = store.StatusDone, at(time.Hour)
	emptyResult.Result, emptyResult.BlockReason = ptr(""), ptr("")
	cancelled := objective("cancelled", time.Minute)
	cancelled.Status = store.StatusCancelled
	unicode := objective("ü\"'\\ 日本", time.Minute)
	unicode.Title, unicode.Body, unicode.Watchers = "line\nbreak", "%_*", []string{"dörte", ""}

	tests := []struct {
		name string
		o    store.Objective
	}{
		{"every field", objective("full", time.Minute)},
		{"nil watchers, attachments, result and block reason", minimal},
		{"empty watchers and attachments", func() store.Objective {
			o := objective("empty", time.Minute)
			o.Watchers, o.Attachments = []string{}, []store.Attachment{}
			return o
		}()},
		{"done with completion time and result", done},
		{"blocked with reason", blocked},
		{"empty result and reason are not nil", emptyResult},
		{"cancelled", cancelled},
		{"unicode", unicode},
	}
	for _, tc := range tests {
		mustCreateObjectives(t, s, tc.o)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.GetObjective(t.Context(), tc.o.ID)
			require.NoError(t, err)
			require.Equal(t, viewObjective(tc.o), viewObjective(got))
			// Views compare pointees; nil must stay nil and set stay set.
			require.Equal(t, tc.o.Result == nil, got.Result == nil, "result")
			require.Equal(t, tc.o.BlockReason == nil, got.BlockReason == nil, "block reason")
			require.Equal(t, tc.o.CompletedAt.IsZero(), got.CompletedAt.IsZero(), "completed at")
		})
	}
}

func testObjectiveCreateConflict(t *testing.T, s store.ObjectiveStore) {
	orig := objective("o1", 0)
	mustCreateObjectives(t, s, orig)
	dup := objective("o1", time.Hour)
	dup.Title, dup.Assignee, dup.Watchers = "Other", "bob", nil
	require.ErrorIs(t, s.CreateObjective(t.Context(), dup), store.ErrConflict)
	requireObjective(t, s, orig)
	all, err := s.ListObjectives(t.Context(), store.ObjectiveFilter{})
	require.NoError(t, err)
	require.Equal(t, []string{"o1"}, objectiveIDs(all))
}

func testObjectiveNotFound(t *testing.T, s store.ObjectiveStore) {
	mustCreateObjectives(t, s, objective("o1", 0))
	tests := []struct {
		name string
		call func() error
	}{
		{"get", func() error {
			_, err := s.GetObjective(t.Context(), "nope")
			return err
		}},
		{"get empty id", func() error {
			_, err := s.GetObjective(t.Context(), "")
			return err
		}},
		{"update", func() error { return s.UpdateObjective(t.Context(), objective("nope", 0)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), store.ErrNotFound)
		})
	}
	// The failed update created nothing.
	_, err := s.GetObjective(t.Context(), "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	requireObjective(t, s, objective("o1", 0))
}

func testObjectiveUpdate(t *testing.T, s store.ObjectiveStore) {
	ctx := t.Context()
	orig, other := objective("o1", 0), objective("o2", time.Minute)
	mustCreateObjectives(t, s, orig, other)

	// Every mutable field changes; ID, originator and creation time stay.
	done := store.Objective{
		ID: "o1", Title: "New title", Outcome: "New outcome.", Body: "New body.",
		Status: store.StatusDone, Assignee: "bob", Originator: "mallory", AssigneeID: "bob-1", OriginatorID: "mallory-1",
		Watchers:    []string{"dave"},
		Attachments: []store.Attachment{{Path: "/bob/r.md", Name: "r.md", Size: 9, MimeType: "text/markdown", EntryID: 42}},
		CreatedAt:   at(time.Hour), UpdatedAt: at(2 * time.Hour), CompletedAt: at(2 * time.Hour),
		Result: ptr("Done."), BlockReason: ptr("Was blocked."),
	}
	// And back: set fields become nil, zero or empty.
	blocked := store.Objective{
		ID: "o1", Title: "t", Outcome: "o", Status: store.StatusBlocked, Assignee: "carol",
		UpdatedAt: at(3 * time.Hour), BlockReason: ptr("Waiting."),
	}
	steps := []struct {
		name string
		o    store.Objective
	}{
		{"every mutable field set", done},
		{"every mutable field cleared", blocked},
	}
	for _, step := range steps {
		require.NoError(t, s.UpdateObjective(ctx, step.o), step.name)
		want := step.o
		want.Originator, want.OriginatorID, want.CreatedAt = orig.Originator, orig.OriginatorID, orig.CreatedAt
		requireObjective(t, s, want)
	}
	requireObjective(t, s, other)
}

func testObjectiveCompletedIffDone(t *testing.T, s store.ObjectiveStore) {
	ctx := t.Context()
	orig := objective("o1", 0)
	mustCreateObjectives(t, s, orig)

	doneNoTime := objective("o1", 0)
	doneNoTime.Status, doneNoTime.Title, doneNoTime.Result = store.StatusDone, "Changed", ptr("r")
	activeWithTime := objective("o1", 0)
	activeWithTime.Title, activeWithTime.CompletedAt = "Changed", at(time.Hour)
	tests := []struct {
		name string
		o    store.Objective
	}{
		{"done without completion time", doneNoTime},
		{"active with completion time", activeWithTime},
		{"blocked with completion time", func() store.Objective {
			o := activeWithTime
			o.Status = store.StatusBlocked
			return o
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, s.UpdateObjective(t.Context(), tc.o))
			requireObjective(t, s, orig)

			created := tc.o
			created.ID = "new"
			require.Error(t, s.CreateObjective(t.Context(), created))
			_, err := s.GetObjective(t.Context(), "new")
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}

	// The failures left the store (or transaction) usable.
	done := doneNoTime
	done.CompletedAt = at(time.Hour)
	require.NoError(t, s.UpdateObjective(ctx, done))
	requireObjective(t, s, done)
}

func testObjectiveList(t *testing.T, s store.ObjectiveStore) {
	ctx := t.Context()
	obj := func(id, assignee, status string, d time.Duration) store.Objective {
		o := objective(id, d)
		o.Assignee, o.Status = assignee, status
		if status == store.StatusDone {
			o.CompletedAt = at(d + time.Hour)
		}
		return o
	}
	// Inserted out of time order; t2, t1 and t3 share a creation time, so
	// insertion order breaks the tie (neither id order nor its reverse).
	a1 := obj("a1", "alice", store.StatusActive, time.Minute)
	b1 := obj("b1", "bob", store.StatusBlocked, 2*time.Minute)
	a2 := obj("a2", "alice", store.StatusDone, 3*time.Minute)
	t2 := obj("t2", "alice", store.StatusActive, 4*time.Minute)
	t1 := obj("t1", "bob", store.StatusCancelled, 4*time.Minute)
	t3 := obj("t3", "alice", store.StatusBlocked, 4*time.Minute)
	mustCreateObjectives(t, s, b1, a2, t2, a1, t1, t3)

	tests := []struct {
		name string
		f    store.ObjectiveFilter
		want []string
	}{
		{"none", store.ObjectiveFilter{}, []string{"t3", "t1", "t2", "a2", "b1", "a1"}},
		{"empty statuses", store.ObjectiveFilter{Statuses: []string{}}, []string{"t3", "t1", "t2", "a2", "b1", "a1"}},
		{"assignee", store.ObjectiveFilter{Assignee: "alice"}, []string{"t3", "t2", "a2", "a1"}},
		{"one status", store.ObjectiveFilter{Statuses: []string{store.StatusActive}}, []string{"t2", "a1"}},
		{"statuses", store.ObjectiveFilter{Statuses: []string{store.StatusBlocked, store.StatusDone}}, []string{"t3", "a2", "b1"}},
		{"both", store.ObjectiveFilter{Assignee: "alice", Statuses: []string{store.StatusActive, store.StatusBlocked}}, []string{"t3", "t2", "a1"}},
		{"both, no match", store.ObjectiveFilter{Assignee: "bob", Statuses: []string{store.StatusDone}}, []string{}},
		{"unknown assignee", store.ObjectiveFilter{Assignee: "nobody"}, []string{}},
		{"unknown status", store.ObjectiveFilter{Statuses: []string{"nope"}}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListObjectives(t.Context(), tc.f)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, tc.want, objectiveIDs(got))
		})
	}

	all, err := s.ListObjectives(ctx, store.ObjectiveFilter{})
	require.NoError(t, err)
	require.Equal(t, viewObjective(t3), viewObjective(all[0]))
	require.Equal(t, viewObjective(a2), viewObjective(all[3]))

	// An update moves an objective between filters but not in the order,
	// which is by creation.
	a1.Status, a1.UpdatedAt = store.StatusBlocked, at(time.Hour)
	require.NoError(t, s.UpdateObjective(ctx, a1))
	got, err := s.ListObjectives(ctx, store.ObjectiveFilter{Statuses: []string{store.StatusBlocked}})
	require.NoError(t, err)
	require.Equal(t, []string{"t3", "b1", "a1"}, objectiveIDs(got))
	got, err = s.ListObjectives(ctx, store.ObjectiveFilter{Statuses: []string{store.StatusActive}})
	require.NoError(t, err)
	require.Equal(t, []string{"t2"}, objectiveIDs(got))
}

func testObjectiveEvents(t *testing.T, s store.ObjectiveStore) {
	ctx := t.Context()
	mustCreateObjectives(t, s, objective("o1", 0), objective("o2", 0), objective("quiet", 0))

	first := []store.ObjectiveEvent{
		{ObjectiveID: "o1", Kind: "assigned", Actor: "olga", CreatedAt: at(time.Minute)},
		{ObjectiveID: "o1", Kind: "note", Actor: "bob", CreatedAt: at(2 * time.Minute), Payload: []byte(`{"text":"hi ü"}`)},
	}
	// Times need not increase: the log is ordered by id.
	second := []store.ObjectiveEvent{
		{ObjectiveID: "o2", Kind: "assigned", Actor: "olga", CreatedAt: at(time.Hour)},
		{ObjectiveID: "o1", Kind: "done", Actor: "alice", CreatedAt: at(30 * time.Second), Payload: []byte(`{}`)},
	}
	var appended []store.ObjectiveEvent
	for _, batch := range [][]store.ObjectiveEvent{first, second} {
		got, err := s.AppendObjectiveEvents(ctx, batch)
		require.NoError(t, err)
		require.Len(t, got, len(batch))
		for i := range batch {
			want := batch[i]
			want.ID = got[i].ID
			require.Equal(t, viewObjectiveEvents([]store.ObjectiveEvent{want}), viewObjectiveEvents(got[i:i+1]))
		}
		appended = append(appended, got...)
	}
	for i := 1; i < len(appended); i++ {
		require.Greater(t, appended[i].ID, appended[i-1].ID, "ids increase in append order")
	}
	require.Nil(t, appended[0].Payload)
	require.NotNil(t, appended[3].Payload)

	tests := []struct {
		name      string
		objective string
		want      []store.ObjectiveEvent
	}{
		{"oldest first across appends", "o1", []store.ObjectiveEvent{appended[0], appended[1], appended[3]}},
		{"only the objective's", "o2", []store.ObjectiveEvent{appended[2]}},
		{"none yet", "quiet", nil},
		{"unknown objective", "nope", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListObjectiveEvents(t.Context(), tc.objective)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, viewObjectiveEvents(tc.want), viewObjectiveEvents(got))
		})
	}

	got, err := s.AppendObjectiveEvents(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = s.AppendObjectiveEvents(ctx, []store.ObjectiveEvent{{ObjectiveID: "nope", Kind: "k", Actor: "a", CreatedAt: at(0)}})
	require.ErrorIs(t, err, store.ErrPrecondition)
	list, err := s.ListObjectiveEvents(ctx, "nope")
	require.NoError(t, err)
	require.Empty(t, list)
}

// testObjectiveEventsAtomic: outside a transaction a batch with an event of
// an unknown objective writes none of the batch.
func testObjectiveEventsAtomic(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateObjectives(t, s, objective("o1", 0))
	_, err := s.AppendObjectiveEvents(ctx, []store.ObjectiveEvent{
		{ObjectiveID: "o1", Kind: "k", Actor: "a", CreatedAt: at(0)},
		{ObjectiveID: "nope", Kind: "k", Actor: "a", CreatedAt: at(0)},
	})
	require.ErrorIs(t, err, store.ErrPrecondition)
	list, err := s.ListObjectiveEvents(ctx, "o1")
	require.NoError(t, err)
	require.Empty(t, list)
}

// testObjectiveSavepoint: a savepoint whose fn fails rolls back its own
// writes, nested savepoints included, and the transaction goes on.
func testObjectiveSavepoint(t *testing.T, s store.Store) {
	ctx := t.Context()
	kept := objective("kept", 0)
	mustCreateObjectives(t, s, kept)
	ev := store.ObjectiveEvent{ObjectiveID: "kept", Kind: "note", Actor: "bob", CreatedAt: at(time.Minute)}

	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		mustCreateObjectives(t, tx, objective("before", time.Minute))

		err := tx.Savepoint(ctx, func() error {
			mustCreateObjectives(t, tx, objective("failed", time.Minute))
			changed := kept
			changed.Title = "Changed."
			require.NoError(t, tx.UpdateObjective(ctx, changed))
			_, err := tx.AppendObjectiveEvents(ctx, []store.ObjectiveEvent{ev})
			require.NoError(t, err)
			return errAbort
		})
		require.ErrorIs(t, err, errAbort)
		// Rolled back inside the transaction already.
		requireObjective(t, tx, kept)
		evs, err := tx.ListObjectiveEvents(ctx, "kept")
		require.NoError(t, err)
		require.Empty(t, evs)

		// A store error keeps its sentinel.
		err = tx.Savepoint(ctx, func() error { return tx.CreateObjective(ctx, objective("before", 0)) })
		require.ErrorIs(t, err, store.ErrConflict)

		// An inner failure spares the outer savepoint's writes.
		require.NoError(t, tx.Savepoint(ctx, func() error {
			mustCreateObjectives(t, tx, objective("outer", time.Minute))
			require.ErrorIs(t, tx.Savepoint(ctx, func() error {
				mustCreateObjectives(t, tx, objective("inner failed", time.Minute))
				return errAbort
			}), errAbort)
			return nil
		}))
		// An outer failure takes the inner savepoint's released writes.
		require.ErrorIs(t, tx.Savepoint(ctx, func() error {
			mustCreateObjectives(t, tx, objective("outer failed", time.Minute))
			require.NoError(t, tx.Savepoint(ctx, func() error {
				mustCreateObjectives(t, tx, objective("inner released", time.Minute))
				return nil
			}))
			return errAbort
		}), errAbort)

		_, err = tx.AppendObjectiveEvents(ctx, []store.ObjectiveEvent{ev})
		return err
	}))

	requireObjective(t, s, kept)
	evs, err := s.ListObjectiveEvents(ctx, "kept")
	require.NoError(t, err)
	require.Len(t, evs, 1)
	all, err := s.ListObjectives(ctx, store.ObjectiveFilter{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"kept", "before", "outer"}, objectiveIDs(all))
}

// Objectives without member ids get them: their names' current members',
// or the orphan id for names no member has now; ids set stay.
func testObjectiveAdoptMembers(t *testing.T, s store.ObjectiveStore) {
	ctx := t.Context()
	legacy := objective("o1", 0)
	legacy.AssigneeID, legacy.OriginatorID = "", ""
	half := objective("o2", time.Minute)
	half.AssigneeID = ""
	mustCreateObjectives(t, s, legacy, half, objective("o3", 2*time.Minute))
	_, err := s.AdoptObjectiveMembers(ctx, map[string]string{"alice": "a"}, "")
	require.ErrorIs(t, err, store.ErrPrecondition)
	n, err := s.AdoptObjectiveMembers(ctx, map[string]string{"alice": "a", "x": "y"}, "gone")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	for id, want := range map[string][2]string{"o1": {"a", "gone"}, "o2": {"a", "olga-1"}, "o3": {"alice-1", "olga-1"}} {
		o, err := s.GetObjective(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, [2]string{o.AssigneeID, o.OriginatorID}, id)
	}
	n, err = s.AdoptObjectiveMembers(ctx, map[string]string{"alice": "b"}, "gone")
	require.NoError(t, err)
	require.Zero(t, n)
}
