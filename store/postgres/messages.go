package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
func (q queries) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	out := make([]store.Message, len(msgs))
	ins, err := q.stmt(ctx, true, insertMessage)
	if err != nil {
		return nil, translate("append messages", err)
	}
	rcpt, err := q.stmt(ctx, true, insertRecipient)
	if err != nil {
		return nil, translate("append messages", err)
	}
	for i, m := range msgs {
		atts, err := json.Marshal(nonNilStrings(m.Attachments))
		if err != nil {
			return nil, fmt.Errorf("append messages: %w", err)
		}
		created := q.orNow(m.CreatedAt).UnixMilli()
		if m.ReplyTo < 0 || m.Hops < 0 || m.Chain < 0 {
			return nil, fmt.Errorf("append messages: negative reply chain field")
		}
		row := ins.QueryRowContext(ctx, m.From, nullString(m.To), m.Thread, m.Title, m.Body, m.Level,
			nullJSON(m.Data), nullJSON(m.Meta), string(atts), created, m.All,
			nullSeq(m.ReplyTo), m.Hops, nullSeq(m.Chain), m.LoopStopped)
		if err := row.Scan(&m.Seq); err != nil {
			return nil, translate("append messages", err)
		}
		for _, r := range m.Recipients {
			if _, err := rcpt.ExecContext(ctx, r, m.Seq); err != nil {
				return nil, translate("append messages", err)
			}
		}
		m.CreatedAt = fromMS(created)
		out[i] = m
	}
	return out, nil
}

const (
	// The seq is the next of message_seq, bumped under the write lock the
	// transaction holds to its commit: ids are the commit order
	// (docs/DECISIONS.md, "PostgreSQL store"). Neither statement can fail
	// on a constraint, so neither spends a savepoint.
	insertMessage = noSavepoint + `WITH n AS (UPDATE message_seq SET seq = seq + 1 RETURNING seq)
INSERT INTO messages (seq, sender, recipient, thread, title, body, level, data, meta, attachments, created_at, all_members, reply_to, hops, chain, loop_stopped)
VALUES ((SELECT seq FROM n), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`
	insertRecipient = noSavepoint + `INSERT INTO message_recipients (member, seq) VALUES (?, ?) ON CONFLICT DO NOTHING`
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
		sb.WriteString(` AND (sender = ? OR all_members OR EXISTS (SELECT 1 FROM message_recipients r WHERE r.member = ? AND r.seq = messages.seq))`)
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
	SELECT seq FROM (SELECT seq FROM messages WHERE all_members AND seq > ?1 AND sender <> ?2 ORDER BY seq LIMIT ?3) b
	UNION ALL
	SELECT seq FROM (SELECT seq FROM message_recipients WHERE member = ?2 AND seq > ?1 ORDER BY seq LIMIT ?3) d
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
