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
// It runs several statements on q.w, which must be a transaction: one for
// the messages, however many, and one for their recipients if they name
// any (one round trip per message and recipient before: the batch's
// transaction holds the write lock for each of them; docs/SCALING.md).
func (q queries) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	out := make([]store.Message, len(msgs))
	if len(msgs) == 0 {
		return out, nil
	}
	var (
		n                                = len(msgs)
		senders, threads, titles, bodies = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		levels, atts                     = make([]string, n), make([]string, n)
		recipients, data, meta           = make([]*string, n), make([]*string, n), make([]*string, n)
		created, hops                    = make([]int64, n), make([]int64, n)
		replyTo, chain                   = make([]*int64, n), make([]*int64, n)
		all, stopped                     = make([]bool, n), make([]bool, n)
		rcptMembers                      []string
		rcptOrd                          []int64
	)
	for i, m := range msgs {
		a, err := json.Marshal(nonNilStrings(m.Attachments))
		if err != nil {
			return nil, fmt.Errorf("append messages: %w", err)
		}
		if m.ReplyTo < 0 || m.Hops < 0 || m.Chain < 0 {
			return nil, fmt.Errorf("append messages: negative reply chain field")
		}
		senders[i], threads[i], titles[i], bodies[i], levels[i], atts[i] = m.From, m.Thread, m.Title, m.Body, m.Level, string(a)
		recipients[i], data[i], meta[i] = ptrOf(nullString(m.To)), ptrOf(nullJSON(m.Data)), ptrOf(nullJSON(m.Meta))
		created[i], hops[i] = q.orNow(m.CreatedAt).UnixMilli(), int64(m.Hops)
		replyTo[i], chain[i] = seqPtr(m.ReplyTo), seqPtr(m.Chain)
		all[i], stopped[i] = m.All, m.LoopStopped
		for _, r := range m.Recipients {
			rcptMembers = append(rcptMembers, r)
			rcptOrd = append(rcptOrd, int64(i+1))
		}
	}
	ins, err := q.stmt(ctx, true, insertMessages)
	if err != nil {
		return nil, translate("append messages", err)
	}
	var base int64
	if err := ins.QueryRowContext(ctx, int64(n), senders, recipients, threads, titles, bodies, levels,
		data, meta, atts, created, all, replyTo, hops, chain, stopped).Scan(&base); err != nil {
		return nil, translate("append messages", err)
	}
	if len(rcptMembers) > 0 {
		rcpt, err := q.stmt(ctx, true, insertRecipients)
		if err != nil {
			return nil, translate("append messages", err)
		}
		if _, err := rcpt.ExecContext(ctx, rcptMembers, rcptOrd, base); err != nil {
			return nil, translate("append messages", err)
		}
	}
	for i, m := range msgs {
		m.Seq = base + int64(i) + 1
		m.CreatedAt = fromMS(created[i])
		out[i] = m
	}
	return out, nil
}

// ptrOf is a nullable column's value as an array element: nil for NULL.
func ptrOf(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

// seqPtr is a message seq as an array element: 0 (none) is NULL.
func seqPtr(seq int64) *int64 {
	if seq == 0 {
		return nil
	}
	return &seq
}

const (
	// The batch takes the next n values of message_seq, bumped under the
	// write lock the transaction holds to its commit: ids are the commit
	// order (docs/DECISIONS.md, "PostgreSQL store"), in the order of the
	// batch (WITH ORDINALITY). The INSERT runs to completion although the
	// statement reads nothing from it (a data-modifying WITH always
	// does). Neither statement can fail on a constraint, so neither spends
	// a savepoint.
	insertMessages = noSavepoint + `WITH n AS (UPDATE message_seq SET seq = seq + ?1 RETURNING seq - ?1 AS base),
ins AS (
	INSERT INTO messages (seq, sender, recipient, thread, title, body, level, data, meta, attachments, created_at, all_members, reply_to, hops, chain, loop_stopped)
	SELECT n.base + m.ord, m.sender, m.recipient, m.thread, m.title, m.body, m.level, m.data, m.meta, m.attachments, m.created_at, m.all_members, m.reply_to, m.hops, m.chain, m.loop_stopped
	FROM n, unnest(?2::text[], ?3::text[], ?4::text[], ?5::text[], ?6::text[], ?7::text[], ?8::text[], ?9::text[], ?10::text[],
		?11::bigint[], ?12::boolean[], ?13::bigint[], ?14::bigint[], ?15::bigint[], ?16::boolean[])
		WITH ORDINALITY AS m(sender, recipient, thread, title, body, level, data, meta, attachments, created_at, all_members, reply_to, hops, chain, loop_stopped, ord)
)
SELECT base FROM n`
	// Recipients name their message by its place in the batch (1-based)
	// after base, the seq before the batch.
	insertRecipients = noSavepoint + `INSERT INTO message_recipients (member, seq)
SELECT r.member, ?3 + r.ord FROM unnest(?1::text[], ?2::bigint[]) AS r(member, ord) ON CONFLICT DO NOTHING`
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

func nullJSON(b []byte) sql.NullString { return sql.NullString{String: string(b), Valid: b != nil} }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
