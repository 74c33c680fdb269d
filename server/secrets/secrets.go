// Package secrets is the secrets capability: the registry of environment
// secrets members' runners resolve, on the registry kit. Values are
// write-only: sealed under the KEK, never answered but to the member that
// may use them (ResolveSecrets), never in an event.
package secrets

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/registry"
	"svc/store"
)

// Secret bounds.
const (
	// MaxValue is the most bytes a secret value holds (docs/API.md,
	// Environment secrets).
	MaxValue = 32 << 10
	// maxEnvName bounds an envName: environments take long names, but not
	// unbounded ones.
	maxEnvName = 128
)

// envNameRE is the envName grammar.
var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// reservedEnvNames and reservedEnvPrefixes are names a secret may not set:
// the runner's own environment and the loader's.
var (
	reservedEnvNames    = []string{"PATH", "HOME", "USER", "SHELL", "PWD", "TERM"}
	reservedEnvPrefixes = []string{"SVC_", "LD_", "DYLD_"}
)

// validEnvName checks an envName: the grammar, a bounded length, and none
// of the reserved names.
func validEnvName(field, s string) error {
	switch {
	case s == "":
		return apierr.Invalid(field, "is required")
	case len(s) > maxEnvName || !envNameRE.MatchString(s):
		return apierr.Invalid(field, "must match ^[A-Z_][A-Z0-9_]*$ (at most %d characters)", maxEnvName)
	case slices.Contains(reservedEnvNames, s):
		return apierr.Invalid(field, "%s is reserved", s)
	}
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(s, p) {
			return apierr.Invalid(field, "names starting with %s are reserved", p)
		}
	}
	return nil
}

// Deps are what the secrets service needs of the broker.
type Deps struct {
	// Store reads the secrets; changes go through Registry.
	Store    store.Store
	Registry *registry.Kit
	// Changed runs after every change of a secret: the redactors drop
	// what they hold of the old values.
	Changed func()
	Now     func() time.Time
	Log     *slog.Logger
}

// Service implements apiv1.SecretsServer: the registry of environment
// secrets. Every change runs on the message committer with the event that
// reports it.
type Service struct {
	apiv1.UnimplementedSecretsServer
	d Deps
	r registry.Of[store.Secret]
}

var _ apiv1.SecretsServer = (*Service)(nil)

// New builds the service.
func New(d Deps) *Service {
	return &Service{d: d, r: registry.Of[store.Secret]{
		Kit: d.Registry, Kind: registry.Secrets,
		Get: func(ctx context.Context, tx store.Tx, slug string) (store.Secret, error) {
			return tx.GetSecret(ctx, slug)
		},
		Audience: func(x store.Secret) (bool, []string) { return x.AllMembers, x.Bound },
		Bind:     func(ctx context.Context, tx store.Tx, slug, m string) error { return tx.PutSecretBinding(ctx, slug, m) },
		Unbind: func(ctx context.Context, tx store.Tx, slug, m string) error {
			return tx.DeleteSecretBinding(ctx, slug, m)
		},
		Changed: d.Changed,
	}}
}

// secretToProto is s as viewer p sees it; detail adds boundMembers for
// secrets.manage holders.
func secretToProto(s store.Secret, p *auth.Principal, detail bool) *apiv1.Secret {
	out := &apiv1.Secret{
		Slug: s.Slug, EnvName: s.EnvName, Enabled: s.Enabled, AllMembers: s.AllMembers,
		Bound: slices.Contains(s.Bound, p.Member), HasValue: len(s.Value) > 0,
		CreatedAt: float64(s.CreatedAt.UnixMilli()), UpdatedAt: float64(s.UpdatedAt.UnixMilli()),
	}
	if s.Description != "" {
		out.Description = &s.Description
	}
	if detail && p.Has(auth.SecretsManage) {
		out.BoundMembers = registry.NameList(s.Bound)
	}
	return out
}

// ListSecrets implements apiv1.SecretsServer.
func (s *Service) ListSecrets(ctx context.Context, _ *apiv1.ListSecretsRequest) (*apiv1.ListSecretsResponse, error) {
	p := registry.Caller(ctx)
	list, err := s.d.Store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListSecretsResponse{Secrets: make([]*apiv1.Secret, len(list))}
	for i, x := range list {
		out.Secrets[i] = secretToProto(x, p, false)
	}
	return out, nil
}

// GetSecret implements apiv1.SecretsServer.
func (s *Service) GetSecret(ctx context.Context, req *apiv1.GetSecretRequest) (*apiv1.GetSecretResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	x, err := s.d.Store.GetSecret(ctx, req.GetSlug())
	if err != nil {
		return nil, s.r.NotFound(err, req.GetSlug())
	}
	return &apiv1.GetSecretResponse{Secret: secretToProto(x, p, true)}, nil
}

// CreateSecret implements apiv1.SecretsServer: 201 with the secret.
func (s *Service) CreateSecret(ctx context.Context, req *apiv1.CreateSecretRequest) (*apiv1.CreateSecretResponse, error) {
	p := registry.Caller(ctx)
	if err := apierr.FirstErr(
		registry.ValidSlug("slug", req.GetSlug()),
		validEnvName("envName", req.GetEnvName()),
		apierr.ValidText("description", req.GetDescription(), registry.MaxDescription, false),
	); err != nil {
		return nil, err
	}
	now := s.d.Now()
	x := store.Secret{
		Slug: req.GetSlug(), EnvName: req.GetEnvName(), Description: req.GetDescription(),
		Enabled: true, AllMembers: req.GetAllMembers(), CreatedAt: now, UpdatedAt: now,
	}
	err := s.r.Create(ctx, x.Slug, x, func(ctx context.Context, tx store.Tx) error {
		err := tx.CreateSecret(ctx, x)
		if errors.Is(err, store.ErrConflict) {
			if _, gerr := tx.GetSecret(ctx, x.Slug); gerr != nil {
				return apierr.Errorf(apierr.CodeConflict, "envName %s is taken", x.EnvName)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateSecretResponse{Secret: secretToProto(x, p, true)}, nil
}

// UpdateSecret implements apiv1.SecretsServer.
func (s *Service) UpdateSecret(ctx context.Context, req *apiv1.UpdateSecretRequest) (*apiv1.UpdateSecretResponse, error) {
	p := registry.Caller(ctx)
	if req.EnvName != nil {
		if err := validEnvName("envName", req.GetEnvName()); err != nil {
			return nil, err
		}
	}
	if err := apierr.ValidText("description", req.GetDescription(), registry.MaxDescription, false); err != nil {
		return nil, err
	}
	x, err := s.r.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.Secret, ch *registry.Change) (bool, error) {
		before := *x
		if req.EnvName != nil {
			x.EnvName = req.GetEnvName()
		}
		if req.Description != nil {
			x.Description = req.GetDescription()
		}
		if req.Enabled != nil {
			x.Enabled = req.GetEnabled()
		}
		if req.AllMembers != nil {
			x.AllMembers = req.GetAllMembers()
		}
		if x.EnvName == before.EnvName && x.Description == before.Description && x.Enabled == before.Enabled && x.AllMembers == before.AllMembers {
			return false, nil
		}
		x.UpdatedAt = s.d.Now()
		if err := tx.UpdateSecret(ctx, *x); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return false, apierr.Errorf(apierr.CodeConflict, "envName %s is taken", x.EnvName)
			}
			return false, err
		}
		ch.Event = "updated"
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateSecretResponse{Secret: secretToProto(x, p, true)}, nil
}

// DeleteSecret implements apiv1.SecretsServer: 204.
func (s *Service) DeleteSecret(ctx context.Context, req *apiv1.DeleteSecretRequest) (*apiv1.DeleteSecretResponse, error) {
	if err := s.r.Delete(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, slug string) error {
		return tx.DeleteSecret(ctx, slug)
	}); err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteSecretResponse{}, nil
}

// SetSecretValue implements apiv1.SecretsServer: the value is sealed
// under the KEK (503 without one) and never answered.
func (s *Service) SetSecretValue(ctx context.Context, req *apiv1.SetSecretValueRequest) (*apiv1.SetSecretValueResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	v := req.GetValue()
	switch {
	case len(v) > MaxValue:
		return nil, apierr.Errorf(apierr.CodePayloadTooLarge, "value: over %d bytes", MaxValue)
	case v == "":
		return nil, apierr.Invalid("value", "is required (DELETE /secrets/%s/value removes it)", req.GetSlug())
	}
	x, err := s.r.SetSecret(ctx, req.GetSlug(), []byte(v), func(ctx context.Context, tx store.Tx, x *store.Secret, sealed []byte) error {
		return tx.SetSecretValue(ctx, x.Slug, sealed, s.d.Now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.SetSecretValueResponse{Secret: secretToProto(x, p, true)}, nil
}

// DeleteSecretValue implements apiv1.SecretsServer: 204, 404 when the
// secret has no value.
func (s *Service) DeleteSecretValue(ctx context.Context, req *apiv1.DeleteSecretValueRequest) (*apiv1.DeleteSecretValueResponse, error) {
	err := s.r.ClearSecret(ctx, req.GetSlug(), func(x store.Secret) bool { return len(x.Value) > 0 },
		func(ctx context.Context, tx store.Tx, x *store.Secret) error {
			return tx.SetSecretValue(ctx, x.Slug, nil, s.d.Now())
		})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteSecretValueResponse{}, nil
}

// AddSecretBinding implements apiv1.SecretsServer: an unknown member is
// 400, as an unknown assignee or watcher is.
func (s *Service) AddSecretBinding(ctx context.Context, req *apiv1.AddSecretBindingRequest) (*apiv1.AddSecretBindingResponse, error) {
	x, err := s.r.AddBinding(ctx, req.GetSlug(), req.GetMember())
	if err != nil {
		return nil, err
	}
	return &apiv1.AddSecretBindingResponse{Secret: secretToProto(x, registry.Caller(ctx), true)}, nil
}

// RemoveSecretBinding implements apiv1.SecretsServer: 204, 404 when the
// member is not bound; the member is told.
func (s *Service) RemoveSecretBinding(ctx context.Context, req *apiv1.RemoveSecretBindingRequest) (*apiv1.RemoveSecretBindingResponse, error) {
	if err := s.r.RemoveBinding(ctx, req.GetSlug(), req.GetName()); err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RemoveSecretBindingResponse{}, nil
}

// ResolveSecrets implements apiv1.SecretsServer: the caller's own
// environment, decrypted (503 without a KEK). A value the KEK cannot open
// (sealed under another key) is left out and logged.
func (s *Service) ResolveSecrets(ctx context.Context, _ *apiv1.ResolveSecretsRequest) (*apiv1.ResolveSecretsResponse, error) {
	p := registry.Caller(ctx)
	if err := s.d.Registry.Sealing(); err != nil {
		return nil, err
	}
	env, err := s.MemberSecrets(ctx, p.Member, true)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ResolveSecretsResponse{Env: map[string]string{}}
	for _, e := range env {
		out.Env[e.EnvName] = e.Value
	}
	return out, nil
}

// Resolved is one decrypted secret of a member.
type Resolved struct {
	EnvName, Value string
}

// MemberSecrets decrypts the secrets member may use that have a value:
// bound or allMembers. enabledOnly leaves out disabled ones (resolve).
// Without a KEK there are none.
func (s *Service) MemberSecrets(ctx context.Context, member string, enabledOnly bool) ([]Resolved, error) {
	if s.d.Registry.Sealing() != nil {
		return nil, nil
	}
	list, err := s.d.Store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	var out []Resolved
	for _, x := range list {
		if len(x.Value) == 0 || (enabledOnly && !x.Enabled) || (!x.AllMembers && !slices.Contains(x.Bound, member)) {
			continue
		}
		v, err := s.d.Registry.Open(x.Value, registry.Secrets.PurposeOf(x.Slug))
		if err != nil {
			s.d.Log.WarnContext(ctx, "secret value cannot be opened with the active KEK; set it again", "secret", x.Slug, "err", err)
			continue
		}
		out = append(out, Resolved{EnvName: x.EnvName, Value: string(v)})
	}
	return out, nil
}

// MemberValues are the values of the secrets member may use, enabled or
// not: what a record of member's is redacted of.
func (s *Service) MemberValues(ctx context.Context, member string) ([]string, error) {
	env, err := s.MemberSecrets(ctx, member, false)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Value
	}
	return out, nil
}

// TeamValues are the values of every secret the team holds, bound or not,
// enabled or not: what ingested telemetry is redacted of (docs/TELEMETRY.md,
// "Redaction at ingest"). A value the active KEK cannot open is left out
// (MemberSecrets warns of it); without a KEK there are none.
func (s *Service) TeamValues(ctx context.Context) ([]string, error) {
	if s.d.Registry.Sealing() != nil {
		return nil, nil
	}
	list, err := s.d.Store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range list {
		if len(x.Value) == 0 {
			continue
		}
		if v, err := s.d.Registry.Open(x.Value, registry.Secrets.PurposeOf(x.Slug)); err == nil {
			out = append(out, string(v))
		}
	}
	return out, nil
}
