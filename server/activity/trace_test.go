package activity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

func TestHoldings(t *testing.T) {
	t0 := time.UnixMilli(1_000_000)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	now := at(1000)
	mark := func(id int64, member, kind string, s int) store.ActivityEvent {
		return store.ActivityEvent{ID: id, Member: member, Kind: kind, TS: at(s)}
	}
	markOf := func(id int64, member, memberID, kind string, s int) store.ActivityEvent {
		e := mark(id, member, kind, s)
		e.MemberUID = memberID
		return e
	}
	hold := func(member string, from, to time.Time) holding { return holding{member: member, from: from, to: to} }
	holdOf := func(member, id string, from, to time.Time) holding {
		return holding{member: member, id: id, from: from, to: to}
	}
	live := store.Objective{Assignee: "ann", Status: store.StatusActive, CreatedAt: at(0), UpdatedAt: at(5)}
	done := store.Objective{Assignee: "ann", Status: store.StatusDone, CreatedAt: at(0), UpdatedAt: at(60), CompletedAt: at(50)}
	cancelled := store.Objective{Assignee: "ann", Status: store.StatusCancelled, CreatedAt: at(0), UpdatedAt: at(70)}
	tests := []struct {
		name    string
		o       store.Objective
		markers []store.ActivityEvent
		want    []holding
	}{
		{"no markers, live: createdAt to now", live, nil, []holding{hold("ann", at(0), now)}},
		{"no markers, done: createdAt to completedAt", done, nil, []holding{hold("ann", at(0), at(50))}},
		{"no markers, cancelled: createdAt to its last change", cancelled, nil, []holding{hold("ann", at(0), at(70))}},
		{"open and close", done, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveOpen, 1), mark(2, "ann", store.KindObjectiveClose, 50),
		}, []holding{hold("ann", at(1), at(50))}},
		{"open only, live: to now", live, []store.ActivityEvent{mark(1, "ann", store.KindObjectiveOpen, 1)}, []holding{hold("ann", at(1), now)}},
		{"open only, done: to completedAt", done, []store.ActivityEvent{mark(1, "ann", store.KindObjectiveOpen, 1)}, []holding{hold("ann", at(1), at(50))}},
		{"reassigned: one interval per holder", live, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveOpen, 1), mark(2, "ann", store.KindObjectiveClose, 10), mark(3, "bob", store.KindObjectiveOpen, 10),
		}, []holding{hold("ann", at(1), at(10)), hold("bob", at(10), now)}},
		{"runner restart: the same holder's intervals, disjoint", done, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveOpen, 1), mark(2, "ann", store.KindObjectiveClose, 10),
			mark(3, "ann", store.KindObjectiveOpen, 20), mark(4, "ann", store.KindObjectiveClose, 30),
		}, []holding{hold("ann", at(1), at(10)), hold("ann", at(20), at(30))}},
		{"handed back and forth: overlapping intervals of one member merge", done, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveOpen, 1), mark(2, "ann", store.KindObjectiveClose, 10),
			mark(3, "ann", store.KindObjectiveOpen, 10), mark(4, "ann", store.KindObjectiveClose, 20),
		}, []holding{hold("ann", at(1), at(20))}},
		{"a second open while open changes nothing", done, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveOpen, 1), mark(2, "ann", store.KindObjectiveOpen, 5), mark(3, "ann", store.KindObjectiveClose, 9),
		}, []holding{hold("ann", at(1), at(9))}},
		{"a close whose open was pruned runs from createdAt", done, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveClose, 9),
		}, []holding{hold("ann", at(0), at(9))}},
		{"markers out of order are sorted by time, then id", done, []store.ActivityEvent{
			mark(2, "ann", store.KindObjectiveClose, 9), mark(1, "ann", store.KindObjectiveOpen, 1),
		}, []holding{hold("ann", at(1), at(9))}},
		{"a name deleted and created again holds as another member", done, []store.ActivityEvent{
			markOf(1, "ann", "ann-1", store.KindObjectiveOpen, 1), markOf(2, "ann", "ann-1", store.KindObjectiveClose, 10),
			markOf(3, "ann", "ann-2", store.KindObjectiveOpen, 10), markOf(4, "ann", "ann-2", store.KindObjectiveClose, 20),
		}, []holding{holdOf("ann", "ann-1", at(1), at(10)), holdOf("ann", "ann-2", at(10), at(20))}},
		{"a clock step back never gives an interval ending before it starts", live, []store.ActivityEvent{
			mark(1, "ann", store.KindObjectiveOpen, 2000),
		}, []holding{hold("ann", at(2000), at(2000))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, holdings(tc.o, tc.markers, now))
		})
	}
}
