package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

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
	}
	return fmt.Errorf("%s: %w", op, err)
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
