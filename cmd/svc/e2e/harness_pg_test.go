package e2e

// PostgreSQL mode of the harness. With SVC_E2E_STORE=postgres every `svc
// serve` child runs on PostgreSQL through --db-url: one pgtest cluster for
// the whole run (or the server SVC_TEST_PG_URL names), and one database per
// dbPath, the same each time that dbPath is used, so restart, kill -9 and
// crash tests find their data. A child without a dbPath (in-memory SQLite
// in the default mode) gets the database of its config: a fresh one for a
// new config, the same one when it restarts on that config. A fresh
// database at each restart would be refused: a durable store writes its
// team id into the config, and the boot guard will not pair that config
// with an empty database (docs/DECISIONS.md, Operations). A child whose
// procOpts.store is "sqlite" stays on SQLite: its test is about SQLite's
// files (docs/TESTING.md).

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/store/postgres/pgtest"
)

const (
	// storeEnv selects the store of the run's brokers: "" or "sqlite"
	// (the default), or "postgres".
	storeEnv = "SVC_E2E_STORE"

	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// runStore is the store of this run's children, from storeEnv.
var runStore = func() string {
	switch s := os.Getenv(storeEnv); s {
	case "", storeSQLite:
		return storeSQLite
	case storePostgres:
		return storePostgres
	default:
		fmt.Fprintf(os.Stderr, "e2e: %s=%q: want %q or %q\n", storeEnv, s, storeSQLite, storePostgres)
		os.Exit(2)
		return ""
	}
}()

var (
	pgOnce    sync.Once
	pgCluster *pgtest.Cluster
	pgErr     error

	pgDBsMu sync.Mutex
	// pgDBs maps a child's dbPath to the database that stands for it.
	pgDBs = map[string]string{}
)

// pgClusterFor returns the run's cluster, started on first use (a run whose
// children all stay on SQLite starts none); stopPG stops it.
func pgClusterFor(t testing.TB) *pgtest.Cluster {
	t.Helper()
	pgOnce.Do(func() { pgCluster, pgErr = pgtest.Start(context.Background()) })
	if pgErr != nil {
		t.Fatalf("PostgreSQL for the e2e brokers: %v", pgErr)
	}
	return pgCluster
}

func stopPG() {
	if pgCluster != nil {
		pgCluster.Stop()
	}
}

// storeOf is the store a child with opts runs on.
func storeOf(opts procOpts) string {
	switch opts.store {
	case "":
		return runStore
	case storeSQLite, storePostgres:
		return opts.store
	}
	panic(fmt.Sprintf("procOpts.store %q: want %q or %q", opts.store, storeSQLite, storePostgres))
}

// pgDatabaseFor returns the database URL of a child with opts: the one
// created on the first use of its dbPath, or of its configPath when it has
// no dbPath.
func pgDatabaseFor(t testing.TB, opts procOpts) string {
	t.Helper()
	c := pgClusterFor(t)
	key := opts.dbPath
	if key == "" {
		key = "config:" + opts.configPath
	}
	pgDBsMu.Lock()
	defer pgDBsMu.Unlock()
	if u, ok := pgDBs[key]; ok {
		return u
	}
	u := c.NewDatabase(t)
	pgDBs[key] = u
	t.Cleanup(func() {
		pgDBsMu.Lock()
		delete(pgDBs, key)
		pgDBsMu.Unlock()
	})
	return u
}

// storeArgs are the flags that put a serve child with opts on its store.
// A child whose env names its database (SVC_DB_URL, SVC_DB_PATH) gets none:
// its test chose the database.
func storeArgs(t testing.TB, opts procOpts) []string {
	t.Helper()
	if opts.dbPath == "" && slices.ContainsFunc(opts.env, func(kv string) bool {
		return strings.HasPrefix(kv, "SVC_DB_URL=") || strings.HasPrefix(kv, "SVC_DB_PATH=")
	}) {
		return nil
	}
	if storeOf(opts) == storePostgres {
		return []string{"--db-url", pgDatabaseFor(t, opts)}
	}
	if opts.dbPath != "" {
		return []string{"--db-path", opts.dbPath}
	}
	return nil
}

// pgMaintenanceArgs rewrites `--db-path P` of a maintenance command (check,
// prune, admin token, kek, files sweep) to `--db-url` of the database that
// stands for P, when a PostgreSQL child used P: the command then acts on
// the data that child wrote. Any other P is left as it is. A `svc serve`
// without a database on the config of a PostgreSQL child gets that
// child's database, as a restart of the child would.
func pgMaintenanceArgs(args []string) []string {
	pgDBsMu.Lock()
	defer pgDBsMu.Unlock()
	if len(pgDBs) == 0 {
		return args
	}
	out := slices.Clone(args)
	named := false
	for i := 0; i+1 < len(out); i++ {
		switch out[i] {
		case "--db-url":
			named = true
		case "--db-path":
			named = true
			if u, ok := pgDBs[out[i+1]]; ok {
				out[i], out[i+1] = "--db-url", u
			}
		}
	}
	if len(out) > 0 && out[0] == "serve" && !named {
		if i := slices.Index(out, "--config-path"); i >= 0 && i+1 < len(out) {
			if u, ok := pgDBs["config:"+out[i+1]]; ok {
				out = append(out, "--db-url", u)
			}
		}
	}
	return out
}

// requirePGLacks requires that no row of any table in the database of a
// PostgreSQL child with opts holds any of secrets, as text or as the hex
// of a bytea: what reading a SQLite file's bytes checks on SQLite.
func requirePGLacks(t testing.TB, opts procOpts, secrets ...string) {
	t.Helper()
	require.Equal(t, storePostgres, storeOf(opts))
	u := pgDatabaseFor(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	for _, table := range tables {
		var dump string
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(string_agg(x::text, E'\n'), '') FROM `+table+` x`).Scan(&dump))
		for _, s := range secrets {
			// Not NotContains: the failure would print the whole table.
			require.False(t, strings.Contains(dump, s), "table %s holds %q", table, s)
			require.False(t, strings.Contains(dump, hex.EncodeToString([]byte(s))), "table %s holds %q in a bytea", table, s)
		}
	}
}
