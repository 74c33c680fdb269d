package server

import (
	"context"
	"net/http"
	"net/url"

	apiv1 "svc/gen/svc/v1"
	"svc/server/notify"
)

// MaxHookBody is the most bytes an ingress body may carry; the gateway
// reads one byte more to tell an oversized body.
const MaxHookBody = notify.MaxBody

// ErrHookRejected answers an ingress request that failed verification: the
// gateway answers a bare 401, with no body and no detail. Its receipt is
// committed.
var ErrHookRejected = notify.ErrRejected

// HookResult is the answer to an accepted ingress request: 202 {id, status}.
type HookResult = notify.Result

// Hook takes one ingress request POST /hooks/<slug> (notify.Service.Ingress).
func (s *Server) Hook(ctx context.Context, slug string, query url.Values, h http.Header, body []byte) (HookResult, error) {
	return s.core.notify.Ingress(ctx, slug, query, h, body)
}

// ReplayNotificationDelivery implements apiv1.NotificationsServer: the
// stored raw body runs through the pipeline again under a fresh receipt
// (notify.Service.Replay).
func (n *Notifications) ReplayNotificationDelivery(ctx context.Context, req *apiv1.ReplayNotificationDeliveryRequest) (*apiv1.ReplayNotificationDeliveryResponse, error) {
	if err := validDeliveryID(req.GetId()); err != nil {
		return nil, err
	}
	orig, err := n.store.GetHookDelivery(ctx, req.GetId())
	if err != nil {
		return nil, deliveryErr(err, req.GetId())
	}
	d, err := n.notify.Replay(ctx, orig)
	if err != nil {
		return nil, err
	}
	return &apiv1.ReplayNotificationDeliveryResponse{Delivery: deliveryToProto(d, false)}, nil
}
