package postgres

import (
	"context"
	"fmt"

	"svc/store"
)

// FileBlobs lists the blobs file entries reference, each with one of
// those entries, ordered by sha: what svc check verifies on disk.
func (db *DB) FileBlobs(ctx context.Context) ([]store.FileBlob, error) {
	const op = "list file blobs"
	rows, err := db.r.QueryContext(ctx, `SELECT b.sha, b.size, COALESCE((SELECT e.path FROM fs_entries e WHERE e.blob = b.sha ORDER BY e.path LIMIT 1), '')
FROM fs_blobs b WHERE b.refs > 0 AND NOT EXISTS (SELECT 1 FROM fs_inline i WHERE i.sha = b.sha) ORDER BY b.sha`)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.FileBlob
	for rows.Next() {
		var b store.FileBlob
		if err := rows.Scan(&b.SHA, &b.Size, &b.Path); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, b)
	}
	return out, translate(op, rows.Err())
}

// InlineContents calls fn with each content kept in the database (table
// fs_inline) that a file entry references, with one of those entries and
// the stored bytes, ordered by sha: svc check hashes them, because page
// checksums are off unless the cluster was initialised with them and do
// not cover what a damaged disk or a hand edit wrote through the server.
func (db *DB) InlineContents(ctx context.Context, fn func(b store.FileBlob, data []byte) error) error {
	const op = "list inline contents"
	rows, err := db.r.QueryContext(ctx, `SELECT b.sha, b.size, COALESCE((SELECT e.path FROM fs_entries e WHERE e.blob = b.sha ORDER BY e.path LIMIT 1), ''), i.data
FROM fs_blobs b JOIN fs_inline i ON i.sha = b.sha WHERE b.refs > 0 ORDER BY b.sha`)
	if err != nil {
		return translate(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var b store.FileBlob
		var data []byte
		if err := rows.Scan(&b.SHA, &b.Size, &b.Path, &data); err != nil {
			return translate(op, err)
		}
		if err := fn(b, data); err != nil {
			return err
		}
	}
	return translate(op, rows.Err())
}

// BlobReferenced reports whether a file entry references sha now: a blob
// found missing while a broker runs may have been removed with its last
// entry since FileBlobs listed it.
func (db *DB) BlobReferenced(ctx context.Context, sha string) (bool, error) {
	var ok bool
	err := db.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_entries WHERE blob = ?)`, sha).Scan(&ok)
	return ok, translate("fs blob referenced", err)
}

// Describe says which server holds the store and whether it checksums its
// pages: PostgreSQL verifies its own data (data checksums, amcheck), so
// svc check reports what protects it rather than reading every page.
func (db *DB) Describe(ctx context.Context) (string, error) {
	var version, checksums string
	if err := db.r.QueryRowContext(ctx, `SELECT current_setting('server_version'), current_setting('data_checksums')`).Scan(&version, &checksums); err != nil {
		return "", translate("describe", err)
	}
	return fmt.Sprintf("PostgreSQL %s, data checksums %s", version, checksums), nil
}
