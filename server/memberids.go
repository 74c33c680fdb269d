package server

import (
	"context"
	"sync"
	"time"

	"svc/store"
)

// orphanMemberID owns the activity of a name that had no member when
// member ids came in (a member deleted before them): such rows are shown
// as a deleted member's, with no date.
const orphanMemberID = "deleted-before-ids"

// memberIDs tells apart the members that held one name over time (docs/
// DECISIONS.md, "A deleted member's data stays its own"): the team
// registry holds the current member's id, and the deleted ones are
// recorded in the main store when they go.
type memberIDs struct {
	team *Team
	mu   sync.RWMutex
	// former are the deleted members by id; last is, per name, the id of
	// the member of that name deleted last.
	former map[string]store.FormerMember
	last   map[string]string
}

func newMemberIDs(team *Team) *memberIDs {
	return &memberIDs{team: team, former: map[string]store.FormerMember{}, last: map[string]string{}}
}

// load reads the deleted members the main store recorded.
func (m *memberIDs) load(ctx context.Context, st store.MemberStore) error {
	fs, err := st.ListFormerMembers(ctx)
	if err != nil {
		return err
	}
	for _, f := range fs {
		m.add(f)
	}
	return nil
}

// add records a deleted member.
func (m *memberIDs) add(f store.FormerMember) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.former[f.ID] = f
	if prev, ok := m.former[m.last[f.Name]]; !ok || !f.DeletedAt.Before(prev.DeletedAt) {
		m.last[f.Name] = f.ID
	}
}

// current is the id of the member named name now; "" when there is none.
func (m *memberIDs) current(name string) string {
	if m == nil || m.team == nil {
		return ""
	}
	mem, ok := m.team.Member(name)
	if !ok {
		return ""
	}
	return mem.ID
}

// wasMember reports whether a deleted member is recorded under name.
func (m *memberIDs) wasMember(name string) bool {
	if m == nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.last[name] != ""
}

// owner is whose a row written now under name is: the member of that name,
// else the one of that name deleted last (a marker or a telemetry flush
// that follows a deletion), else an unknown deleted member.
func (m *memberIDs) owner(name string) string {
	if id := m.current(name); id != "" || m == nil {
		return id
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if id := m.last[name]; id != "" {
		return id
	}
	return orphanMemberID
}

// label says whether the member id of a row under name is a deleted
// member's, and since when when that is known. A row with no id (from
// before ids, not yet adopted) is the current member's.
func (m *memberIDs) label(name, id string) (deleted bool, at time.Time) {
	if id == "" || m == nil || id == m.current(name) {
		return false, time.Time{}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	f, ok := m.former[id]
	if !ok {
		return true, time.Time{}
	}
	return true, f.DeletedAt
}

// adoptMemberIDs gives the activity rows, inference records and objectives
// written before member ids one: their name's member's now, or, for a name
// no member has, orphanMemberID. Once every row has one it costs an
// indexed look-up per table; a failure is logged, and the start goes on
// (a row without an id reads as its name's current member's).
func (c *core) adoptMemberIDs(ctx context.Context) {
	owners := c.memberSnapshot()
	if n, err := c.store.AdoptObjectiveMembers(ctx, owners, orphanMemberID); err != nil {
		c.log.ErrorContext(ctx, "objectives not given member ids", "err", err)
	} else if n > 0 {
		c.log.InfoContext(ctx, "gave objectives from before member ids their members' ids", "objectives", n)
	}
	if c.activity == nil {
		return
	}
	if n, err := c.activity.AdoptMemberRows(ctx, owners, orphanMemberID); err != nil {
		c.log.ErrorContext(ctx, "activity not given member ids", "err", err)
	} else if n > 0 {
		c.log.InfoContext(ctx, "gave activity from before member ids its members' ids", "rows", n)
	}
}
