package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"svc/store"
)

const memberColumns = `name, role, instructions, permissions, created_at, updated_at, since_seq, member_id`

// roleJSON fixes the stored encoding of store.Role independently of its Go
// field names.
type roleJSON struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

// ReplaceMembers upserts every member and deletes the others; the foreign
// keys cascade the deletes to tokens and sessions. It runs its statements on
// q.w, which must be a transaction (DB.ReplaceMembers opens one).
func (q queries) ReplaceMembers(ctx context.Context, members []store.Member) error {
	names := make([]string, 0, len(members))
	for _, m := range members {
		if err := q.putMember(ctx, m); err != nil {
			return translate("replace members", err)
		}
		names = append(names, m.Name)
	}
	keep, err := json.Marshal(names)
	if err != nil {
		return fmt.Errorf("replace members: %w", err)
	}
	// One JSON parameter keeps the statement independent of the number
	// of members.
	defer q.tokensChanging()() // the deletes cascade to tokens
	_, err = q.w.ExecContext(ctx, `DELETE FROM members WHERE name NOT IN (SELECT value FROM jsonb_array_elements_text(?::jsonb))`, string(keep))
	return translate("replace members", err)
}

// PutMember inserts or updates one member. On update it keeps the stored
// CreatedAt, and it moves UpdatedAt only when the role, instructions or
// permissions changed, so mirroring an unchanged config file is a no-op.
// Zero times on insert become the clock's time.
func (q queries) PutMember(ctx context.Context, m store.Member) error {
	return translate("put member", q.putMember(ctx, m))
}

func (q queries) putMember(ctx context.Context, m store.Member) error {
	var role sql.NullString
	if m.Role != nil {
		b, err := json.Marshal(roleJSON{Title: m.Role.Title, Description: m.Role.Description})
		if err != nil {
			return err
		}
		role = sql.NullString{String: string(b), Valid: true}
	}
	perms := m.Permissions
	if perms == nil {
		perms = []string{} // "[]", never "null"
	}
	permsJSON, err := json.Marshal(perms)
	if err != nil {
		return err
	}
	now := q.now()
	created, updated := m.CreatedAt, m.UpdatedAt
	if created.IsZero() {
		created = now
	}
	if updated.IsZero() {
		updated = now
	}
	// A new member's since_seq is the newest message now, read in the
	// same statement: every earlier message is at or below it.
	// An empty id keeps the stored one: only a member entry that has one
	// says what it is.
	_, err = q.w.ExecContext(ctx, `INSERT INTO members (`+memberColumns+`)
VALUES (?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM messages), ?)
ON CONFLICT (name) DO UPDATE SET
	role = excluded.role,
	instructions = excluded.instructions,
	permissions = excluded.permissions,
	updated_at = CASE WHEN members.role IS DISTINCT FROM excluded.role
		OR members.instructions IS DISTINCT FROM excluded.instructions
		OR members.permissions IS DISTINCT FROM excluded.permissions THEN excluded.updated_at ELSE members.updated_at END,
	member_id = CASE WHEN excluded.member_id != '' THEN excluded.member_id ELSE members.member_id END
WHERE members.role IS DISTINCT FROM excluded.role
	OR members.instructions IS DISTINCT FROM excluded.instructions
	OR members.permissions IS DISTINCT FROM excluded.permissions
	OR (excluded.member_id != '' AND members.member_id != excluded.member_id)`,
		m.Name, role, m.Instructions, string(permsJSON), created.UnixMilli(), updated.UnixMilli(), m.ID)
	return err
}

// GetMember returns ErrNotFound for an unknown name.
func (q queries) GetMember(ctx context.Context, name string) (store.Member, error) {
	row := q.r.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM members WHERE name = ?`, name)
	m, err := scanMember(row)
	if err != nil {
		return store.Member{}, translate("get member", err)
	}
	return m, nil
}

// ListMembers returns every member ordered by name.
func (q queries) ListMembers(ctx context.Context) ([]store.Member, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+memberColumns+` FROM members ORDER BY name`)
	if err != nil {
		return nil, translate("list members", err)
	}
	defer rows.Close()
	out := []store.Member{}
	for rows.Next() {
		m, err := scanMember(rows)
		if err != nil {
			return nil, translate("list members", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list members", err)
	}
	return out, nil
}

// DeleteMember removes a member; the foreign keys cascade to its tokens and
// sessions. ErrNotFound when absent.
func (q queries) DeleteMember(ctx context.Context, name string) error {
	defer q.tokensChanging()() // the delete cascades to tokens
	res, err := q.w.ExecContext(ctx, `DELETE FROM members WHERE name = ?`, name)
	if err != nil {
		return translate("delete member", err)
	}
	return notFound("delete member", res)
}

func scanMember(s scanner) (store.Member, error) {
	var (
		m                store.Member
		role             sql.NullString
		perms            string
		created, updated int64
	)
	if err := s.Scan(&m.Name, &role, &m.Instructions, &perms, &created, &updated, &m.SinceSeq, &m.ID); err != nil {
		return store.Member{}, err
	}
	if role.Valid {
		var r roleJSON
		if err := json.Unmarshal([]byte(role.String), &r); err != nil {
			return store.Member{}, fmt.Errorf("member %q: decode role: %w", m.Name, err)
		}
		m.Role = &store.Role{Title: r.Title, Description: r.Description}
	}
	m.Permissions = []string{}
	if err := json.Unmarshal([]byte(perms), &m.Permissions); err != nil {
		return store.Member{}, fmt.Errorf("member %q: decode permissions: %w", m.Name, err)
	}
	if m.Permissions == nil {
		m.Permissions = []string{}
	}
	m.CreatedAt = fromMS(created)
	m.UpdatedAt = fromMS(updated)
	return m, nil
}

// PutFormerMember records a deleted member; an id recorded already is
// left as it is.
func (q queries) PutFormerMember(ctx context.Context, m store.FormerMember) error {
	if m.ID == "" || m.Name == "" {
		return fmt.Errorf("put former member: no id or name: %w", store.ErrPrecondition)
	}
	at := m.DeletedAt
	if at.IsZero() {
		at = q.now()
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO former_members (id, name, deleted_at, deleted_by) VALUES (?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`, m.ID, m.Name, at.UnixMilli(), m.DeletedBy)
	return translate("put former member", err)
}

// ListFormerMembers returns every recorded deleted member, by deletion
// time.
func (q queries) ListFormerMembers(ctx context.Context) ([]store.FormerMember, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT id, name, deleted_at, deleted_by FROM former_members ORDER BY deleted_at, id`)
	if err != nil {
		return nil, translate("list former members", err)
	}
	defer rows.Close()
	out := []store.FormerMember{}
	for rows.Next() {
		var (
			m  store.FormerMember
			at int64
		)
		if err := rows.Scan(&m.ID, &m.Name, &at, &m.DeletedBy); err != nil {
			return nil, translate("list former members", err)
		}
		m.DeletedAt = fromMS(at)
		out = append(out, m)
	}
	return out, translate("list former members", rows.Err())
}
