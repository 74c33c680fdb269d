package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"svc/store"
)

const (
	// defaultActivityLimit is both the default and the cap of
	// ActivityFilter.Limit, as the store contract documents.
	defaultActivityLimit = 1000
	// pruneBatch bounds the rows one prune statement deletes, so appends
	// queued on the writer wait for a short statement, not the whole prune.
	pruneBatch = 5000
)

const activityColumns = `id, member, kind, ts, objective_id, data`

// ActivityDB is the activity store on SQLite, a database of its own so that
// high-volume appends and prunes stay off the main database's writer. It
// implements store.ActivityStore.
type ActivityDB struct {
	c   *conns
	now func() time.Time
}

// OpenActivity opens or creates the activity database at path and applies
// its migrations. An empty path or ":memory:" gives an in-memory database.
// Events appended with a zero TS get the WithNow clock's time.
func OpenActivity(ctx context.Context, path string, opts ...Option) (*ActivityDB, error) {
	o := newOptions(opts)
	c, err := openConns(ctx, path, subFS(activityMigrations), o)
	if err != nil {
		return nil, fmt.Errorf("open activity store: %w", err)
	}
	return &ActivityDB{c: c, now: o.now}, nil
}

// Close closes the database. Calling it again returns the same result.
func (db *ActivityDB) Close() error { return db.c.Close() }

// AppendActivity stores events in one transaction and returns copies with
// their ids set, in the order given, as ListActivity would return them: TS
// at millisecond precision and nil Data stored as "{}".
func (db *ActivityDB) AppendActivity(ctx context.Context, events []store.ActivityEvent) ([]store.ActivityEvent, error) {
	out := make([]store.ActivityEvent, len(events))
	if len(events) == 0 {
		return out, nil
	}
	err := db.c.withTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO activity (member, kind, ts, objective_id, data) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, e := range events {
			ts := e.TS
			if ts.IsZero() {
				ts = db.now()
			}
			data := e.Data
			if data == nil {
				data = []byte("{}")
			}
			objective := sql.NullString{String: e.ObjectiveID, Valid: e.ObjectiveID != ""}
			res, err := stmt.ExecContext(ctx, e.Member, e.Kind, ts.UnixMilli(), objective, string(data))
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			e.ID = id
			e.TS = fromMS(ts.UnixMilli())
			e.Data = append([]byte(nil), data...)
			out[i] = e
		}
		return nil
	})
	if err != nil {
		return nil, translate("append activity", err)
	}
	return out, nil
}

// ListActivity returns the member's matching rows newest first, by TS and
// then id.
func (db *ActivityDB) ListActivity(ctx context.Context, f store.ActivityFilter) ([]store.ActivityEvent, error) {
	var (
		sb   strings.Builder
		args = []any{f.Member}
	)
	sb.WriteString(`SELECT ` + activityColumns + ` FROM activity WHERE member = ?`)
	if !f.From.IsZero() {
		sb.WriteString(` AND ts >= ?`)
		args = append(args, f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		sb.WriteString(` AND ts <= ?`)
		args = append(args, f.To.UnixMilli())
	}
	if len(f.Kinds) > 0 {
		sb.WriteString(` AND kind IN (?` + strings.Repeat(`, ?`, len(f.Kinds)-1) + `)`)
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	limit := f.Limit
	if limit <= 0 || limit > defaultActivityLimit {
		limit = defaultActivityLimit
	}
	sb.WriteString(` ORDER BY ts DESC, id DESC LIMIT ?`)
	args = append(args, limit)

	rows, err := db.c.reader.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, translate("list activity", err)
	}
	defer rows.Close()
	out := []store.ActivityEvent{}
	for rows.Next() {
		var (
			e         store.ActivityEvent
			ts        int64
			objective sql.NullString
		)
		if err := rows.Scan(&e.ID, &e.Member, &e.Kind, &ts, &objective, &e.Data); err != nil {
			return nil, translate("list activity", err)
		}
		e.TS = fromMS(ts)
		e.ObjectiveID = objective.String
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list activity", err)
	}
	return out, nil
}

// PruneActivity deletes every row whose TS is before cutoff and returns how
// many it deleted. It deletes in batches, each its own transaction, so a
// cancelled prune keeps what it already deleted.
func (db *ActivityDB) PruneActivity(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		res, err := db.c.writer.ExecContext(ctx,
			`DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE ts < ? LIMIT ?)`,
			cutoff.UnixMilli(), pruneBatch)
		if err != nil {
			return total, translate("prune activity", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, translate("prune activity", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
