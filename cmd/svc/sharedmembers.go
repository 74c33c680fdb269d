package main

import (
	"context"
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

// refuseSharedMembers refuses a maintenance command that edits the
// members of a config whose members live in the database: it would edit a
// file that holds none.
func refuseSharedMembers(cfg Config, file *teamconfig.File, what string) error {
	if !file.Store.MembersInDatabase {
		return nil
	}
	return fmt.Errorf("the team config %s keeps its members in the database (brokers share the team over NATS): %s does not edit them there yet; nothing changed", cfg.ConfigPath, what)
}
