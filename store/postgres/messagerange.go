package postgres

import (
	"context"

	"svc/store"
)

// MessagesBetween returns every message with after < seq <= upTo, oldest
// first, with its recipients: what a broker missed of another broker's
// commits (server/cluster reads holes with it; docs/DECISIONS.md, "Several
// brokers: fan-out on NATS"). The caller bounds the span; ids up to a
// committed one are all visible (DECISIONS, "PostgreSQL store"), and a
// message's recipients commit with it.
func (q queries) MessagesBetween(ctx context.Context, after, upTo int64) ([]store.Message, error) {
	msgs, err := q.queryMessages(ctx, "messages between", `SELECT `+messageColumns+` FROM messages WHERE seq > ? AND seq <= ? ORDER BY seq`, after, upTo)
	if err != nil || len(msgs) == 0 {
		return msgs, err
	}
	rows, err := q.r.QueryContext(ctx, `SELECT seq, member FROM message_recipients WHERE seq > ? AND seq <= ? ORDER BY seq, member`, after, upTo)
	if err != nil {
		return nil, translate("messages between", err)
	}
	defer rows.Close()
	at := make(map[int64]int, len(msgs))
	for i, m := range msgs {
		at[m.Seq] = i
	}
	for rows.Next() {
		var (
			seq    int64
			member string
		)
		if err := rows.Scan(&seq, &member); err != nil {
			return nil, translate("messages between", err)
		}
		if i, ok := at[seq]; ok {
			msgs[i].Recipients = append(msgs[i].Recipients, member)
		}
	}
	return msgs, translate("messages between", rows.Err())
}
