package server

import (
	"context"
	"time"

	"svc/server/teamconfig"
	"svc/store"
)

// The members document changed by a maintenance command (svc admin token,
// svc kek) rather than by a broker: docs/DECISIONS.md, "Maintenance
// commands on a team whose members live in the database".

// StoredMembers returns the members of a team whose brokers share it
// (NewSharedTeam) as the store holds them, and the document's version;
// store.ErrNotFound when the store holds no document.
func StoredMembers(ctx context.Context, st store.MetaStore) ([]teamconfig.Member, int64, error) {
	doc, err := readMembersDoc(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	return doc.Members, doc.Version, nil
}

// ChangeStoredMembers is a broker's member change (changeShared) made by a
// process that is no broker: in one transaction under the store's write
// lock it reads the document, applies fn to a copy of f holding the
// stored members, validates the result, runs mirror in the same
// transaction and writes the next version. Every running broker takes the
// change with its next authenticated request (each reads the version
// first) and within a second otherwise (its poll); no NATS notice is
// needed. f is the team config file, whose other blocks the validation
// reads; it is not changed, and nothing is written to its file. It returns
// the members as committed and their version.
func ChangeStoredMembers(ctx context.Context, st store.Store, f *teamconfig.File, fn func(f *teamconfig.File) error, mirror func(ctx context.Context, tx store.Tx) error) ([]teamconfig.Member, int64, error) {
	t := &Team{file: f, store: st, now: time.Now, shared: &sharedMembers{poke: make(chan struct{}, 1)}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.changeShared(context.WithoutCancel(ctx), fn, mirror); err != nil {
		return nil, 0, err
	}
	return t.file.Store.Members, t.shared.version.Load(), nil
}
