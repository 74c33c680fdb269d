package toolsources

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"svc/server/wire"
	"unicode"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/registry"
	"svc/server/toolcall"
	"svc/store"
)

// toolSourceToProto is s as viewer p sees it. detail adds the tool
// definitions; a tools.manage viewer also gets boundMembers and the
// custom tools' bindings.
func toolSourceToProto(s store.ToolSource, p *auth.Principal, detail bool) *apiv1.ToolSource {
	out := &apiv1.ToolSource{
		Slug: s.Slug, Kind: s.Kind, DisplayName: s.DisplayName,
		Enabled: s.Enabled, AllMembers: s.AllMembers, Bound: slices.Contains(s.Bound, p.Member),
		ToolCount: int32(len(s.Tools)), HasCredential: s.Credential.Kind != "",
		CreatedAt: float64(s.CreatedAt.UnixMilli()), UpdatedAt: float64(s.UpdatedAt.UnixMilli()),
		Tools: []*apiv1.ToolDefinition{},
	}
	// config may hold a key (an MCP URL's query): only those who manage
	// or may use the source see it (docs/TOOLCALL.md, Who sees config).
	if p.Has(auth.ToolsManage) || s.AllMembers || out.Bound {
		out.Config = wire.Struct(s.Config)
	}
	if s.Credential.Kind != "" {
		out.CredentialKind = &s.Credential.Kind
		if s.Credential.HeaderName != "" {
			out.CredentialHeaderName = &s.Credential.HeaderName
		}
	}
	if !detail {
		return out
	}
	manager := p.Has(auth.ToolsManage)
	for _, t := range s.Tools {
		out.Tools = append(out.Tools, toolToProto(t, manager))
	}
	if manager {
		out.BoundMembers = registry.NameList(s.Bound)
	}
	return out
}

// ListToolSources implements apiv1.ToolSourcesServer.
func (s *Service) ListToolSources(ctx context.Context, _ *apiv1.ListToolSourcesRequest) (*apiv1.ListToolSourcesResponse, error) {
	p := registry.Caller(ctx)
	list, err := s.d.Store.ListToolSources(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListToolSourcesResponse{Sources: make([]*apiv1.ToolSource, len(list))}
	for i, x := range list {
		out.Sources[i] = toolSourceToProto(x, p, false)
	}
	return out, nil
}

// GetToolSource implements apiv1.ToolSourcesServer.
func (s *Service) GetToolSource(ctx context.Context, req *apiv1.GetToolSourceRequest) (*apiv1.GetToolSourceResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	x, err := s.d.Store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, s.r.NotFound(err, req.GetSlug())
	}
	return &apiv1.GetToolSourceResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// validDisplayName checks a display name: short, UTF-8, no control
// characters.
func validDisplayName(s string) error {
	if err := apierr.ValidText("displayName", s, maxDisplayName, false); err != nil {
		return err
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return apierr.Invalid("displayName", "must not hold control characters")
	}
	return nil
}

// toolConfig checks a source's config for its kind and returns it as
// JSON: an object of at most maxToolConfig bytes; an mcp source's holds
// url, an http or https URL without userinfo.
func toolConfig(kind string, cfg *structpb.Struct) ([]byte, error) {
	if cfg == nil {
		cfg = &structpb.Struct{}
	}
	b, err := protojson.Marshal(cfg)
	if err != nil {
		return nil, apierr.Invalid("config", "%v", err)
	}
	if len(b) > maxToolConfig {
		return nil, apierr.Invalid("config", "at most %d bytes", maxToolConfig)
	}
	if kind == KindMCP {
		if _, err := mcpURL(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// mcpURL reads and checks config.url of an mcp source.
func mcpURL(config []byte) (string, error) {
	var c struct {
		URL any `json:"url"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return "", apierr.Invalid("config", "must be a JSON object")
	}
	raw, ok := c.URL.(string)
	if !ok || raw == "" {
		return "", apierr.Invalid("config.url", "is required for an mcp source")
	}
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxURL:
		return "", apierr.Invalid("config.url", "at most %d bytes", maxURL)
	case err != nil:
		return "", apierr.Invalid("config.url", "must be a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", apierr.Invalid("config.url", "must be an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return "", apierr.Invalid("config.url", "must name a host")
	case u.User != nil:
		return "", apierr.Invalid("config.url", "must not hold userinfo: set a credential")
	case u.Fragment != "" || strings.ContainsFunc(raw, unicode.IsControl):
		return "", apierr.Invalid("config.url", "must not hold a fragment or control characters")
	}
	return raw, nil
}

// CreateToolSource implements apiv1.ToolSourcesServer: 201 with the
// source.
func (s *Service) CreateToolSource(ctx context.Context, req *apiv1.CreateToolSourceRequest) (*apiv1.CreateToolSourceResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	if req.GetKind() != KindCustom && req.GetKind() != KindMCP {
		return nil, apierr.Invalid("kind", "must be custom or mcp")
	}
	name := req.GetSlug()
	if req.DisplayName != nil {
		name = req.GetDisplayName()
	}
	if err := validDisplayName(name); err != nil {
		return nil, err
	}
	cfg, err := toolConfig(req.GetKind(), req.GetConfig())
	if err != nil {
		return nil, err
	}
	now := s.d.Now()
	x := store.ToolSource{
		Slug: req.GetSlug(), Kind: req.GetKind(), DisplayName: name, Config: cfg,
		Enabled: req.Enabled == nil || req.GetEnabled(), AllMembers: req.GetAllMembers(), CreatedAt: now, UpdatedAt: now,
	}
	err = s.r.Create(ctx, x.Slug, x, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateToolSource(ctx, x)
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateToolSourceResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// UpdateToolSource implements apiv1.ToolSourcesServer.
func (s *Service) UpdateToolSource(ctx context.Context, req *apiv1.UpdateToolSourceRequest) (*apiv1.UpdateToolSourceResponse, error) {
	p := registry.Caller(ctx)
	if req.DisplayName != nil {
		if err := validDisplayName(req.GetDisplayName()); err != nil {
			return nil, err
		}
	}
	x, err := s.r.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registry.Change) (bool, error) {
		before := *x
		if req.DisplayName != nil {
			x.DisplayName = req.GetDisplayName()
		}
		if req.Config != nil {
			cfg, err := toolConfig(x.Kind, req.GetConfig())
			if err != nil {
				return false, err
			}
			if x.Kind == KindMCP && x.Credential.Kind != "" {
				// The credential is bound to the URL's origin: moving it
				// elsewhere would hand the credential to the new server.
				was, _ := mcpURL(x.Config)
				now, _ := mcpURL(cfg)
				if origin(was) != origin(now) {
					return false, apierr.Errorf(apierr.CodeConflict, "config.url: the credential is bound to %s; delete it before moving the source to %s", origin(was), origin(now))
				}
			}
			x.Config = cfg
		}
		if req.Enabled != nil {
			x.Enabled = req.GetEnabled()
		}
		if req.AllMembers != nil {
			x.AllMembers = req.GetAllMembers()
		}
		if x.DisplayName == before.DisplayName && bytes.Equal(x.Config, before.Config) && x.Enabled == before.Enabled && x.AllMembers == before.AllMembers {
			return false, nil
		}
		x.UpdatedAt = s.d.Now()
		ch.Event = "updated"
		return true, tx.UpdateToolSource(ctx, *x)
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateToolSourceResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// DeleteToolSource implements apiv1.ToolSourcesServer: 204.
func (s *Service) DeleteToolSource(ctx context.Context, req *apiv1.DeleteToolSourceRequest) (*apiv1.DeleteToolSourceResponse, error) {
	err := s.r.Delete(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, slug string) error {
		return tx.DeleteToolSource(ctx, slug)
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteToolSourceResponse{}, nil
}

// SetToolCredential implements apiv1.ToolSourcesServer: the secret is
// sealed under the KEK (503 without one) and never answered. A header
// credential whose header a stored binding sets is refused (409): the
// binding could otherwise override it.
func (s *Service) SetToolCredential(ctx context.Context, req *apiv1.SetToolCredentialRequest) (*apiv1.SetToolCredentialResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	cred := store.ToolCredential{Kind: req.GetKind()}
	switch req.GetKind() {
	case "bearer":
		if req.GetHeaderName() != "" {
			return nil, apierr.Invalid("headerName", "is only for a header credential")
		}
	case "header":
		h := req.GetHeaderName()
		if err := toolcall.CheckCredentialHeader(h); err != nil {
			return nil, apierr.Invalid("headerName", "%v", err)
		}
		cred.HeaderName = http.CanonicalHeaderKey(h)
	default:
		return nil, apierr.Invalid("kind", "must be bearer or header")
	}
	secret := req.GetSecret()
	switch {
	case secret == "":
		return nil, apierr.Invalid("secret", "is required")
	case len(secret) > maxCredentialSecret:
		return nil, apierr.Errorf(apierr.CodePayloadTooLarge, "secret: over %d bytes", maxCredentialSecret)
	case !httpguts.ValidHeaderFieldValue(secret) || strings.TrimSpace(secret) != secret:
		return nil, apierr.Invalid("secret", "must be a valid header value without leading or trailing space")
	}
	// The credential is sealed with the origin it is set for; the source is
	// read first to learn it, and the origin is checked again in the change.
	cur, err := s.d.Store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, s.r.NotFound(err, req.GetSlug())
	}
	org, err := credentialOrigin(cur)
	if err != nil {
		return nil, err
	}
	envelope, err := json.Marshal(sealedCred{Origin: org, Secret: secret})
	if err != nil {
		return nil, err
	}
	x, err := s.r.SetSecret(ctx, req.GetSlug(), append([]byte(credEnvelope), envelope...), func(ctx context.Context, tx store.Tx, x *store.ToolSource, sealed []byte) error {
		if now, err := credentialOrigin(*x); err != nil {
			return err
		} else if now != org {
			return apierr.Errorf(apierr.CodeConflict, "tool source %q changed its origin meanwhile: set the credential again", x.Slug)
		}
		if cred.HeaderName != "" {
			for tool, hs := range bindingHeaders(x.Tools) {
				for _, h := range hs {
					if strings.EqualFold(h, cred.HeaderName) {
						return apierr.Errorf(apierr.CodeConflict, "tool %s's binding sets %s: the credential cannot use it", tool, cred.HeaderName)
					}
				}
			}
		}
		cred.Secret = sealed
		return tx.SetToolCredential(ctx, x.Slug, cred, s.d.Now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.SetToolCredentialResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// DeleteToolCredential implements apiv1.ToolSourcesServer: 204, 404 when
// the source has none.
func (s *Service) DeleteToolCredential(ctx context.Context, req *apiv1.DeleteToolCredentialRequest) (*apiv1.DeleteToolCredentialResponse, error) {
	err := s.r.ClearSecret(ctx, req.GetSlug(), func(x store.ToolSource) bool { return x.Credential.Kind != "" },
		func(ctx context.Context, tx store.Tx, x *store.ToolSource) error {
			return tx.SetToolCredential(ctx, x.Slug, store.ToolCredential{}, s.d.Now())
		})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteToolCredentialResponse{}, nil
}

// AddToolBinding implements apiv1.ToolSourcesServer: an unknown member is
// 400.
func (s *Service) AddToolBinding(ctx context.Context, req *apiv1.AddToolBindingRequest) (*apiv1.AddToolBindingResponse, error) {
	x, err := s.r.AddBinding(ctx, req.GetSlug(), req.GetMember())
	if err != nil {
		return nil, err
	}
	return &apiv1.AddToolBindingResponse{Source: toolSourceToProto(x, registry.Caller(ctx), true)}, nil
}

// RemoveToolBinding implements apiv1.ToolSourcesServer: 204, 404 when the
// member is not bound; the member is told.
func (s *Service) RemoveToolBinding(ctx context.Context, req *apiv1.RemoveToolBindingRequest) (*apiv1.RemoveToolBindingResponse, error) {
	if err := s.r.RemoveBinding(ctx, req.GetSlug(), req.GetName()); err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RemoveToolBindingResponse{}, nil
}
