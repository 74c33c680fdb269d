package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"svc/store"
)

const approvalColumns = `id, member, tool, input, objective, status, requested_at, expires_at, decided_at, decided_by, reason`

// CreateApproval stores a new approval.
func (q queries) CreateApproval(ctx context.Context, a store.Approval) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO approvals (`+approvalColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Member, a.Tool, a.Input, nullString(a.Objective), a.Status,
		q.orNow(a.RequestedAt).UnixMilli(), a.ExpiresAt.UnixMilli(), msOrNull(a.DecidedAt),
		nullString(a.DecidedBy), nullString(a.Reason))
	return translate("create approval", err)
}

// GetApproval returns one approval.
func (q queries) GetApproval(ctx context.Context, id string) (store.Approval, error) {
	a, err := scanApproval(q.r.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
	return a, translate("get approval", err)
}

// ListApprovals returns the approvals f selects, newest first.
func (q queries) ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]store.Approval, error) {
	var where []string
	var args []any
	if len(f.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		for _, s := range f.Statuses {
			args = append(args, s)
		}
	}
	if f.Member != "" {
		where = append(where, "member = ?")
		args = append(args, f.Member)
	}
	if !f.ExpiresBy.IsZero() {
		where = append(where, "expires_at <= ?")
		args = append(args, f.ExpiresBy.UnixMilli())
	}
	query := `SELECT ` + approvalColumns + ` FROM approvals`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	query += ` ORDER BY requested_at DESC, rowid DESC LIMIT ?`
	args = append(args, limit)
	return collect(ctx, q.r, "list approvals", scanApproval, query, args...)
}

// CountPendingApprovals counts member's pending approvals.
func (q queries) CountPendingApprovals(ctx context.Context, member string) (int, error) {
	var n int
	err := q.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals WHERE member = ? AND status = ?`, member, store.ApprovalPending).Scan(&n)
	return n, translate("count pending approvals", err)
}

// DecideApproval writes the decision of a pending approval: the update
// names the pending status, so of two decisions racing only one applies.
func (q queries) DecideApproval(ctx context.Context, d store.ApprovalDecision) (store.Approval, error) {
	switch d.Status {
	case store.ApprovalAllowed, store.ApprovalDenied, store.ApprovalExpired:
	default:
		return store.Approval{}, fmt.Errorf("decide approval: status %q is no decision: %w", d.Status, store.ErrPrecondition)
	}
	a, err := scanApproval(q.w.QueryRowContext(ctx, `UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, reason = ?
WHERE id = ? AND status = ? RETURNING `+approvalColumns,
		d.Status, q.orNow(d.DecidedAt).UnixMilli(), nullString(d.DecidedBy), nullString(d.Reason), d.ID, store.ApprovalPending))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := q.GetApproval(ctx, d.ID); gerr != nil {
			return store.Approval{}, gerr
		}
		return store.Approval{}, fmt.Errorf("decide approval %s: already decided: %w", d.ID, store.ErrConflict)
	}
	return a, translate("decide approval", err)
}

func scanApproval(s scanner) (store.Approval, error) {
	var (
		a                     store.Approval
		requested, expires    int64
		decided               sql.NullInt64
		objective, by, reason sql.NullString
	)
	if err := s.Scan(&a.ID, &a.Member, &a.Tool, &a.Input, &objective, &a.Status, &requested, &expires, &decided, &by, &reason); err != nil {
		return store.Approval{}, err
	}
	a.Objective, a.DecidedBy, a.Reason = objective.String, by.String, reason.String
	a.RequestedAt, a.ExpiresAt, a.DecidedAt = fromMS(requested), fromMS(expires), fromNullMS(decided)
	return a, nil
}
