package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"svc/store"
)

const (
	// defaultHistoryLimit is MessageFilter.Limit when unset.
	defaultHistoryLimit = 50
	messageColumns      = `seq, sender, recipient, thread, title, body, level, data, meta, attachments, created_at, all_members, reply_to, hops, chain, loop_stopped`
)

// AppendMessages stores messages and their recipients in one transaction.
func (db *DB) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	return inTx(ctx, db, func(q queries) ([]store.Message, error) { return q.AppendMessages(ctx, msgs) })
}

// AppendMessages stores messages in order and returns copies with Seq set.
// It runs several statements on q.w, which must be a transaction.
//
// The rows go in multi-row INSERTs of insertChunks rows (a batch of 21 is
// 16+4+1), each prepared at open: with a statement per row, the database/sql
// and cgo work of each statement was most of a message's CPU in the group
// commit; in chunks a commit of 16 broadcasts costs 0.52-0.63x the CPU a
// message, of 64 0.39-0.44x (BenchmarkGroupCommit; docs/PERFORMANCE.md,
// "Issue 30: what bounds the push rate").
func (q queries) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	out := make([]store.Message, len(msgs))
	rcpt, err := q.stmt(ctx, true, insertRecipient)
	if err != nil {
		return nil, translate("append messages", err)
	}
	args := make([]any, 0, messageArgs*min(len(msgs), insertChunks[0]))
	for done := 0; done < len(msgs); {
		n := insertChunks[len(insertChunks)-1]
		for _, c := range insertChunks {
			if c <= len(msgs)-done {
				n = c
				break
			}
		}
		chunk := out[done : done+n]
		args = args[:0]
		for i, m := range msgs[done : done+n] {
			atts, err := json.Marshal(nonNilStrings(m.Attachments))
			if err != nil {
				return nil, fmt.Errorf("append messages: %w", err)
			}
			created := q.orNow(m.CreatedAt).UnixMilli()
			if m.ReplyTo < 0 || m.Hops < 0 || m.Chain < 0 {
				return nil, fmt.Errorf("append messages: negative reply chain field")
			}
			args = append(args, m.From, nullString(m.To), m.Thread, m.Title, m.Body, m.Level,
				nullJSON(m.Data), nullJSON(m.Meta), string(atts), created, m.All,
				nullSeq(m.ReplyTo), m.Hops, nullSeq(m.Chain), m.LoopStopped)
			m.CreatedAt = fromMS(created)
			chunk[i] = m
		}
		if err := q.insertMessages(ctx, chunk, args); err != nil {
			return nil, err
		}
		for _, m := range chunk {
			for _, r := range m.Recipients {
				if _, err := rcpt.ExecContext(ctx, r, m.Seq); err != nil {
					return nil, translate("append messages", err)
				}
			}
		}
		done += n
	}
	return out, nil
}

// insertMessages inserts the rows of msgs (args, messageArgs each) with
// the statement of their number and sets each message's Seq. The rows are
// inserted in order and seq is an AUTOINCREMENT key, so their seqs grow in
// that order; RETURNING's order is not specified, so they are sorted.
func (q queries) insertMessages(ctx context.Context, msgs []store.Message, args []any) error {
	ins, err := q.stmt(ctx, true, insertMessagesQuery(len(msgs)))
	if err != nil {
		return translate("append messages", err)
	}
	if len(msgs) == 1 {
		return translate("append messages", ins.QueryRowContext(ctx, args...).Scan(&msgs[0].Seq))
	}
	rows, err := ins.QueryContext(ctx, args...)
	if err != nil {
		return translate("append messages", err)
	}
	defer rows.Close()
	seqs := make([]int64, 0, len(msgs))
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return translate("append messages", err)
		}
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return translate("append messages", err)
	}
	if len(seqs) != len(msgs) {
		return fmt.Errorf("append messages: %d rows inserted, %d returned", len(msgs), len(seqs))
	}
	slices.Sort(seqs)
	for i := range msgs {
		msgs[i].Seq = seqs[i]
	}
	return nil
}

// insertChunks are the row counts of the message inserts, largest first;
// the last must be 1. 64 rows are 960 parameters, far below SQLite's
// limit (32766).
var insertChunks = [...]int{64, 32, 16, 8, 4, 2, 1}

// messageArgs is the number of parameters of one message row.
const messageArgs = 15

// insertMessageQueries are the inserts of insertChunks rows, by row count
// (prepared on the writer at open).
var insertMessageQueries = func() map[int]string {
	m := map[int]string{}
	for _, n := range insertChunks {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO messages (sender, recipient, thread, title, body, level, data, meta, attachments, created_at, all_members, reply_to, hops, chain, loop_stopped)
VALUES `)
		for i := range n {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		}
		sb.WriteString(" RETURNING seq")
		m[n] = sb.String()
	}
	return m
}()

func insertMessagesQuery(n int) string { return insertMessageQueries[n] }

// messageStatements are AppendMessages' statements, for Open to prepare.
func messageStatements() []string {
	out := []string{insertRecipient}
	for _, n := range insertChunks {
		out = append(out, insertMessagesQuery(n))
	}
	return out
}

const (
	insertRecipient = `INSERT OR IGNORE INTO message_recipients (member, seq) VALUES (?, ?)`
)

// ListMessages returns a thread's messages newest first, in commit order.
func (q queries) ListMessages(ctx context.Context, f store.MessageFilter) ([]store.Message, error) {
	var (
		sb   strings.Builder
		args = []any{f.Thread}
	)
	sb.WriteString(`SELECT ` + messageColumns + ` FROM messages WHERE thread = ?`)
	if !f.Before.IsZero() {
		sb.WriteString(` AND created_at < ?`)
		args = append(args, f.Before.UnixMilli())
	}
	if f.AfterSeq > 0 {
		sb.WriteString(` AND seq > ?`)
		args = append(args, f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		sb.WriteString(` AND seq < ?`)
		args = append(args, f.BeforeSeq)
	}
	if f.Viewer != "" {
		sb.WriteString(` AND (sender = ? OR all_members = 1 OR EXISTS (SELECT 1 FROM message_recipients r WHERE r.member = ? AND r.seq = messages.seq))`)
		args = append(args, f.Viewer, f.Viewer)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultHistoryLimit
	}
	sb.WriteString(` ORDER BY seq DESC LIMIT ?`)
	args = append(args, limit)
	return q.queryMessages(ctx, "list messages", sb.String(), args...)
}

// MessagesFor returns, oldest first, up to limit messages after seq that
// were addressed to member: broadcasts it did not send, and every message
// naming it as a recipient.
func (q queries) MessagesFor(ctx context.Context, member string, after int64, limit int) ([]store.Message, error) {
	if limit <= 0 {
		limit = defaultHistoryLimit
	}
	// Each branch reads at most limit rows through its own index, so paging
	// through a long backlog stays linear.
	return q.queryMessages(ctx, "messages for", `SELECT `+messageColumns+` FROM messages WHERE seq IN (
	SELECT seq FROM (SELECT seq FROM messages WHERE all_members = 1 AND seq > ?1 AND sender <> ?2 ORDER BY seq LIMIT ?3)
	UNION ALL
	SELECT seq FROM (SELECT seq FROM message_recipients WHERE member = ?2 AND seq > ?1 ORDER BY seq LIMIT ?3)
) ORDER BY seq LIMIT ?3`, after, member, limit)
}

// LastMessageSeq returns the newest message's seq, 0 when there is none.
func (q queries) LastMessageSeq(ctx context.Context) (int64, error) {
	var n int64
	err := q.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages`).Scan(&n)
	return n, translate("last message seq", err)
}

func (q queries) queryMessages(ctx context.Context, op, query string, args ...any) ([]store.Message, error) {
	rows, err := q.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []store.Message{}
	for rows.Next() {
		var (
			m              store.Message
			to, data, meta sql.NullString
			atts           string
			created        int64
			replyTo, chain sql.NullInt64
		)
		if err := rows.Scan(&m.Seq, &m.From, &to, &m.Thread, &m.Title, &m.Body, &m.Level, &data, &meta, &atts, &created, &m.All,
			&replyTo, &m.Hops, &chain, &m.LoopStopped); err != nil {
			return nil, translate(op, err)
		}
		m.To = to.String
		m.ReplyTo, m.Chain = replyTo.Int64, chain.Int64
		if data.Valid {
			m.Data = []byte(data.String)
		}
		if meta.Valid {
			m.Meta = []byte(meta.String)
		}
		if err := json.Unmarshal([]byte(atts), &m.Attachments); err != nil {
			return nil, fmt.Errorf("%s: message %d attachments: %w", op, m.Seq, err)
		}
		m.CreatedAt = fromMS(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// nullSeq stores a message seq of 0 (none) as NULL.
func nullSeq(seq int64) sql.NullInt64 { return sql.NullInt64{Int64: seq, Valid: seq != 0} }

func nullJSON(b []byte) sql.NullString { return sql.NullString{String: string(b), Valid: b != nil} }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
