package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"syscall"

	"github.com/mattn/go-sqlite3"

	"svc/store"
)

// translate is the one place driver errors become store sentinels. Errors it
// recognises carry only the sentinel, so no driver error leaks to callers;
// the rest (context errors included) stay wrapped for errors.Is and logs.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
			return fmt.Errorf("%s: %w", op, store.ErrConflict)
		case sqlite3.ErrConstraintForeignKey:
			return fmt.Errorf("%s: %w", op, store.ErrPrecondition)
		}
		// The driver's text ("database or disk is full") stays for the
		// log; its type does not leak.
		switch failureOf(se) {
		case failFull:
			return fmt.Errorf("%s: %w (%s)", op, store.ErrStorageFull, se.Error())
		case failDamaged:
			return fmt.Errorf("%s: %w (%s)", op, store.ErrDamaged, se.Error())
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// failure is what an error says about the storage under a database.
type failure int

const (
	failNone    failure = iota // not about the storage (a constraint, a bad query, a context)
	failFull                   // no room: the disk, a quota or a file size limit
	failIO                     // the disk failed a read or write
	failDamaged                // the file is malformed or not a database
)

// failureOf classifies a driver error. SQLite reports a full disk as
// SQLITE_FULL when a write comes up short; a write refused outright (over
// a file size limit, EFBIG; over a quota, EDQUOT) or an fsync of a full
// disk is an SQLITE_IOERR carrying the errno.
func failureOf(se sqlite3.Error) failure {
	switch {
	case se.Code == sqlite3.ErrFull, fullErrno(se.SystemErrno):
		return failFull
	case se.Code == sqlite3.ErrCorrupt, se.Code == sqlite3.ErrNotADB:
		return failDamaged
	case se.Code == sqlite3.ErrIoErr:
		return failIO
	}
	return failNone
}

// fullErrno reports whether errno means there is no room to write.
func fullErrno(errno syscall.Errno) bool {
	return errno == syscall.ENOSPC || errno == syscall.EDQUOT || errno == syscall.EFBIG
}

// failureOfErr classifies any error: the store's sentinels, or a driver
// error somewhere in its chain.
func failureOfErr(err error) failure {
	switch {
	case err == nil:
		return failNone
	case errors.Is(err, store.ErrStorageFull):
		return failFull
	case errors.Is(err, store.ErrDamaged):
		return failDamaged
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		return failureOf(se)
	}
	return failNone
}

// withSentinel adds ErrStorageFull or ErrDamaged to an error whose driver
// error says so and that does not carry the sentinel yet (an error a
// transaction's closure returned untranslated).
func withSentinel(err error) error {
	if err == nil || errors.Is(err, store.ErrStorageFull) || errors.Is(err, store.ErrDamaged) {
		return err
	}
	switch failureOfErr(err) {
	case failFull:
		return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
	case failDamaged:
		return fmt.Errorf("%w: %w", store.ErrDamaged, err)
	}
	return err
}

// notFound returns ErrNotFound when a write addressed no row.
func notFound(op string, res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return translate(op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
}
