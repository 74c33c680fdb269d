package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// registry is what the slug registries (secrets, tool sources, hook
// endpoints and profiles) share: a table keyed by slug with created_at and
// updated_at, read whole by one SELECT, bindings of members in a second
// table, and errors named after one noun ("get secret", "list secrets"), so
// each registry writes only its columns and its scan.
type registry[T any] struct {
	noun     string // "tool source": the ops' object
	table    string // "tool_sources"
	alias    string // the table's alias in columns, "" for none
	columns  string // what scan reads, in its order
	scan     func(scanner) (T, error)
	hot      bool   // get runs on every request (a hook delivery): a cached statement
	bindings string // the bindings table, "" for none
	bindNoun string // "tool binding": the op of deleting one

	getQuery, listQuery string
}

// newRegistry builds r's read queries once, so a hot get's statement is
// the same string every time (the statement cache's key).
func newRegistry[T any](r registry[T]) registry[T] {
	from, key := r.table, "slug"
	if r.alias != "" {
		from, key = r.table+" "+r.alias, r.alias+".slug"
	}
	r.getQuery = `SELECT ` + r.columns + ` FROM ` + from + ` WHERE ` + key + ` = ?`
	r.listQuery = `SELECT ` + r.columns + ` FROM ` + from + ` ORDER BY ` + key
	return r
}

// create inserts an entry: cols are the columns args fill, and the entry's
// times follow (updated defaults to created, created to now).
func (r registry[T]) create(ctx context.Context, q queries, created, updated time.Time, cols string, args ...any) error {
	created = q.orNow(created)
	if updated.IsZero() {
		updated = created
	}
	args = append(args, created.UnixMilli(), updated.UnixMilli())
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")
	_, err := q.w.ExecContext(ctx, `INSERT INTO `+r.table+` (`+cols+`, created_at, updated_at) VALUES (`+marks+`)`, args...)
	return translate("create "+r.noun, err)
}

// get returns one entry: ErrNotFound when there is none.
func (r registry[T]) get(ctx context.Context, q queries, slug string) (T, error) {
	op := "get " + r.noun
	if !r.hot {
		v, err := r.scan(q.r.QueryRowContext(ctx, r.getQuery, slug))
		return v, translate(op, err)
	}
	st, err := q.stmt(ctx, false, r.getQuery)
	if err != nil {
		var zero T
		return zero, translate(op, err)
	}
	v, err := r.scan(st.QueryRowContext(ctx, slug))
	return v, translate(op, err)
}

// list returns every entry by slug.
func (r registry[T]) list(ctx context.Context, q queries) ([]T, error) {
	return collect(ctx, q.r, "list "+r.noun+"s", r.scan, r.listQuery)
}

// collect returns every row query answers, read by scan; never nil.
func collect[T any](ctx context.Context, db dbtx, op string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, translate(op, err)
		}
		out = append(out, v)
	}
	return out, translate(op, rows.Err())
}

// update sets an entry's columns (set is "a = ?, b = ?" for args, or
// empty) and moves its updated_at to at or now: ErrNotFound when there is
// no such entry.
func (r registry[T]) update(ctx context.Context, q queries, op, set, slug string, at time.Time, args ...any) error {
	if set != "" {
		set += ", "
	}
	args = append(args, q.orNow(at).UnixMilli(), slug)
	res, err := q.w.ExecContext(ctx, `UPDATE `+r.table+` SET `+set+`updated_at = ? WHERE slug = ?`, args...)
	if err != nil {
		return translate(op, err)
	}
	return notFound(op, res)
}

// remove deletes an entry (what references it goes by the schema's
// cascades): ErrNotFound when there is none.
func (r registry[T]) remove(ctx context.Context, q queries, slug string) error {
	op := "delete " + r.noun
	res, err := q.w.ExecContext(ctx, `DELETE FROM `+r.table+` WHERE slug = ?`, slug)
	if err != nil {
		return translate(op, err)
	}
	return notFound(op, res)
}

// bind binds a member to an entry: ErrNotFound when the entry does not
// exist, ErrPrecondition when the member does not (the foreign key). One
// statement: the entry's existence is part of the insert.
func (r registry[T]) bind(ctx context.Context, q queries, slug, member string) error {
	op := "put " + r.bindings
	res, err := q.w.ExecContext(ctx, `INSERT INTO `+r.bindings+` (slug, member) SELECT slug, ? FROM `+r.table+` WHERE slug = ?
ON CONFLICT (slug, member) DO NOTHING`, member, slug)
	if err != nil {
		return translate(op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return translate(op, err)
	}
	// Nothing inserted: already bound, or no such entry.
	var one int
	err = q.w.QueryRowContext(ctx, `SELECT 1 FROM `+r.table+` WHERE slug = ?`, slug).Scan(&one)
	return translate(op, err)
}

// unbind removes a binding: ErrNotFound when there is none.
func (r registry[T]) unbind(ctx context.Context, q queries, slug, member string) error {
	op := "delete " + r.bindNoun
	res, err := q.w.ExecContext(ctx, `DELETE FROM `+r.bindings+` WHERE slug = ? AND member = ?`, slug, member)
	if err != nil {
		return translate(op, err)
	}
	return notFound(op, res)
}

// boundColumn reads an entry's bound members in its own statement, sorted,
// as a JSON array for decodeBound.
func boundColumn(bindings, alias string) string {
	return `(SELECT COALESCE(json_agg(member ORDER BY member), '[]')::text FROM ` + bindings + ` b WHERE b.slug = ` + alias + `.slug)`
}

// decodeBound decodes what boundColumn read.
func decodeBound(what, bound string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(bound), &out); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// sealed is a sealed column as read: nil when NULL or empty.
func sealed(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// inTxErr runs fn in one transaction, for the writes of more than one
// statement.
func inTxErr(ctx context.Context, db *DB, fn func(q queries) error) error {
	_, err := inTx(ctx, db, func(q queries) (struct{}, error) { return struct{}{}, fn(q) })
	return err
}
