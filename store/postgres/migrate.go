package postgres

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations
var migrationsFS embed.FS

// Each database has its own directory of numbered migrations.
const (
	mainMigrations     = "migrations/main"
	activityMigrations = "migrations/activity"
)

// testMigrations, set by tests, are migrations of a later build: added
// to those of their directory.
var testMigrations = map[string][]migration{}

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the files NNNN_name.sql of dir, ordered by version.
func loadMigrations(dir string) ([]migration, error) {
	fsys, err := fs.Sub(migrationsFS, dir)
	if err != nil {
		return nil, err
	}
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
	ms = append(ms, testMigrations[dir]...)
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

// migrate applies every migration of dir not yet recorded in its
// schema_migrations table, each in its own transaction holding the
// migration lock key, so brokers starting at once apply each one once. It
// refuses a database a newer build has migrated past what this one knows.
func migrate(ctx context.Context, pool *pgxpool.Pool, dir string, key int64, o options) error {
	ms, err := loadMigrations(dir)
	if err != nil {
		return err
	}
	table := migrationsTable(dir)
	for _, m := range ms {
		applied, err := applyMigration(ctx, pool, table, m, key, ms[len(ms)-1].version, o)
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if applied {
			o.log.InfoContext(ctx, "applied migration", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// migrationsTable is the table that records dir's applied migrations.
func migrationsTable(dir string) string {
	if dir == activityMigrations {
		// The activity store may share the main store's database.
		return "activity_schema_migrations"
	}
	return "schema_migrations"
}

// applyMigration runs m unless it is recorded; the advisory lock makes the
// check and the run one step across processes.
func applyMigration(ctx context.Context, pool *pgxpool.Pool, table string, m migration, key int64, newest int, o options) (applied bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
	version    BIGINT PRIMARY KEY,
	applied_at BIGINT NOT NULL
)`); err != nil {
			return fmt.Errorf("create %s: %w", table, err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+table).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > newest {
			return fmt.Errorf("database schema version %d is newer than this build knows (%d)", current, newest)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE version = $1)`, m.version).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, applied_at) VALUES ($1, $2)`, m.version, o.now().UnixMilli()); err != nil {
			return err
		}
		applied = true
		return nil
	})
	return applied, err
}
