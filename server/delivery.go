package server

import (
	"context"
	"errors"
	"fmt"
	"svc/server/apierr"
	"svc/server/wire"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
)

// The bound of a first replay (docs/RUNNER.md, Delivery contract): a
// runner that never acknowledged anything starts with at most the newest
// backlogMax messages addressed to its member, none older than backlogAge.
// Older work is better read on purpose (the recent tool) than replayed as
// hundreds of turns; backlogMaxOmitted caps the count of what was left out
// so that counting stays cheap on a long history.
const (
	backlogMax        = 200
	backlogAge        = 7 * 24 * time.Hour
	backlogMaxOmitted = 100_000
)

// brokerDelivery serves members' delivery states: the position each
// member's runner acknowledged and the turn it is in.
type brokerDelivery struct{ *core }

// GetDelivery implements apiv1.BrokerServer.
func (b *brokerDelivery) GetDelivery(ctx context.Context, req *apiv1.GetDeliveryRequest) (*apiv1.GetDeliveryResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	d, err := b.store.GetDelivery(ctx, req.GetName())
	switch {
	case errors.Is(err, store.ErrNotFound):
		d = store.Delivery{Member: req.GetName()} // its runner never attached
	case err != nil:
		return nil, err
	}
	st, err := b.deliveryState(ctx, d)
	if err != nil {
		return nil, err
	}
	return &apiv1.GetDeliveryResponse{Delivery: st}, nil
}

// UpdateDelivery implements apiv1.BrokerServer. It commits through the
// message committer, so a turn's start is ordered with the messages around
// it and shares their fsync.
func (b *brokerDelivery) UpdateDelivery(ctx context.Context, req *apiv1.UpdateDeliveryRequest) (*apiv1.UpdateDeliveryResponse, error) {
	p := mustPrincipal(ctx)
	if req.GetName() != p.Member {
		return nil, fmt.Errorf("%w: a member's delivery state is updated by its own runner", auth.ErrForbidden)
	}
	if !p.BearerPlane() {
		return nil, fmt.Errorf("%w: delivery is reported with a bearer token", auth.ErrForbidden)
	}
	u := store.DeliveryUpdate{At: b.now()}
	switch req.GetTurn() {
	case apiv1.TurnPhase_TURN_PHASE_UNSPECIFIED:
	case apiv1.TurnPhase_TURN_PHASE_STARTED:
		u.Turn = store.TurnStarted
	case apiv1.TurnPhase_TURN_PHASE_ENDED:
		u.Turn = store.TurnEnded
	default:
		return nil, apierr.Invalid("turn", "must be TURN_PHASE_STARTED, TURN_PHASE_ENDED or absent")
	}
	if req.GetTurnMessageId() != "" && u.Turn != store.TurnStarted {
		return nil, apierr.Invalid("turnMessageId", "is given only with turn TURN_PHASE_STARTED")
	}
	var err error
	if u.Position, err = b.knownMessage(ctx, "position", req.GetPosition()); err != nil {
		return nil, err
	}
	if u.TurnSeq, err = b.knownMessage(ctx, "turnMessageId", req.GetTurnMessageId()); err != nil {
		return nil, err
	}
	var d store.Delivery
	err = b.commit(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		d, err = tx.UpdateDelivery(ctx, p.Member, u)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(apierr.CodeNotFound, "member %q not found", p.Member) // deleted meanwhile
	}
	if err != nil {
		return nil, err
	}
	st, err := b.deliveryState(ctx, d)
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateDeliveryResponse{Delivery: st}, nil
}

// knownMessage reads a message id of an update: "" is 0 (none); anything
// else must name a message this store holds.
func (b *brokerDelivery) knownMessage(ctx context.Context, field, id string) (int64, error) {
	if id == "" {
		return 0, nil
	}
	seq, err := ParseMessageID(id)
	if err != nil || seq == 0 {
		return 0, apierr.Invalid(field, "must be a message id")
	}
	newest, err := b.store.LastMessageSeq(ctx)
	if err != nil {
		return 0, err
	}
	if seq > newest {
		return 0, apierr.Invalid(field, "no message %s", id)
	}
	return seq, nil
}

// deliveryState renders d, with the bounded backlog of a member whose
// runner never acknowledged anything.
func (b *brokerDelivery) deliveryState(ctx context.Context, d store.Delivery) (*apiv1.DeliveryState, error) {
	st := &apiv1.DeliveryState{TurnActive: d.TurnActive}
	if d.Position > 0 {
		pos := formatMessageID(d.Position)
		st.Position = &pos
	}
	if d.TurnActive && d.TurnSeq > 0 {
		id := formatMessageID(d.TurnSeq)
		st.TurnMessageId = &id
	}
	if !d.TurnStartedAt.IsZero() {
		at := wire.MS(d.TurnStartedAt)
		st.TurnStartedAt = &at
	}
	if !d.FirstAttachedAt.IsZero() {
		at := wire.MS(d.FirstAttachedAt)
		st.FirstAttachedAt = &at
	}
	if d.Position == 0 {
		since, err := b.memberSince(ctx, d.Member)
		if err != nil {
			return nil, err
		}
		bl, err := b.store.DeliveryBacklog(ctx, store.BacklogFilter{
			Member: d.Member, Since: since, Max: backlogMax,
			NotBefore: b.now().Add(-backlogAge), MaxOmitted: backlogMaxOmitted,
		})
		if err != nil {
			return nil, err
		}
		after := formatMessageID(bl.After)
		st.BacklogAfter, st.BacklogOmitted = &after, int32(bl.Omitted)
	}
	return st, nil
}
