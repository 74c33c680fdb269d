package postgres

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"svc/store"
)

const genaiSummaryColumns = `id, member, COALESCE(member_uid, ''), ts, provider, api, model, response_id,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, raw_sha`

// genaiColumns are a record's columns with its message arrays: the parts
// of a record stored with them, the arrays themselves in one stored
// before.
const genaiColumns = genaiSummaryColumns + `, system_part, input_part, output_part,
	system_instructions, input_messages, output_messages, tools_part`

// putGenAI stores a record: its raw upload, its three message arrays and
// its tool definitions as parts (genaiparts.go).
func (db *ActivityDB) putGenAI(ctx context.Context, tx dbtx, r store.GenAIRecord) error {
	if r.ID == "" || r.Member == "" {
		return fmt.Errorf("put genai record: no id or member: %w", store.ErrPrecondition)
	}
	w := partWriter{ctx: ctx, tx: tx}
	raw, sum, err := w.put(r.Raw, 0)
	if err != nil {
		return err
	}
	sha := hex.EncodeToString(sum[:])
	// raw_sha references genai_raw: the row is kept, without the bytes
	// the parts hold (records stored before parts have them there).
	if _, err := tx.ExecContext(ctx, `INSERT INTO genai_raw (sha, bytes) VALUES (?, ''::bytea) ON CONFLICT (sha) DO NOTHING`, sha); err != nil {
		return err
	}
	var arrays [4]int64
	for i, b := range [][]byte{r.SystemInstructions, r.InputMessages, r.OutputMessages, r.ToolDefinitions} {
		if arrays[i], _, err = w.put([]byte(jsonArray(b)), 0); err != nil {
			return err
		}
	}
	ts := r.TS
	if ts.IsZero() {
		ts = db.now()
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO genai (id, member, member_uid, ts, provider, api, model, response_id,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, raw_sha,
	raw_part, system_part, input_part, output_part, system_instructions, input_messages, output_messages, tools_part)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', '', ?)`,
		r.ID, r.Member, sql.NullString{String: r.MemberUID, Valid: r.MemberUID != ""}, ts.UnixMilli(), r.Provider, r.API, r.Model, r.ResponseID,
		r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheCreationTokens, r.Usage.ReasoningTokens,
		sha, raw, arrays[0], arrays[1], arrays[2], arrays[3])
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

// GenAIByResponse returns member's records (of memberUID, when set) of the
// given response ids.
func (db *ActivityDB) GenAIByResponse(ctx context.Context, member, memberUID string, responseIDs []string) ([]store.GenAIRecord, error) {
	if len(responseIDs) == 0 {
		return []store.GenAIRecord{}, nil
	}
	// One JSON parameter keeps the statement independent of the number
	// of ids.
	ids, err := json.Marshal(responseIDs)
	if err != nil {
		return nil, fmt.Errorf("genai by response: %w", err)
	}
	return db.queryGenAI(ctx, "genai by response", true, 0, `SELECT `+genaiColumns+` FROM genai
WHERE member = ?1 AND (?2 = '' OR member_uid = ?2) AND response_id != '' AND response_id IN (SELECT value FROM jsonb_array_elements_text(?3::jsonb))
ORDER BY ts, rowid`, member, memberUID, string(ids))
}

// GenAIRaw returns the raw upload of member's record id.
func (db *ActivityDB) GenAIRaw(ctx context.Context, member, id string) ([]byte, error) {
	var (
		part sql.NullInt64
		sha  string
	)
	err := db.r.QueryRowContext(ctx, `SELECT raw_part, raw_sha FROM genai WHERE member = ? AND id = ?`, member, id).Scan(&part, &sha)
	if err != nil {
		return nil, translate("genai raw", err)
	}
	if !part.Valid {
		var b []byte
		err := db.r.QueryRowContext(ctx, `SELECT bytes FROM genai_raw WHERE sha = ?`, sha).Scan(&b)
		return b, translate("genai raw", err)
	}
	ps := parts{}
	if err := ps.load(ctx, db.r, []int64{part.Int64}); err != nil {
		return nil, translate("genai raw", err)
	}
	b, err := ps.bytes(part.Int64)
	return b, translate("genai raw", err)
}

// genaiRow is a record as read, before its arrays are assembled.
type genaiRow struct {
	rec   store.GenAIRecord
	parts [4]sql.NullInt64 // system, input, output, tools
}

// genaiBatch is how many records' parts are read at once.
const genaiBatch = 32

// queryGenAI reads records, with their message arrays when full; with
// maxBytes > 0 it stops after the record whose arrays bring the total to
// maxBytes. The parts of a query are read once however many of its
// records share them.
func (db *ActivityDB) queryGenAI(ctx context.Context, op string, full bool, maxBytes int, query string, args ...any) ([]store.GenAIRecord, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	var read []genaiRow
	// Arrays of records stored before parts come with their rows: past
	// the budget no more rows are read (later ones would not be sent).
	legacy := 0
	for rows.Next() && (maxBytes <= 0 || legacy < maxBytes) {
		var (
			g  genaiRow
			r  = &g.rec
			ts int64
		)
		dest := []any{&r.ID, &r.Member, &r.MemberUID, &ts, &r.Provider, &r.API, &r.Model, &r.ResponseID,
			&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CacheReadTokens, &r.Usage.CacheCreationTokens, &r.Usage.ReasoningTokens, &r.RawSHA}
		var sys, in, outMsgs string
		if full {
			dest = append(dest, &g.parts[0], &g.parts[1], &g.parts[2], &sys, &in, &outMsgs, &g.parts[3])
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, translate(op, err)
		}
		r.TS = fromMS(ts)
		if full {
			r.SystemInstructions, r.InputMessages, r.OutputMessages = []byte(sys), []byte(in), []byte(outMsgs)
			legacy += len(sys) + len(in) + len(outMsgs)
		}
		read = append(read, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	out := []store.GenAIRecord{}
	if !full {
		for _, g := range read {
			out = append(out, g.rec)
		}
		return out, nil
	}
	ps := parts{}
	size := 0
	for start := 0; start < len(read) && (maxBytes <= 0 || size < maxBytes); start += genaiBatch {
		batch := read[start:min(start+genaiBatch, len(read))]
		var roots []int64
		for _, g := range batch {
			for _, p := range g.parts {
				if p.Valid {
					roots = append(roots, p.Int64)
				}
			}
		}
		if err := ps.load(ctx, db.r, roots); err != nil {
			return nil, translate(op, err)
		}
		for _, g := range batch {
			if maxBytes > 0 && size >= maxBytes {
				break
			}
			r := g.rec
			for i, dst := range []*[]byte{&r.SystemInstructions, &r.InputMessages, &r.OutputMessages, &r.ToolDefinitions} {
				if !g.parts[i].Valid {
					continue
				}
				b, err := ps.bytes(g.parts[i].Int64)
				if err != nil {
					return nil, translate(op, err)
				}
				*dst = b
			}
			size += len(r.SystemInstructions) + len(r.InputMessages) + len(r.OutputMessages) + len(r.ToolDefinitions)
			out = append(out, r)
		}
	}
	return out, nil
}
