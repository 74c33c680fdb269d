package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"svc/store"
)

const genaiSummaryColumns = `id, member, ts, provider, api, model, response_id,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, raw_sha`

const genaiColumns = genaiSummaryColumns + `, system_instructions, input_messages, output_messages`

// putGenAI stores a record and its raw upload, once per SHA-256.
func (db *ActivityDB) putGenAI(ctx context.Context, tx *sql.Tx, r store.GenAIRecord) error {
	if r.ID == "" || r.Member == "" {
		return fmt.Errorf("put genai record: no id or member: %w", store.ErrPrecondition)
	}
	sum := sha256.Sum256(r.Raw)
	sha := hex.EncodeToString(sum[:])
	if _, err := tx.ExecContext(ctx, `INSERT INTO genai_raw (sha, bytes) VALUES (?, ?) ON CONFLICT (sha) DO NOTHING`, sha, r.Raw); err != nil {
		return err
	}
	ts := r.TS
	if ts.IsZero() {
		ts = db.now()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO genai (`+genaiColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Member, ts.UnixMilli(), r.Provider, r.API, r.Model, r.ResponseID,
		r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheCreationTokens, r.Usage.ReasoningTokens,
		sha, jsonArray(r.SystemInstructions), jsonArray(r.InputMessages), jsonArray(r.OutputMessages))
	return err
}

func jsonArray(b []byte) string {
	if len(b) == 0 {
		return "[]"
	}
	return string(b)
}

// ListGenAI returns matching records oldest first.
func (db *ActivityDB) ListGenAI(ctx context.Context, f store.GenAIFilter) ([]store.GenAIRecord, error) {
	var (
		sb   strings.Builder
		args = []any{f.Member}
	)
	cols := genaiColumns
	if f.Summary {
		cols = genaiSummaryColumns
	}
	sb.WriteString(`SELECT ` + cols + ` FROM genai WHERE member = ?`)
	if !f.From.IsZero() {
		sb.WriteString(` AND ts >= ?`)
		args = append(args, f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		sb.WriteString(` AND ts <= ?`)
		args = append(args, f.To.UnixMilli())
	}
	sb.WriteString(` ORDER BY ts, rowid LIMIT ?`)
	args = append(args, limitOr(f.Limit, defaultActivityLimit))
	return db.queryGenAI(ctx, "list genai", !f.Summary, f.MaxBytes, sb.String(), args...)
}

// GetGenAI returns member's record id.
func (db *ActivityDB) GetGenAI(ctx context.Context, member, id string) (store.GenAIRecord, error) {
	rs, err := db.queryGenAI(ctx, "get genai", true, 0, `SELECT `+genaiColumns+` FROM genai WHERE member = ? AND id = ?`, member, id)
	if err != nil {
		return store.GenAIRecord{}, err
	}
	if len(rs) == 0 {
		return store.GenAIRecord{}, fmt.Errorf("get genai: %w", store.ErrNotFound)
	}
	return rs[0], nil
}

// GenAIByResponse returns member's records of the given response ids.
func (db *ActivityDB) GenAIByResponse(ctx context.Context, member string, responseIDs []string) ([]store.GenAIRecord, error) {
	if len(responseIDs) == 0 {
		return []store.GenAIRecord{}, nil
	}
	// json_each keeps the statement independent of the number of ids.
	ids, err := json.Marshal(responseIDs)
	if err != nil {
		return nil, fmt.Errorf("genai by response: %w", err)
	}
	return db.queryGenAI(ctx, "genai by response", true, 0, `SELECT `+genaiColumns+` FROM genai
WHERE member = ? AND response_id != '' AND response_id IN (SELECT value FROM json_each(?)) ORDER BY ts, rowid`, member, string(ids))
}

// GenAIRaw returns the raw upload of member's record id.
func (db *ActivityDB) GenAIRaw(ctx context.Context, member, id string) ([]byte, error) {
	var b []byte
	err := db.c.reader.QueryRowContext(ctx, `SELECT r.bytes FROM genai g JOIN genai_raw r ON r.sha = g.raw_sha WHERE g.member = ? AND g.id = ?`, member, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("genai raw: %w", store.ErrNotFound)
	}
	return b, translate("genai raw", err)
}

// queryGenAI reads records, with their message arrays when full; with
// maxBytes > 0 it stops after the record whose arrays bring the total to
// maxBytes.
func (db *ActivityDB) queryGenAI(ctx context.Context, op string, full bool, maxBytes int, query string, args ...any) ([]store.GenAIRecord, error) {
	rows, err := db.c.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []store.GenAIRecord{}
	size := 0
	for rows.Next() && (maxBytes <= 0 || size < maxBytes) {
		var (
			r  store.GenAIRecord
			ts int64
		)
		dest := []any{&r.ID, &r.Member, &ts, &r.Provider, &r.API, &r.Model, &r.ResponseID,
			&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CacheReadTokens, &r.Usage.CacheCreationTokens, &r.Usage.ReasoningTokens, &r.RawSHA}
		var sys, in, outMsgs string
		if full {
			dest = append(dest, &sys, &in, &outMsgs)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, translate(op, err)
		}
		r.TS = fromMS(ts)
		if full {
			r.SystemInstructions, r.InputMessages, r.OutputMessages = []byte(sys), []byte(in), []byte(outMsgs)
			size += len(sys) + len(in) + len(outMsgs)
		}
		out = append(out, r)
	}
	return out, translate(op, rows.Err())
}
