package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// Members in the database when brokers share a team (docs/DECISIONS.md,
// "Members in the database when brokers share a team"): the members block
// of the team config is one versioned document in the store's meta table,
// changed under the store's write lock, and every broker reloads it when
// its version moves.

// Meta keys of the members document. The version is a hint read on every
// authenticated request; the document carries its own version, which is
// the one that counts.
const (
	metaMembersDoc     = "members_doc"
	metaMembersVersion = "members_version"
)

// membersPoll is how often a broker checks the document's version on its
// own: the bound on how late a change whose NATS message was lost reaches
// this broker's in-memory registry (permission checks read the version on
// every request and are never late).
const membersPoll = time.Second

// freshWithin bounds the version read a permission check makes.
const freshWithin = 5 * time.Second

// membersDoc is the stored document.
type membersDoc struct {
	Version int64               `json:"version"`
	Members []teamconfig.Member `json:"members"`
}

// sharedMembers is what a Team keeps when its members live in the store.
type sharedMembers struct {
	// version is the document version t.file's members are (written under
	// t.mu, read without it).
	version atomic.Int64
	// publish announces a committed version to the other brokers; nil
	// until JoinCluster.
	publish atomic.Pointer[func(v int64)]
	// elsewhere reacts to members changed by another broker: old and new
	// are the members before and after.
	elsewhere atomic.Pointer[func(old, new []teamconfig.Member)]
	// poke asks the reload loop to look now.
	poke chan struct{}
}

// MembersInStore reports whether st holds the members document, i.e.
// brokers sharing the team over NATS have moved the members there.
func MembersInStore(ctx context.Context, st store.MetaStore) (bool, error) {
	_, err := st.GetMeta(ctx, metaMembersVersion)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// NewSharedTeam is NewTeam for brokers that share one team over NATS: the
// members live in the store, not in the config file at path. The first
// broker moves the file's members into the store (with the mirror and the
// bootstrap tokens NewTeam makes) and rewrites the file without them,
// marked membersInDatabase; every later start reads them from the store
// and ignores any members the file holds. f's other blocks stay the
// file's.
func NewSharedTeam(ctx context.Context, path string, f *teamconfig.File, st store.Store, now func() time.Time) (*Team, error) {
	t := &Team{path: path, file: f, store: st, now: now, shared: &sharedMembers{poke: make(chan struct{}, 1)}}
	fileMembers := f.Store.Members
	var moved bool
	err := st.WithTx(ctx, func(tx store.Tx) error {
		doc, err := readMembersDoc(ctx, tx)
		if err == nil {
			next, err := t.withMembers(doc.Members)
			if err != nil {
				return err
			}
			t.file = next
			t.shared.version.Store(doc.Version)
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// The first broker in this mode: the file's members move.
		for i := range f.Store.Members {
			if f.Store.Members[i].ID == "" {
				if f.Store.Members[i].ID, err = teamconfig.NewMemberID(); err != nil {
					return err
				}
			}
		}
		if err := mirrorMembers(ctx, tx, f.Store.Members, now()); err != nil {
			return err
		}
		moved = true
		t.shared.version.Store(1)
		return writeMembersDoc(ctx, tx, membersDoc{Version: 1, Members: f.Store.Members})
	})
	if err != nil {
		return nil, fmt.Errorf("members in the database: %w", err)
	}
	if moved || len(fileMembers) > 0 || !f.Store.MembersInDatabase {
		// The file keeps everything but the members. Several brokers may
		// write this at once; each writes the same bytes, atomically.
		kept, err := t.withMembers(nil)
		if err != nil {
			return nil, err
		}
		kept.Store.MembersInDatabase = true
		if err := teamconfig.Save(path, kept); err != nil {
			return nil, fmt.Errorf("rewrite the team config without its members: %w", err)
		}
	}
	return t, nil
}

// withMembers returns a copy of the config with members as its members,
// validated. Called with t.mu held, or before t is shared.
func (t *Team) withMembers(members []teamconfig.Member) (*teamconfig.File, error) {
	data, err := t.file.Marshal()
	if err != nil {
		return nil, err
	}
	next, err := teamconfig.Parse(data)
	if err != nil {
		return nil, err
	}
	next.Store.Members = members
	if next.Store.Members == nil {
		next.Store.Members = []teamconfig.Member{}
	}
	if err := next.Validate(); err != nil {
		return nil, fmt.Errorf("the members stored in the database: %w", err)
	}
	return next, nil
}

// readMembersDoc reads the document; store.ErrNotFound when there is none.
func readMembersDoc(ctx context.Context, st store.MetaStore) (membersDoc, error) {
	raw, err := st.GetMeta(ctx, metaMembersDoc)
	if err != nil {
		return membersDoc{}, err
	}
	var doc membersDoc
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return membersDoc{}, fmt.Errorf("the members stored in the database do not read: %w", err)
	}
	if doc.Version < 1 {
		return membersDoc{}, errors.New("the members stored in the database have no version")
	}
	return doc, nil
}

// writeMembersDoc writes the document and its version hint, in tx.
func writeMembersDoc(ctx context.Context, tx store.MetaStore, doc membersDoc) error {
	if doc.Members == nil {
		doc.Members = []teamconfig.Member{}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if err := tx.PutMeta(ctx, metaMembersDoc, string(raw)); err != nil {
		return err
	}
	return tx.PutMeta(ctx, metaMembersVersion, strconv.FormatInt(doc.Version, 10))
}

// storedVersion reads the version hint; 0 when there is no document.
func storedVersion(ctx context.Context, st store.MetaStore) (int64, error) {
	raw, err := st.GetMeta(ctx, metaMembersVersion)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(raw, 10, 64)
}

// changeShared is change when the members live in the store. Inside one
// transaction, under the store's write lock (so changes from every broker
// are serial): the document is read, fn applied to it (never to a stale
// copy), the result validated, mirror run, and the next version written.
// After commit the registry takes it and the other brokers hear of it.
// Called with t.mu held.
func (t *Team) changeShared(ctx context.Context, fn func(f *teamconfig.File) error, mirror mirrorFunc) error {
	var (
		next      *teamconfig.File
		committed int64
		// The members as another broker left them, when ours were stale.
		wasOld, stale []teamconfig.Member
	)
	err := t.store.WithTx(ctx, func(tx store.Tx) error {
		doc, err := readMembersDoc(ctx, tx)
		if err != nil {
			return err
		}
		base, err := t.withMembers(doc.Members)
		if err != nil {
			return err
		}
		wasOld, stale = nil, nil
		if doc.Version != t.shared.version.Load() {
			wasOld, stale = t.file.Store.Members, slices.Clone(base.Store.Members)
		}
		next = base
		if err := fn(next); err != nil {
			return err
		}
		if err := next.Validate(); err != nil {
			return err
		}
		if mirror != nil {
			if err := mirror(ctx, tx); err != nil {
				return err
			}
		}
		doc.Version++
		doc.Members = next.Store.Members
		committed = doc.Version
		return writeMembersDoc(ctx, tx, doc)
	})
	if err != nil {
		return err
	}
	t.file = next
	t.shared.version.Store(committed)
	if p := t.shared.publish.Load(); p != nil {
		(*p)(committed)
	}
	if stale != nil {
		if f := t.shared.elsewhere.Load(); f != nil {
			// Others' changes came before ours: this broker reacts to them
			// as to a reload, outside the lock (the reaction reads the
			// registry).
			go (*f)(wasOld, stale)
		}
	}
	return nil
}

// fresh brings the registry up to the store's version: one read of the
// version hint, and a reload when it moved. A permission check calls it
// before it answers, so a change committed on another broker before the
// request applies to it whatever NATS did.
func (t *Team) fresh(ctx context.Context) error {
	v, err := storedVersion(ctx, t.store)
	if err != nil {
		return err
	}
	if v <= t.shared.version.Load() {
		return nil
	}
	return t.reload(ctx)
}

// reload reads the document and takes it when it is newer than the
// registry's, then lets the server react to what changed.
func (t *Team) reload(ctx context.Context) error {
	doc, err := readMembersDoc(ctx, t.store)
	if err != nil {
		return err
	}
	t.mu.Lock()
	if doc.Version <= t.shared.version.Load() {
		t.mu.Unlock()
		return nil
	}
	next, err := t.withMembers(doc.Members)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	old := t.file.Store.Members
	t.file = next
	t.shared.version.Store(doc.Version)
	t.mu.Unlock()
	if f := t.shared.elsewhere.Load(); f != nil {
		(*f)(old, next.Store.Members)
	}
	return nil
}

// Shared reports whether the members live in the store (NewSharedTeam).
func (t *Team) Shared() bool { return t != nil && t.shared != nil }

// MembersPoll is how often a broker checks the members' version without
// news; tests of several brokers lengthen it to show a change came over
// NATS, not from the poll.
var MembersPoll = membersPoll

// joinMembers shares the registry with the other brokers over nc: a change
// committed here is announced on svc.<team>.members; an announcement, or
// the poll every membersPoll, reloads it from the store. Nothing is taken
// from the message but the news that something changed.
func (s *Server) joinMembers(nc *nats.Conn, team string) error {
	c := s.core
	t := c.team
	if !t.Shared() {
		return nil
	}
	subject := "svc." + team + ".members"
	pub := func(v int64) {
		// Lost is fine: the others poll.
		_ = nc.Publish(subject, []byte(strconv.FormatInt(v, 10)))
	}
	t.shared.publish.Store(&pub)
	react := c.membersChangedElsewhere
	t.shared.elsewhere.Store(&react)
	sub, err := nc.Subscribe(subject, func(*nats.Msg) {
		select {
		case t.shared.poke <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to member changes: %w", err)
	}
	s.run = append(s.run, func(ctx context.Context) {
		defer func() { _ = sub.Unsubscribe() }()
		tick := time.NewTicker(MembersPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.shared.poke:
			case <-tick.C:
			}
			rctx, cancel := context.WithTimeout(ctx, freshWithin)
			if err := t.fresh(rctx); err != nil && ctx.Err() == nil {
				c.log.Warn("members not reloaded from the database", "err", err)
			}
			cancel()
		}
	})
	return nil
}

// membersChangedElsewhere does on this broker what the broker that changed
// the members did on its own: a member deleted (or deleted and created
// again) loses its streams here and is known as deleted; one that lost
// activity.read loses its activity streams; presence tells the roster of
// members that came and went.
func (c *core) membersChangedElsewhere(old, cur []teamconfig.Member) {
	ctx := context.Background()
	byName := func(ms []teamconfig.Member) map[string]teamconfig.Member {
		out := make(map[string]teamconfig.Member, len(ms))
		for _, m := range ms {
			out[m.Name] = m
		}
		return out
	}
	before, after := byName(old), byName(cur)
	gone := false
	for name, m := range before {
		n, ok := after[name]
		switch {
		case !ok || n.ID != m.ID:
			gone = true
			c.disconnect(name, nil)
			if c.approvals != nil {
				c.approvals.forget(name)
			}
			c.presenceChanged(name)
		case slices.Contains(m.Permissions, auth.ActivityRead) && !slices.Contains(n.Permissions, auth.ActivityRead):
			if c.act != nil {
				c.act.Disconnect(name, nil)
			}
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			c.presenceChanged(name)
		}
	}
	if gone {
		if err := c.ids.load(ctx, c.store); err != nil {
			c.log.Error("deleted members not reloaded: their rows show as an unknown deleted member's", "err", err)
		}
	}
}
