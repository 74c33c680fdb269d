package notify

import (
	"math"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/store"
)

// The wire forms of endpoints, profiles and receipts. None carries a
// secret: HasSecret says whether one is set.

func authToProto(a store.HookAuth) *apiv1.NotificationAuth {
	out := &apiv1.NotificationAuth{Kind: a.Kind}
	if a.HeaderName != "" {
		out.HeaderName = &a.HeaderName
	}
	if a.Prefix != "" {
		out.Prefix = &a.Prefix
	}
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nonNil is s, or an empty list for nil, so a list field is [] on the
// wire, never absent.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// endpointToProto renders an endpoint; profileSecret is whether its
// profile (if any) has a secret.
func endpointToProto(e Endpoint, profileSecret bool) *apiv1.NotificationEndpoint {
	pol := e.Policy
	level := pol.Level
	if level == "" {
		level = e.Level
	}
	out := &apiv1.NotificationEndpoint{
		Slug: e.Slug, DisplayName: optString(e.DisplayName), Auth: authToProto(e.Auth), AuthProfile: optString(e.AuthProfile),
		Template: optString(e.Template), DedupeHeader: optString(e.DedupeHeader), Enabled: e.Enabled, Level: e.Level,
		HasSecret: len(e.Secret) > 0, IngressPath: "/hooks/" + e.Slug,
		Policy: &apiv1.NotificationPolicy{
			IfOffline: &pol.IfOffline, IfBusy: &pol.IfBusy, DebounceMs: &pol.DebounceMs, DebounceMax: &pol.DebounceMax,
			QueueTtlMs: &pol.QueueTTLMs, MaxWaitMs: &pol.MaxWaitMs, Level: &level,
		},
		Targets:   []*apiv1.NotificationTarget{},
		Filters:   []*apiv1.NotificationFilter{},
		CreatedAt: float64(e.CreatedAt.UnixMilli()), UpdatedAt: float64(e.UpdatedAt.UnixMilli()),
	}
	if e.AuthProfile != "" {
		out.HasSecret = profileSecret
	}
	for _, t := range e.Targets {
		out.Targets = append(out.Targets, &apiv1.NotificationTarget{Member: optString(t.Member), Channel: optString(t.Channel)})
	}
	for _, f := range e.Filters {
		pf := &apiv1.NotificationFilter{Path: f.Path, Op: f.Op}
		if len(f.Value) > 0 {
			v := &structpb.Value{}
			if protojson.Unmarshal(f.Value, v) == nil {
				pf.Value = v
			}
		}
		out.Filters = append(out.Filters, pf)
	}
	return out
}

func profileToProto(p store.HookProfile) *apiv1.NotificationProfile {
	return &apiv1.NotificationProfile{
		Slug: p.Slug, Description: optString(p.Description), Auth: authToProto(p.Auth), HasSecret: len(p.Secret) > 0,
		EndpointCount: int32(min(p.EndpointCount, math.MaxInt32)),
		CreatedAt:     float64(p.CreatedAt.UnixMilli()), UpdatedAt: float64(p.UpdatedAt.UnixMilli()),
	}
}

func deliveryToProto(d store.HookDelivery, withBody bool) *apiv1.NotificationDelivery {
	out := &apiv1.NotificationDelivery{
		Id: d.ID, Endpoint: d.Endpoint, Status: d.Status, Reason: optString(d.Reason), DedupeKey: optString(d.DedupeKey),
		MessageIds: nonNil(d.MessageIDs), ReceivedAt: float64(d.ReceivedAt.UnixMilli()), Size: int32(min(d.Size, math.MaxInt32)),
		IfOffline: optString(d.IfOffline), IfBusy: optString(d.IfBusy), Level: optString(d.Level),
	}
	if withBody {
		out.Body = d.Body
		if out.Body == nil {
			out.Body = []byte{}
		}
	}
	return out
}
