package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"

	"svc/store"
)

// DefaultStartupCheck bounds the quick_check opening a file runs. quick_check
// reads every page once; it was measured at about a second per 250 MB here
// (docs/OPERATIONS.md), so the default covers a few gigabytes. A larger
// file is opened unchecked when the budget runs out, with a warning naming
// svc check, which runs the full check without a bound.
const DefaultStartupCheck = 10 * time.Second

// maxFindings bounds the lines a check reports: the first ones say
// enough to decide, and a badly damaged file has thousands.
const maxFindings = 20

// DamagedError refuses a database file that is damaged or not a database
// at all. It wraps store.ErrDamaged.
type DamagedError struct {
	Path string
	// NotADatabase is set when the file is not an SQLite database (its
	// header is wrong: another file, or one overwritten from the start).
	NotADatabase bool
	// Findings are what the check reported, at most maxFindings lines.
	Findings []string
}

func (e *DamagedError) Error() string {
	if e.NotADatabase {
		return fmt.Sprintf("%s is not an SQLite database (%s)", e.Path, strings.Join(e.Findings, "; "))
	}
	return fmt.Sprintf("%s is damaged: %s", e.Path, strings.Join(e.Findings, "; "))
}

func (e *DamagedError) Unwrap() error { return store.ErrDamaged }

// damagedAtOpen is the refusal of a file whose first reads failed with
// SQLITE_CORRUPT or SQLITE_NOTADB.
func damagedAtOpen(abs string, err error) error {
	var notDB bool
	msg := err.Error()
	var se sqlite3.Error
	if errors.As(err, &se) {
		notDB = se.Code == sqlite3.ErrNotADB
		msg = se.Error()
	}
	return &DamagedError{Path: abs, NotADatabase: notDB, Findings: []string{msg}}
}

// startupCheck runs PRAGMA quick_check on the writer before migrations,
// bounded by o.startupCheck: a damaged file refuses to open. When the
// budget runs out first, the file is opened with a warning: refusing to
// start because a large database is slow to check would be worse.
func startupCheck(ctx context.Context, db *sql.DB, abs string, o options) error {
	if o.startupCheck <= 0 {
		return nil
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, o.startupCheck)
	defer cancel()
	findings, err := integrityCheck(cctx, db, "quick_check")
	switch {
	case err != nil && ctx.Err() == nil && cctx.Err() != nil:
		o.log.Warn("startup integrity check did not finish in time; the database was opened unchecked: run svc check",
			"db", abs, "budget", o.startupCheck)
		return nil
	case err != nil && failureOfErr(err) == failDamaged:
		return damagedAtOpen(abs, err)
	case err != nil:
		return fmt.Errorf("quick_check: %w", err)
	case len(findings) > 0:
		return &DamagedError{Path: abs, Findings: findings}
	}
	o.log.Debug("startup integrity check passed", "db", abs, "took", time.Since(start))
	return nil
}

// integrityCheck runs PRAGMA <pragma>(maxFindings) and returns what it
// found, nil when the database is sound.
func integrityCheck(ctx context.Context, db *sql.DB, pragma string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "PRAGMA "+pragma+"("+strconv.Itoa(maxFindings)+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 1 && out[0] == "ok" {
		return nil, nil
	}
	if len(out) == 0 {
		return nil, errors.New(pragma + " returned nothing")
	}
	return out, nil
}

// Inspector reads a database file for svc check: read-only, without the
// file's lock or migrations, so it runs beside a broker as well as
// without one.
type Inspector struct {
	db   *sql.DB
	path string
}

// Inspect opens the database file at path read-only. A missing file is
// an error wrapping fs.ErrNotExist; nothing is created. A file that is not
// a database is a *DamagedError.
func Inspect(ctx context.Context, path string) (*Inspector, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolve path: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, err
	}
	params := url.Values{"mode": {"ro"}, "_busy_timeout": {strconv.Itoa(busyTimeoutMS)}}
	db := newDB(fileDSN(abs, params), nil)
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if failureOfErr(err) == failDamaged {
			return nil, damagedAtOpen(abs, err)
		}
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	return &Inspector{db: db, path: abs}, nil
}

// Path is the absolute path of the file.
func (i *Inspector) Path() string { return i.path }

// Close closes the file.
func (i *Inspector) Close() error { return i.db.Close() }

// IntegrityCheck runs the full PRAGMA integrity_check (every page, every
// index against its table), with no time bound but ctx's. It returns at
// most maxFindings findings, nil when the file is sound; a file that is
// not a database is a finding too.
func (i *Inspector) IntegrityCheck(ctx context.Context) ([]string, error) {
	findings, err := integrityCheck(ctx, i.db, "integrity_check")
	if err != nil && failureOfErr(err) == failDamaged {
		var de *DamagedError
		if errors.As(damagedAtOpen(i.path, err), &de) {
			return de.Findings, nil
		}
	}
	return findings, err
}

// FileBlob is the content of a file entry as the main database records
// it.
type FileBlob = store.FileBlob

// FileBlobs lists the blobs file entries reference, each with one of
// those entries, ordered by sha.
func (i *Inspector) FileBlobs(ctx context.Context) ([]FileBlob, error) {
	// Inspect runs no migrations: a database from before fs_inline keeps
	// every content on disk.
	var inline bool
	if err := i.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'fs_inline')`).Scan(&inline); err != nil {
		return nil, translate("list file blobs", err)
	}
	onDisk := ""
	if inline {
		onDisk = ` AND NOT EXISTS (SELECT 1 FROM fs_inline i WHERE i.sha = b.sha)`
	}
	rows, err := i.db.QueryContext(ctx, `SELECT b.sha, b.size, (SELECT e.path FROM fs_entries e WHERE e.blob = b.sha ORDER BY e.path LIMIT 1)
FROM fs_blobs b WHERE b.refs > 0`+onDisk+` ORDER BY b.sha`)
	if err != nil {
		return nil, translate("list file blobs", err)
	}
	defer rows.Close()
	var out []FileBlob
	for rows.Next() {
		var b FileBlob
		var path sql.NullString
		if err := rows.Scan(&b.SHA, &b.Size, &path); err != nil {
			return nil, translate("list file blobs", err)
		}
		b.Path = path.String
		out = append(out, b)
	}
	return out, translate("list file blobs", rows.Err())
}

// InlineContents calls fn with each content kept in the database (table
// fs_inline) that a file entry references, with one of those entries and
// the stored bytes, ordered by sha: svc check hashes them, because
// integrity_check checks pages and indexes, never a BLOB's bytes. fn must
// not use the Inspector. A database from before fs_inline has none.
func (i *Inspector) InlineContents(ctx context.Context, fn func(b FileBlob, data []byte) error) error {
	const op = "list inline contents"
	var inline bool
	if err := i.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'fs_inline')`).Scan(&inline); err != nil {
		return translate(op, err)
	}
	if !inline {
		return nil
	}
	rows, err := i.db.QueryContext(ctx, `SELECT b.sha, b.size, (SELECT e.path FROM fs_entries e WHERE e.blob = b.sha ORDER BY e.path LIMIT 1), i.data
FROM fs_blobs b JOIN fs_inline i ON i.sha = b.sha WHERE b.refs > 0 ORDER BY b.sha`)
	if err != nil {
		return translate(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var b FileBlob
		var path sql.NullString
		var data []byte
		if err := rows.Scan(&b.SHA, &b.Size, &path, &data); err != nil {
			return translate(op, err)
		}
		b.Path = path.String
		if err := fn(b, data); err != nil {
			return err
		}
	}
	return translate(op, rows.Err())
}

// BlobReferenced reports whether a file entry references sha now: a blob
// found missing while a broker runs may have been removed with its last
// entry since FileBlobs listed it.
func (i *Inspector) BlobReferenced(ctx context.Context, sha string) (bool, error) {
	var ok bool
	err := i.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries WHERE blob = ?)`, sha).Scan(&ok)
	return ok, translate("fs blob referenced", err)
}
