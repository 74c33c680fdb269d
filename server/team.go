package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"svc/server/apierr"
	"sync"
	"time"

	"svc/server/teamconfig"
	"svc/store"
)

// Team is the member registry. The team config file is its authority: every
// change is written to the file (atomically, fsynced) before it is applied in
// memory and mirrored into the store, where other tables reference members.
// When brokers share the team (NewSharedTeam), a document in the store is
// the authority instead, and the file keeps everything else.
type Team struct {
	mu    sync.RWMutex
	path  string
	file  *teamconfig.File
	store store.Store
	now   func() time.Time
	// shared is set when the members live in the store
	// (server/clustermembers.go).
	shared *sharedMembers
}

// NewTeam loads the registry from a validated, migrated config and makes the
// store's member mirror match it. A member's config tokenHash is seeded as a
// bootstrap token unless the store already knows that hash (a revoked hash is
// never revived).
func NewTeam(ctx context.Context, path string, f *teamconfig.File, st store.Store, now func() time.Time) (*Team, error) {
	t := &Team{path: path, file: f, store: st, now: now}
	// A config that never went through a boot's migration (an embedder's,
	// a test's) still names each member apart; the ids are written with
	// the next change.
	for i := range f.Store.Members {
		if f.Store.Members[i].ID == "" {
			id, err := teamconfig.NewMemberID()
			if err != nil {
				return nil, err
			}
			f.Store.Members[i].ID = id
		}
	}
	err := st.WithTx(ctx, func(tx store.Tx) error {
		return mirrorMembers(ctx, tx, f.Store.Members, now())
	})
	if err != nil {
		return nil, fmt.Errorf("sync members into store: %w", err)
	}
	return t, nil
}

// mirrorMembers makes the store's member mirror equal to members, and
// seeds each member's tokenHash as a bootstrap token unless the store
// already knows that hash (a revoked hash is never revived).
func mirrorMembers(ctx context.Context, tx store.Tx, ms []teamconfig.Member, ts time.Time) error {
	members := make([]store.Member, 0, len(ms))
	for _, m := range ms {
		members = append(members, toStoreMember(m, ts))
	}
	if err := tx.ReplaceMembers(ctx, members); err != nil {
		return err
	}
	for _, m := range ms {
		if m.TokenHash == "" {
			continue
		}
		h, err := teamconfig.ParseTokenHash(m.TokenHash)
		if err != nil {
			return err
		}
		if _, err := tx.GetTokenByHash(ctx, h); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.CreateToken(ctx, store.Token{
			ID: newID(), Member: m.Name, Hash: h, Label: "config", Origin: "bootstrap",
			CreatedAt: ts, CreatedBy: m.Name,
		}); err != nil {
			return err
		}
	}
	return nil
}

func toStoreMember(m teamconfig.Member, now time.Time) store.Member {
	sm := store.Member{Name: m.Name, ID: m.ID, Instructions: m.Instructions, Permissions: slices.Clone(m.Permissions), CreatedAt: now, UpdatedAt: now}
	if m.Role != nil {
		sm.Role = &store.Role{Title: m.Role.Title, Description: m.Role.Description}
	}
	return sm
}

// MemberPermissions implements auth.MemberLookup. When brokers share the
// team, it first brings the registry up to the store's version, so every
// request is checked against the members as committed before it began, on
// whichever broker; when the store cannot say, the member is refused.
func (t *Team) MemberPermissions(name string) ([]string, bool) {
	if t.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), freshWithin)
		err := t.fresh(ctx)
		cancel()
		if err != nil {
			return nil, false
		}
	}
	m, ok := t.Member(name)
	return m.Permissions, ok
}

// Member returns a copy of a member entry.
func (t *Team) Member(name string) (teamconfig.Member, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	i := t.indexLocked(name)
	if i < 0 {
		return teamconfig.Member{}, false
	}
	return cloneMember(t.file.Store.Members[i]), true
}

// Members returns copies of every member, ordered by name.
func (t *Team) Members() []teamconfig.Member {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]teamconfig.Member, 0, len(t.file.Store.Members))
	for _, m := range t.file.Store.Members {
		out = append(out, cloneMember(m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len returns the number of members.
func (t *Team) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.file.Store.Members)
}

// WebPush returns the webPush block, or nil when web push is disabled.
func (t *Team) WebPush() *teamconfig.WebPush {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.file.WebPush == nil {
		return nil
	}
	w := *t.file.WebPush
	return &w
}

// Info returns the team block and the resolved presets.
func (t *Team) Info() (teamconfig.Team, map[string][]string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	presets := map[string][]string{}
	for k, v := range t.file.Presets() {
		presets[k] = slices.Clone(v)
	}
	return t.file.Team, presets
}

// ApprovalExpiry is how long a pending approval waits for a decision.
func (t *Team) ApprovalExpiry() time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.file.ApprovalExpiry()
}

// ApproverOf names the members whose named approvers include name, by
// name.
func (t *Team) ApproverOf(name string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []string
	for _, m := range t.file.Store.Members {
		if slices.Contains(m.Approvers, name) {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// LoopGuard returns the loopGuard block with its defaults filled in.
func (t *Team) LoopGuard() teamconfig.LoopGuard {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.file.LoopGuardSettings()
}

func (t *Team) indexLocked(name string) int { return t.file.MemberIndex(name) }

func cloneMember(m teamconfig.Member) teamconfig.Member {
	c := m
	c.Permissions = slices.Clone(m.Permissions)
	c.RawPermissions = slices.Clone(m.RawPermissions)
	c.TOTPSecret = slices.Clone(m.TOTPSecret)
	c.Approvers = slices.Clone(m.Approvers)
	if m.Role != nil {
		r := *m.Role
		c.Role = &r
	}
	return c
}

// mirrorFunc applies a config change to the store inside the transaction
// that also covers the config write.
type mirrorFunc func(ctx context.Context, tx store.Tx) error

// change applies fn to a copy of the config, validates it, and then, inside
// one store transaction, runs mirror and writes the file: a failed write rolls
// the store back, and the transaction commits only once the file is durable.
// The client's cancellation does not interrupt it half-way. Changes are
// serialized.
func (t *Team) change(ctx context.Context, fn func(f *teamconfig.File) error, mirror mirrorFunc) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	if t.shared != nil {
		// The members live in the store: no file is written.
		return t.changeShared(ctx, fn, mirror)
	}
	data, err := t.file.Marshal()
	if err != nil {
		return err
	}
	next, err := teamconfig.Parse(data)
	if err != nil {
		return err
	}
	if err := fn(next); err != nil {
		return err
	}
	if err := next.Validate(); err != nil {
		return err
	}
	err = t.store.WithTx(ctx, func(tx store.Tx) error {
		if mirror != nil {
			if err := mirror(ctx, tx); err != nil {
				return err
			}
		}
		if err := teamconfig.Save(t.path, next); err != nil {
			return fmt.Errorf("write team config: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.file = next
	return nil
}

// changeMember applies fn to the named member's entry.
func (t *Team) changeMember(ctx context.Context, name string, fn func(m *teamconfig.Member) error, mirror mirrorFunc) error {
	return t.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(name)
		if i < 0 {
			return apierr.Errorf(apierr.CodeNotFound, "member %q not found", name)
		}
		return fn(&f.Store.Members[i])
	}, mirror)
}

// errLastAdmin is the last-admin invariant: no change may leave the team
// without a member who can manage members.
var errLastAdmin = apierr.Errorf(apierr.CodeBadRequest, "at least one member must keep members.manage")

func checkAdminRemains(f *teamconfig.File) error {
	if !f.HasManager() {
		return errLastAdmin
	}
	return nil
}

// newID returns a random RFC 4122 version 4 UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
