package main

// The checks a boot makes before it trusts what it was given: that the
// team config, the database and the files root belong together, and that
// the KEK is the one their sealed values were sealed under. The rules are
// in docs/DECISIONS.md, "What a boot may assume".

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"svc/server"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/server/vfs"
	"svc/store"
)

// sweepLimit is how many unreferenced files under blobs a boot deletes
// unasked. A crash leaves one per write in flight, or the content of a
// delete whose purge it interrupted; a wrong database makes every blob
// look unreferenced. Past it the boot refuses and `svc files sweep`
// deletes them on purpose.
const sweepLimit = 16

// keySource is the KEK a command was given and where it came from.
type keySource struct {
	k    *kek.KEK // nil when there is none
	env  bool     // SVC_KEK rather than the file
	path string   // the KEK file beside the config
}

// name says where the key comes from, for messages.
func (s keySource) name() string {
	if s.env {
		return "SVC_KEK"
	}
	return s.path
}

// readKEK reads SVC_KEK when set, else the KEK file beside the config. A
// missing file is no error: k is nil, and whether a key may be made is
// decided once the config and the store have been seen.
func readKEK(cfg Config) (keySource, error) {
	src := keySource{env: cfg.KEK != "", path: cfg.KEKPath()}
	if src.env {
		k, err := kek.Parse(cfg.KEK)
		if err != nil {
			return src, fmt.Errorf("SVC_KEK: %w", err)
		}
		src.k = k
		return src, nil
	}
	k, err := kek.Load(src.path)
	if errors.Is(err, fs.ErrNotExist) {
		return src, nil
	}
	if err != nil {
		return src, &exitError{code: 1, err: fmt.Errorf("refusing to start: %w", err)}
	}
	src.k = k
	return src, nil
}

// readConfig loads and validates the team config; nil when it does not
// exist. It does not migrate: that needs the KEK, checked after.
func readConfig(cfg Config) (*teamconfig.File, error) {
	f, err := teamconfig.Load(cfg.ConfigPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("refusing to start: %w", err)}
	}
	return f, nil
}

// storeFacts is what the database says about itself.
type storeFacts struct {
	census      store.Census
	teamID      string // "" when none is recorded
	fingerprint string // of the KEK; "" when none is recorded
}

func readStoreFacts(ctx context.Context, st store.MetaStore) (storeFacts, error) {
	var f storeFacts
	var err error
	if f.census, err = st.Census(ctx); err != nil {
		return f, err
	}
	if f.teamID, err = getMeta(ctx, st, store.MetaTeamID); err != nil {
		return f, err
	}
	f.fingerprint, err = getMeta(ctx, st, store.MetaKEKFingerprint)
	return f, err
}

func getMeta(ctx context.Context, st store.MetaStore, key string) (string, error) {
	v, err := st.GetMeta(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return v, err
}

// configFilesRoot is the files root a config uses (relative to the config's
// directory), the first-boot root when there is no config, "" when the
// config has no files block.
func configFilesRoot(cfg Config, f *teamconfig.File) string {
	if f == nil {
		return cfg.FilesRoot()
	}
	if f.Files == nil || f.Files.Root == "" {
		return ""
	}
	if filepath.IsAbs(f.Files.Root) {
		return f.Files.Root
	}
	return filepath.Join(filepath.Dir(cfg.ConfigPath), f.Files.Root)
}

// pairing is what the boot knows about the three places a team keeps its
// data, before it changes any.
type pairing struct {
	configPath   string
	configExists bool
	configID     string
	dbPath       string // the database's name in messages; "" is in-memory
	dbFlag       string // the flag that names it, for advice
	dbExisted    bool   // the database file was there before this start
	db           storeFacts
	root         string // files root; "" when the filesystem is off
	blobs        int    // files under root/blobs
}

// verdict is what a pairing allows.
type verdict int

const (
	// firstBoot: nothing exists yet; write the first-boot config.
	firstBoot verdict = iota + 1
	// normalStart: the config, database and files belong together (or
	// are a pair from before team ids, or a hand-written config on a new
	// database).
	normalStart
)

// decide is the pairing rule of docs/DECISIONS.md, "What a boot may
// assume": a first boot only when config, database and files are all new;
// a start when they belong together; otherwise a refusal that says what
// was found and what to do.
func decide(p pairing) (verdict, error) {
	dbNew := p.db.census.Empty()
	if !p.configExists {
		switch {
		case !dbNew:
			return 0, refusal(
				fmt.Sprintf("the team config %s does not exist, but the database %s holds a team (%s); a first boot would replace its members and delete their files", p.configPath, p.dbName(), p.db.describe()),
				"if the config was moved or renamed, put it back or pass its path with --config-path (SVC_CONFIG_PATH)",
				"if this is not the database you meant, pass the right one with "+p.flag(),
				"to start a new team, use a new database ("+p.flag()+") and a config path in a new directory",
			)
		case p.blobs > 0:
			return 0, refusal(
				fmt.Sprintf("the team config %s does not exist and %s, but the files root %s holds %d files; a first boot would delete them", p.configPath, p.dbEmpty(), p.root, p.blobs),
				"if the config was moved or renamed, put it back or pass its path with --config-path (SVC_CONFIG_PATH)",
				"pass the database these files belong to with "+p.flag(),
				fmt.Sprintf("to start a new team here, move %s away first", filepath.Join(p.root, "blobs")),
			)
		}
		return firstBoot, nil
	}
	switch {
	case p.db.teamID != "" && p.configID != "" && p.db.teamID != p.configID:
		return 0, refusal(
			fmt.Sprintf("the team config %s belongs to team %s, but the database %s to team %s (%s)", p.configPath, p.configID, p.dbName(), p.db.teamID, p.db.describe()),
			"pass the database of this config with "+p.flag()+", or the config of this database with --config-path (SVC_CONFIG_PATH)",
		)
	case p.db.teamID != "" && p.configID == "":
		return 0, refusal(
			fmt.Sprintf("the database %s belongs to team %s (%s), but the team config %s names no team: it is not the config this database was started with", p.dbName(), p.db.teamID, p.db.describe(), p.configPath),
			"pass that config with --config-path (SVC_CONFIG_PATH), or the database of this config with "+p.flag(),
			fmt.Sprintf(`if %s is that config (its "id" was deleted), add "id": %q to its team block`, p.configPath, p.db.teamID),
		)
	case dbNew && p.blobs > 0:
		return 0, refusal(
			fmt.Sprintf("%s, but the files root %s holds %d files this database does not know (team config %s); starting would delete them", p.dbEmpty(), p.root, p.blobs, p.configPath),
			"pass the database these files belong to with "+p.flag(),
			fmt.Sprintf("to start over with no files, move %s away first", filepath.Join(p.root, "blobs")),
		)
	case dbNew && p.db.teamID == "" && p.configID != "":
		return 0, refusal(
			fmt.Sprintf("the team config %s belongs to team %s, whose database is elsewhere: %s", p.configPath, p.configID, p.dbEmpty()),
			"pass the team's database with "+p.flag(),
			fmt.Sprintf(`to start team %s over on an empty database on purpose, delete "id" from the team block of %s`, p.configID, p.configPath),
		)
	}
	return normalStart, nil
}

// flag is the flag that names the database, for advice.
func (p pairing) flag() string {
	if p.dbFlag == "" {
		return "--db-path (SVC_DB_PATH)"
	}
	return p.dbFlag
}

func (p pairing) dbName() string {
	if p.dbPath == "" {
		return "(in-memory)"
	}
	return p.dbPath
}

// dbEmpty says the database holds nothing, and why that may be.
func (p pairing) dbEmpty() string {
	switch {
	case p.dbPath == "":
		return "no --db-path was given, so the database is in-memory and empty"
	case !p.dbExisted:
		return fmt.Sprintf("the database %s does not exist", p.dbPath)
	}
	return fmt.Sprintf("the database %s is empty", p.dbPath)
}

// describe counts what a store holds, for messages.
func (f storeFacts) describe() string {
	c := f.census
	more := func(n int) string {
		if n >= store.CensusCap {
			return fmt.Sprintf("%d+", n)
		}
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d members, %s messages, %s file entries, %d sealed values", c.Members, more(c.Messages), more(c.FileEntries), c.Sealed)
}

// refusedError is a boot refusal: it comes before anything is written.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// refusal is a boot refusal: what was found, then what to do, one line
// each. Nothing was changed.
func refusal(found string, todo ...string) error {
	var b strings.Builder
	b.WriteString("refusing to start: ")
	b.WriteString(found)
	b.WriteString(". Nothing was changed.")
	for _, t := range todo {
		b.WriteString("\n  - ")
		b.WriteString(t)
	}
	return &exitError{code: 1, err: &refusedError{b.String()}}
}

// openChecked opens the main store and runs prepareBoot on it. After a
// refusal the store is closed again, and a database file this start
// created is removed: a mistyped --db-path leaves no empty database
// behind to be mistaken for one later.
func openChecked(ctx context.Context, cfg Config, log *slog.Logger, observe func(time.Duration)) (store.Store, *booted, error) {
	// One broker per database unless brokers share their live traffic
	// over NATS (--nats-url); docs/DECISIONS.md, "Choosing the store".
	st, existed, err := openMain(ctx, cfg, log, observe, cfg.NATSURL == "")
	if err != nil {
		return nil, nil, err
	}
	b, err := prepareBoot(ctx, cfg, st, existed, log)
	if err != nil {
		cerr := st.Close()
		var refused *refusedError
		if errors.As(err, &refused) && !existed && cfg.DBURL == "" {
			cerr = errors.Join(cerr, removeNewDB(cfg.DBPath))
		}
		return nil, nil, errors.Join(err, cerr)
	}
	return st, b, nil
}

// booted is what prepareBoot hands the server.
type booted struct {
	file       *teamconfig.File
	kek        *kek.KEK
	firstToken string // the admin token of a first boot; "" otherwise
}

// prepareBoot checks that the config, the database st and the files root
// belong together and that the KEK is theirs, then makes what a first boot
// makes, or migrates the config and records the team id and the KEK's
// fingerprint where they are missing. It refuses, changing nothing, when
// they do not fit.
func prepareBoot(ctx context.Context, cfg Config, st store.Store, dbExisted bool, log *slog.Logger) (*booted, error) {
	key, err := readKEK(cfg)
	if err != nil {
		return nil, err
	}
	file, err := readConfig(cfg)
	if err != nil {
		return nil, err
	}
	p, err := readPairing(ctx, cfg, file, st)
	if err != nil {
		return nil, err
	}
	p.dbExisted = dbExisted
	v, err := decide(p)
	if err != nil {
		return nil, err
	}
	if v == firstBoot {
		return bootFirst(ctx, cfg, p, key, st, log)
	}
	shared, err := checkSharedMembers(ctx, cfg, file, st)
	if err != nil {
		return nil, err
	}
	if !shared {
		if err := checkMembers(ctx, cfg, p, file, st); err != nil {
			return nil, err
		}
	}
	k, err := checkKEK(ctx, cfg, p, file, key, st, log)
	if err != nil {
		return nil, err
	}
	kept, err := keepMemberIDs(ctx, file, st)
	if err != nil {
		return nil, err
	}
	if len(kept) > 0 {
		log.Info("member ids missing from the team config taken back from the database", "members", kept, "path", cfg.ConfigPath)
	}
	changed, err := file.Migrate(k)
	changed = changed || len(kept) > 0
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("refusing to start: %s: %w", cfg.ConfigPath, err)}
	}
	if changed {
		log.Info("migrated plaintext secrets and presets in team config", "path", cfg.ConfigPath)
	}
	// A config without an id on a database (hand-written, or a pair from
	// before team ids; decide refused one on a database that has an id)
	// gets a new one. The config is written first: a crash before the
	// database records it leaves a pair decide still starts.
	if file.Team.ID == "" && cfg.durable() {
		if file.Team.ID, err = teamconfig.NewTeamID(); err != nil {
			return nil, err
		}
		changed = true
		log.Info("recorded a team id in the team config and the database", "team_id", file.Team.ID, "config", cfg.ConfigPath, "db", cfg.dbName())
	}
	if changed {
		if err := teamconfig.Save(cfg.ConfigPath, file); err != nil {
			return nil, fmt.Errorf("rewrite team config: %w", err)
		}
	}
	if p.db.teamID == "" && file.Team.ID != "" {
		if err := st.PutMeta(ctx, store.MetaTeamID, file.Team.ID); err != nil {
			return nil, err
		}
	}
	if p.db.fingerprint != k.Fingerprint() {
		if err := st.PutMeta(ctx, store.MetaKEKFingerprint, k.Fingerprint()); err != nil {
			return nil, err
		}
	}
	if !shared && !file.HasManager() {
		log.Warn("no member holds members.manage; the team cannot be managed over the API")
	}
	return &booted{file: file, kek: k}, nil
}

// keepMemberIDs gives each member entry without an id the id the
// database's mirror of that member holds, when it has one no other entry
// uses: a config rewritten without ids (by hand, or by a tool that
// templates it) must not turn current members into new ones that no longer
// read their own activity or hold their own objectives (docs/DECISIONS.md,
// "A deleted member's data stays its own"). It returns the names it gave
// an id; entries it leaves without one get a new id from Migrate.
func keepMemberIDs(ctx context.Context, file *teamconfig.File, st store.MemberStore) ([]string, error) {
	used := map[string]bool{}
	for _, m := range file.Store.Members {
		used[m.ID] = m.ID != ""
	}
	var kept []string
	for i := range file.Store.Members {
		m := &file.Store.Members[i]
		if m.ID != "" {
			continue
		}
		stored, err := st.GetMember(ctx, m.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if stored.ID != "" && !used[stored.ID] {
			m.ID, used[stored.ID] = stored.ID, true
			kept = append(kept, m.Name)
		}
	}
	if len(kept) > 0 {
		if err := file.Validate(); err != nil {
			return nil, fmt.Errorf("member ids from the database: %w", err)
		}
	}
	return kept, nil
}

// readPairing gathers what decide needs.
func readPairing(ctx context.Context, cfg Config, file *teamconfig.File, st store.MetaStore) (pairing, error) {
	p := pairing{configPath: cfg.ConfigPath, configExists: file != nil, dbFlag: cfg.dbFlag(), root: configFilesRoot(cfg, file)}
	if cfg.durable() {
		p.dbPath = cfg.dbName()
	}
	if file != nil {
		p.configID = file.Team.ID
	}
	var err error
	if p.db, err = readStoreFacts(ctx, st); err != nil {
		return p, fmt.Errorf("read the database: %w", err)
	}
	if p.root != "" {
		if p.blobs, err = vfs.CountBlobs(p.root); err != nil {
			return p, fmt.Errorf("files root %s: %w", p.root, err)
		}
	}
	return p, nil
}

// checkMembers refuses a config that lacks more than one member of the
// database: the start would delete them, their tokens and their files. A
// member is deleted by writing the config, then the database, so a crash
// leaves at most one behind, which the start then deletes; more is an
// older copy of the config.
func checkMembers(ctx context.Context, cfg Config, p pairing, file *teamconfig.File, st store.MemberStore) error {
	stored, err := st.ListMembers(ctx)
	if err != nil {
		return err
	}
	var gone []string
	for _, m := range stored {
		if file.MemberIndex(m.Name) < 0 {
			gone = append(gone, m.Name)
		}
	}
	if len(gone) <= 1 {
		return nil
	}
	names := gone
	if len(names) > 10 {
		names = append(slices.Clip(names[:10]), fmt.Sprintf("and %d more", len(gone)-10))
	}
	return refusal(
		fmt.Sprintf("the team config %s lacks %d members of the database %s (%s); starting would delete them with their tokens and files", cfg.ConfigPath, len(gone), p.dbName(), strings.Join(names, ", ")),
		"if this is an older copy of the config, pass the current one with --config-path (SVC_CONFIG_PATH)",
		"to delete them on purpose, put them back in store.members, start, and delete them over the API (DELETE /members/<name>)",
	)
}

// bootFirst writes what a first boot makes: the KEK file when no key was
// given, the team id in the database, then the config (the admin token is
// printed once it is durable). A crash between the two leaves a database
// that holds only the id: the next boot is a first boot again, with it.
func bootFirst(ctx context.Context, cfg Config, p pairing, key keySource, st store.Store, log *slog.Logger) (*booted, error) {
	k := key.k
	if k == nil {
		var err error
		if k, err = kek.Create(key.path); err != nil {
			return nil, err
		}
		log.Info("created KEK file", "path", key.path)
	}
	// An in-memory database keeps no id, so the config names no team: the
	// next in-memory start is one more start of a config without one.
	teamID := ""
	if cfg.durable() {
		teamID = p.db.teamID
		if teamID == "" {
			var err error
			if teamID, err = teamconfig.NewTeamID(); err != nil {
				return nil, err
			}
		}
		if err := st.PutMeta(ctx, store.MetaTeamID, teamID); err != nil {
			return nil, err
		}
	}
	token, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	f, err := teamconfig.Default(k, teamID, cfg.FilesRoot(), hash)
	if err != nil {
		return nil, err
	}
	if err := teamconfig.Save(cfg.ConfigPath, f); err != nil {
		return nil, fmt.Errorf("write first-boot config: %w", err)
	}
	if err := st.PutMeta(ctx, store.MetaKEKFingerprint, k.Fingerprint()); err != nil {
		return nil, err
	}
	log.Info("first boot: wrote team config", "path", cfg.ConfigPath, "team_id", teamID)
	return &booted{file: f, kek: k, firstToken: token}, nil
}

// checkKEK returns the key to run with: the one given when it is the key
// of everything sealed in the config and the database, a new one (a new
// KEK file) when nothing is sealed anywhere. It refuses a missing key or
// another key while anything sealed would not open.
func checkKEK(ctx context.Context, cfg Config, p pairing, file *teamconfig.File, key keySource, st store.Store, log *slog.Logger) (*kek.KEK, error) {
	cfgSealed := file.Sealed()
	sealed := describeSealed(p, cfgSealed)
	if key.k == nil {
		if sealed != "" {
			return nil, kekRefusal(cfg, p,
				fmt.Sprintf("there is no KEK: %s does not exist and SVC_KEK is not set, but %s; a new key could not open them", key.path, sealed))
		}
		k, err := kek.Create(key.path)
		if err != nil {
			return nil, err
		}
		if p.db.fingerprint != "" {
			log.Warn("created a new KEK file; the database recorded another key but holds nothing sealed", "path", key.path, "fingerprint", k.Fingerprint(), "recorded_fingerprint", p.db.fingerprint)
		} else {
			log.Info("created KEK file", "path", key.path)
		}
		return k, nil
	}
	k := key.k
	switch {
	case p.db.fingerprint != "" && p.db.fingerprint != k.Fingerprint() && p.db.census.Sealed > 0:
		return nil, kekRefusal(cfg, p,
			fmt.Sprintf("the KEK from %s (fingerprint %s) is not the key the database %s was sealed under (fingerprint %s); its %d sealed values would not open", key.name(), k.Fingerprint(), p.dbName(), p.db.fingerprint, p.db.census.Sealed))
	case p.db.fingerprint == "" && p.db.census.Sealed > 0:
		// A database from before the fingerprint proves the key by
		// opening what it holds.
		if err := server.CheckSealed(ctx, st, k); err != nil {
			return nil, kekRefusal(cfg, p,
				fmt.Sprintf("the KEK from %s (fingerprint %s) cannot open %s in the database %s: it was sealed under another key", key.name(), k.Fingerprint(), sealedName(err), p.dbName()))
		}
	case p.db.fingerprint != "" && p.db.fingerprint != k.Fingerprint():
		log.Warn("the KEK differs from the one the database recorded, which holds nothing sealed: recording this one", "kek", key.name(), "fingerprint", k.Fingerprint(), "recorded_fingerprint", p.db.fingerprint)
	}
	if err := file.CheckKEK(k); err != nil {
		return nil, kekRefusal(cfg, p,
			fmt.Sprintf("the KEK from %s (fingerprint %s) cannot open %s of the team config %s: it was sealed under another key", key.name(), k.Fingerprint(), sealedName(err), cfg.ConfigPath))
	}
	return k, nil
}

// sealedName names the sealed value an error is about.
func sealedName(err error) string {
	var ee *teamconfig.EntryError
	if errors.As(err, &ee) {
		return ee.Entry
	}
	var se *server.SealedValueError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s %q", se.Kind, se.Key)
	}
	return err.Error()
}

// describeSealed says what is sealed in the config and the database; ""
// when nothing is.
func describeSealed(p pairing, cfgSealed []teamconfig.SealedEntry) string {
	var parts []string
	if n := p.db.census.Sealed; n > 0 {
		s := fmt.Sprintf("the database %s holds %d sealed values", p.dbName(), n)
		if p.db.fingerprint != "" {
			s += fmt.Sprintf(" (KEK fingerprint %s)", p.db.fingerprint)
		}
		parts = append(parts, s)
	}
	if len(cfgSealed) > 0 {
		names := make([]string, len(cfgSealed))
		for i, e := range cfgSealed {
			names[i] = e.Entry
		}
		parts = append(parts, fmt.Sprintf("the team config %s holds sealed %s", p.configPath, strings.Join(names, ", ")))
	}
	return strings.Join(parts, " and ")
}

// kekRefusal refuses a KEK, saying how to find the right one, change keys
// on purpose, or give up what a lost key sealed.
func kekRefusal(cfg Config, p pairing, found string) error {
	flags := fmt.Sprintf("--config-path %s %s", cfg.ConfigPath, cfg.dbArgs())
	return refusal(found,
		fmt.Sprintf("give the broker the key it was using: restore %s or set SVC_KEK (svc kek fingerprint --kek-file <file> prints a key file's fingerprint)", cfg.KEKPath()),
		fmt.Sprintf("to change keys on purpose, start with the old key in place and run: svc kek rotate %s --new-kek-file <file> [--generate]", flags),
		fmt.Sprintf("if the old key is lost for good: svc kek reset %s --new-kek-file <file> --generate drops what it sealed (secret values, credentials, hook secrets, TOTP enrollments, the web push keypair)", flags),
	)
}

// dbFileExists reports whether the database file is there before the
// store is opened (which creates it); in-memory counts as there.
func dbFileExists(path string) bool {
	if path == "" {
		return true
	}
	_, err := os.Stat(path)
	return err == nil
}

// removeNewDB removes the files of a database this start created.
func removeNewDB(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".lock"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepRefusal explains a sweep that would delete more than sweepLimit.
func sweepRefusal(cfg Config, root string, e *vfs.UnreferencedError) error {
	return refusal(
		fmt.Sprintf("the files root %s holds %d files (%d bytes) that no file entry of the database %s references; a boot deletes at most %d unasked", root, e.Count, e.Bytes, cfg.dbName(), e.Max),
		"if this is not the database these files belong to (a mistyped "+cfg.dbFlag()+", a database restored from an older backup), pass the right one",
		fmt.Sprintf("if the database is right (say a member with many files was deleted just before a crash), delete them on purpose: svc files sweep --config-path %s %s", cfg.ConfigPath, cfg.dbArgs()),
	)
}
