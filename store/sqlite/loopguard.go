package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"svc/store"
)

// activeTurnQuery reads a member's turn in progress with its message's
// place in the reply chain, in one indexed lookup: it runs for every
// member message the messenger commits.
const activeTurnQuery = `SELECT coalesce(d.turn_seq, 0), coalesce(m.hops, 0), coalesce(m.chain, m.seq, 0)
FROM deliveries d LEFT JOIN messages m ON m.seq = d.turn_seq
WHERE d.member = ? AND d.turn_active = 1`

// ActiveTurn returns false for a member with no turn in progress.
func (q queries) ActiveTurn(ctx context.Context, member string) (store.ActiveTurn, bool, error) {
	st, err := q.stmt(ctx, false, activeTurnQuery)
	if err != nil {
		return store.ActiveTurn{}, false, translate("active turn", err)
	}
	var t store.ActiveTurn
	err = st.QueryRowContext(ctx, member).Scan(&t.Seq, &t.Hops, &t.Chain)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ActiveTurn{}, false, nil
	}
	if err != nil {
		return store.ActiveTurn{}, false, translate("active turn", err)
	}
	return t, true, nil
}

// activeTurnsQuery is activeTurnQuery for a set of members at once (a
// JSON array of names): one statement, and one round trip through cgo and
// database/sql, for every sender of a group commit instead of one each.
const activeTurnsQuery = `SELECT d.member, coalesce(d.turn_seq, 0), coalesce(m.hops, 0), coalesce(m.chain, m.seq, 0)
FROM deliveries d LEFT JOIN messages m ON m.seq = d.turn_seq
WHERE d.member IN (SELECT value FROM json_each(?)) AND d.turn_active = 1`

// ActiveTurns is ActiveTurn for each of members: the turns in progress by
// member; a member with none is absent. The messenger reads a batch's
// senders with it (the method is sqlite's alone: the store interface is
// unchanged and other stores are asked one member at a time).
func (q queries) ActiveTurns(ctx context.Context, members []string) (map[string]store.ActiveTurn, error) {
	out := map[string]store.ActiveTurn{}
	if len(members) == 0 {
		return out, nil
	}
	for _, m := range members {
		// JSON would turn bytes that are not UTF-8 into U+FFFD and look
		// up another name; no member has such a name, but the answer must
		// be ActiveTurn's.
		if !utf8.ValidString(m) {
			return nil, fmt.Errorf("active turns: member name is not UTF-8")
		}
	}
	names, err := json.Marshal(members)
	if err != nil {
		return nil, fmt.Errorf("active turns: %w", err)
	}
	st, err := q.stmt(ctx, false, activeTurnsQuery)
	if err != nil {
		return nil, translate("active turns", err)
	}
	rows, err := st.QueryContext(ctx, string(names))
	if err != nil {
		return nil, translate("active turns", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			member string
			t      store.ActiveTurn
		)
		if err := rows.Scan(&member, &t.Seq, &t.Hops, &t.Chain); err != nil {
			return nil, translate("active turns", err)
		}
		out[member] = t
	}
	if err := rows.Err(); err != nil {
		return nil, translate("active turns", err)
	}
	return out, nil
}

// ReplyPath walks reply_to from seq. A reply always names an older
// message (a turn's message was stored before the turn started), so the
// walk ends, and newest first is seq order.
func (q queries) ReplyPath(ctx context.Context, seq int64, limit int) ([]store.Message, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("reply path: limit must be positive")
	}
	return q.queryMessages(ctx, "reply path", `WITH RECURSIVE path(seq, n) AS (
	SELECT ?1, 1
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
