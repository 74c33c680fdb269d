package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"svc/store"
)

const deliveryColumns = `member, position, turn_active, turn_seq, turn_started_at, first_attached_at, updated_at`

// GetDelivery returns ErrNotFound for a member whose runner never attached.
func (q queries) GetDelivery(ctx context.Context, member string) (store.Delivery, error) {
	d, err := scanDelivery(q.r.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE member = ?`, member))
	return d, translate("get delivery", err)
}

// UpdateDelivery applies u in one statement: an upsert whose update keeps
// the position from moving backwards.
func (q queries) UpdateDelivery(ctx context.Context, member string, u store.DeliveryUpdate) (store.Delivery, error) {
	if u.Turn < store.TurnUnchanged || u.Turn > store.TurnEnded {
		return store.Delivery{}, fmt.Errorf("update delivery: unknown turn phase %d", u.Turn)
	}
	if u.Position < 0 || u.TurnSeq < 0 {
		return store.Delivery{}, fmt.Errorf("update delivery: negative seq")
	}
	at := q.orNow(u.At).UnixMilli()
	d, err := scanDelivery(q.w.QueryRowContext(ctx, `INSERT INTO deliveries (`+deliveryColumns+`)
VALUES (?1, NULLIF(?2::bigint, 0), ?3::int = 1, CASE WHEN ?3::int = 1 THEN NULLIF(?4::bigint, 0) END, CASE WHEN ?3::int = 1 THEN ?5::bigint END, ?5::bigint, ?5::bigint)
ON CONFLICT (member) DO UPDATE SET
	position = CASE WHEN excluded.position > coalesce(deliveries.position, 0) THEN excluded.position ELSE deliveries.position END,
	turn_active = CASE ?3::int WHEN 0 THEN deliveries.turn_active ELSE ?3::int = 1 END,
	turn_seq = CASE ?3::int WHEN 0 THEN deliveries.turn_seq WHEN 1 THEN NULLIF(?4::bigint, 0) END,
	turn_started_at = CASE ?3::int WHEN 0 THEN deliveries.turn_started_at WHEN 1 THEN ?5::bigint END,
	updated_at = ?5::bigint
RETURNING `+deliveryColumns, member, u.Position, int(u.Turn), u.TurnSeq, at))
	if err != nil {
		err = translate("update delivery", err)
		if errors.Is(err, store.ErrPrecondition) {
			// The foreign key: no such member.
			return store.Delivery{}, fmt.Errorf("update delivery: member %q: %w", member, store.ErrNotFound)
		}
		return store.Delivery{}, err
	}
	return d, nil
}

func scanDelivery(s scanner) (store.Delivery, error) {
	var (
		d                     store.Delivery
		pos, turnSeq, started sql.NullInt64
		first, updated        int64
	)
	if err := s.Scan(&d.Member, &pos, &d.TurnActive, &turnSeq, &started, &first, &updated); err != nil {
		return store.Delivery{}, err
	}
	d.Position, d.TurnSeq = pos.Int64, turnSeq.Int64
	d.TurnStartedAt = fromNullMS(started)
	d.FirstAttachedAt, d.UpdatedAt = fromMS(first), fromMS(updated)
	return d, nil
}

// DeliveryBacklog reads the newest f.Max+1 messages addressed to the member
// (by index, newest first) and walks them: the backlog ends at the first one
// past the bound (the count or the age), and what lies at or before it is
// counted, by index, up to f.MaxOmitted. Both reads are bounded however long
// the member's history is.
func (q queries) DeliveryBacklog(ctx context.Context, f store.BacklogFilter) (store.Backlog, error) {
	if f.Max <= 0 || f.MaxOmitted <= 0 {
		return store.Backlog{}, fmt.Errorf("delivery backlog: Max and MaxOmitted must be positive")
	}
	rows, err := q.r.QueryContext(ctx, `SELECT m.seq, m.created_at FROM messages m WHERE m.seq IN (
	SELECT seq FROM (SELECT seq FROM messages WHERE all_members AND seq > ?1 AND sender <> ?2 ORDER BY seq DESC LIMIT ?3) b
	UNION ALL
	SELECT seq FROM (SELECT r.seq FROM message_recipients r JOIN messages x ON x.seq = r.seq
		WHERE r.member = ?2 AND r.seq > ?1 AND x.sender <> ?2 ORDER BY r.seq DESC LIMIT ?3) d
) ORDER BY m.seq DESC LIMIT ?3`, f.Since, f.Member, f.Max+1)
	if err != nil {
		return store.Backlog{}, translate("delivery backlog", err)
	}
	defer rows.Close()
	b := store.Backlog{After: f.Since}
	notBefore := int64(0)
	if !f.NotBefore.IsZero() {
		notBefore = f.NotBefore.UnixMilli()
	}
	cut := false
	for i := 0; rows.Next(); i++ {
		var seq, created int64
		if err := rows.Scan(&seq, &created); err != nil {
			return store.Backlog{}, translate("delivery backlog", err)
		}
		if i == f.Max || created < notBefore {
			b.After, cut = seq, true
			break
		}
	}
	if err := rows.Err(); err != nil {
		return store.Backlog{}, translate("delivery backlog", err)
	}
	rows.Close()
	if !cut {
		return b, nil
	}
	err = q.r.QueryRowContext(ctx, `SELECT
	(SELECT count(*) FROM (SELECT 1 FROM messages WHERE all_members AND seq > ?1 AND seq <= ?3 AND sender <> ?2 LIMIT ?4) b)
	+ (SELECT count(*) FROM (SELECT 1 FROM message_recipients r JOIN messages x ON x.seq = r.seq
		WHERE r.member = ?2 AND r.seq > ?1 AND r.seq <= ?3 AND x.sender <> ?2 LIMIT ?4) d)`,
		f.Since, f.Member, b.After, f.MaxOmitted).Scan(&b.Omitted)
	if err != nil {
		return store.Backlog{}, translate("delivery backlog", err)
	}
	b.Omitted = min(b.Omitted, f.MaxOmitted)
	return b, nil
}
