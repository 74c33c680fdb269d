package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/mattn/go-sqlite3"
)

// defaultCheckpointEvery is how often, at most, the checkpointer copies
// the WAL into the database file: each copy ends with an fsync of that
// file, so once a second bounds what it adds to the disk's load, and the
// WAL to about a second of writes.
const defaultCheckpointEvery = time.Second

// journalSizeLimit is the size the writer truncates the WAL back to when
// it starts it over: about a second of writes at the peak measured
// (docs/PERFORMANCE.md), so steady load reuses the file without growing
// it again every second, while a burst's larger WAL does not stay.
const journalSizeLimit = 4 << 20

// checkpointer copies the WAL into the database file off the commit path.
// With wal_autocheckpoint=0 on the writer, a commit only appends to the
// WAL and fsyncs it (durability is unchanged: an acknowledged commit is in
// the fsynced WAL, which recovery replays). The checkpointer runs PASSIVE
// checkpoints from its own connection, which copy what no reader still
// needs and never wait for or block the writer; once the whole WAL is
// copied, the writer's next transaction starts it over from the top, so it
// does not grow. It checkpoints only when something was committed since
// its last look (PRAGMA data_version). The first look that finds nothing
// new runs one TRUNCATE checkpoint, which empties the WAL file: an idle
// broker holds no WAL on disk (space a full disk needs back) and then
// does no I/O until the next commit.
//
// Its connection never waits on a lock (busy_timeout 0): a TRUNCATE that
// meets a reader or a writer gives up at once and is tried again on the
// next idle tick, instead of holding the write lock while it waits.
type checkpointer struct {
	db     *sql.DB
	health *health
	cancel context.CancelFunc
	done   chan struct{}
	// version is the data_version at the last checkpoint.
	version int64
	// truncated is set once the WAL was emptied after the last commit.
	truncated bool
}

// newCheckpointDB returns the checkpointer's handle on the file abs: the
// settings of params and want, but no busy wait.
func newCheckpointDB(abs string, params url.Values, want []pragma) *sql.DB {
	p := cloneValues(params)
	p.Set("_busy_timeout", "0")
	w := make([]pragma, 0, len(want))
	for _, pr := range want {
		if pr.name == "busy_timeout" {
			pr.want = "0"
		}
		w = append(w, pr)
	}
	return newDB(fileDSN(abs, p), w)
}

func startCheckpointer(ctx context.Context, db *sql.DB, every time.Duration, h *health) (*checkpointer, error) {
	// data_version is per connection: the checkpointer must keep one.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect checkpointer: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ck := &checkpointer{db: db, health: h, cancel: cancel, done: make(chan struct{}), version: -1}
	go ck.run(rctx, every)
	return ck, nil
}

func (ck *checkpointer) run(ctx context.Context, every time.Duration) {
	defer close(ck.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := ck.pass(ctx); ctx.Err() == nil {
				ck.health.checkpointed(err)
			}
		}
	}
}

// Outcomes of a pass.
const (
	passIdle      = "idle"      // nothing to do
	passCopied    = "copied"    // a PASSIVE checkpoint after new commits
	passTruncated = "truncated" // the idle TRUNCATE emptied the WAL
	passBusy      = "busy"      // the idle TRUNCATE met a reader or writer
)

// pass checkpoints when another connection committed since the last
// pass, truncates the WAL on the first pass that finds nothing new, and
// says which it did.
func (ck *checkpointer) pass(ctx context.Context) (string, error) {
	var v int64
	if err := ck.db.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return "", translate("wal checkpoint", err)
	}
	if v == ck.version {
		if ck.truncated {
			return passIdle, nil
		}
		busy, err := ck.checkpoint(ctx, "TRUNCATE")
		switch {
		case isBusy(err):
			return passBusy, nil
		case err != nil:
			return "", err
		case busy:
			return passBusy, nil
		}
		ck.truncated = true
		return passTruncated, nil
	}
	if _, err := ck.checkpoint(ctx, "PASSIVE"); err != nil {
		return "", err
	}
	// Copied in full or not, the next pass looks again only after a new
	// commit; a WAL a reader kept from copying in full is finished then.
	ck.version = v
	ck.truncated = false
	return passCopied, nil
}

// checkpoint runs PRAGMA wal_checkpoint(mode) and reports whether it was
// blocked before it finished.
func (ck *checkpointer) checkpoint(ctx context.Context, mode string) (bool, error) {
	var busy, logFrames, copied int
	if err := ck.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logFrames, &copied); err != nil {
		return false, translate("wal checkpoint", err)
	}
	return busy != 0, nil
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// stop ends the checkpointer and closes its connection. The database's
// last connection to close (the writer) checkpoints what is left.
func (ck *checkpointer) stop() error {
	ck.cancel()
	<-ck.done
	return ck.db.Close()
}
