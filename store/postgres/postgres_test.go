package postgres

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/store"
	"svc/store/postgres/pgtest"
	"svc/store/storetest"
)

// cluster is the test binary's PostgreSQL (pgtest).
var cluster *pgtest.Cluster

func TestMain(m *testing.M) {
	c, err := pgtest.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "store/postgres tests need PostgreSQL:", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// MustOpen opens the main store on a fresh database and closes it when tb
// ends.
func MustOpen(tb testing.TB, opts ...Option) *DB {
	tb.Helper()
	url := cluster.NewDatabaseFrom(tb, "main", func(url string) error {
		db, err := Open(context.Background(), url)
		if err != nil {
			return err
		}
		return db.Close()
	})
	db, err := Open(context.Background(), url, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

// MustOpenActivity opens the activity store on a fresh database and
// closes it when tb ends.
func MustOpenActivity(tb testing.TB, opts ...Option) *ActivityDB {
	tb.Helper()
	url := cluster.NewDatabaseFrom(tb, "activity", func(url string) error {
		db, err := OpenActivity(context.Background(), url)
		if err != nil {
			return err
		}
		return db.Close()
	})
	db, err := OpenActivity(context.Background(), url, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

func TestStore(t *testing.T) {
	storetest.RunAll(t, func(t *testing.T) store.Store { return MustOpen(t) })
}

func TestActivity(t *testing.T) {
	storetest.RunActivity(t, func(t *testing.T) store.ActivityStore { return MustOpenActivity(t) })
}

// TestConcurrentOpenMigratesOnce opens stores on one fresh database at
// once, as brokers starting together would: each migration is applied
// once, under its advisory lock, and every open succeeds.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	for _, kind := range []string{"main", "activity"} {
		t.Run(kind, func(t *testing.T) {
			url := cluster.NewDatabase(t)
			const n = 4
			errs := make(chan error, n)
			for range n {
				go func() {
					var (
						c   interface{ Close() error }
						err error
					)
					if kind == "main" {
						c, err = Open(t.Context(), url)
					} else {
						c, err = OpenActivity(t.Context(), url)
					}
					if err == nil {
						err = c.Close()
					}
					errs <- err
				}()
			}
			for range n {
				require.NoError(t, <-errs)
			}
			conn, err := pgx.Connect(t.Context(), url)
			require.NoError(t, err)
			defer conn.Close(t.Context())
			table := "schema_migrations"
			if kind == "activity" {
				table = "activity_schema_migrations"
			}
			var rows, versions int
			require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version) FROM `+table).Scan(&rows, &versions))
			require.Equal(t, versions, rows)
			require.Positive(t, rows)
		})
	}
}

// TestMessageIDsAreCommitOrder runs two stores on one database, as two
// brokers would, appending messages from several goroutines each, while a
// reader pages through them by id the way a resuming stream does: every
// page it reads must start right after the last id it saw, with no id
// missing. A missing id would be one a later read shows, which a stream
// that resumed past it never delivers (docs/DECISIONS.md, "PostgreSQL
// store").
func TestMessageIDsAreCommitOrder(t *testing.T) {
	url := cluster.NewDatabaseFrom(t, "main", func(url string) error {
		db, err := Open(context.Background(), url)
		if err != nil {
			return err
		}
		return db.Close()
	})
	var brokers [2]*DB
	for i := range brokers {
		db, err := Open(t.Context(), url)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		brokers[i] = db
	}
	const (
		writersPerBroker = 3
		batches          = 15
		perBatch         = 4
		total            = len(brokers) * writersPerBroker * batches * perBatch
	)
	ctx := t.Context()
	errs := make(chan error, len(brokers)*writersPerBroker)
	for b, db := range brokers {
		for w := range writersPerBroker {
			go func() {
				for i := range batches {
					msgs := make([]store.Message, perBatch)
					for j := range msgs {
						msgs[j] = store.Message{From: fmt.Sprintf("b%dw%d", b, w), Thread: "chan:general",
							Body: fmt.Sprint(i, j), Level: "info", All: true}
					}
					if _, err := db.AppendMessages(ctx, msgs); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
	}
	// The reader follows the broadcasts as member "reader" would.
	var last int64
	seen := 0
	for seen < total {
		page, err := brokers[seen%2].MessagesFor(ctx, "reader", last, 50)
		require.NoError(t, err)
		for _, m := range page {
			require.Equal(t, last+1, m.Seq, "a reader saw id %d before id %d", m.Seq, last+1)
			last = m.Seq
			seen++
		}
	}
	for range len(brokers) * writersPerBroker {
		require.NoError(t, <-errs)
	}
	n, err := brokers[0].LastMessageSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(total), n)
}

// TestWritersWaitingLeaveConnectionsForReads runs more write transactions
// at once than the pool has connections, each reading through the store
// (not the transaction) while it holds the write lock, as code written
// against SQLite's separate read pool may: the waiting writers must not
// hold every connection, or the lock holder's read never gets one.
func TestWritersWaitingLeaveConnectionsForReads(t *testing.T) {
	url := cluster.NewDatabaseFrom(t, "main", func(url string) error {
		db, err := Open(context.Background(), url)
		if err != nil {
			return err
		}
		return db.Close()
	})
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	db, err := Open(t.Context(), u.String())
	require.NoError(t, err)
	// Bounded: the pool's Close waits for every connection to come back,
	// which writers stuck on each other's connections may never do.
	t.Cleanup(func() {
		closed := make(chan error, 1)
		go func() { closed <- db.Close() }()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("Close still waits for pooled connections after 10s")
		}
	})
	require.NoError(t, db.PutMember(t.Context(), store.Member{Name: "alice"}))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const writers = 4
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			errs <- db.WithTx(ctx, func(tx store.Tx) error {
				if _, err := db.GetMember(ctx, "alice"); err != nil {
					return err
				}
				return tx.PutMember(ctx, store.Member{Name: fmt.Sprint("m", i)})
			})
		}()
	}
	// The test fails, rather than hangs, when the writers deadlock: one
	// of these transactions takes milliseconds.
	deadline := time.After(20 * time.Second)
	for range writers {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-deadline:
			cancel()
			t.Fatal("the write transactions still wait after 20s: the waiting writers hold every pooled connection, so the lock holder's read gets none")
		}
	}
	members, err := db.ListMembers(t.Context())
	require.NoError(t, err)
	require.Len(t, members, writers+1)
}
