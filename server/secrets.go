package server

import (
	"context"
	"errors"

	"net/http"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/registry"
	"svc/store"
)

// Secret bounds.
const (
	// maxSecretValue is the most bytes a secret value holds (spec: Limits).
	maxSecretValue = 32 << 10
	// maxEnvName bounds an envName: environments take long names, but not
	// unbounded ones.
	maxEnvName = 128
)

// envNameRE is the envName grammar (CONTRACT §4).
var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// reservedEnvNames and reservedEnvPrefixes are names a secret may not set
// (CONTRACT §4): the runner's own environment and the loader's.
var (
	reservedEnvNames    = []string{"PATH", "HOME", "USER", "SHELL", "PWD", "TERM"}
	reservedEnvPrefixes = []string{"SVC_", "LD_", "DYLD_"}
)

// validEnvName checks an envName: the grammar, a bounded length, and none
// of the reserved names.
func validEnvName(field, s string) error {
	switch {
	case s == "":
		return invalid(field, "is required")
	case len(s) > maxEnvName || !envNameRE.MatchString(s):
		return invalid(field, "must match ^[A-Z_][A-Z0-9_]*$ (at most %d characters)", maxEnvName)
	case slices.Contains(reservedEnvNames, s):
		return invalid(field, "%s is reserved", s)
	}
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(s, p) {
			return invalid(field, "names starting with %s are reserved", p)
		}
	}
	return nil
}

// secretPurpose binds a sealed secret value to its secret.
func secretPurpose(slug string) string { return registry.Secrets.PurposeOf(slug) }

// Secrets implements apiv1.SecretsServer: the registry of environment
// secrets. Every change runs on the message committer with the event that
// reports it.
type Secrets struct {
	apiv1.UnimplementedSecretsServer
	*core
}

var _ apiv1.SecretsServer = (*Secrets)(nil)

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
		out.BoundMembers = nameList(s.Bound)
	}
	return out
}

// nameList renders names as a JSON array.
func nameList(names []string) *structpb.ListValue {
	l := &structpb.ListValue{Values: make([]*structpb.Value, len(names))}
	for i, n := range names {
		l.Values[i] = structpb.NewStringValue(n)
	}
	return l
}

// secretErr names an unknown secret.
func secretErr(err error, slug string) error { return secretRegistry(nil).NotFound(err, slug) }

// ListSecrets implements apiv1.SecretsServer.
func (s *Secrets) ListSecrets(ctx context.Context, _ *apiv1.ListSecretsRequest) (*apiv1.ListSecretsResponse, error) {
	p := mustPrincipal(ctx)
	list, err := s.store.ListSecrets(ctx)
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
func (s *Secrets) GetSecret(ctx context.Context, req *apiv1.GetSecretRequest) (*apiv1.GetSecretResponse, error) {
	p := mustPrincipal(ctx)
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	x, err := s.store.GetSecret(ctx, req.GetSlug())
	if err != nil {
		return nil, secretErr(err, req.GetSlug())
	}
	return &apiv1.GetSecretResponse{Secret: secretToProto(x, p, true)}, nil
}

// CreateSecret implements apiv1.SecretsServer: 201 with the secret.
func (s *Secrets) CreateSecret(ctx context.Context, req *apiv1.CreateSecretRequest) (*apiv1.CreateSecretResponse, error) {
	p := mustPrincipal(ctx)
	if err := firstErr(
		validRegistrySlug("slug", req.GetSlug()),
		validEnvName("envName", req.GetEnvName()),
		validText("description", req.GetDescription(), maxRegistryDescription, false),
	); err != nil {
		return nil, err
	}
	now := s.now()
	x := store.Secret{
		Slug: req.GetSlug(), EnvName: req.GetEnvName(), Description: req.GetDescription(),
		Enabled: true, AllMembers: req.GetAllMembers(), CreatedAt: now, UpdatedAt: now,
	}
	err := secretRegistry(s.core).Create(ctx, x.Slug, x, func(ctx context.Context, tx store.Tx) error {
		err := tx.CreateSecret(ctx, x)
		if errors.Is(err, store.ErrConflict) {
			if _, gerr := tx.GetSecret(ctx, x.Slug); gerr != nil {
				return Errorf(CodeConflict, "envName %s is taken", x.EnvName)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateSecretResponse{Secret: secretToProto(x, p, true)}, nil
}

// changeSecret loads a secret on the committer, lets fn change it and
// report the change, and answers the secret as it then is. fn returns
// false when nothing changed.
func (s *Secrets) changeSecret(ctx context.Context, slug string, fn func(ctx context.Context, tx store.Tx, x *store.Secret, ch *registry.Change) (bool, error)) (store.Secret, error) {
	return secretRegistry(s.core).Change(ctx, slug, fn)
}

// secretRegistry is the registry of secrets on c's kit (nil c: without a
// kit, for NotFound alone).
func secretRegistry(c *core) registry.Of[store.Secret] {
	r := registry.Of[store.Secret]{
		Kind: registry.Secrets,
		Get: func(ctx context.Context, tx store.Tx, slug string) (store.Secret, error) {
			return tx.GetSecret(ctx, slug)
		},
		Audience: func(x store.Secret) (bool, []string) { return x.AllMembers, x.Bound },
		Bind:     func(ctx context.Context, tx store.Tx, slug, m string) error { return tx.PutSecretBinding(ctx, slug, m) },
		Unbind: func(ctx context.Context, tx store.Tx, slug, m string) error {
			return tx.DeleteSecretBinding(ctx, slug, m)
		},
	}
	if c != nil {
		r.Kit, r.Changed = c.reg, c.secretsChanged
	}
	return r
}

// UpdateSecret implements apiv1.SecretsServer.
func (s *Secrets) UpdateSecret(ctx context.Context, req *apiv1.UpdateSecretRequest) (*apiv1.UpdateSecretResponse, error) {
	p := mustPrincipal(ctx)
	if req.EnvName != nil {
		if err := validEnvName("envName", req.GetEnvName()); err != nil {
			return nil, err
		}
	}
	if err := validText("description", req.GetDescription(), maxRegistryDescription, false); err != nil {
		return nil, err
	}
	x, err := s.changeSecret(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.Secret, ch *registry.Change) (bool, error) {
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
		x.UpdatedAt = s.now()
		if err := tx.UpdateSecret(ctx, *x); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return false, Errorf(CodeConflict, "envName %s is taken", x.EnvName)
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
func (s *Secrets) DeleteSecret(ctx context.Context, req *apiv1.DeleteSecretRequest) (*apiv1.DeleteSecretResponse, error) {
	if err := secretRegistry(s.core).Delete(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, slug string) error {
		return tx.DeleteSecret(ctx, slug)
	}); err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteSecretResponse{}, nil
}

// SetSecretValue implements apiv1.SecretsServer: the value is sealed
// under the KEK (503 without one) and never answered.
func (s *Secrets) SetSecretValue(ctx context.Context, req *apiv1.SetSecretValueRequest) (*apiv1.SetSecretValueResponse, error) {
	p := mustPrincipal(ctx)
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	v := req.GetValue()
	switch {
	case len(v) > maxSecretValue:
		return nil, Errorf(CodePayloadTooLarge, "value: over %d bytes", maxSecretValue)
	case v == "":
		return nil, invalid("value", "is required (DELETE /secrets/%s/value removes it)", req.GetSlug())
	}
	x, err := secretRegistry(s.core).SetSecret(ctx, req.GetSlug(), []byte(v), func(ctx context.Context, tx store.Tx, x *store.Secret, sealed []byte) error {
		return tx.SetSecretValue(ctx, x.Slug, sealed, s.now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.SetSecretValueResponse{Secret: secretToProto(x, p, true)}, nil
}

// DeleteSecretValue implements apiv1.SecretsServer: 204, 404 when the
// secret has no value.
func (s *Secrets) DeleteSecretValue(ctx context.Context, req *apiv1.DeleteSecretValueRequest) (*apiv1.DeleteSecretValueResponse, error) {
	err := secretRegistry(s.core).ClearSecret(ctx, req.GetSlug(), func(x store.Secret) bool { return len(x.Value) > 0 },
		func(ctx context.Context, tx store.Tx, x *store.Secret) error {
			return tx.SetSecretValue(ctx, x.Slug, nil, s.now())
		})
	if err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteSecretValueResponse{}, nil
}

// AddSecretBinding implements apiv1.SecretsServer: an unknown member is
// 400, as an unknown assignee or watcher is.
func (s *Secrets) AddSecretBinding(ctx context.Context, req *apiv1.AddSecretBindingRequest) (*apiv1.AddSecretBindingResponse, error) {
	x, err := secretRegistry(s.core).AddBinding(ctx, req.GetSlug(), req.GetMember())
	if err != nil {
		return nil, err
	}
	return &apiv1.AddSecretBindingResponse{Secret: secretToProto(x, mustPrincipal(ctx), true)}, nil
}

// RemoveSecretBinding implements apiv1.SecretsServer: 204, 404 when the
// member is not bound; the member is told.
func (s *Secrets) RemoveSecretBinding(ctx context.Context, req *apiv1.RemoveSecretBindingRequest) (*apiv1.RemoveSecretBindingResponse, error) {
	if err := secretRegistry(s.core).RemoveBinding(ctx, req.GetSlug(), req.GetName()); err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RemoveSecretBindingResponse{}, nil
}

// ResolveSecrets implements apiv1.SecretsServer: the caller's own
// environment, decrypted (503 without a KEK). A value the KEK cannot open
// (sealed under another key) is left out and logged.
func (s *Secrets) ResolveSecrets(ctx context.Context, _ *apiv1.ResolveSecretsRequest) (*apiv1.ResolveSecretsResponse, error) {
	p := mustPrincipal(ctx)
	if s.kek == nil {
		return nil, errNoKEK
	}
	env, err := s.memberSecrets(ctx, p.Member, true)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ResolveSecretsResponse{Env: map[string]string{}}
	for _, e := range env {
		out.Env[e.envName] = e.value
	}
	return out, nil
}

// resolvedSecret is one decrypted secret of a member.
type resolvedSecret struct {
	envName, value string
}

// memberSecrets decrypts the secrets member may use that have a value:
// bound or allMembers. enabledOnly leaves out disabled ones (resolve).
func (c *core) memberSecrets(ctx context.Context, member string, enabledOnly bool) ([]resolvedSecret, error) {
	if c.kek == nil {
		return nil, nil
	}
	list, err := c.store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	var out []resolvedSecret
	for _, x := range list {
		if len(x.Value) == 0 || (enabledOnly && !x.Enabled) || (!x.AllMembers && !slices.Contains(x.Bound, member)) {
			continue
		}
		v, err := c.open(x.Value, secretPurpose(x.Slug))
		if err != nil {
			c.log.WarnContext(ctx, "secret value cannot be opened with the active KEK; set it again", "secret", x.Slug, "err", err)
			continue
		}
		out = append(out, resolvedSecret{envName: x.EnvName, value: string(v)})
	}
	return out, nil
}
