package store

import (
	"context"
	"time"
)

// HookAuth is a verification config: kind, header name and prefix.
type HookAuth struct {
	Kind       string
	HeaderName string
	Prefix     string
}

// HookEndpoint is an inbound notification endpoint. Targets, Filters and
// Policy are JSON the server validated (opaque here). Secret is the sealed
// secret as the server encrypted it; nil when none is set.
type HookEndpoint struct {
	Slug         string
	DisplayName  string
	Targets      []byte // JSON array
	Auth         HookAuth
	AuthProfile  string // "" when the inline Auth applies
	Filters      []byte // JSON array
	Template     string
	Policy       []byte // JSON object
	DedupeHeader string
	Enabled      bool
	Level        string
	Secret       []byte
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// HookProfile is a shared verification config and secret. EndpointCount
// is filled by reads.
type HookProfile struct {
	Slug          string
	Description   string
	Auth          HookAuth
	Secret        []byte
	CreatedAt     time.Time
	UpdatedAt     time.Time
	EndpointCount int
}

// HookDelivery is the receipt of one inbound delivery, with its raw body.
type HookDelivery struct {
	ID         string
	Endpoint   string
	Status     string
	Reason     string
	DedupeKey  string
	MessageIDs []string
	ReceivedAt time.Time
	Size       int
	Body       []byte
	// IfOffline, IfBusy and Level are the delivery's query overrides; ""
	// when none was given.
	IfOffline, IfBusy, Level string
}

// HookDeliveryFilter selects one endpoint's receipts, newest first.
type HookDeliveryFilter struct {
	Endpoint string
	Before   time.Time // exclusive; zero means unbounded
	Limit    int       // <= 0 means 50
	// WithBody reads the raw bodies too (they are left nil otherwise).
	WithBody bool
}

// HookStore keeps notification endpoints, profiles and delivery receipts.
type HookStore interface {
	// CreateHookEndpoint stores an endpoint: ErrConflict when the slug is
	// taken, ErrPrecondition when AuthProfile names no profile.
	CreateHookEndpoint(ctx context.Context, e HookEndpoint) error
	// GetHookEndpoint returns an endpoint; ErrNotFound.
	GetHookEndpoint(ctx context.Context, slug string) (HookEndpoint, error)
	// ListHookEndpoints returns every endpoint by slug.
	ListHookEndpoints(ctx context.Context) ([]HookEndpoint, error)
	// UpdateHookEndpoint replaces every field of e.Slug but the secret and
	// createdAt: ErrNotFound, ErrPrecondition when AuthProfile names no
	// profile.
	UpdateHookEndpoint(ctx context.Context, e HookEndpoint) error
	// DeleteHookEndpoint removes an endpoint with its receipts;
	// ErrNotFound.
	DeleteHookEndpoint(ctx context.Context, slug string) error
	// SetHookEndpointSecret replaces the sealed secret (nil clears it);
	// ErrNotFound.
	SetHookEndpointSecret(ctx context.Context, slug string, secret []byte, at time.Time) error

	// CreateHookProfile stores a profile; ErrConflict when the slug is taken.
	CreateHookProfile(ctx context.Context, p HookProfile) error
	// GetHookProfile returns a profile with its endpoint count; ErrNotFound.
	GetHookProfile(ctx context.Context, slug string) (HookProfile, error)
	// ListHookProfiles returns every profile by slug with endpoint counts.
	ListHookProfiles(ctx context.Context) ([]HookProfile, error)
	// UpdateHookProfile replaces the description, auth and updatedAt;
	// ErrNotFound.
	UpdateHookProfile(ctx context.Context, p HookProfile) error
	// DeleteHookProfile removes a profile: ErrNotFound, ErrConflict while
	// an endpoint references it.
	DeleteHookProfile(ctx context.Context, slug string) error
	// SetHookProfileSecret replaces the sealed secret (nil clears it);
	// ErrNotFound.
	SetHookProfileSecret(ctx context.Context, slug string, secret []byte, at time.Time) error

	// AddHookDelivery stores a receipt: ErrConflict when the id is taken,
	// ErrPrecondition when the endpoint does not exist.
	AddHookDelivery(ctx context.Context, d HookDelivery) error
	// PruneHookDeliveries deletes at most limit receipts received before
	// before that hold no pending row, oldest first, and returns how many.
	PruneHookDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneRejectedHookDeliveries deletes rejected receipts received
	// before before, and, when endpoint is not "", those of endpoint past
	// its newest keep; it returns how many. Endpoint "" means every
	// endpoint, by age only.
	PruneRejectedHookDeliveries(ctx context.Context, endpoint string, before time.Time, keep int) (int, error)
	// SetHookDeliveryMessages records the ids of the messages a delivery
	// became; ErrNotFound.
	SetHookDeliveryMessages(ctx context.Context, id string, messageIDs []string) error
	// GetHookDelivery returns a receipt with its body; ErrNotFound.
	GetHookDelivery(ctx context.Context, id string) (HookDelivery, error)
	// ListHookDeliveries returns an endpoint's receipts newest first.
	ListHookDeliveries(ctx context.Context, f HookDeliveryFilter) ([]HookDelivery, error)
	// HookDedupeSeen reports whether endpoint has a receipt with key whose
	// status is not rejected nor duplicate, received at or after since.
	HookDedupeSeen(ctx context.Context, endpoint, key string, since time.Time) (bool, error)

	// The rows the delivery policy holds.
	HookPendingStore
}

// Kinds of a HookPending row.
const (
	HookQueue    = "queue"    // a copy queued for an offline member
	HookWait     = "wait"     // a copy held while the member is working
	HookDebounce = "debounce" // a delivery in its endpoint's debounce buffer
)

// HookPending is a delivery the policy holds: a member's queued or held
// copy, or (Member "") a delivery in the endpoint's debounce buffer. It
// belongs to the receipt Delivery; ReceivedAt is that receipt's. Items is
// the JSON content it carries, opaque here.
type HookPending struct {
	Delivery   string
	Endpoint   string
	Member     string
	Kind       string
	ReceivedAt time.Time
	DueAt      time.Time
	Level      string
	Items      []byte
}

// HookPendingFilter selects pending rows; empty fields match any.
type HookPendingFilter struct {
	Kind     string
	Member   string
	Endpoint string
	// DueBy, when set, keeps rows due at or before it.
	DueBy time.Time
}

// HookPendingStore keeps the rows the delivery policy holds.
type HookPendingStore interface {
	// AddHookPending stores a row: ErrConflict when (delivery, member,
	// kind) is taken, ErrPrecondition when its receipt or endpoint does
	// not exist.
	AddHookPending(ctx context.Context, p HookPending) error
	// ListHookPending returns the rows f selects, by endpoint, then
	// newest first (received at descending).
	ListHookPending(ctx context.Context, f HookPendingFilter) ([]HookPending, error)
	// DeleteHookPending removes one row; ErrNotFound.
	DeleteHookPending(ctx context.Context, delivery, member, kind string) error
	// CountHookPending counts a receipt's rows.
	CountHookPending(ctx context.Context, delivery string) (int, error)
	// HookPendingMembers are the members with rows of kind, by name.
	HookPendingMembers(ctx context.Context, kind string) ([]string, error)
	// NextHookPendingDue is the earliest due time of any row; ok false
	// when there is none.
	NextHookPendingDue(ctx context.Context) (due time.Time, ok bool, err error)
	// SetHookDeliveryStatus sets a receipt's status and reason and appends
	// messageIDs to its message ids; ErrNotFound.
	SetHookDeliveryStatus(ctx context.Context, id, status, reason string, messageIDs []string) error
}
