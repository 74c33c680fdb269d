package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
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

const activityColumns = `id, member, COALESCE(member_uid, ''), kind, ts, objective_id, data`

// ActivityDB is the activity store on PostgreSQL: its own tables and
// write lock, in the main store's database or another. It implements
// store.ActivityStore.
type ActivityDB struct {
	c   *conns
	r   reader
	w   writer
	now func() time.Time
}

// OpenActivity connects to the database at url and applies the activity
// store's migrations. Events appended with a zero TS get the WithNow
// clock's time.
func OpenActivity(ctx context.Context, url string, opts ...Option) (*ActivityDB, error) {
	o := newOptions(opts)
	o.use = nil // the use lock is the main store's
	c, err := openConns(ctx, url, activityMigrations, activityWriteKey, activityMigrateKey, o)
	if err != nil {
		return nil, fmt.Errorf("open activity store: %w", err)
	}
	return &ActivityDB{c: c, r: reader{c}, w: writer{c}, now: o.now}, nil
}

// Close closes the pool. Calling it again does nothing.
func (db *ActivityDB) Close() error {
	db.c.Close()
	return nil
}

// AppendActivity stores events in one transaction and returns copies with
// their ids set, in the order given, as ListActivity would return them: TS
// at millisecond precision and nil Data stored as "{}".
func (db *ActivityDB) AppendActivity(ctx context.Context, events []store.ActivityEvent) ([]store.ActivityEvent, error) {
	return db.CommitActivity(ctx, store.ActivityBatch{Events: events})
}

// CommitActivity writes rows, correlation states and inference records in
// one transaction.
func (db *ActivityDB) CommitActivity(ctx context.Context, b store.ActivityBatch) ([]store.ActivityEvent, error) {
	out := make([]store.ActivityEvent, len(b.Events))
	if len(b.Events) == 0 && len(b.States) == 0 && len(b.GenAI) == 0 {
		return out, nil
	}
	err := db.c.withTx(ctx, func(ptx pgx.Tx) error {
		tx := txHandle{ptx}
		if err := db.appendEvents(ctx, tx, b.Events, out); err != nil {
			return err
		}
		for _, st := range b.States {
			if err := putState(ctx, tx, st, db.now); err != nil {
				return err
			}
		}
		for _, r := range b.GenAI {
			if err := db.putGenAI(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate("commit activity", err)
	}
	return out, nil
}

// appendEvents stores events in one statement, however many (one round
// trip per event before; docs/SCALING.md), and fills out with them.
func (db *ActivityDB) appendEvents(ctx context.Context, tx dbtx, events, out []store.ActivityEvent) error {
	if len(events) == 0 {
		return nil
	}
	n := len(events)
	var (
		members, kinds, data        = make([]string, n), make([]string, n), make([]string, n)
		uids, objectives, responses = make([]*string, n), make([]*string, n), make([]*string, n)
		ts                          = make([]int64, n)
	)
	for i, e := range events {
		at := e.TS
		if at.IsZero() {
			at = db.now()
		}
		d := e.Data
		if d == nil {
			d = []byte("{}")
		}
		members[i], kinds[i], data[i], ts[i] = e.Member, e.Kind, string(d), at.UnixMilli()
		uids[i], objectives[i], responses[i] = nonEmpty(e.MemberUID), nonEmpty(e.ObjectiveID), nonEmpty(e.ResponseID)
		e.TS = fromMS(ts[i])
		e.Data = d
		out[i] = e
	}
	var base int64
	if err := tx.QueryRowContext(ctx, insertActivity, int64(n), members, uids, kinds, ts, objectives, data, responses).Scan(&base); err != nil {
		return err
	}
	for i := range out {
		out[i].ID = base + int64(i) + 1
	}
	return nil
}

// nonEmpty is a nullable text column's value as an array element: "" is
// NULL.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// The batch takes the next n values of activity_seq under the write lock
// the transaction holds: ids are the commit order (docs/DECISIONS.md,
// "PostgreSQL store"), in the order of the batch (WITH ORDINALITY). The
// INSERT runs to completion although the statement reads nothing from it.
const insertActivity = noSavepoint + `WITH n AS (UPDATE activity_seq SET id = id + ?1 RETURNING id - ?1 AS base),
ins AS (
	INSERT INTO activity (id, member, member_uid, kind, ts, objective_id, data, response_id)
	SELECT n.base + e.ord, e.member, e.member_uid, e.kind, e.ts, e.objective_id, e.data, e.response_id
	FROM n, unnest(?2::text[], ?3::text[], ?4::text[], ?5::bigint[], ?6::text[], ?7::text[], ?8::text[])
		WITH ORDINALITY AS e(member, member_uid, kind, ts, objective_id, data, response_id, ord)
)
SELECT base FROM n`

func putState(ctx context.Context, tx dbtx, st store.CorrelationState, now func() time.Time) error {
	if st.State == nil {
		_, err := tx.ExecContext(ctx, `DELETE FROM otlp_state WHERE member = ?`, st.Member)
		return err
	}
	at := st.UpdatedAt
	if at.IsZero() {
		at = now()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO otlp_state (member, state, updated_at) VALUES (?, ?, ?)
ON CONFLICT (member) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`, st.Member, st.State, at.UnixMilli())
	return err
}

// CorrelationStates returns every stored correlation state.
func (db *ActivityDB) CorrelationStates(ctx context.Context) ([]store.CorrelationState, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT member, state, updated_at FROM otlp_state ORDER BY member`)
	if err != nil {
		return nil, translate("correlation states", err)
	}
	defer rows.Close()
	out := []store.CorrelationState{}
	for rows.Next() {
		var (
			st store.CorrelationState
			at int64
		)
		if err := rows.Scan(&st.Member, &st.State, &at); err != nil {
			return nil, translate("correlation states", err)
		}
		st.UpdatedAt = fromMS(at)
		out = append(out, st)
	}
	return out, translate("correlation states", rows.Err())
}

// ListActivity returns the member's matching rows newest first, by TS and
// then id.
func (db *ActivityDB) ListActivity(ctx context.Context, f store.ActivityFilter) ([]store.ActivityEvent, error) {
	var (
		sb   strings.Builder
		args = []any{f.Member}
	)
	sb.WriteString(`SELECT ` + activityColumns + ` FROM activity WHERE member = ?`)
	if f.MemberUID != "" {
		sb.WriteString(` AND member_uid = ?`)
		args = append(args, f.MemberUID)
	}
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
	if f.OldestFirst {
		sb.WriteString(` ORDER BY ts, id LIMIT ?`)
	} else {
		sb.WriteString(` ORDER BY ts DESC, id DESC LIMIT ?`)
	}
	args = append(args, limit)
	return db.queryActivity(ctx, "list activity", f.MaxBytes, sb.String(), args...)
}

// ActivityAfter returns up to limit rows of member (of memberUID, when
// set) after id after, oldest first.
func (db *ActivityDB) ActivityAfter(ctx context.Context, member, memberUID string, after int64, limit int) ([]store.ActivityEvent, error) {
	return db.queryActivity(ctx, "activity after", 0, `SELECT `+activityColumns+` FROM activity
WHERE member = ?1 AND (?2 = '' OR member_uid = ?2) AND id > ?3 ORDER BY id LIMIT ?4`,
		member, memberUID, after, limitOr(limit, defaultActivityLimit))
}

// LastActivityID returns the newest row id.
func (db *ActivityDB) LastActivityID(ctx context.Context) (int64, error) {
	var n int64
	// The counter survives a prune that emptied the table.
	err := db.r.QueryRowContext(ctx, `SELECT id FROM activity_seq`).Scan(&n)
	return n, translate("last activity id", err)
}

// ObjectiveMarkers returns the open and close markers of an objective.
func (db *ActivityDB) ObjectiveMarkers(ctx context.Context, objectiveID string) ([]store.ActivityEvent, error) {
	return db.queryActivity(ctx, "objective markers", 0, `SELECT `+activityColumns+` FROM activity
WHERE objective_id = ? AND kind IN ('objective_open', 'objective_close') ORDER BY ts, id`, objectiveID)
}

// usageTokens reads an exchange's token counts from its data: a count that
// is absent, not a number or negative is 0, so no upload can make a sum
// go down.
const usageTokens = `
	GREATEST(svc_json_int(data::jsonb #> '{usage,inputTokens}'), 0) AS i,
	GREATEST(svc_json_int(data::jsonb #> '{usage,outputTokens}'), 0) AS o,
	GREATEST(svc_json_int(data::jsonb #> '{usage,cacheReadTokens}'), 0) AS cr,
	GREATEST(svc_json_int(data::jsonb #> '{usage,cacheCreationTokens}'), 0) AS cc`

// usageSums are the sums of one usage group, over rows of i, o, cr, cc and
// cost (NULL when the row carried none).
const usageSums = `
	SUM(i)::bigint, SUM(o)::bigint, SUM(cr)::bigint, SUM(cc)::bigint, COUNT(*), COALESCE(SUM(cost), 0)::float8,
	SUM(CASE WHEN cost IS NULL THEN i ELSE 0 END)::bigint, SUM(CASE WHEN cost IS NULL THEN o ELSE 0 END)::bigint,
	SUM(CASE WHEN cost IS NULL THEN cr ELSE 0 END)::bigint, SUM(CASE WHEN cost IS NULL THEN cc ELSE 0 END)::bigint,
	SUM(CASE WHEN cost IS NULL AND i + o + cr + cc > 0 THEN 1 ELSE 0 END)::bigint`

// usageBucket is how many thresholds (?5, a JSON array) a row's prompt is
// above.
const usageBucket = `(SELECT COUNT(*) FROM jsonb_array_elements_text(?5::jsonb) t WHERE i + cr + cc > t.value::numeric)`

// ActivityUsage sums the usage f selects, per member id, model and bucket.
func (db *ActivityDB) ActivityUsage(ctx context.Context, f store.UsageFilter) ([]store.UsageGroup, error) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.From.IsZero() {
		lo = f.From.UnixMilli()
	}
	if !f.To.IsZero() {
		hi = f.To.UnixMilli()
	}
	thresholds := f.Thresholds
	if thresholds == nil {
		thresholds = []int64{}
	}
	th, err := json.Marshal(thresholds)
	if err != nil {
		return nil, fmt.Errorf("activity usage: %w", err)
	}
	// Exchanges: the cost they carried, when a number.
	exchanges := `SELECT uid, model, ` + usageBucket + ` AS bucket, ` + usageSums + `
FROM (SELECT COALESCE(member_uid, '') AS uid,
	CASE WHEN jsonb_typeof(data::jsonb -> 'model') = 'string' THEN data::jsonb ->> 'model' ELSE '' END AS model,
	CASE WHEN jsonb_typeof(data::jsonb -> 'costUsd') = 'number' THEN (data::jsonb ->> 'costUsd')::float8 END AS cost,` + usageTokens + `
	FROM activity WHERE member = ?1 AND (?2 = '' OR member_uid = ?2) AND kind = 'llm_exchange' AND ts >= ?3 AND ts <= ?4) x
GROUP BY uid, model, bucket`
	// Inference records count unless an exchange of the range carries them
	// (one of the same member of the name): by response id, or, when
	// either has none, by window. They carry no cost.
	records := `SELECT uid, model, ` + usageBucket + ` AS bucket, ` + usageSums + `
FROM (SELECT COALESCE(g.member_uid, '') AS uid, g.model AS model, NULL::float8 AS cost,
	GREATEST(g.input_tokens, 0) AS i, GREATEST(g.output_tokens, 0) AS o,
	GREATEST(g.cache_read_tokens, 0) AS cr, GREATEST(g.cache_creation_tokens, 0) AS cc
FROM genai g WHERE g.member = ?1 AND (?2 = '' OR g.member_uid = ?2) AND g.ts >= ?3 AND g.ts <= ?4
	AND NOT (g.response_id != '' AND EXISTS (SELECT 1 FROM activity a WHERE a.member = g.member
		AND a.member_uid IS NOT DISTINCT FROM g.member_uid
		AND a.response_id = g.response_id AND a.kind = 'llm_exchange' AND a.ts >= ?3 AND a.ts <= ?4))
	AND NOT EXISTS (SELECT 1 FROM activity a WHERE a.member = g.member AND a.member_uid IS NOT DISTINCT FROM g.member_uid
		AND a.kind = 'llm_exchange' AND a.ts >= ?3 AND a.ts <= ?4
		AND a.ts >= g.ts - ?6 AND a.ts <= g.ts + ?6 + ?7
		AND (g.response_id = '' OR a.response_id IS NULL)
		AND g.ts >= a.ts - svc_json_duration(a.data::jsonb -> 'durationMs', ?7) - ?6
		AND (g.model = '' OR COALESCE(a.data::jsonb ->> 'model', '') IN ('', g.model)))) x
GROUP BY uid, model, bucket`
	slack, maxDur := store.JoinSlack.Milliseconds(), store.MaxJoinDuration.Milliseconds()
	out := []store.UsageGroup{}
	args := []any{f.Member, f.MemberUID, lo, hi, string(th), slack, maxDur}
	// PostgreSQL wants exactly the parameters a statement names: the
	// exchanges name the first five.
	for _, q := range []struct {
		query string
		args  []any
	}{{exchanges, args[:5]}, {records, args}} {
		rows, err := db.r.QueryContext(ctx, q.query, q.args...)
		if err != nil {
			return nil, translate("activity usage", err)
		}
		for rows.Next() {
			var g store.UsageGroup
			if err := rows.Scan(&g.MemberUID, &g.Model, &g.Bucket,
				&g.InputTokens, &g.OutputTokens, &g.CacheReadTokens, &g.CacheCreationTokens, &g.Exchanges, &g.CostUSD,
				&g.NoCost.InputTokens, &g.NoCost.OutputTokens, &g.NoCost.CacheReadTokens, &g.NoCost.CacheCreationTokens,
				&g.NoCostExchanges); err != nil {
				rows.Close()
				return nil, translate("activity usage", err)
			}
			out = append(out, g)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, translate("activity usage", err)
		}
	}
	return out, nil
}

// AdoptMemberRows gives rows and records without a member id one: owners'
// for the names it lists, orphan for the others. It works in batches, each
// its own transaction, so appends queued on the writer wait for short
// statements; a start interrupted half-way finishes at the next.
func (db *ActivityDB) AdoptMemberRows(ctx context.Context, owners map[string]string, orphan string) (int64, error) {
	if orphan == "" {
		return 0, fmt.Errorf("adopt member rows: no orphan id: %w", store.ErrPrecondition)
	}
	b, err := json.Marshal(owners)
	if err != nil {
		return 0, fmt.Errorf("adopt member rows: %w", err)
	}
	var n int64
	for _, table := range []string{"activity", "genai"} {
		for {
			key := "rowid"
			if table == "activity" {
				key = "id"
			}
			res, err := db.w.ExecContext(ctx, `UPDATE `+table+` SET member_uid = COALESCE(?1::jsonb ->> member, ?2)
WHERE `+key+` IN (SELECT `+key+` FROM `+table+` WHERE member_uid IS NULL LIMIT ?3)`, string(b), orphan, pruneBatch)
			if err != nil {
				return n, translate("adopt member rows", err)
			}
			c, err := res.RowsAffected()
			if err != nil {
				return n, translate("adopt member rows", err)
			}
			n += c
			if c < pruneBatch {
				break
			}
		}
	}
	return n, nil
}

// queryActivity reads rows; with maxBytes > 0 it stops after the row whose
// data brings the total to maxBytes.
func (db *ActivityDB) queryActivity(ctx context.Context, op string, maxBytes int, query string, args ...any) ([]store.ActivityEvent, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []store.ActivityEvent{}
	size := 0
	for rows.Next() && (maxBytes <= 0 || size < maxBytes) {
		var (
			e         store.ActivityEvent
			ts        int64
			objective sql.NullString
		)
		if err := rows.Scan(&e.ID, &e.Member, &e.MemberUID, &e.Kind, &ts, &objective, &e.Data); err != nil {
			return nil, translate(op, err)
		}
		e.TS = fromMS(ts)
		e.ObjectiveID = objective.String
		size += len(e.Data)
		out = append(out, e)
	}
	return out, translate(op, rows.Err())
}

// limitOr is n, or def when n is not in (0, def].
func limitOr(n, def int) int {
	if n <= 0 || n > def {
		return def
	}
	return n
}

// PruneActivity deletes what is older than cutoff. It deletes in batches,
// each its own transaction, so a cancelled prune keeps what it already
// deleted, and appends queued on the writer wait for short statements.
func (db *ActivityDB) PruneActivity(ctx context.Context, cutoff time.Time) (store.PruneResult, error) {
	var r store.PruneResult
	at := cutoff.UnixMilli()
	steps := []struct {
		op, query string
		args      []any
		n         *int64
	}{
		{"prune activity", `DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE ts < ? LIMIT ?)`, []any{at}, &r.Activity},
		{"prune genai", `DELETE FROM genai WHERE id IN (SELECT id FROM genai WHERE ts < ? LIMIT ?)`, []any{at}, &r.GenAI},
		{"prune genai raw", `DELETE FROM genai_raw WHERE sha IN (SELECT sha FROM genai_raw r
	WHERE NOT EXISTS (SELECT 1 FROM genai g WHERE g.raw_sha = r.sha) LIMIT ?)`, nil, &r.Raw},
		// Parts no record reaches any more: every part is marked from the
		// records' roots down, the rest goes.
		{"prune genai parts", `DELETE FROM genai_part WHERE id IN (SELECT id FROM genai_part WHERE id NOT IN (
	WITH RECURSIVE live(id) AS (
		SELECT raw_part FROM genai WHERE raw_part IS NOT NULL
		UNION SELECT system_part FROM genai WHERE system_part IS NOT NULL
		UNION SELECT input_part FROM genai WHERE input_part IS NOT NULL
		UNION SELECT output_part FROM genai WHERE output_part IS NOT NULL
		UNION SELECT tools_part FROM genai WHERE tools_part IS NOT NULL
		UNION SELECT c.value::bigint FROM genai_part p JOIN live ON p.id = live.id, jsonb_array_elements_text(p.children::jsonb) c
	) SELECT id FROM live) LIMIT ?)`, nil, &r.Parts},
		{"prune correlation state", `DELETE FROM otlp_state WHERE member IN (SELECT member FROM otlp_state WHERE updated_at < ? LIMIT ?)`, []any{at}, &r.States},
	}
	for _, st := range steps {
		for {
			res, err := db.w.ExecContext(ctx, st.query, append(slices.Clone(st.args), pruneBatch)...)
			if err != nil {
				return r, translate(st.op, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return r, translate(st.op, err)
			}
			*st.n += n
			if n < pruneBatch {
				break
			}
		}
	}
	return r, nil
}
