package main

import (
	"context"
	"errors"
	"fmt"

	"svc/server"
	"svc/server/teamconfig"
	"svc/store"
)

// Members in the database when brokers share a team (docs/DECISIONS.md,
// "Members in the database when brokers share a team"): what a boot and
// the maintenance commands do about it.

// checkSharedMembers is the boot's check of where the members live. A
// config whose members moved into the database starts only beside
// --nats-url: alone it would hold no members. It reports whether the
// database holds them, in which case the config's members (if any) are not
// the team's and are not compared with the database's.
func checkSharedMembers(ctx context.Context, cfg Config, file *teamconfig.File, st store.MetaStore) (bool, error) {
	if cfg.NATSURL == "" {
		if file.Store.MembersInDatabase {
			return false, refusal(
				fmt.Sprintf("the team config %s says the team's members live in the database (brokers sharing it over NATS moved them there); without --nats-url this broker would hold none", cfg.ConfigPath),
				"start it as the others are, with --nats-url (SVC_NATS_URL)",
			)
		}
		return false, nil
	}
	in, err := server.MembersInStore(ctx, st)
	if err != nil {
		return false, err
	}
	if !in && file.Store.MembersInDatabase {
		return false, refusal(
			fmt.Sprintf("the team config %s says the team's members live in the database, but %s holds none", cfg.ConfigPath, cfg.dbName()),
			"pass the database the other brokers of this team use with "+cfg.dbFlag(),
		)
	}
	return in, nil
}

// openBesideBrokers opens the database of a team whose members live in
// it, for `svc admin token`: beside the running brokers, not instead of
// them. It takes the database's use lock shared, as the brokers do
// (docs/DECISIONS.md, "Maintenance commands on a team whose members live
// in the database"): a member change is serial with theirs through the
// store's write lock, so nothing needs the database alone, while a
// process that does (svc kek, svc migrate, a broker without NATS) still
// refuses this command and is refused by it. The config and the database
// must belong to one team, and the database must hold the members.
func openBesideBrokers(ctx context.Context, cfg Config, file *teamconfig.File) (store.Store, pairing, error) {
	if cfg.DBURL == "" {
		return nil, pairing{}, fmt.Errorf("the team config %s keeps its members in the database the brokers share: name it with --db-url (SVC_DB_URL)", cfg.ConfigPath)
	}
	st, _, err := openMain(ctx, cfg, nil, nil, false)
	if err != nil {
		return nil, pairing{}, err
	}
	p, err := readPairing(ctx, cfg, file, st)
	p.dbExisted = true
	if err == nil {
		_, err = decide(p)
	}
	if err == nil {
		var in bool
		if in, err = server.MembersInStore(ctx, st); err == nil && !in {
			err = fmt.Errorf("the team config %s says the team's members live in the database, but %s holds none: pass the database the brokers of this team use with %s", cfg.ConfigPath, cfg.dbName(), cfg.dbFlag())
		}
	}
	if err != nil {
		return nil, pairing{}, errors.Join(err, st.Close())
	}
	return st, p, nil
}

// withStoredMembers is the config file as it reads with the members the
// database holds: what the KEK commands check and list. It is a view,
// never saved (the file keeps no members).
func withStoredMembers(ctx context.Context, file *teamconfig.File, st store.MetaStore) (*teamconfig.File, error) {
	if !file.Store.MembersInDatabase {
		return file, nil
	}
	members, _, err := server.StoredMembers(ctx, st)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errors.New("the team config says the team's members live in the database, but this database holds none: pass the database the brokers of this team use with --db-url (SVC_DB_URL)")
	}
	if err != nil {
		return nil, fmt.Errorf("the members stored in the database: %w", err)
	}
	view := *file
	view.Store.Members = members
	return &view, nil
}
