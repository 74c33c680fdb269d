package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"errors"
	"fmt"

	"svc/store"
)

const pushSubColumns = `id, member, endpoint, p256dh, auth, created_at`

// PutPushSubscription stores s or, when s.Member already registered its
// endpoint, updates that subscription's keys, keeping its id and creation
// time. An endpoint another member registered is ErrConflict, unchanged.
func (q queries) PutPushSubscription(ctx context.Context, s store.PushSubscription) (store.PushSubscription, error) {
	row := q.w.QueryRowContext(ctx, `INSERT INTO push_subscriptions (`+pushSubColumns+`) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth
WHERE push_subscriptions.member = excluded.member
RETURNING `+pushSubColumns, s.ID, s.Member, s.Endpoint, s.P256dh, s.Auth, q.orNow(s.CreatedAt).UnixMilli())
	out, err := scanPushSub(row)
	if errors.Is(err, pgx.ErrNoRows) {
		// The conflicting row is another member's: the update's WHERE
		// refused it.
		return store.PushSubscription{}, fmt.Errorf("put push subscription: endpoint of another member: %w", store.ErrConflict)
	}
	return out, translate("put push subscription", err)
}

// GetPushSubscriptionByEndpoint returns the subscription of an endpoint.
func (q queries) GetPushSubscriptionByEndpoint(ctx context.Context, endpoint string) (store.PushSubscription, error) {
	out, err := scanPushSub(q.r.QueryRowContext(ctx, `SELECT `+pushSubColumns+` FROM push_subscriptions WHERE endpoint = ?`, endpoint))
	return out, translate("get push subscription", err)
}

// MovePushSubscription gives the subscription of an endpoint to member.
func (q queries) MovePushSubscription(ctx context.Context, endpoint, member string) (store.PushSubscription, error) {
	out, err := scanPushSub(q.w.QueryRowContext(ctx, `UPDATE push_subscriptions SET member = ? WHERE endpoint = ? RETURNING `+pushSubColumns, member, endpoint))
	return out, translate("move push subscription", err)
}

// ListPushSubscriptions returns the member's subscriptions, or everyone's
// when member is empty, oldest first.
func (q queries) ListPushSubscriptions(ctx context.Context, member string) ([]store.PushSubscription, error) {
	return collect(ctx, q.r, "list push subscriptions", scanPushSub, `SELECT `+pushSubColumns+` FROM push_subscriptions WHERE ?1 = '' OR member = ?1 ORDER BY created_at, id`, member)
}

// DeletePushSubscription removes a subscription of member (of anyone when
// member is empty).
func (q queries) DeletePushSubscription(ctx context.Context, member, id string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM push_subscriptions WHERE id = ?1 AND (?2 = '' OR member = ?2)`, id, member)
	if err != nil {
		return translate("delete push subscription", err)
	}
	return notFound("delete push subscription", res)
}

func scanPushSub(s scanner) (store.PushSubscription, error) {
	var (
		p       store.PushSubscription
		created int64
	)
	if err := s.Scan(&p.ID, &p.Member, &p.Endpoint, &p.P256dh, &p.Auth, &created); err != nil {
		return store.PushSubscription{}, err
	}
	p.CreatedAt = fromMS(created)
	return p, nil
}
