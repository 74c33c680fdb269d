package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"

	"svc/store"
)

// health is what a database's own operations say about its storage, for
// Health (GET /healthz): whether writes fail for want of room or of a
// working disk, whether the checkpointer can copy the WAL, and whether
// damage was ever seen. Write and checkpoint failures clear with a
// success once store.FailureHold has passed since the last failure;
// damage stays until the process restarts, whose startup check then
// refuses the file.
type health struct {
	log  *slog.Logger
	path string

	write   store.Failing
	ckpt    store.Failing
	damaged store.Failing
}

func newHealth(path string, o options) *health {
	return &health{
		log: o.log, path: path,
		write:   store.Failing{What: "writes", Now: o.now},
		ckpt:    store.Failing{What: "wal checkpoints", Now: o.now},
		damaged: store.Failing{What: "data", Now: o.now},
	}
}

// wrote takes the outcome of a write (a transaction, or a statement on
// the writer outside one): a storage failure marks the store failing, a
// success clears that (after the hold). Errors that are not about the
// storage (a constraint, a cancelled context) change nothing.
func (h *health) wrote(err error) {
	if h == nil {
		return
	}
	if err == nil {
		if ended := h.write.Succeed(); ended != nil {
			h.log.Info("store writes succeed again", "db", h.path, "failing_since", ended.Since)
		}
		return
	}
	h.failed(&h.write, "store write failed", err)
}

// read takes the error of a read: only damage counts, a read says
// nothing about room to write.
func (h *health) read(err error) {
	if h != nil && failureOfErr(err) == failDamaged {
		h.failed(nil, "", err)
	}
}

// checkpointed takes the outcome of a checkpoint.
func (h *health) checkpointed(err error) {
	if h == nil {
		return
	}
	switch {
	case err == nil:
		if ended := h.ckpt.Succeed(); ended != nil {
			h.log.Info("wal checkpoints succeed again", "db", h.path, "failing_since", ended.Since)
		}
	case failureOfErr(err) == failNone:
		h.log.Warn("wal checkpoint failed; retrying", "db", h.path, "err", err)
	default:
		h.failed(&h.ckpt, "wal checkpoint failed; retrying", err)
	}
}

// failed records a storage failure in slot (nil: damage alone), damage
// also in its own slot, logging at error level when a run of failures
// begins: an operator must act, and one line per run keeps a full disk
// from flooding the log from here (each refused request is logged where
// it is answered).
func (h *health) failed(slot *store.Failing, msg string, err error) {
	kind := failureOfErr(err)
	if kind == failNone {
		return
	}
	err = withSentinel(err)
	if kind == failDamaged {
		if h.damaged.Fail(err) {
			h.log.Error("store damaged: stop the broker, then run svc check", "db", h.path, "err", err)
		}
		return
	}
	if slot.Fail(err) {
		h.log.Error(msg, "db", h.path, "err", err)
	}
}

// err returns why the store is failing now, or nil: one
// *store.FailingError per failing slot.
func (h *health) err() error {
	var errs []error
	for _, f := range []*store.Failing{&h.damaged, &h.write, &h.ckpt} {
		if fe := f.Err(); fe != nil {
			errs = append(errs, fe)
		}
	}
	return errors.Join(errs...)
}

// watched is a handle whose statements report to health: the writer's
// every outcome, the readers' damage. Transactions report through withTx.
type watched struct {
	db     *sql.DB
	h      *health
	writer bool
}

func (w watched) observe(err error) {
	if w.writer {
		w.h.wrote(err)
	} else {
		w.h.read(err)
	}
}

func (w watched) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := w.db.ExecContext(ctx, query, args...)
	w.observe(err)
	return res, err
}

func (w watched) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := w.db.QueryContext(ctx, query, args...)
	if err != nil {
		// A failed query says nothing about room to write; only damage.
		w.h.read(err)
	}
	return rows, err
}

// QueryRowContext passes through: its error surfaces at Scan, where
// translate gives it its sentinel.
func (w watched) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return w.db.QueryRowContext(ctx, query, args...)
}
