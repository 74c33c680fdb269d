package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"svc/store"
)

// translate is the one place driver errors become store sentinels. Errors it
// recognises carry only the sentinel, so no driver error leaks to callers;
// the rest (context errors included) stay wrapped for errors.Is and logs.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505", // unique_violation
			"23P01": // exclusion_violation: a hash index's uniqueness (fs_entries.path)
			return fmt.Errorf("%s: %w", op, store.ErrConflict)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: %w", op, store.ErrPrecondition)
		case "53100": // disk_full. Not 54000 (program_limit_exceeded): a
			// value too long for an index is the request's, not a full
			// disk, and must not raise the storage alarm.
			return fmt.Errorf("%s: %w (%s)", op, store.ErrStorageFull, pe.Message)
		case "XX001", "XX002": // data_corrupted, index_corrupted
			return fmt.Errorf("%s: %w (%s)", op, store.ErrDamaged, pe.Message)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// notFound returns ErrNotFound when a write addressed no row.
func notFound(op string, res result) error {
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
