package store

import (
	"context"
	"time"
)

// Approval statuses: pending until decided once.
const (
	ApprovalPending = "pending"
	ApprovalAllowed = "allowed"
	ApprovalDenied  = "denied"
	ApprovalExpired = "expired"
)

// Approval is a member's request that a person decide whether it may use
// a tool (docs/APPROVALS.md).
type Approval struct {
	ID     string
	Member string // who asks
	Tool   string
	// Input is the tool's input as JSON, redacted by the requester.
	Input []byte
	// Objective is the objective the member works on; "" when none.
	Objective   string
	Status      string
	RequestedAt time.Time
	ExpiresAt   time.Time
	// DecidedAt, DecidedBy and Reason are set by the decision; zero (or
	// "") while pending, DecidedBy also "" on expiry.
	DecidedAt time.Time
	DecidedBy string
	Reason    string
}

// ApprovalFilter selects approvals, newest first.
type ApprovalFilter struct {
	// Statuses keeps these statuses only; empty keeps all.
	Statuses []string
	// Member keeps one requester's approvals only; "" keeps all.
	Member string
	// ExpiresBy, when set, keeps approvals whose expiry is at or before it.
	ExpiresBy time.Time
	// Limit is the most returned; <= 0 means 100.
	Limit int
}

// ApprovalDecision is what deciding writes.
type ApprovalDecision struct {
	ID        string
	Status    string // allowed, denied or expired
	DecidedAt time.Time
	DecidedBy string // "" on expiry
	Reason    string
}

// ApprovalStore keeps approvals.
type ApprovalStore interface {
	// CreateApproval stores a new approval: ErrConflict when its id is
	// taken, ErrPrecondition when its member does not exist.
	CreateApproval(ctx context.Context, a Approval) error
	// GetApproval returns one approval; ErrNotFound when absent.
	GetApproval(ctx context.Context, id string) (Approval, error)
	// ListApprovals returns the approvals f selects, newest first.
	ListApprovals(ctx context.Context, f ApprovalFilter) ([]Approval, error)
	// CountPendingApprovals returns how many of member's approvals are
	// pending.
	CountPendingApprovals(ctx context.Context, member string) (int, error)
	// DecideApproval writes the decision of a pending approval and returns
	// it decided: ErrNotFound when absent, ErrConflict when it is no longer
	// pending (a decision is written once).
	DecideApproval(ctx context.Context, d ApprovalDecision) (Approval, error)
}
