package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"errors"
	"fmt"

	"svc/store"
)

// activeTurnQuery reads a member's turn in progress with its message's
// place in the reply chain, in one indexed lookup: it runs for every
// member message the messenger commits.
const activeTurnQuery = `SELECT coalesce(d.turn_seq, 0), coalesce(m.hops, 0), coalesce(m.chain, m.seq, 0)
FROM deliveries d LEFT JOIN messages m ON m.seq = d.turn_seq
WHERE d.member = ? AND d.turn_active`

// ActiveTurn returns false for a member with no turn in progress.
func (q queries) ActiveTurn(ctx context.Context, member string) (store.ActiveTurn, bool, error) {
	st, err := q.stmt(ctx, false, activeTurnQuery)
	if err != nil {
		return store.ActiveTurn{}, false, translate("active turn", err)
	}
	var t store.ActiveTurn
	err = st.QueryRowContext(ctx, member).Scan(&t.Seq, &t.Hops, &t.Chain)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ActiveTurn{}, false, nil
	}
	if err != nil {
		return store.ActiveTurn{}, false, translate("active turn", err)
	}
	return t, true, nil
}

// ReplyPath walks reply_to from seq. A reply always names an older
// message (a turn's message was stored before the turn started), so the
// walk ends, and newest first is seq order.
func (q queries) ReplyPath(ctx context.Context, seq int64, limit int) ([]store.Message, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("reply path: limit must be positive")
	}
	return q.queryMessages(ctx, "reply path", `WITH RECURSIVE path(seq, n) AS (
	SELECT ?1::bigint, 1
	UNION ALL
	SELECT m.reply_to, path.n + 1 FROM path JOIN messages m ON m.seq = path.seq
	WHERE m.reply_to IS NOT NULL AND m.reply_to < m.seq AND path.n < ?2
)
SELECT `+messageColumns+` FROM messages WHERE seq IN (SELECT seq FROM path) ORDER BY seq DESC`, seq, limit)
}

// AddLoopStop inserts the chain's record unless it has one.
func (q queries) AddLoopStop(ctx context.Context, s store.LoopStop) (bool, error) {
	if s.Chain <= 0 || s.Message <= 0 {
		return false, fmt.Errorf("add loop stop: chain and message must be message seqs")
	}
	st, err := q.stmt(ctx, true, addLoopStopQuery)
	if err != nil {
		return false, translate("add loop stop", err)
	}
	res, err := st.ExecContext(ctx, s.Chain, s.Message, q.orNow(s.At).UnixMilli())
	if err != nil {
		return false, translate("add loop stop", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, translate("add loop stop", err)
	}
	return n == 1, nil
}

const addLoopStopQuery = `INSERT INTO loop_stops (chain, message, created_at) VALUES (?, ?, ?) ON CONFLICT (chain) DO NOTHING`

// ListAgents reads the members with a delivery state.
func (q queries) ListAgents(ctx context.Context) ([]string, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT member FROM deliveries ORDER BY member`)
	if err != nil {
		return nil, translate("list agents", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, translate("list agents", err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list agents", err)
	}
	return out, nil
}
