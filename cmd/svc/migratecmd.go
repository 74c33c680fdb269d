package main

// svc migrate: a team's stores copied from SQLite into PostgreSQL, table by
// table, in one PostgreSQL transaction (one per database when the
// activity store is in another), verified by counts and a
// checksum per table before anything commits (docs/OPERATIONS.md, Moving a
// team to PostgreSQL; docs/DECISIONS.md, "svc migrate").

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	// The source files are read through database/sql's sqlite3 driver.
	_ "github.com/mattn/go-sqlite3"

	"svc/store/postgres"
	"svc/store/sqlite"
)

const migrateUsage = `usage: svc migrate --from sqlite:PATH --to postgres://... [flags]

Copies a team's data from its SQLite files (the main store at PATH and its
activity store, PATH-activity.db unless --from-activity names another) into
PostgreSQL: the schema is created with the store's own migrations, every
table is copied in primary-key order inside one transaction (one per
database when the activity store is in another), and
each table's row count and SHA-256 are computed on both sides and compared
before anything commits. Any difference rolls everything back.

The broker must be stopped (the main file's lock is taken), and the target
must hold no team yet: a freshly created schema, or an empty database.
--replace-target deletes what the target holds first; two teams are never
merged. Only database rows are copied: the files' bytes stay under the
files root the team config names, and sealed values are copied as they
are, so the same config and KEK serve the broker on PostgreSQL.

Exit status: 0 when everything was copied and verified, 1 on a refusal or a
failed verification (nothing committed), 2 on a usage error. See
docs/OPERATIONS.md.

flags:
`

// migrateOptions is what svc migrate was asked to do.
type migrateOptions struct {
	from, fromActivity string // SQLite files, absolute
	to, toActivity     string // PostgreSQL URLs
	replace            bool
	// afterCopy, set by tests, runs in each store's transaction once its
	// rows are copied and before they are verified.
	afterCopy func(ctx context.Context, store string, tx pgx.Tx) error
}

// migrateCommand runs svc migrate.
func migrateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() { fmt.Fprint(fset.Output(), migrateUsage); fset.PrintDefaults() }
	from := fset.String("from", "", "the main store: sqlite:PATH (required)")
	fromAct := fset.String("from-activity", "", "the activity store: sqlite:PATH; default sqlite:PATH-activity.db")
	to := fset.String("to", os.Getenv("SVC_DB_URL"), "the target database: postgres://... (env SVC_DB_URL)")
	toAct := fset.String("to-activity", os.Getenv("SVC_ACTIVITY_DB_URL"), "the activity store's target database; default the same as --to (env SVC_ACTIVITY_DB_URL)")
	replace := fset.Bool("replace-target", false, "delete every row the target's svc tables hold before copying (replaces a team there, never merges)")
	if done, err := parseFlags(fset, args); done {
		return err
	}
	o, err := migrateConfig(*from, *fromAct, *to, *toAct)
	if err != nil {
		return err
	}
	o.replace = *replace
	return runMigrate(ctx, o, stdout)
}

// migrateConfig checks the command line's sources and targets.
func migrateConfig(from, fromAct, to, toAct string) (migrateOptions, error) {
	var o migrateOptions
	usage := func(format string, a ...any) (migrateOptions, error) {
		return o, &exitError{code: 2, err: fmt.Errorf(format, a...)}
	}
	path, ok := strings.CutPrefix(from, "sqlite:")
	if from == "" || !ok || path == "" || isMemory(path) {
		return usage("--from must name the main store's file as sqlite:PATH")
	}
	actPath := path + "-activity.db"
	if fromAct != "" {
		if actPath, ok = strings.CutPrefix(fromAct, "sqlite:"); !ok || actPath == "" || isMemory(actPath) {
			return usage("--from-activity must name the activity store's file as sqlite:PATH")
		}
	}
	var err error
	if o.from, err = filepath.Abs(path); err != nil {
		return o, err
	}
	if o.fromActivity, err = filepath.Abs(actPath); err != nil {
		return o, err
	}
	if o.from == o.fromActivity {
		return usage("--from and --from-activity name the same file")
	}
	if to == "" {
		return usage("--to must name the target database (or SVC_DB_URL)")
	}
	if o.to, err = parseDBURL("--to", to); err != nil {
		return o, err
	}
	o.toActivity = o.to
	if toAct != "" {
		if o.toActivity, err = parseDBURL("--to-activity", toAct); err != nil {
			return o, err
		}
	}
	return o, nil
}

// storeCopy is one store on its way: its SQLite snapshot and its
// PostgreSQL transaction.
type storeCopy struct {
	name    string // "main" or "activity"
	srcPath string
	dstURL  string
	src     *sql.Tx
	srcDB   *sql.DB
	conn    *pgx.Conn
	tx      pgx.Tx
	// shared: conn and tx are another store's (both stores in one
	// database), which commits and closes them.
	shared bool
	plan   *storePlan
}

// runMigrate copies both stores and commits them only when both verify.
func runMigrate(ctx context.Context, o migrateOptions, stdout io.Writer) (err error) {
	start := time.Now()
	for _, src := range []struct{ path, store, table string }{{o.from, "main", "members"}, {o.fromActivity, "activity", "activity"}} {
		if err := holdsStore(ctx, src.path, src.store, src.table); err != nil {
			return err
		}
	}
	// Opening the stores as svc serve does takes the main file's lock (a
	// running broker refuses it), checks the files and brings them to
	// this build's schema, which is the one the target gets.
	mainDB, err := sqlite.Open(ctx, o.from)
	if err != nil {
		return fmt.Errorf("open the main store: %w (stop the broker first)", err)
	}
	defer func() { err = errors.Join(err, mainDB.Close()) }()
	actDB, err := sqlite.OpenActivity(ctx, o.fromActivity)
	if err != nil {
		return fmt.Errorf("open the activity store: %w", err)
	}
	defer func() { err = errors.Join(err, actDB.Close()) }()

	// The target's schema comes from the store's own migrations, and its
	// use lock, held alone until the end, keeps brokers off it.
	pm, err := postgres.Open(ctx, o.to, postgres.WithUseLock(true))
	if err != nil {
		return fmt.Errorf("the target %s: %w", redactDBURL(o.to), err)
	}
	defer func() { err = errors.Join(err, pm.Close()) }()
	pa, err := postgres.OpenActivity(ctx, o.toActivity)
	if err != nil {
		return fmt.Errorf("the activity target %s: %w", redactDBURL(o.toActivity), err)
	}
	defer func() { err = errors.Join(err, pa.Close()) }()

	stores := []*storeCopy{
		{name: "main", srcPath: o.from, dstURL: o.to},
		{name: "activity", srcPath: o.fromActivity, dstURL: o.toActivity},
	}
	defer func() {
		for _, s := range stores {
			s.close(ctx)
		}
	}()
	if err := stores[0].open(ctx, nil); err != nil {
		return err
	}
	// Both stores in one database are copied in one transaction: all or
	// nothing, with no moment where the main store is in and the
	// activity store not. In a database of its own the activity store
	// gets its own transaction, and that database's use lock is held
	// alone as the main one's is (a broker holds it shared there).
	same, err := sameDatabase(ctx, stores[0].conn, o.toActivity)
	if err != nil {
		return fmt.Errorf("activity store: %w", err)
	}
	if same {
		err = stores[1].open(ctx, stores[0])
	} else if err = pa.Use(ctx, true); err != nil {
		err = fmt.Errorf("the activity target %s: %w", redactDBURL(o.toActivity), err)
	} else {
		err = stores[1].open(ctx, nil)
	}
	if err != nil {
		return err
	}
	if err := planStores(ctx, stores[0], stores[1]); err != nil {
		return err
	}

	copyStart := time.Now()
	fmt.Fprintln(stdout, "svc migrate copies database rows only: the files' bytes stay under the files root the team config names, and sealed values are copied as they are (the same KEK opens them).")
	for _, s := range stores {
		fmt.Fprintf(stdout, "%s store: %s -> %s\n", s.name, s.srcPath, redactDBURL(s.dstURL))
		if err := s.copy(ctx, o); err != nil {
			return fmt.Errorf("%s store: %w", s.name, err)
		}
	}
	copied := time.Since(copyStart)
	verifyStart := time.Now()
	bad := 0
	var rows, bytes int64
	tables := 0
	for _, s := range stores {
		checks, err := verifyStore(ctx, s.src, s.tx, s.plan)
		if err != nil {
			return fmt.Errorf("%s store: verify: %w", s.name, err)
		}
		fmt.Fprintf(stdout, "\n%s store, verified on both sides:\n", s.name)
		bad += printChecks(stdout, checks)
		for _, c := range checks {
			rows += c.src.rows
			bytes += c.src.bytes
			tables++
		}
	}
	verified := time.Since(verifyStart)
	if bad > 0 {
		return &exitError{code: 1, err: fmt.Errorf("verification failed: %d table(s) differ between SQLite and PostgreSQL; nothing was committed", bad)}
	}
	for i, s := range stores {
		if s.shared {
			continue // committed with the store whose transaction it is in
		}
		if err := s.tx.Commit(ctx); err != nil {
			if i > 0 {
				// Only with the activity store in another database: rare
				// (the connection lost between two commits), and loud: the
				// main store is in, the activity store not.
				return fmt.Errorf("%s store: commit: %w; the main store was committed: run again with --replace-target", s.name, err)
			}
			return fmt.Errorf("%s store: commit: %w; nothing was committed", s.name, err)
		}
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "\ncommitted: %d tables, %d rows, %s in %.1f s (%.0f rows/s; copy %.1f s, verification %.1f s)\n",
		tables, rows, humanBytes(bytes), took.Seconds(), float64(rows)/max(took.Seconds(), 1e-3), copied.Seconds(), verified.Seconds())
	fmt.Fprintln(stdout, "next: start svc serve with --db-url (and --activity-db-url when the activity store is elsewhere) and the same team config and KEK; keep the SQLite files until the broker on PostgreSQL has served the team.")
	return nil
}

// holdsStore refuses a source file that is not the store it is named as
// (the activity file given as the main store, an empty file), before
// opening it as svc serve does would add a store's tables to it.
func holdsStore(ctx context.Context, path, store, table string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("the %s store: %w", store, err)
	}
	db, err := sql.Open("sqlite3", readOnlyDSN(path))
	if err != nil {
		return err
	}
	defer db.Close()
	var ok bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?)`, table).Scan(&ok); err != nil {
		return fmt.Errorf("the %s store %s: %w", store, path, err)
	}
	if !ok {
		return &exitError{code: 1, err: fmt.Errorf("%s does not hold svc's %s store (no %s table); nothing was changed", path, store, table)}
	}
	return nil
}

// readOnlyDSN opens an SQLite file read-only.
func readOnlyDSN(path string) string {
	params := url.Values{"mode": {"ro"}, "_busy_timeout": {"5000"}}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: params.Encode()}
	return u.String()
}

// open reads the SQLite file in one read transaction (a snapshot) and
// begins the PostgreSQL transaction, or joins with's when with is not nil.
func (s *storeCopy) open(ctx context.Context, with *storeCopy) error {
	db, err := sql.Open("sqlite3", readOnlyDSN(s.srcPath))
	if err != nil {
		return fmt.Errorf("%s store: %w", s.name, err)
	}
	db.SetMaxOpenConns(1)
	s.srcDB = db
	if s.src, err = db.BeginTx(ctx, nil); err != nil {
		return fmt.Errorf("%s store: read %s: %w", s.name, s.srcPath, err)
	}
	if with != nil {
		s.conn, s.tx, s.shared = with.conn, with.tx, true
		return nil
	}
	if s.conn, err = pgx.Connect(ctx, s.dstURL); err != nil {
		return fmt.Errorf("%s store: connect to %s: %w", s.name, redactDBURL(s.dstURL), err)
	}
	if s.tx, err = s.conn.Begin(ctx); err != nil {
		return fmt.Errorf("%s store: begin: %w", s.name, err)
	}
	// A broker on the target holds locks the copy needs: fail rather
	// than wait for ever.
	if _, err := s.tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
		return fmt.Errorf("%s store: %w", s.name, err)
	}
	return nil
}

// sameDatabase reports whether url names the database conn is connected
// to, however the two URLs are spelt (a host name and its address, a
// socket and localhost): advisory locks are scoped to the database, so a
// lock conn holds is refused to a session of the same database only.
func sameDatabase(ctx context.Context, conn *pgx.Conn, url string) (bool, error) {
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", redactDBURL(url), err)
	}
	defer func() { _ = other.Close(context.WithoutCancel(ctx)) }()
	// A random key: no other holder of an advisory lock uses it.
	key := int64(rand.Uint64()) //nolint:gosec // a lock key, not a secret
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return false, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key) }()
	var got bool
	if err := other.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		return false, err
	}
	return !got, nil // other's lock goes with its connection
}

// close rolls back whatever did not commit and closes the connections.
func (s *storeCopy) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if s.tx != nil && !s.shared {
		_ = s.tx.Rollback(ctx)
	}
	if s.conn != nil && !s.shared {
		_ = s.conn.Close(ctx)
	}
	if s.src != nil {
		_ = s.src.Rollback()
	}
	if s.srcDB != nil {
		_ = s.srcDB.Close()
	}
}

// copy empties the target's tables (refusing a target that holds a team
// unless o.replace), copies every table and sets the counters.
func (s *storeCopy) copy(ctx context.Context, o migrateOptions) error {
	p := s.plan
	if !o.replace {
		if err := checkEmpty(ctx, s.tx, p); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(p.tables)+len(p.counters))
	for _, t := range p.tables {
		names = append(names, pgx.Identifier{t.name}.Sanitize())
	}
	for _, c := range p.counters {
		names = append(names, pgx.Identifier{c.table}.Sanitize())
	}
	// In a fresh schema this removes only the rows the migrations seed
	// (the general channel, the counters at 0), which the copy brings
	// back as the source has them.
	if _, err := s.tx.Exec(ctx, `TRUNCATE `+strings.Join(names, ", ")+` RESTART IDENTITY`); err != nil {
		return fmt.Errorf("empty the target: %w", lockHint(err))
	}
	// The rows are copied as they are, counts kept by triggers included
	// (fs_blobs, fs_usage): the triggers would count them twice.
	for _, t := range p.triggered {
		if _, err := s.tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{t}.Sanitize()+` DISABLE TRIGGER USER`); err != nil {
			return fmt.Errorf("table %s: disable its triggers for the copy: %w", t, lockHint(err))
		}
	}
	for _, t := range p.tables {
		if err := copyTable(ctx, s.src, s.tx, t); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	for _, t := range p.triggered {
		if _, err := s.tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{t}.Sanitize()+` ENABLE TRIGGER USER`); err != nil {
			return fmt.Errorf("table %s: enable its triggers: %w", t, err)
		}
	}
	if err := setCounters(ctx, s.tx, p); err != nil {
		return err
	}
	if o.afterCopy != nil {
		return o.afterCopy(ctx, s.name, s.tx)
	}
	return nil
}

// lockHint says what a lock timeout on the target most likely means.
func lockHint(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return fmt.Errorf("%w (is a broker running on the target? stop it first)", err)
	}
	return err
}

// printChecks prints the verification table and returns how many tables
// differ.
func printChecks(w io.Writer, checks []tableCheck) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  table\trows sqlite\trows postgres\tsha256 sqlite\tsha256 postgres\tcheck")
	bad := 0
	for _, c := range checks {
		verdict := "ok"
		if !c.equal() {
			verdict = "DIFFERS"
			bad++
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\n", c.table, c.src.rows, c.dst.rows, c.src.short(), c.dst.short(), verdict)
	}
	_ = tw.Flush()
	return bad
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
