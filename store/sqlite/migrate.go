package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationsFS embed.FS

// Each database has its own directory of numbered migrations.
const (
	mainMigrations     = "migrations/main"
	activityMigrations = "migrations/activity"
)

type migration struct {
	version int
	name    string
	sql     string
}

func subFS(dir string) fs.FS {
	sub, err := fs.Sub(migrationsFS, dir)
	if err != nil {
		panic(err) // dir is a constant naming an embedded directory
	}
	return sub
}

// loadMigrations reads the files NNNN_name.sql of fsys, ordered by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	ms := make([]migration, 0, len(names))
	for _, name := range names {
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive number and an underscore", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %q and %q share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations")
	}
	return ms, nil
}

// migrate applies every migration of fsys not yet recorded in
// schema_migrations, each in its own transaction. It refuses a database that
// a newer build has migrated past what this build knows.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, o options) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL
) STRICT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if newest := ms[len(ms)-1].version; current > newest {
		return fmt.Errorf("database schema version %d is newer than this build knows (%d)", current, newest)
	}
	for _, m := range ms {
		applied, err := applyMigration(ctx, db, m, o)
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if applied {
			o.log.InfoContext(ctx, "applied migration", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// applyMigration runs m unless it is recorded. The check is inside the
// transaction, whose write lock serialises two processes migrating at once.
func applyMigration(ctx context.Context, db *sql.DB, m migration, o options) (applied bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`, m.version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.version, o.now().UnixMilli()); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
