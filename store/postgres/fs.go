package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"svc/store"
)

// fsColumns are the columns scanFsEntry reads, in order.
const fsColumns = `id, path, owner, kind, size, mime_type, blob, created_at, updated_at`

// The DB versions of the multi-statement FsStore methods run them in one
// transaction; the queries versions assume q.w is one.

// CreateEntry stores an entry in one transaction.
func (db *DB) CreateEntry(ctx context.Context, e store.FsEntry) (store.FsEntry, error) {
	return inTx(ctx, db, func(q queries) (store.FsEntry, error) { return q.CreateEntry(ctx, e) })
}

// ReplaceFile replaces a file's content in one transaction.
func (db *DB) ReplaceFile(ctx context.Context, p string, c store.FsContent) (store.FsEntry, []string, error) {
	var purged []string
	out, err := inTx(ctx, db, func(q queries) (out store.FsEntry, err error) {
		out, purged, err = q.ReplaceFile(ctx, p, c)
		return out, err
	})
	return out, purged, err
}

// DeleteEntry removes an entry in one transaction.
func (db *DB) DeleteEntry(ctx context.Context, p string) ([]string, error) {
	return inTx(ctx, db, func(q queries) ([]string, error) { return q.DeleteEntry(ctx, p) })
}

// DeleteTree removes a subtree in one transaction.
func (db *DB) DeleteTree(ctx context.Context, p string) (int, []string, error) {
	var purged []string
	n, err := inTx(ctx, db, func(q queries) (n int, err error) {
		n, purged, err = q.DeleteTree(ctx, p)
		return n, err
	})
	return n, purged, err
}

// MoveEntry moves a file in one transaction.
func (db *DB) MoveEntry(ctx context.Context, m store.FsMove) (store.FsEntry, error) {
	return inTx(ctx, db, func(q queries) (store.FsEntry, error) { return q.MoveEntry(ctx, m) })
}

// GetEntry returns the entry at p, or a member's home.
func (q queries) GetEntry(ctx context.Context, p string) (store.FsEntry, error) {
	const op = "get fs entry"
	if isHome(p) {
		return q.home(ctx, op, q.r, p)
	}
	row := q.r.QueryRowContext(ctx, `SELECT `+fsColumns+` FROM fs_entries WHERE path = ?`, p)
	e, err := scanFsEntry(row)
	return e, translate(op, err)
}

// ListDir returns a page of dir's children ordered by name, or of the
// homes for "/".
func (q queries) ListDir(ctx context.Context, dir string, p store.Page) ([]store.FsEntry, error) {
	const op = "list fs dir"
	if dir == "/" {
		return q.homes(ctx, op, p)
	}
	d, err := q.GetEntry(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if d.Kind != store.FsDir {
		return nil, fmt.Errorf("%s: %s is not a directory: %w", op, dir, store.ErrPrecondition)
	}
	// Siblings share the parent prefix, so path order is name order.
	after := ""
	if p.After != "" {
		after = dir + "/" + p.After
	}
	return q.queryFsEntries(ctx, op, q.r, `SELECT `+fsColumns+` FROM fs_entries WHERE parent = ? AND path > ? ORDER BY path LIMIT ?`,
		dir, after, limitOrAll(p.Limit))
}

// fsBelow is the condition that col is within [?1, ?2): the fs_key bounds
// let the btree on fs_key(path) find the range, since no btree holds a
// whole path (migrations/main/0005_long_values.sql).
func fsBelow(col string) string {
	return `fs_key(` + col + `) >= fs_key(?1) AND fs_key(` + col + `) <= fs_key(?2) AND ` + col + ` >= ?1 AND ` + col + ` < ?2`
}

// limitOrAll renders a page's limit for SQL, where NULL is no limit.
func limitOrAll(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}

// ListTree returns every entry below dir ordered by path.
func (q queries) ListTree(ctx context.Context, dir string) ([]store.FsEntry, error) {
	const op = "list fs tree"
	if dir == "/" {
		return q.queryFsEntries(ctx, op, q.r, `SELECT `+fsColumns+` FROM fs_entries ORDER BY fs_key(path), path`)
	}
	lo, hi := below(dir)
	return q.queryFsEntries(ctx, op, q.r, `SELECT `+fsColumns+` FROM fs_entries
WHERE `+fsBelow("path")+` ORDER BY fs_key(path), path`, lo, hi)
}

// CreateEntry stores a new entry; a file's blob row is created or counted
// up by the insert trigger. It runs several statements on q.w, which must
// be a transaction.
func (q queries) CreateEntry(ctx context.Context, e store.FsEntry) (store.FsEntry, error) {
	const op = "create fs entry"
	if err := checkEntryPath(op, e.Path); err != nil {
		return store.FsEntry{}, err
	}
	switch {
	case e.Owner == "":
		return store.FsEntry{}, fmt.Errorf("%s: no owner: %w", op, store.ErrPrecondition)
	case e.Kind == store.FsFile && (!validSHA(e.Blob) || e.Size < 0):
		return store.FsEntry{}, fmt.Errorf("%s: a file needs a sha-256 blob and a size: %w", op, store.ErrPrecondition)
	case e.Kind == store.FsDir && (e.Blob != "" || e.Size != 0 || e.MimeType != ""):
		return store.FsEntry{}, fmt.Errorf("%s: a directory has no content: %w", op, store.ErrPrecondition)
	case e.Kind != store.FsFile && e.Kind != store.FsDir:
		return store.FsEntry{}, fmt.Errorf("%s: kind %q: %w", op, e.Kind, store.ErrPrecondition)
	}
	parent := path.Dir(e.Path)
	if err := q.requireDir(ctx, op, parent); err != nil {
		return store.FsEntry{}, err
	}
	e.CreatedAt = fromMS(q.orNow(e.CreatedAt).UnixMilli())
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = e.CreatedAt
	}
	e.UpdatedAt = fromMS(e.UpdatedAt.UnixMilli())
	// A taken path fails the whole statement, the trigger's blob count
	// included, so nothing is left half done.
	row := q.w.QueryRowContext(ctx, `INSERT INTO fs_entries (path, parent, owner, kind, size, mime_type, blob, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		e.Path, parent, e.Owner, e.Kind, e.Size, e.MimeType, nullString(e.Blob), e.CreatedAt.UnixMilli(), e.UpdatedAt.UnixMilli())
	if err := row.Scan(&e.ID); err != nil {
		return store.FsEntry{}, translate(op, err)
	}
	return e, nil
}

// ReplaceFile sets a file's content; the update triggers move the blob
// reference. It runs several statements on q.w, which must be a
// transaction.
func (q queries) ReplaceFile(ctx context.Context, p string, c store.FsContent) (store.FsEntry, []string, error) {
	const op = "replace fs file"
	if !validSHA(c.Blob) || c.Size < 0 {
		return store.FsEntry{}, nil, fmt.Errorf("%s: a file needs a sha-256 blob and a size: %w", op, store.ErrPrecondition)
	}
	if err := q.requireFile(ctx, op, p); err != nil {
		return store.FsEntry{}, nil, err
	}
	row := q.w.QueryRowContext(ctx, `UPDATE fs_entries SET blob = ?, size = ?, mime_type = ?, updated_at = ?
WHERE path = ? RETURNING `+fsColumns, c.Blob, c.Size, c.MimeType, q.orNow(c.UpdatedAt).UnixMilli(), p)
	e, err := scanFsEntry(row)
	if err != nil {
		return store.FsEntry{}, nil, translate(op, err)
	}
	purged, err := q.purgeUnreferenced(ctx, op)
	if err != nil {
		return store.FsEntry{}, nil, err
	}
	return e, purged, nil
}

// DeleteEntry removes a file or an empty directory. It runs several
// statements on q.w, which must be a transaction.
func (q queries) DeleteEntry(ctx context.Context, p string) ([]string, error) {
	const op = "delete fs entry"
	var (
		id   int64
		kind string
	)
	if err := q.w.QueryRowContext(ctx, `SELECT id, kind FROM fs_entries WHERE path = ?`, p).Scan(&id, &kind); err != nil {
		return nil, translate(op, err)
	}
	if kind == store.FsDir {
		var children bool
		if err := q.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries WHERE parent = ?)`, p).Scan(&children); err != nil {
			return nil, translate(op, err)
		}
		if children {
			return nil, fmt.Errorf("%s: %s is not empty: %w", op, p, store.ErrPrecondition)
		}
	}
	if _, err := q.w.ExecContext(ctx, `DELETE FROM fs_entries WHERE id = ?`, id); err != nil {
		return nil, translate(op, err)
	}
	return q.purgeUnreferenced(ctx, op)
}

// DeleteTree removes the entry at p and everything below it. It runs
// several statements on q.w, which must be a transaction.
func (q queries) DeleteTree(ctx context.Context, p string) (int, []string, error) {
	const op = "delete fs tree"
	if p == "/" {
		return 0, nil, fmt.Errorf("%s: refusing to delete the root: %w", op, store.ErrPrecondition)
	}
	if !cleanAbs(p) {
		return 0, nil, fmt.Errorf("%s: %q is not a clean absolute path: %w", op, p, store.ErrPrecondition)
	}
	lo, hi := below(p)
	res, err := q.w.ExecContext(ctx, `DELETE FROM fs_entries WHERE path = ?3 OR (`+fsBelow("path")+`)`, lo, hi, p)
	if err != nil {
		return 0, nil, translate(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, nil, translate(op, err)
	}
	if n == 0 {
		// An empty home still exists; anything else that removed nothing
		// was not there. A departed member's home is gone, but its
		// leftover entries (n > 0) are removed all the same.
		if !isHome(p) {
			return 0, nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
		}
		if _, err := q.home(ctx, op, q.w, p); err != nil {
			return 0, nil, err
		}
	}
	purged, err := q.purgeUnreferenced(ctx, op)
	if err != nil {
		return 0, nil, err
	}
	return int(n), purged, nil
}

// MoveEntry renames a file. It runs several statements on q.w, which must
// be a transaction.
func (q queries) MoveEntry(ctx context.Context, m store.FsMove) (store.FsEntry, error) {
	const op = "move fs entry"
	if err := checkEntryPath(op, m.To); err != nil {
		return store.FsEntry{}, err
	}
	if err := q.requireFile(ctx, op, m.From); err != nil {
		return store.FsEntry{}, err
	}
	if m.To == m.From {
		return store.FsEntry{}, fmt.Errorf("%s: %s exists: %w", op, m.To, store.ErrConflict)
	}
	parent := path.Dir(m.To)
	if err := q.requireDir(ctx, op, parent); err != nil {
		return store.FsEntry{}, err
	}
	row := q.w.QueryRowContext(ctx, `UPDATE fs_entries SET path = ?, parent = ?, owner = COALESCE(NULLIF(?, ''), owner), updated_at = ?
WHERE path = ? RETURNING `+fsColumns, m.To, parent, m.Owner, q.orNow(m.UpdatedAt).UnixMilli(), m.From)
	e, err := scanFsEntry(row)
	return e, translate(op, err)
}

// GrantEntries grants read of the files with the given entry IDs.
func (q queries) GrantEntries(ctx context.Context, ids []int64, grantees []string) error {
	const op = "grant fs entries"
	if len(ids) == 0 || len(grantees) == 0 {
		return nil
	}
	is, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	gs, err := json.Marshal(grantees)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err = q.w.ExecContext(ctx, `INSERT INTO fs_grants (entry_id, grantee)
SELECT e.id, g.value FROM fs_entries e, jsonb_array_elements_text(?2::jsonb) g
WHERE e.id IN (SELECT value::bigint FROM jsonb_array_elements_text(?1::jsonb)) AND e.kind = 'file'
	AND (g.value = '*' OR EXISTS (SELECT 1 FROM members m WHERE m.name = g.value))
ON CONFLICT (entry_id, grantee) DO NOTHING`, string(is), string(gs))
	return translate(op, err)
}

// HasGrant reports whether the file at p is granted to member or Everyone.
func (q queries) HasGrant(ctx context.Context, p, member string) (bool, error) {
	if member == "" {
		return false, nil
	}
	var ok bool
	err := q.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries e JOIN fs_grants g ON g.entry_id = e.id
WHERE e.path = ? AND e.kind = 'file' AND g.grantee IN (?, '*'))`, p, member).Scan(&ok)
	return ok, translate("has fs grant", err)
}

// SharedWith returns the files granted to member or Everyone outside
// member's home, ordered by path.
func (q queries) SharedWith(ctx context.Context, member string, p store.Page) ([]store.FsEntry, error) {
	lo, hi := below("/" + member)
	return q.queryFsEntries(ctx, "fs shared with", q.r, `SELECT `+fsColumns+` FROM fs_entries
WHERE kind = 'file' AND path > ? AND NOT (path >= ? AND path < ?)
	AND id IN (SELECT entry_id FROM fs_grants WHERE grantee IN (?, '*'))
ORDER BY path LIMIT ?`, p.After, lo, hi, member, limitOrAll(p.Limit))
}

// SharedBelow reports whether a file shared with member is at p or below.
func (q queries) SharedBelow(ctx context.Context, member, p string) (bool, error) {
	homeLo, homeHi := below("/" + member)
	lo, hi := below(p)
	var ok bool
	err := q.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries e JOIN fs_grants g ON g.entry_id = e.id
WHERE g.grantee IN (?, '*') AND e.kind = 'file'
	AND (e.path = ? OR (e.path >= ? AND e.path < ?))
	AND NOT (e.path >= ? AND e.path < ?))`, member, p, lo, hi, homeLo, homeHi).Scan(&ok)
	return ok, translate("fs shared below", err)
}

// Usage returns the bytes of the files in member's home.
// The triggers of migration 0007 keep the sum in fs_usage.
func (q queries) Usage(ctx context.Context, member string) (int64, error) {
	var n int64
	err := q.r.QueryRowContext(ctx, `SELECT COALESCE((SELECT bytes FROM fs_usage WHERE home = ?), 0)`, member).Scan(&n)
	return n, translate("fs usage", err)
}

// BlobReferenced reports whether a file entry references sha.
func (q queries) BlobReferenced(ctx context.Context, sha string) (bool, error) {
	var ok bool
	err := q.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries WHERE blob = ?)`, sha).Scan(&ok)
	return ok, translate("fs blob referenced", err)
}

// PutInline keeps data as the content sha, in one transaction.
func (db *DB) PutInline(ctx context.Context, sha string, data []byte) error {
	_, err := inTx(ctx, db, func(q queries) (struct{}, error) { return struct{}{}, q.PutInline(ctx, sha, data) })
	return err
}

// PutInline keeps data as the content sha, whose blob row an entry written
// before it in the transaction q.w is made (the reference triggers)
// created. The row's size was the entry's, so a mismatch is refused.
func (q queries) PutInline(ctx context.Context, sha string, data []byte) error {
	const op = "put inline fs content"
	if err := store.CheckInline(sha, data); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var size int64
	if err := q.w.QueryRowContext(ctx, `SELECT size FROM fs_blobs WHERE sha = ? AND refs > 0`, sha).Scan(&size); err != nil {
		return translate(op, err)
	}
	if size != int64(len(data)) {
		return fmt.Errorf("%s: %d bytes for a blob of %d: %w", op, len(data), size, store.ErrPrecondition)
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO fs_inline (sha, data) VALUES (?, ?) ON CONFLICT (sha) DO NOTHING`, sha, data)
	return translate(op, err)
}

// InlineContent returns the content sha kept in the database.
func (q queries) InlineContent(ctx context.Context, sha string) ([]byte, error) {
	var data []byte
	err := q.r.QueryRowContext(ctx, `SELECT data FROM fs_inline WHERE sha = ?`, sha).Scan(&data)
	return data, translate("get inline fs content", err)
}

// purgeUnreferenced deletes the blob rows the statements before it left
// without references and returns their shas, sorted.
func (q queries) purgeUnreferenced(ctx context.Context, op string) ([]string, error) {
	rows, err := q.w.QueryContext(ctx, `DELETE FROM fs_blobs WHERE refs = 0 RETURNING sha`)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, sha)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	slices.Sort(out)
	return out, nil
}

// requireDir fails with ErrPrecondition unless dir is a member's home or a
// directory entry.
func (q queries) requireDir(ctx context.Context, op, dir string) error {
	var (
		exists bool
		err    error
	)
	switch {
	case dir == "/":
	case isHome(dir):
		err = q.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM members WHERE name = ?)`, dir[1:]).Scan(&exists)
	default:
		err = q.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries WHERE path = ? AND kind = 'dir')`, dir).Scan(&exists)
	}
	if err != nil {
		return translate(op, err)
	}
	if !exists {
		return fmt.Errorf("%s: parent %s is not a directory: %w", op, dir, store.ErrPrecondition)
	}
	return nil
}

// requireFile fails with ErrNotFound when p is absent and ErrPrecondition
// when it is a directory.
func (q queries) requireFile(ctx context.Context, op, p string) error {
	var kind string
	if err := q.w.QueryRowContext(ctx, `SELECT kind FROM fs_entries WHERE path = ?`, p).Scan(&kind); err != nil {
		if isHome(p) && isNoRows(err) {
			return fmt.Errorf("%s: %s is a home: %w", op, p, store.ErrPrecondition)
		}
		return translate(op, err)
	}
	if kind != store.FsFile {
		return fmt.Errorf("%s: %s is a directory: %w", op, p, store.ErrPrecondition)
	}
	return nil
}

// home returns the home p of an existing member as a directory entry.
func (q queries) home(ctx context.Context, op string, h dbtx, p string) (store.FsEntry, error) {
	row := h.QueryRowContext(ctx, `SELECT name, created_at, updated_at FROM members WHERE name = ?`, p[1:])
	e, err := scanHome(row)
	return e, translate(op, err)
}

// homes returns every member's home ordered by name.
func (q queries) homes(ctx context.Context, op string, p store.Page) ([]store.FsEntry, error) {
	return collect(ctx, q.r, op, scanHome, `SELECT name, created_at, updated_at FROM members WHERE name > ? ORDER BY name LIMIT ?`, p.After, limitOrAll(p.Limit))
}

func (q queries) queryFsEntries(ctx context.Context, op string, h dbtx, query string, args ...any) ([]store.FsEntry, error) {
	return collect(ctx, h, op, scanFsEntry, query, args...)
}

func scanFsEntry(s scanner) (store.FsEntry, error) {
	var (
		e                store.FsEntry
		blob             sql.NullString
		created, updated int64
	)
	if err := s.Scan(&e.ID, &e.Path, &e.Owner, &e.Kind, &e.Size, &e.MimeType, &blob, &created, &updated); err != nil {
		return store.FsEntry{}, err
	}
	e.Blob = blob.String
	e.CreatedAt = fromMS(created)
	e.UpdatedAt = fromMS(updated)
	return e, nil
}

func scanHome(s scanner) (store.FsEntry, error) {
	var (
		name             string
		created, updated int64
	)
	if err := s.Scan(&name, &created, &updated); err != nil {
		return store.FsEntry{}, err
	}
	return store.FsEntry{
		Path:      "/" + name,
		Owner:     name,
		Kind:      store.FsDir,
		CreatedAt: fromMS(created),
		UpdatedAt: fromMS(updated),
	}, nil
}

// checkEntryPath fails with ErrPrecondition unless p is clean, absolute and
// below a home, the only place entries live.
func checkEntryPath(op, p string) error {
	if !cleanAbs(p) || p == "/" || isHome(p) {
		return fmt.Errorf("%s: %q is not a path below a home: %w", op, p, store.ErrPrecondition)
	}
	return nil
}

// cleanAbs reports whether p is absolute and clean: no empty, "." or ".."
// segment and no trailing slash. Full validation is server/vfs's job.
func cleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}

// isHome reports whether p is a single-segment path "/<name>".
func isHome(p string) bool {
	return len(p) > 1 && p[0] == '/' && strings.IndexByte(p[1:], '/') < 0
}

// below returns the bounds [lo, hi) of the paths strictly below dir: they
// all start with dir+"/", and '0' is the byte after '/'. Comparing bounds
// instead of LIKE keeps '%' and '_' in names literal and uses the path
// index.
func below(dir string) (lo, hi string) {
	return dir + "/", dir + "0"
}

// validSHA reports whether s is a lowercase hex SHA-256.
func validSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
