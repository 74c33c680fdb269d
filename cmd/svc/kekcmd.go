package main

// `svc kek`: the key-encryption key's fingerprint, its rotation, and the
// way out when it is lost (docs/DECISIONS.md, "The KEK a store was sealed
// under").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"svc/server"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
)

const kekUsage = `usage: svc kek <command> [flags]

commands:
  fingerprint [--config-path P] [--kek-file F]
      print the fingerprint of a key: F, else SVC_KEK, else <config>.kek
  rotate --config-path P --db-path D --new-kek-file F [--generate]
      re-seal every sealed value under the key in F (--generate makes F)
      and make it the broker's key; the broker (every broker of a team
      sharing it over NATS) must be stopped
  reset --config-path P --db-path D --new-kek-file F [--generate] [--yes]
      the old key is lost: drop everything it sealed and start a new key
`

func kekCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, kekUsage)
		return &exitError{code: 2, err: errors.New("kek: no command")}
	}
	switch args[0] {
	case "fingerprint":
		return kekFingerprint(args[1:], stdout, stderr)
	case "rotate":
		return kekRotate(ctx, args[1:], stdout, stderr)
	case "reset":
		return kekReset(ctx, args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, kekUsage)
		return nil
	}
	fmt.Fprint(stderr, kekUsage)
	return &exitError{code: 2, err: fmt.Errorf("kek: unknown command %q", args[0])}
}

func kekFingerprint(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("kek fingerprint", flag.ContinueOnError)
	fset.SetOutput(stderr)
	configPath, _, _ := maintenanceFlags(fset)
	file := fset.String("kek-file", "", "a KEK file (base64 of 32 bytes)")
	if err := fset.Parse(args); err != nil {
		return usageError(err)
	}
	warnSecretFlags(fset)
	var (
		k    *kek.KEK
		from string
		err  error
	)
	switch {
	case *file != "":
		k, err = kek.Load(*file)
		from = *file
	case os.Getenv("SVC_KEK") != "":
		k, err = kek.Parse(os.Getenv("SVC_KEK"))
		from = "SVC_KEK"
	default:
		from = *configPath + ".kek"
		k, err = kek.Load(from)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	fmt.Fprintf(stdout, "%s  %s\n", k.Fingerprint(), from)
	return nil
}

// newKeyFlags are the flags that name the new key of rotate and reset.
type newKeyFlags struct {
	path     *string
	generate *bool
}

func addNewKeyFlags(fset *flag.FlagSet) newKeyFlags {
	return newKeyFlags{
		path:     fset.String("new-kek-file", "", "file holding the new key, base64 of 32 bytes (required)"),
		generate: fset.Bool("generate", false, "make the new key and write it to --new-kek-file, which must not exist"),
	}
}

// load returns the new key: read from its file, or made and written to it
// (never over an existing file) with --generate.
func (f newKeyFlags) load() (*kek.KEK, []byte, error) {
	if *f.path == "" {
		return nil, nil, &exitError{code: 2, err: errors.New("--new-kek-file is required")}
	}
	if *f.generate {
		key, err := kek.Generate()
		if err != nil {
			return nil, nil, err
		}
		if err := kek.WriteNew(*f.path, key); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, nil, fmt.Errorf("%s exists: drop --generate to use the key it holds", *f.path)
			}
			return nil, nil, err
		}
		k, err := kek.New(key)
		return k, key, err
	}
	data, err := os.ReadFile(*f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("new key: %w", err)
	}
	key, err := kek.Decode(string(data))
	if err != nil {
		return nil, nil, fmt.Errorf("new key %s: %w", *f.path, err)
	}
	k, err := kek.New(key)
	return k, key, err
}

// installKey makes key the broker's: the KEK file beside the config is
// replaced (atomically), unless the broker takes its key from SVC_KEK,
// which only the operator can change.
func installKey(cfg Config, key []byte, stdout io.Writer, newPath string) error {
	if cfg.KEK != "" {
		fmt.Fprintf(stdout, "SVC_KEK is set: set it to the content of %s before starting the broker (it refuses the old key now)\n", newPath)
		return nil
	}
	if err := kek.Replace(cfg.KEKPath(), key); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s now holds the new key; %s is a copy: keep it as a backup or delete it\n", cfg.KEKPath(), newPath)
	return nil
}

// kekRotate re-seals everything under a new key. The order (database,
// config, key file) and how a crash is recovered are in
// docs/DECISIONS.md: run the same command again and it finishes the job.
func kekRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("kek rotate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	configPath, dbPath, dbURL := maintenanceFlags(fset)
	nk := addNewKeyFlags(fset)
	if done, err := parseFlags(fset, args); done {
		return err
	}
	cfg, err := maintenanceConfig(*configPath, *dbPath, dbURL, true)
	if err != nil {
		return err
	}
	if *nk.path == "" {
		return &exitError{code: 2, err: errors.New("--new-kek-file is required")}
	}
	old, err := readKEK(cfg)
	if err != nil {
		return err
	}
	if old.k == nil {
		return fmt.Errorf("no KEK to rotate from: %s does not exist and SVC_KEK is not set (if the key is lost, see svc kek reset)", old.path)
	}
	file, st, p, err := openStopped(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	// Members' TOTP secrets are sealed too; on a team whose brokers share
	// it over NATS they are in the database's members document.
	view, err := withStoredMembers(ctx, file, st)
	if err != nil {
		return err
	}
	to, key, err := nk.load()
	if err != nil {
		return err
	}
	from := old.k
	if from.Fingerprint() == to.Fingerprint() {
		// A rotation that installed its key and was run again.
		if err := view.CheckKEK(to); err != nil {
			return fmt.Errorf("the team config does not open with the key %s: %w", to.Fingerprint(), err)
		}
		if p.db.fingerprint != "" && p.db.fingerprint != to.Fingerprint() {
			return fmt.Errorf("the database %s is sealed under %s, not the key in use (%s)", cfg.dbName(), p.db.fingerprint, to.Fingerprint())
		}
		fmt.Fprintf(stdout, "nothing to do: the broker's key is already %s\n", to.Fingerprint())
		return nil
	}

	// Every value must open before anything is written: the config's in
	// memory now, the database's inside its transaction.
	nCfg, err := file.Reseal(from, to)
	if err != nil {
		return fmt.Errorf("the team config %s: %w: it opens with neither the current key (%s) nor the new one (%s)", cfg.ConfigPath, err, from.Fingerprint(), to.Fingerprint())
	}
	nDB := 0
	switch p.db.fingerprint {
	case to.Fingerprint():
		// Re-sealed by an earlier run that stopped before the config.
	case from.Fingerprint(), "":
		if file.Store.MembersInDatabase {
			nDB, err = resealStoredMembers(ctx, st, file, from, to)
		} else {
			err = st.WithTx(ctx, func(tx store.Tx) error {
				nDB, err = server.Reseal(ctx, tx, from, to)
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("the database %s: %w (nothing in it changed)", cfg.dbName(), err)
		}
	default:
		return fmt.Errorf("the database %s is sealed under the key %s, neither the current one (%s) nor the new one (%s)", cfg.dbName(), p.db.fingerprint, from.Fingerprint(), to.Fingerprint())
	}
	if err := teamconfig.Save(cfg.ConfigPath, file); err != nil {
		return fmt.Errorf("rewrite the team config (run the same command again to finish): %w", err)
	}
	fmt.Fprintf(stdout, "re-sealed %d values in %s and %d in %s under the key %s\n", nDB, cfg.dbName(), nCfg, cfg.ConfigPath, to.Fingerprint())
	return installKey(cfg, key, stdout, *nk.path)
}

// kekReset gives up on a lost key: every sealed value goes, the config's
// TOTP secrets and web push keypair included, and the new key takes over.
func kekReset(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("kek reset", flag.ContinueOnError)
	fset.SetOutput(stderr)
	configPath, dbPath, dbURL := maintenanceFlags(fset)
	nk := addNewKeyFlags(fset)
	yes := fset.Bool("yes", false, "do not ask for confirmation")
	if done, err := parseFlags(fset, args); done {
		return err
	}
	cfg, err := maintenanceConfig(*configPath, *dbPath, dbURL, true)
	if err != nil {
		return err
	}
	if *nk.path == "" {
		return &exitError{code: 2, err: errors.New("--new-kek-file is required")}
	}
	cur, err := readKEK(cfg)
	if err != nil {
		return err
	}
	file, st, p, err := openStopped(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	view, err := withStoredMembers(ctx, file, st)
	if err != nil {
		return err
	}
	if cur.k != nil && keyOpensAll(ctx, cur.k, view, p, st) {
		return fmt.Errorf("the key from %s (%s) opens everything sealed: it is not lost; use svc kek rotate to change it", cur.name(), cur.k.Fingerprint())
	}
	sealed, err := st.ListSealed(ctx)
	if err != nil {
		return err
	}
	var totp []string
	for _, m := range view.Store.Members {
		if m.HasTOTP() {
			totp = append(totp, m.Name)
		}
	}
	fmt.Fprintf(stdout, "The old key is lost; these go for good:\n")
	for _, v := range sealed {
		fmt.Fprintf(stdout, "  %s %s\n", v.Kind, v.Key)
	}
	for _, m := range totp {
		fmt.Fprintf(stdout, "  the TOTP secret of %s (enroll again)\n", m)
	}
	if file.WebPush != nil {
		fmt.Fprintf(stdout, "  the web push keypair and every push subscription (browsers subscribe again)\n")
	}
	if err := askYes(stdin, stdout, *yes, fmt.Sprintf("Drop them from %s and %s?", cfg.dbName(), cfg.ConfigPath)); err != nil {
		return err
	}
	to, key, err := nk.load()
	if err != nil {
		return err
	}
	drop := func(ctx context.Context, tx store.Tx) error {
		if _, err := server.DropSealed(ctx, tx, to); err != nil {
			return err
		}
		if file.WebPush == nil {
			return nil
		}
		return dropPushSubscriptions(ctx, tx)
	}
	if file.Store.MembersInDatabase {
		// The members' TOTP secrets go in the same transaction as the
		// database's sealed values and its new fingerprint.
		_, _, err = server.ChangeStoredMembers(ctx, st, file, func(f *teamconfig.File) error {
			for i := range f.Store.Members {
				f.Store.Members[i].TOTPSecret = nil
			}
			return nil
		}, drop)
	} else {
		err = st.WithTx(ctx, func(tx store.Tx) error { return drop(ctx, tx) })
	}
	if err != nil {
		return fmt.Errorf("the database %s: %w (nothing in it changed)", cfg.dbName(), err)
	}
	if _, err := file.DropSealed(to); err != nil {
		return err
	}
	if err := teamconfig.Save(cfg.ConfigPath, file); err != nil {
		return fmt.Errorf("rewrite the team config (run the same command again to finish): %w", err)
	}
	fmt.Fprintf(stdout, "dropped %d sealed values and %d TOTP secrets; the new key is %s\n", len(sealed), len(totp), to.Fingerprint())
	return installKey(cfg, key, stdout, *nk.path)
}

// resealStoredMembers re-seals, in one transaction, the database's sealed
// values, the members' TOTP secrets in its members document (a new
// version of it) and its KEK fingerprint: a crash leaves the database
// under one key or the other, and a second run finds its fingerprint and
// goes on with the config. It reports how many values it re-sealed.
func resealStoredMembers(ctx context.Context, st store.Store, file *teamconfig.File, from, to *kek.KEK) (int, error) {
	var nMembers, nDB int
	_, _, err := server.ChangeStoredMembers(ctx, st, file, func(f *teamconfig.File) error {
		// The members alone: the config's own values are the file's.
		var err error
		nMembers, err = (&teamconfig.File{Store: teamconfig.Store{Members: f.Store.Members}}).Reseal(from, to)
		return err
	}, func(ctx context.Context, tx store.Tx) error {
		var err error
		nDB, err = server.Reseal(ctx, tx, from, to)
		return err
	})
	return nMembers + nDB, err
}

// keyOpensAll reports whether k is the key of everything sealed.
func keyOpensAll(ctx context.Context, k *kek.KEK, file *teamconfig.File, p pairing, st store.MetaStore) bool {
	if file.CheckKEK(k) != nil {
		return false
	}
	if p.db.fingerprint != "" {
		return p.db.fingerprint == k.Fingerprint()
	}
	return server.CheckSealed(ctx, st, k) == nil
}

// dropPushSubscriptions deletes every member's push subscriptions: they
// were made for the old VAPID key.
func dropPushSubscriptions(ctx context.Context, tx store.Tx) error {
	members, err := tx.ListMembers(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		subs, err := tx.ListPushSubscriptions(ctx, m.Name)
		if err != nil {
			return err
		}
		for _, s := range subs {
			if err := tx.DeletePushSubscription(ctx, m.Name, s.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}
