package notify

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/hooks"
	"svc/server/registry"
	"svc/store"
)

// Admin implements apiv1.NotificationsServer: the admin API of inbound
// hooks (endpoints, their secrets and receipts, profiles). Every endpoint
// change commits on the message committer with the event that reports it.
type Admin struct {
	apiv1.UnimplementedNotificationsServer
	s *Service
}

var _ apiv1.NotificationsServer = (*Admin)(nil)

// Admin returns the admin API over s.
func (s *Service) Admin() *Admin { return &Admin{s: s} }

// deliveryErr names an unknown receipt.
func deliveryErr(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errorf(apierr.CodeNotFound, "no delivery %q", id)
	}
	return err
}

// profileSecrets maps each profile slug to whether it has a secret.
func (a *Admin) profileSecrets(ctx context.Context) (map[string]bool, error) {
	ps, err := a.s.d.Store.ListHookProfiles(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ps))
	for _, p := range ps {
		out[p.Slug] = len(p.Secret) > 0
	}
	return out, nil
}

// render renders e with its profile's secret state.
func (a *Admin) render(ctx context.Context, e Endpoint) *apiv1.NotificationEndpoint {
	has := false
	if e.AuthProfile != "" {
		if p, err := a.s.d.Store.GetHookProfile(ctx, e.AuthProfile); err == nil {
			has = len(p.Secret) > 0
		}
	}
	return endpointToProto(e, has)
}

// ListNotificationEndpoints implements apiv1.NotificationsServer: a
// caller without notifications.manage sees the endpoints that reach it.
func (a *Admin) ListNotificationEndpoints(ctx context.Context, _ *apiv1.ListNotificationEndpointsRequest) (*apiv1.ListNotificationEndpointsResponse, error) {
	p := registry.Caller(ctx)
	list, err := List(ctx, a.s.d.Store)
	if err != nil {
		return nil, err
	}
	secrets, err := a.profileSecrets(ctx)
	if err != nil {
		return nil, err
	}
	var chans map[string]bool
	if !p.Has(auth.NotificationsManage) {
		if chans, err = a.s.memberChannels(ctx, p.Member); err != nil {
			return nil, err
		}
	}
	out := &apiv1.ListNotificationEndpointsResponse{Endpoints: []*apiv1.NotificationEndpoint{}}
	for _, e := range list {
		if chans != nil && !e.reaches(p.Member, chans) {
			continue
		}
		out.Endpoints = append(out.Endpoints, endpointToProto(e, secrets[e.AuthProfile]))
	}
	return out, nil
}

// GetNotificationEndpoint implements apiv1.NotificationsServer: an
// endpoint that does not reach a non-manage caller is 404 to them.
func (a *Admin) GetNotificationEndpoint(ctx context.Context, req *apiv1.GetNotificationEndpointRequest) (*apiv1.GetNotificationEndpointResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	e, err := Read(ctx, a.s.d.Store, req.GetSlug())
	if err != nil {
		return nil, EndpointErr(err, req.GetSlug())
	}
	if !p.Has(auth.NotificationsManage) {
		chans, err := a.s.memberChannels(ctx, p.Member)
		if err != nil {
			return nil, err
		}
		if !e.reaches(p.Member, chans) {
			return nil, EndpointErr(store.ErrNotFound, req.GetSlug())
		}
	}
	return &apiv1.GetNotificationEndpointResponse{Endpoint: a.render(ctx, e)}, nil
}

// resolveTargets parses targets against the team and the channels: an
// unknown member or channel, or an archived channel, is 400.
func (a *Admin) resolveTargets(ctx context.Context, l *structpb.ListValue) ([]Target, error) {
	var lookupErr error
	ts, err := ParseTargets(l, a.s.d.Members.Known, func(ref string) (string, bool) {
		ch, err := a.s.d.Store.GetChannel(ctx, ref)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				lookupErr = err
			}
			return "", false
		}
		return ch.ID, ch.ArchivedAt.IsZero()
	})
	if lookupErr != nil {
		return nil, lookupErr
	}
	return ts, err
}

// knownProfile checks that slug names a profile (400 otherwise).
func (a *Admin) knownProfile(ctx context.Context, slug string) error {
	if err := registry.ValidSlug("authProfile", slug); err != nil {
		return err
	}
	if _, err := a.s.d.Store.GetHookProfile(ctx, slug); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Invalid("authProfile", "no notification profile %q", slug)
		}
		return err
	}
	return nil
}

// CreateNotificationEndpoint implements apiv1.NotificationsServer: 201.
func (a *Admin) CreateNotificationEndpoint(ctx context.Context, req *apiv1.CreateNotificationEndpointRequest) (*apiv1.CreateNotificationEndpointResponse, error) {
	if err := apierr.FirstErr(
		registry.ValidSlug("slug", req.GetSlug()),
		endpointFields(req.DisplayName, req.Template, req.DedupeHeader, req.Level),
	); err != nil {
		return nil, err
	}
	targets, err := a.resolveTargets(ctx, req.GetTargets())
	if err != nil {
		return nil, err
	}
	filters, err := parseFilters(req.GetFilters())
	if err != nil {
		return nil, err
	}
	au := defaultAuth()
	if req.Auth != nil {
		if au, err = parseAuth("auth", req.GetAuth()); err != nil {
			return nil, err
		}
	}
	if req.GetAuthProfile() != "" {
		if err := a.knownProfile(ctx, req.GetAuthProfile()); err != nil {
			return nil, err
		}
	}
	pol, err := applyPolicy(DefaultPolicy(), req.GetPolicy())
	if err != nil {
		return nil, err
	}
	now := a.s.now()
	e := Endpoint{
		HookEndpoint: store.HookEndpoint{
			Slug: req.GetSlug(), DisplayName: req.GetDisplayName(), Auth: au, AuthProfile: req.GetAuthProfile(),
			Template: req.GetTemplate(), DedupeHeader: req.GetDedupeHeader(),
			Enabled: req.Enabled == nil || req.GetEnabled(), Level: "info", CreatedAt: now, UpdatedAt: now,
		},
		Targets: targets, Filters: filters, Policy: pol,
	}
	if req.Level != nil {
		e.Level = req.GetLevel()
	}
	rec, err := e.Record()
	if err != nil {
		return nil, err
	}
	err = a.s.endpoints.Create(ctx, e.Slug, e, func(ctx context.Context, tx store.Tx) error {
		err := tx.CreateHookEndpoint(ctx, rec)
		if errors.Is(err, store.ErrPrecondition) {
			return apierr.Invalid("authProfile", "no notification profile %q", e.AuthProfile)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateNotificationEndpointResponse{Endpoint: a.render(ctx, e)}, nil
}

// UpdateNotificationEndpoint implements apiv1.NotificationsServer.
func (a *Admin) UpdateNotificationEndpoint(ctx context.Context, req *apiv1.UpdateNotificationEndpointRequest) (*apiv1.UpdateNotificationEndpointResponse, error) {
	if err := endpointFields(req.DisplayName, req.Template, req.DedupeHeader, req.Level); err != nil {
		return nil, err
	}
	var (
		targets []Target
		filters []hooks.Filter
		au      store.HookAuth
		err     error
	)
	if req.Targets != nil {
		if targets, err = a.resolveTargets(ctx, req.GetTargets()); err != nil {
			return nil, err
		}
	}
	if req.Filters != nil {
		if filters, err = parseFilters(req.GetFilters()); err != nil {
			return nil, err
		}
	}
	if req.Auth != nil {
		if au, err = parseAuth("auth", req.GetAuth()); err != nil {
			return nil, err
		}
	}
	if req.GetAuthProfile() != "" {
		if err := a.knownProfile(ctx, req.GetAuthProfile()); err != nil {
			return nil, err
		}
	}
	e, err := a.s.endpoints.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, e *Endpoint, ch *registry.Change) (bool, error) {
		before, err := e.Record()
		if err != nil {
			return false, err
		}
		if req.DisplayName != nil {
			e.DisplayName = req.GetDisplayName()
		}
		if targets != nil {
			e.Targets = targets
		}
		if filters != nil {
			e.Filters = filters
		}
		if req.Auth != nil {
			e.Auth = au
		}
		if req.AuthProfile != nil {
			e.AuthProfile = req.GetAuthProfile()
		}
		if req.Template != nil {
			e.Template = req.GetTemplate()
		}
		if req.DedupeHeader != nil {
			e.DedupeHeader = req.GetDedupeHeader()
		}
		if req.Enabled != nil {
			e.Enabled = req.GetEnabled()
		}
		if req.Level != nil {
			e.Level = req.GetLevel()
		}
		if e.Policy, err = applyPolicy(e.Policy, req.GetPolicy()); err != nil {
			return false, err
		}
		after, err := e.Record()
		if err != nil {
			return false, err
		}
		if sameEndpoint(before, after) {
			return false, nil
		}
		after.UpdatedAt = a.s.now()
		if err := tx.UpdateHookEndpoint(ctx, after); err != nil {
			if errors.Is(err, store.ErrPrecondition) {
				return false, apierr.Invalid("authProfile", "no notification profile %q", e.AuthProfile)
			}
			return false, err
		}
		ch.Event = "updated"
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateNotificationEndpointResponse{Endpoint: a.render(ctx, e)}, nil
}

// sameEndpoint reports whether an update changed nothing.
func sameEndpoint(a, b store.HookEndpoint) bool {
	return a.DisplayName == b.DisplayName && string(a.Targets) == string(b.Targets) && string(a.Filters) == string(b.Filters) &&
		a.Auth == b.Auth && a.AuthProfile == b.AuthProfile && a.Template == b.Template && string(a.Policy) == string(b.Policy) &&
		a.DedupeHeader == b.DedupeHeader && a.Enabled == b.Enabled && a.Level == b.Level
}

// DeleteNotificationEndpoint implements apiv1.NotificationsServer: 204;
// the receipts and the queued, held or buffered copies go with it.
func (a *Admin) DeleteNotificationEndpoint(ctx context.Context, req *apiv1.DeleteNotificationEndpointRequest) (*apiv1.DeleteNotificationEndpointResponse, error) {
	err := a.s.endpoints.Delete(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, slug string) error {
		return tx.DeleteHookEndpoint(ctx, slug)
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteNotificationEndpointResponse{}, nil
}

// checkSecret checks a secret for kind before it is sealed: 413 over
// 4 KiB, 400 empty or refused by the engine, 503 without a KEK. The
// engine's message never carries the secret.
func (s *Service) checkSecret(secret, kind string) error {
	switch {
	case len(secret) > maxSecret:
		return apierr.Errorf(apierr.CodePayloadTooLarge, "secret: over %d bytes", maxSecret)
	case secret == "":
		return apierr.Invalid("secret", "is required (DELETE removes it)")
	}
	if err := s.d.Registry.Sealing(); err != nil {
		return err
	}
	if err := hooks.ValidateSecret(kind, secret); err != nil {
		var ie *hooks.InvalidError
		if errors.As(err, &ie) {
			return apierr.Invalid("secret", "%s", ie.Message)
		}
		return apierr.Invalid("secret", "is not a valid %s secret", kind)
	}
	return nil
}

// SetNotificationEndpointSecret implements apiv1.NotificationsServer. The
// secret is checked against the endpoint's own inline kind; with a profile
// it is stored but unused until the profile is unset.
func (a *Admin) SetNotificationEndpointSecret(ctx context.Context, req *apiv1.SetNotificationEndpointSecretRequest) (*apiv1.SetNotificationEndpointSecretResponse, error) {
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	cur, err := a.s.d.Store.GetHookEndpoint(ctx, req.GetSlug())
	if err != nil {
		return nil, EndpointErr(err, req.GetSlug())
	}
	if err := a.s.checkSecret(req.GetSecret(), cur.Auth.Kind); err != nil {
		return nil, err
	}
	e, err := a.s.endpoints.SetSecret(ctx, req.GetSlug(), []byte(req.GetSecret()), func(ctx context.Context, tx store.Tx, e *Endpoint, sealed []byte) error {
		return tx.SetHookEndpointSecret(ctx, e.Slug, sealed, a.s.now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.SetNotificationEndpointSecretResponse{Endpoint: a.render(ctx, e)}, nil
}

// DeleteNotificationEndpointSecret implements apiv1.NotificationsServer:
// 204, 404 when the endpoint has no secret.
func (a *Admin) DeleteNotificationEndpointSecret(ctx context.Context, req *apiv1.DeleteNotificationEndpointSecretRequest) (*apiv1.DeleteNotificationEndpointSecretResponse, error) {
	err := a.s.endpoints.ClearSecret(ctx, req.GetSlug(), func(e Endpoint) bool { return len(e.Secret) > 0 },
		func(ctx context.Context, tx store.Tx, e *Endpoint) error {
			return tx.SetHookEndpointSecret(ctx, e.Slug, nil, a.s.now())
		})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteNotificationEndpointSecretResponse{}, nil
}

// ListNotificationDeliveries implements apiv1.NotificationsServer.
func (a *Admin) ListNotificationDeliveries(ctx context.Context, req *apiv1.ListNotificationDeliveriesRequest) (*apiv1.ListNotificationDeliveriesResponse, error) {
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	limit := 50
	if req.Limit != nil {
		if req.GetLimit() < 1 || req.GetLimit() > maxReceiptList {
			return nil, apierr.Invalid("limit", "must be 1 to %d", maxReceiptList)
		}
		limit = int(req.GetLimit())
	}
	var before time.Time
	if req.Before != nil {
		b := req.GetBefore()
		if math.IsNaN(b) || b < 0 || b > maxEpochMS {
			return nil, apierr.Invalid("before", "must be epoch milliseconds")
		}
		before = time.UnixMilli(int64(b))
	}
	if _, err := a.s.d.Store.GetHookEndpoint(ctx, req.GetSlug()); err != nil {
		return nil, EndpointErr(err, req.GetSlug())
	}
	list, err := a.s.d.Store.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: req.GetSlug(), Before: before, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListNotificationDeliveriesResponse{Deliveries: make([]*apiv1.NotificationDelivery, len(list))}
	for i, d := range list {
		out.Deliveries[i] = deliveryToProto(d, false)
	}
	return out, nil
}

// GetNotificationDelivery implements apiv1.NotificationsServer: the
// receipt with its body.
func (a *Admin) GetNotificationDelivery(ctx context.Context, req *apiv1.GetNotificationDeliveryRequest) (*apiv1.GetNotificationDeliveryResponse, error) {
	if err := validDeliveryID(req.GetId()); err != nil {
		return nil, err
	}
	d, err := a.s.d.Store.GetHookDelivery(ctx, req.GetId())
	if err != nil {
		return nil, deliveryErr(err, req.GetId())
	}
	return &apiv1.GetNotificationDeliveryResponse{Delivery: deliveryToProto(d, true)}, nil
}

// ReplayNotificationDelivery implements apiv1.NotificationsServer: the
// stored raw body runs through the pipeline again under a fresh receipt
// (Service.Replay).
func (a *Admin) ReplayNotificationDelivery(ctx context.Context, req *apiv1.ReplayNotificationDeliveryRequest) (*apiv1.ReplayNotificationDeliveryResponse, error) {
	if err := validDeliveryID(req.GetId()); err != nil {
		return nil, err
	}
	orig, err := a.s.d.Store.GetHookDelivery(ctx, req.GetId())
	if err != nil {
		return nil, deliveryErr(err, req.GetId())
	}
	d, err := a.s.Replay(ctx, orig, registry.Caller(ctx).Member)
	if err != nil {
		return nil, err
	}
	return &apiv1.ReplayNotificationDeliveryResponse{Delivery: deliveryToProto(d, false)}, nil
}

// ListNotificationProfiles implements apiv1.NotificationsServer.
func (a *Admin) ListNotificationProfiles(ctx context.Context, _ *apiv1.ListNotificationProfilesRequest) (*apiv1.ListNotificationProfilesResponse, error) {
	list, err := a.s.d.Store.ListHookProfiles(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListNotificationProfilesResponse{Profiles: make([]*apiv1.NotificationProfile, len(list))}
	for i, p := range list {
		out.Profiles[i] = profileToProto(p)
	}
	return out, nil
}

// CreateNotificationProfile implements apiv1.NotificationsServer: 201,
// reported to the managers.
func (a *Admin) CreateNotificationProfile(ctx context.Context, req *apiv1.CreateNotificationProfileRequest) (*apiv1.CreateNotificationProfileResponse, error) {
	if err := apierr.FirstErr(
		registry.ValidSlug("slug", req.GetSlug()),
		apierr.ValidText("description", req.GetDescription(), registry.MaxDescription, false),
	); err != nil {
		return nil, err
	}
	if req.Auth == nil {
		return nil, apierr.Invalid("auth", "is required")
	}
	au, err := parseAuth("auth", req.GetAuth())
	if err != nil {
		return nil, err
	}
	now := a.s.now()
	pr := store.HookProfile{Slug: req.GetSlug(), Description: req.GetDescription(), Auth: au, CreatedAt: now, UpdatedAt: now}
	err = a.s.profiles.Create(ctx, pr.Slug, pr, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateHookProfile(ctx, pr)
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateNotificationProfileResponse{Profile: profileToProto(pr)}, nil
}

// UpdateNotificationProfile implements apiv1.NotificationsServer. An
// update that changes nothing writes nothing and sends no event, as for
// an endpoint.
func (a *Admin) UpdateNotificationProfile(ctx context.Context, req *apiv1.UpdateNotificationProfileRequest) (*apiv1.UpdateNotificationProfileResponse, error) {
	if err := apierr.ValidText("description", req.GetDescription(), registry.MaxDescription, false); err != nil {
		return nil, err
	}
	var au store.HookAuth
	if req.Auth != nil {
		var err error
		if au, err = parseAuth("auth", req.GetAuth()); err != nil {
			return nil, err
		}
	}
	pr, err := a.s.profiles.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, p *store.HookProfile, ch *registry.Change) (bool, error) {
		next := *p
		if req.Description != nil {
			next.Description = req.GetDescription()
		}
		if req.Auth != nil {
			next.Auth = au
		}
		if next.Description == p.Description && next.Auth == p.Auth {
			return false, nil
		}
		next.UpdatedAt = a.s.now()
		ch.Event = "updated"
		return true, tx.UpdateHookProfile(ctx, next)
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateNotificationProfileResponse{Profile: profileToProto(pr)}, nil
}

// DeleteNotificationProfile implements apiv1.NotificationsServer: 204,
// 409 while an endpoint references it.
func (a *Admin) DeleteNotificationProfile(ctx context.Context, req *apiv1.DeleteNotificationProfileRequest) (*apiv1.DeleteNotificationProfileResponse, error) {
	_, err := a.s.profiles.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, p *store.HookProfile, ch *registry.Change) (bool, error) {
		if err := tx.DeleteHookProfile(ctx, p.Slug); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return false, apierr.Errorf(apierr.CodeConflict, "notification profile %q is referenced by %d endpoint(s)", p.Slug, p.EndpointCount)
			}
			return false, err
		}
		ch.Event = "deleted"
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteNotificationProfileResponse{}, nil
}

// SetNotificationProfileSecret implements apiv1.NotificationsServer: one
// write rotates the secret of every endpoint that references the profile.
func (a *Admin) SetNotificationProfileSecret(ctx context.Context, req *apiv1.SetNotificationProfileSecretRequest) (*apiv1.SetNotificationProfileSecretResponse, error) {
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	cur, err := a.s.d.Store.GetHookProfile(ctx, req.GetSlug())
	if err != nil {
		return nil, a.s.profiles.NotFound(err, req.GetSlug())
	}
	if err := a.s.checkSecret(req.GetSecret(), cur.Auth.Kind); err != nil {
		return nil, err
	}
	pr, err := a.s.profiles.SetSecret(ctx, req.GetSlug(), []byte(req.GetSecret()), func(ctx context.Context, tx store.Tx, p *store.HookProfile, sealed []byte) error {
		return tx.SetHookProfileSecret(ctx, p.Slug, sealed, a.s.now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.SetNotificationProfileSecretResponse{Profile: profileToProto(pr)}, nil
}

// DeleteNotificationProfileSecret implements apiv1.NotificationsServer:
// 204, 404 when the profile has no secret.
func (a *Admin) DeleteNotificationProfileSecret(ctx context.Context, req *apiv1.DeleteNotificationProfileSecretRequest) (*apiv1.DeleteNotificationProfileSecretResponse, error) {
	err := a.s.profiles.ClearSecret(ctx, req.GetSlug(), func(p store.HookProfile) bool { return len(p.Secret) > 0 },
		func(ctx context.Context, tx store.Tx, p *store.HookProfile) error {
			return tx.SetHookProfileSecret(ctx, p.Slug, nil, a.s.now())
		})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteNotificationProfileSecretResponse{}, nil
}
