package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"svc/store"
)

// health is what a database's own operations say about its storage, for
// Health (GET /healthz): whether writes fail for want of room or of a
// working disk, whether the checkpointer can copy the WAL, and whether
// damage was ever seen. Write and checkpoint failures clear with the next
// success; damage stays until the process restarts, whose startup check
// then refuses the file.
type health struct {
	log  *slog.Logger
	path string
	now  func() time.Time

	write   atomic.Pointer[problem]
	ckpt    atomic.Pointer[problem]
	damaged atomic.Pointer[problem]
}

// problem is a failure and when its run of failures began.
type problem struct {
	err   error
	since time.Time
}

func newHealth(path string, o options) *health {
	return &health{log: o.log, path: path, now: o.now}
}

// wrote takes the outcome of a write (a transaction, or a statement on
// the writer outside one): a storage failure marks the store failing, a
// success clears that. Errors that are not about the storage (a
// constraint, a cancelled context) change nothing.
func (h *health) wrote(err error) {
	if h == nil {
		return
	}
	if err == nil {
		if p := h.write.Load(); p != nil && h.write.CompareAndSwap(p, nil) {
			h.log.Info("store writes succeed again", "db", h.path, "failing_since", p.since)
		}
		return
	}
	h.failed(&h.write, "store write failed", err)
}

// read takes the error of a read: only damage counts, a read says
// nothing about room to write.
func (h *health) read(err error) {
	if h != nil && failureOfErr(err) == failDamaged {
		h.failed(&h.write, "store read failed", err)
	}
}

// checkpointed takes the outcome of a checkpoint.
func (h *health) checkpointed(err error) {
	if h == nil {
		return
	}
	switch {
	case err == nil:
		if p := h.ckpt.Load(); p != nil && h.ckpt.CompareAndSwap(p, nil) {
			h.log.Info("wal checkpoints succeed again", "db", h.path, "failing_since", p.since)
		}
	case failureOfErr(err) == failNone:
		h.log.Warn("wal checkpoint failed; retrying", "db", h.path, "err", err)
	default:
		h.failed(&h.ckpt, "wal checkpoint failed; retrying", err)
	}
}

// failed records a storage failure in slot (damage also in its own,
// sticky slot), logging at error level when a run of failures begins:
// an operator must act, and one line per run keeps a full disk from
// flooding the log from here (each refused request is logged where it is
// answered).
func (h *health) failed(slot *atomic.Pointer[problem], msg string, err error) {
	kind := failureOfErr(err)
	if kind == failNone {
		return
	}
	p := &problem{err: withSentinel(err), since: h.now()}
	if kind == failDamaged && h.damaged.CompareAndSwap(nil, p) {
		h.log.Error("store damaged: stop the broker, then run svc check", "db", h.path, "err", err)
	}
	if slot.CompareAndSwap(nil, p) {
		h.log.Error(msg, "db", h.path, "err", err)
	}
}

// err returns why the store is failing now, or nil: one
// *store.FailingError per failing slot.
func (h *health) err() error {
	var errs []error
	damaged := h.damaged.Load()
	if damaged != nil {
		errs = append(errs, &store.FailingError{What: "data", Since: damaged.since, Err: damaged.err})
	}
	if p := h.write.Load(); p != nil && p != damaged {
		errs = append(errs, &store.FailingError{What: "writes", Since: p.since, Err: p.err})
	}
	if p := h.ckpt.Load(); p != nil {
		errs = append(errs, &store.FailingError{What: "wal checkpoints", Since: p.since, Err: p.err})
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
