package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"database/sql"
	"time"

	"svc/store"
)

const channelColumns = `id, slug, created_at, created_by, archived_at`

// CreateChannel stores a channel and its creator as admin in one
// transaction.
func (db *DB) CreateChannel(ctx context.Context, c store.Channel) error {
	return db.c.withTx(ctx, func(tx pgx.Tx) error { return db.in(tx).CreateChannel(ctx, c) })
}

// CreateChannel stores a channel and makes its creator admin; it runs two
// statements on q.w, which must be a transaction.
func (q queries) CreateChannel(ctx context.Context, c store.Channel) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO channels (`+channelColumns+`) VALUES (?, ?, ?, ?, ?)`,
		c.ID, c.Slug, q.orNow(c.CreatedAt).UnixMilli(), c.CreatedBy, msOrNull(c.ArchivedAt))
	if err != nil {
		return translate("create channel", err)
	}
	return q.PutChannelMember(ctx, store.ChannelMember{Channel: c.ID, Member: c.CreatedBy, Role: "admin"})
}

// GetChannel finds a channel by id, or else by slug.
func (q queries) GetChannel(ctx context.Context, idOrSlug string) (store.Channel, error) {
	row := q.r.QueryRowContext(ctx, `SELECT `+channelColumns+` FROM channels WHERE id = ?1
UNION ALL SELECT `+channelColumns+` FROM channels WHERE slug = ?1 AND id <> ?1 LIMIT 1`, idOrSlug)
	c, err := scanChannel(row)
	return c, translate("get channel", err)
}

// ListChannels returns every channel ordered by slug.
func (q queries) ListChannels(ctx context.Context) ([]store.Channel, error) {
	return collect(ctx, q.r, "list channels", scanChannel, `SELECT `+channelColumns+` FROM channels ORDER BY slug`)
}

// RenameChannel changes a channel's slug.
func (q queries) RenameChannel(ctx context.Context, id, slug string) (store.Channel, error) {
	row := q.w.QueryRowContext(ctx, `UPDATE channels SET slug = ? WHERE id = ? RETURNING `+channelColumns, slug, id)
	c, err := scanChannel(row)
	return c, translate("rename channel", err)
}

// ArchiveChannel sets a channel's archive time (the clock's when zero).
func (q queries) ArchiveChannel(ctx context.Context, id string, at time.Time) (store.Channel, error) {
	row := q.w.QueryRowContext(ctx, `UPDATE channels SET archived_at = ? WHERE id = ? RETURNING `+channelColumns, q.orNow(at).UnixMilli(), id)
	c, err := scanChannel(row)
	return c, translate("archive channel", err)
}

// PutChannelMember adds a member or sets its role.
func (q queries) PutChannelMember(ctx context.Context, m store.ChannelMember) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO channel_members (channel, member, role) VALUES (?, ?, ?)
ON CONFLICT (channel, member) DO UPDATE SET role = excluded.role`, m.Channel, m.Member, m.Role)
	return translate("put channel member", err)
}

// DeleteChannelMember removes a membership.
func (q queries) DeleteChannelMember(ctx context.Context, channel, member string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM channel_members WHERE channel = ? AND member = ?`, channel, member)
	if err != nil {
		return translate("delete channel member", err)
	}
	return notFound("delete channel member", res)
}

// ListChannelMembers returns a channel's members ordered by name.
func (q queries) ListChannelMembers(ctx context.Context, channel string) ([]store.ChannelMember, error) {
	return q.channelMembers(ctx, `SELECT channel, member, role FROM channel_members WHERE channel = ? ORDER BY member`, channel)
}

// MemberChannels returns a member's memberships.
func (q queries) MemberChannels(ctx context.Context, member string) ([]store.ChannelMember, error) {
	return q.channelMembers(ctx, `SELECT channel, member, role FROM channel_members WHERE member = ? ORDER BY channel`, member)
}

func (q queries) channelMembers(ctx context.Context, query, arg string) ([]store.ChannelMember, error) {
	rows, err := q.r.QueryContext(ctx, query, arg)
	if err != nil {
		return nil, translate("channel members", err)
	}
	defer rows.Close()
	out := []store.ChannelMember{}
	for rows.Next() {
		var m store.ChannelMember
		if err := rows.Scan(&m.Channel, &m.Member, &m.Role); err != nil {
			return nil, translate("channel members", err)
		}
		out = append(out, m)
	}
	return out, translate("channel members", rows.Err())
}

func scanChannel(s scanner) (store.Channel, error) {
	var (
		c        store.Channel
		created  int64
		archived sql.NullInt64
	)
	if err := s.Scan(&c.ID, &c.Slug, &created, &c.CreatedBy, &archived); err != nil {
		return store.Channel{}, err
	}
	c.CreatedAt = fromMS(created)
	c.ArchivedAt = fromNullMS(archived)
	return c, nil
}
