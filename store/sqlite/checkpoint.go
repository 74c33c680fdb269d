package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"
)

// defaultCheckpointEvery is how often, at most, the checkpointer copies
// the WAL into the database file: each copy ends with an fsync of that
// file, so once a second bounds what it adds to the disk's load, and the
// WAL to about a second of writes.
const defaultCheckpointEvery = time.Second

// checkpointer copies the WAL into the database file off the commit path.
// With wal_autocheckpoint=0 on the writer, a commit only appends to the
// WAL and fsyncs it (durability is unchanged: an acknowledged commit is in
// the fsynced WAL, which recovery replays). The checkpointer runs PASSIVE
// checkpoints from its own connection, which copy what no reader still
// needs and never wait for or block the writer; once the whole WAL is
// copied, the writer's next transaction starts it over from the top, so it
// does not grow. It checkpoints only when something was committed since
// its last look (PRAGMA data_version), so an idle broker does no I/O.
type checkpointer struct {
	db     *sql.DB
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	// version is the data_version at the last checkpoint.
	version int64
}

func startCheckpointer(ctx context.Context, db *sql.DB, every time.Duration, log *slog.Logger) (*checkpointer, error) {
	// data_version is per connection: the checkpointer must keep one.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect checkpointer: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ck := &checkpointer{db: db, log: log, cancel: cancel, done: make(chan struct{}), version: -1}
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
			if _, err := ck.pass(ctx); err != nil && ctx.Err() == nil {
				ck.log.Warn("wal checkpoint failed; retrying", "err", err)
			}
		}
	}
}

// pass checkpoints when another connection committed since the last
// pass, and reports whether it did.
func (ck *checkpointer) pass(ctx context.Context) (bool, error) {
	var v int64
	if err := ck.db.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false, err
	}
	if v == ck.version {
		return false, nil
	}
	var busy, logFrames, copied int
	if err := ck.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied); err != nil {
		return false, err
	}
	// Copied in full or not, the next pass looks again only after a new
	// commit; a WAL a reader kept from copying in full is finished then.
	ck.version = v
	return true, nil
}

// stop ends the checkpointer and closes its connection. The database's
// last connection to close (the writer) checkpoints what is left.
func (ck *checkpointer) stop() error {
	ck.cancel()
	<-ck.done
	return ck.db.Close()
}
