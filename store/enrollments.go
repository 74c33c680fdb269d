package store

import (
	"context"
	"time"
)

// DeviceCodeHash is the SHA-256 of an enrollment device code. Device codes
// are never stored.
type DeviceCodeHash [32]byte

// Enrollment statuses.
const (
	EnrollmentPending  = "pending"
	EnrollmentApproved = "approved"
	EnrollmentRejected = "rejected"
)

// Enrollment is one device enrollment record. It lives until ExpiresAt:
// the lifetime while pending or rejected, the hold of the issued token
// once approved.
type Enrollment struct {
	ID         string
	DeviceHash DeviceCodeHash
	// UserCode is the normalized user code (no dash).
	UserCode   string
	LabelHint  string
	SourceIP   string
	UserAgent  string
	Status     string // pending, approved or rejected
	Reason     string // rejected: shown to the device
	CreatedAt  time.Time
	ExpiresAt  time.Time
	Interval   time.Duration // the device's poll interval, in whole ms
	LastPollAt time.Time     // zero before the first poll
	// Member, TokenID and SealedToken are set on approval: whom the token
	// authenticates, the token row minted for this record, and its
	// plaintext sealed under the KEK.
	Member      string
	TokenID     string
	SealedToken string
}

// Live reports whether the record has not expired at now.
func (e Enrollment) Live(now time.Time) bool { return now.Before(e.ExpiresAt) }

// EnrollmentStore keeps device enrollment records.
type EnrollmentStore interface {
	// CreateEnrollment stores a new record: ErrConflict when its id,
	// device hash or user code is taken (expired records included, until
	// swept).
	CreateEnrollment(ctx context.Context, e Enrollment) error
	// GetEnrollmentByDeviceHash is an indexed exact lookup; ErrNotFound
	// when no record has the hash. Expired records are returned too.
	GetEnrollmentByDeviceHash(ctx context.Context, h DeviceCodeHash) (Enrollment, error)
	// GetEnrollmentByUserCode is an indexed exact lookup of a normalized
	// user code; ErrNotFound when absent. Expired records are returned too.
	GetEnrollmentByUserCode(ctx context.Context, userCode string) (Enrollment, error)
	// ListEnrollments returns the records live at now, oldest first.
	ListEnrollments(ctx context.Context, now time.Time) ([]Enrollment, error)
	// CountEnrollments returns how many records are live at now.
	CountEnrollments(ctx context.Context, now time.Time) (int, error)
	// UpdateEnrollment overwrites the mutable fields of the record with
	// e.ID (status, reason, expiry, interval, last poll, member, token id,
	// sealed token); ErrNotFound when absent.
	UpdateEnrollment(ctx context.Context, e Enrollment) error
	// DeleteEnrollment removes a record; ErrNotFound when absent.
	DeleteEnrollment(ctx context.Context, id string) error
	// DeleteExpiredEnrollments removes every record expired at now (its
	// ExpiresAt at or before now) and returns them.
	DeleteExpiredEnrollments(ctx context.Context, now time.Time) ([]Enrollment, error)
}
