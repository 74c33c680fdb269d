package store

import (
	"context"
	"time"
)

// Objective statuses.
const (
	StatusActive    = "active"
	StatusBlocked   = "blocked"
	StatusDone      = "done"
	StatusCancelled = "cancelled"
)

// Attachment is a file attached to an objective, described as it was when
// attached.
type Attachment struct {
	Path     string
	Name     string
	Size     int64
	MimeType string
	// EntryID is the filesystem entry that was checked, so grants reach that
	// file and no other later written at Path.
	EntryID int64
}

// Objective is a unit of structured work.
type Objective struct {
	ID         string
	Title      string
	Outcome    string
	Body       string
	Status     string
	Assignee   string
	Originator string
	// AssigneeID and OriginatorID are the ids of those members (a name
	// deleted and created again is another member); "" for an objective
	// from before member ids that no start has adopted yet.
	AssigneeID   string
	OriginatorID string
	Watchers     []string
	Attachments  []Attachment
	CreatedAt    time.Time
	UpdatedAt    time.Time
	CompletedAt  time.Time // zero unless done
	Result       *string   // set on completion
	BlockReason  *string   // set while blocked
}

// ObjectiveEvent is one entry of an objective's append-only audit log.
type ObjectiveEvent struct {
	ID          int64 // assigned by the store
	ObjectiveID string
	Kind        string
	Actor       string
	CreatedAt   time.Time
	Payload     []byte // JSON object; nil when none
}

// ObjectiveFilter selects objectives; empty fields match everything.
type ObjectiveFilter struct {
	Assignee string
	Statuses []string
}

// ObjectiveStore keeps objectives and their audit logs.
type ObjectiveStore interface {
	// CreateObjective stores a new objective; ErrConflict when the id exists.
	CreateObjective(ctx context.Context, o Objective) error
	// GetObjective returns ErrNotFound for an unknown id.
	GetObjective(ctx context.Context, id string) (Objective, error)
	// ListObjectives returns matching objectives, newest first.
	ListObjectives(ctx context.Context, f ObjectiveFilter) ([]Objective, error)
	// UpdateObjective replaces every mutable field of the objective with o's;
	// ErrNotFound when absent.
	UpdateObjective(ctx context.Context, o Objective) error
	// AppendObjectiveEvents stores events in order and returns them with ID
	// set; ErrPrecondition when an objective is absent.
	AppendObjectiveEvents(ctx context.Context, evs []ObjectiveEvent) ([]ObjectiveEvent, error)
	// ListObjectiveEvents returns an objective's events, oldest first.
	ListObjectiveEvents(ctx context.Context, objectiveID string) ([]ObjectiveEvent, error)
	// AdoptObjectiveMembers gives assignees and originators without an id
	// one: owners' id for a name it lists, orphan for any other. It
	// returns how many objectives it changed.
	AdoptObjectiveMembers(ctx context.Context, owners map[string]string, orphan string) (int64, error)
}
