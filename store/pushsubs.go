package store

import (
	"context"
	"time"
)

// PushSubscription is a browser's Web Push subscription.
type PushSubscription struct {
	ID        string
	Member    string
	Endpoint  string
	P256dh    string
	Auth      string
	CreatedAt time.Time
}

// PushSubscriptionStore keeps browser push subscriptions.
type PushSubscriptionStore interface {
	// PutPushSubscription stores s, or, when s.Member already registered
	// its endpoint, sets that subscription's keys and returns it with its
	// old id and creation time. A subscription belongs to the member who
	// made it: an endpoint another member registered is ErrConflict, and
	// nothing changes.
	PutPushSubscription(ctx context.Context, s PushSubscription) (PushSubscription, error)
	// GetPushSubscriptionByEndpoint returns the subscription of an
	// endpoint, whoever's it is; ErrNotFound when there is none.
	GetPushSubscriptionByEndpoint(ctx context.Context, endpoint string) (PushSubscription, error)
	// MovePushSubscription gives the subscription of an endpoint to member,
	// keeping its id, keys and creation time, and returns it; ErrNotFound
	// when there is none, ErrPrecondition when member does not exist.
	MovePushSubscription(ctx context.Context, endpoint, member string) (PushSubscription, error)
	// ListPushSubscriptions returns the member's subscriptions; every
	// member's when member is empty.
	ListPushSubscriptions(ctx context.Context, member string) ([]PushSubscription, error)
	// DeletePushSubscription removes the member's subscription (any member's
	// when member is empty); ErrNotFound when absent.
	DeletePushSubscription(ctx context.Context, member, id string) error
}
