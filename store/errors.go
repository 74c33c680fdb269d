package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors every backend returns, wrapped, so callers test them with
// errors.Is and never see driver errors.
var (
	// ErrNotFound means the addressed record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique key is already taken.
	ErrConflict = errors.New("conflict")
	// ErrPrecondition means a referenced record is missing or an invariant of
	// the stored data would break.
	ErrPrecondition = errors.New("precondition failed")
	// ErrStorageFull means the disk (or a file size limit) has no room for
	// the write: nothing of it was stored, and the same write succeeds once
	// space is freed.
	ErrStorageFull = errors.New("storage full")
	// ErrDamaged means the stored data is damaged: the database file is
	// malformed or is not a database. It does not heal by retrying.
	ErrDamaged = errors.New("stored data damaged")
	// ErrUnavailable means the store could not reach its database server
	// (down, restarting, the connection lost): the write failed and may
	// succeed once the server is back. Only a server store returns it.
	ErrUnavailable = errors.New("database unreachable")
	// ErrInUse means another process holds the store in a mode that
	// excludes this one: a second broker or a maintenance command. A
	// server store returns it when it lost its use lock and cannot take it
	// again.
	ErrInUse = errors.New("in use by another process")
)

// HealthReporter is a store that watches its own failures (a full disk,
// I/O errors, damage), for GET /healthz.
type HealthReporter interface {
	// Health returns why the store is failing now, or nil when its last
	// write succeeded and no damage was seen: one *FailingError, or
	// several joined.
	Health() error
}

// FailingError is one thing a store reports failing now (Health).
type FailingError struct {
	// What fails: "writes", "wal checkpoints", "file writes"; "data" for
	// damage.
	What string
	// Since is the first failure of the run.
	Since time.Time
	// Err is that failure; it wraps ErrStorageFull, ErrDamaged or
	// ErrUnavailable when it is one.
	Err error
}

func (e *FailingError) Error() string {
	return fmt.Sprintf("%s failing since %s: %v", e.What, e.Since.UTC().Format(time.RFC3339), e.Err)
}

func (e *FailingError) Unwrap() error { return e.Err }
