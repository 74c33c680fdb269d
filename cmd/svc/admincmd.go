package main

// svc admin token: the recovery of a lost admin token (docs/OPERATIONS.md,
// Lost the admin token).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"

	"svc/server"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// adminCommand dispatches `svc admin <sub>`.
func adminCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "token" {
		return adminToken(ctx, args[1:], stdout, stderr)
	}
	return &exitError{code: 2, err: errors.New("usage: svc admin token --member NAME [--config-path P] [--db-path D]")}
}

// adminToken mints a new bearer token for a member who holds
// members.manage, with the broker stopped: the database's lock (taken
// by openStopped) refuses the command while a broker runs on it, and the
// KEK must open the team config, so only someone holding both the files
// and the key can mint one. Like a member change on a running broker, the
// token row and the config's tokenHash are written together: the file
// inside the store transaction, which a failed write rolls back. Only the
// hash is stored; the plaintext is printed once, on stdout. The member's
// other tokens stay valid. A team whose members live in the database
// (brokers sharing it over NATS) is another path: adminTokenShared, which
// runs beside the brokers.
func adminToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("admin token", flag.ContinueOnError)
	fset.SetOutput(stderr)
	configPath, dbPath, dbURL := maintenanceFlags(fset)
	member := fset.String("member", "", "the member to mint a token for; it must hold members.manage (required)")
	if done, err := parseFlags(fset, args); done {
		return err
	}
	if *member == "" {
		return &exitError{code: 2, err: errors.New("--member is required")}
	}
	// An in-memory broker's store is gone when it stops, and nothing locks
	// its config against this command while it runs: refused.
	cfg, err := maintenanceConfig(*configPath, *dbPath, dbURL, false)
	if err != nil {
		return err
	}
	key, err := readKEK(cfg)
	if err != nil {
		return err
	}
	if key.k == nil {
		return fmt.Errorf("no KEK: %s does not exist and SVC_KEK is not set; minting a token needs the key the team config is sealed under", key.path)
	}
	if file, err := readConfig(cfg); err == nil && file != nil && file.Store.MembersInDatabase {
		return adminTokenShared(ctx, cfg, file, key, *member, stdout, stderr)
	}
	file, st, p, err := openStopped(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := keyOpens(cfg, file, key, p.db.fingerprint); err != nil {
		return err
	}
	// As a boot does: presets resolved to leaves before the check.
	if _, err := file.Migrate(key.k); err != nil {
		return fmt.Errorf("the team config %s: %w", cfg.ConfigPath, err)
	}
	i := file.MemberIndex(*member)
	if i < 0 {
		return fmt.Errorf("the team config %s has no member %q", cfg.ConfigPath, *member)
	}
	if !slices.Contains(file.Store.Members[i].Permissions, auth.MembersManage) {
		return fmt.Errorf("member %q does not hold %s: a recovery token is minted only for a member who can manage the others (give it the permission in %s, or name another member)", *member, auth.MembersManage, cfg.ConfigPath)
	}

	plaintext, tok, err := newRecoveryToken(*member)
	if err != nil {
		return err
	}
	file.Store.Members[i].TokenHash = teamconfig.FormatTokenHash(tok.Hash)
	err = st.WithTx(ctx, func(tx store.Tx) error {
		if err := tx.CreateToken(ctx, tok); err != nil {
			return err
		}
		// The config names the member's newest token (docs/DECISIONS.md,
		// Members and tokens); written inside the transaction, so a
		// failed write leaves the store as it was.
		return teamconfig.Save(cfg.ConfigPath, file)
	})
	if err != nil {
		return fmt.Errorf("mint a token for %q (nothing changed): %w", *member, err)
	}
	printToken(stdout, stderr, *member, plaintext)
	return nil
}

// newRecoveryToken mints member's recovery token: the plaintext to show
// once, and the row to store (its SHA-256 only).
func newRecoveryToken(member string) (string, store.Token, error) {
	plaintext, hash, err := auth.NewToken()
	if err != nil {
		return "", store.Token{}, err
	}
	id, err := uuid.NewRandom()
	if err != nil {
		return "", store.Token{}, err
	}
	return plaintext, store.Token{
		ID: id.String(), Member: member, Hash: hash, Label: "svc admin token", Origin: "bootstrap",
		CreatedAt: time.Now(), CreatedBy: member,
	}, nil
}

// printToken shows a minted token, once.
func printToken(stdout, stderr io.Writer, member, plaintext string) {
	fmt.Fprintf(stdout, "token for %s: %s\n", member, plaintext)
	fmt.Fprintf(stderr, "svc: the token is shown only now; %s's other tokens still work (revoke them with DELETE /members/%s/tokens/<id>)\n", member, member)
}

// checkManager refuses a recovery token for a member who is not there or
// cannot manage the others; where names the member list, for the message.
func checkManager(f *teamconfig.File, member, where string) (int, error) {
	i := f.MemberIndex(member)
	if i < 0 {
		return i, fmt.Errorf("%s has no member %q", where, member)
	}
	if !slices.Contains(f.Store.Members[i].Permissions, auth.MembersManage) {
		return i, fmt.Errorf("member %q does not hold %s: a recovery token is minted only for a member who can manage the others (give it the permission, or name another member)", member, auth.MembersManage)
	}
	return i, nil
}

// adminTokenShared is svc admin token on a team whose members live in the
// database (brokers share it over NATS), and it works while they run: that
// is when a lost admin token hurts. The database's use lock is taken
// shared, as a broker takes it (openBesideBrokers); the token row and the
// member's tokenHash in the members document are written in one
// transaction under the store's write lock, exactly as a broker's member
// change, and the document's version moves, so every broker authenticates
// with the new token from its next request. The config file is not
// written: it holds no members. The KEK must still open the config and be
// the database's, so only someone holding both the files and the key can
// mint one.
func adminTokenShared(ctx context.Context, cfg Config, file *teamconfig.File, key keySource, member string, stdout, stderr io.Writer) error {
	st, p, err := openBesideBrokers(ctx, cfg, file)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := keyOpens(cfg, file, key, p.db.fingerprint); err != nil {
		return err
	}
	plaintext, tok, err := newRecoveryToken(member)
	if err != nil {
		return err
	}
	where := "the members stored in " + cfg.dbName()
	_, _, err = server.ChangeStoredMembers(ctx, st, file, func(f *teamconfig.File) error {
		i, err := checkManager(f, member, where)
		if err != nil {
			return err
		}
		f.Store.Members[i].TokenHash = teamconfig.FormatTokenHash(tok.Hash)
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateToken(ctx, tok)
	})
	if err != nil {
		return fmt.Errorf("mint a token for %q (nothing changed): %w", member, err)
	}
	printToken(stdout, stderr, member, plaintext)
	return nil
}

// keyOpens checks that key opens the team config file and is the one the
// database recorded (fingerprint, "" when none was): minting a token
// needs the key both are sealed under.
func keyOpens(cfg Config, file *teamconfig.File, key keySource, fingerprint string) error {
	if err := file.CheckKEK(key.k); err != nil {
		return fmt.Errorf("the team config %s does not open with the key from %s: %w", cfg.ConfigPath, key.name(), err)
	}
	if fingerprint != "" && fingerprint != key.k.Fingerprint() {
		return fmt.Errorf("the database %s is sealed under the key %s, not the one from %s (%s)", cfg.dbName(), fingerprint, key.name(), key.k.Fingerprint())
	}
	return nil
}
