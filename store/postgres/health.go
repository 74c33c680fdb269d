package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"svc/store"
)

// Health implements store.HealthReporter: why the store is failing now
// (GET /healthz), or nil.
func (db *DB) Health() error { return db.c.health.err() }

// Health implements store.HealthReporter for the activity store.
func (db *ActivityDB) Health() error { return db.c.health.err() }

// health is what the store's own writes say about its database, as
// store/sqlite's health says about its file: whether writes fail because
// the server is unreachable, its disk is full or its disk fails, and
// whether damage was ever seen. A write failure clears with a success
// once store.FailureHold has passed since the last failure; damage stays
// until the broker restarts (docs/DECISIONS.md, "PostgreSQL store's
// health").
type health struct {
	log      *slog.Logger
	database string // the database's name, never the URL (it may hold a password)

	write   store.Failing // the server's disk refuses or fails writes
	reach   store.Failing // the server cannot be reached, by a read or a write
	damaged store.Failing
	use     store.Failing // the use lock is lost and cannot be taken again (uselock.go)
}

func newHealth(database string, o options) *health {
	return &health{
		log: o.log, database: database,
		write:   store.Failing{What: "writes", Now: o.now},
		reach:   store.Failing{What: "database connections", Now: o.now},
		damaged: store.Failing{What: "data", Now: o.now},
		// A lock taken again is held: nothing to hold the report for.
		use: store.Failing{What: "use lock", Now: o.now, Hold: time.Nanosecond},
	}
}

// failure is what an error says about the database under the store.
type failure int

const (
	failNone        failure = iota // not about the database (a constraint, a bad query, the caller's context)
	failFull                       // the server's disk has no room
	failIO                         // the server's disk failed a read or write
	failDamaged                    // a page or an index is corrupted
	failUnavailable                // the server cannot be reached or dropped the connection
)

// failureOfErr classifies the error of an operation run under ctx. An
// operation the caller cancelled or timed out says nothing about the
// database, even though pgx closes the connection it ran on.
func failureOfErr(ctx context.Context, err error) failure {
	if err == nil || ctx.Err() != nil {
		return failNone
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return failFull
		case pe.Code == "XX001", pe.Code == "XX002": // data_corrupted, index_corrupted
			return failDamaged
		case pe.Code == "58030": // io_error
			return failIO
		case strings.HasPrefix(pe.Code, "08"), // connection_exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return failUnavailable
		}
		return failNone
	}
	switch {
	case errors.Is(err, store.ErrStorageFull):
		return failFull
	case errors.Is(err, store.ErrDamaged):
		return failDamaged
	case errors.Is(err, store.ErrUnavailable):
		return failUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// A timeout of the connection's own (connect_timeout) with the
		// caller's context alive is an unreachable server.
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			return failUnavailable
		}
		return failNone
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNREFUSED):
		return failUnavailable
	}
	return failNone
}

// withSentinel adds the store sentinel err's failure means, when err does
// not carry it yet (an error a transaction's closure returned
// untranslated, a lost connection), so callers and Health see the kind.
func withSentinel(kind failure, err error) error {
	var sentinel error
	switch kind {
	case failFull:
		sentinel = store.ErrStorageFull
	case failDamaged:
		sentinel = store.ErrDamaged
	case failUnavailable:
		sentinel = store.ErrUnavailable
	default:
		return err
	}
	if errors.Is(err, sentinel) {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// wrote takes the outcome of a write transaction run under ctx; lost
// says its connection was closed under it (pgx closes a connection on a
// network error or a FATAL from the server). It returns err with its
// sentinel added. A failure about the database marks the store failing,
// a success clears that (after the hold); other errors change nothing.
func (h *health) wrote(ctx context.Context, err error, lost bool) error {
	if err == nil {
		h.succeeded(&h.write, "store writes succeed again")
		h.succeeded(&h.reach, "database reachable again")
		return nil
	}
	kind := failureOfErr(ctx, err)
	if kind == failNone && lost && ctx.Err() == nil {
		kind = failUnavailable
	}
	return h.failed(kind, &h.write, "store write failed", err)
}

// read takes the outcome of a read and returns its error with its
// sentinel added: a read reaches the server or not, and may find damage;
// it says nothing about room to write.
func (h *health) read(ctx context.Context, err error) error {
	if err == nil {
		h.succeeded(&h.reach, "database reachable again")
		return nil
	}
	kind := failureOfErr(ctx, err)
	if kind != failDamaged && kind != failUnavailable {
		return err
	}
	return h.failed(kind, nil, "", err)
}

func (h *health) succeeded(f *store.Failing, msg string) {
	if ended := f.Succeed(); ended != nil {
		h.log.Info(msg, "database", h.database, "failing_since", ended.Since)
	}
}

// failed records a failure of kind in its slot (slot: a write's disk
// failures), logging at error level when a run of failures begins: an
// operator must act, and one line per run keeps a server that is down
// from flooding the log from here (each refused request is logged where
// it is answered). It returns err with its sentinel added.
func (h *health) failed(kind failure, slot *store.Failing, msg string, err error) error {
	if kind == failNone {
		return err
	}
	err = withSentinel(kind, err)
	switch {
	case kind == failDamaged:
		if h.damaged.Fail(err) {
			h.log.Error("store damaged: stop the broker, then repair or restore the database", "database", h.database, "err", err)
		}
	case kind == failUnavailable:
		if h.reach.Fail(err) {
			h.log.Error("database unreachable", "database", h.database, "err", err)
		}
	case slot != nil:
		if slot.Fail(err) {
			h.log.Error(msg, "database", h.database, "err", err)
		}
	}
	return err
}

// err returns why the store is failing now, or nil: one
// *store.FailingError per failing kind.
func (h *health) err() error {
	var errs []error
	for _, f := range []*store.Failing{&h.damaged, &h.use, &h.reach, &h.write} {
		if fe := f.Err(); fe != nil {
			errs = append(errs, fe)
		}
	}
	return errors.Join(errs...)
}
