package store

import "errors"

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
)
