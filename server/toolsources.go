package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/toolcall"
	"svc/store"
)

// Tool source kinds (spec: Tool source).
const (
	toolKindCustom = "custom"
	toolKindMCP    = "mcp"
)

// Tool source bounds.
const (
	// maxInvokeArgs is the most bytes a tool call's args hold as JSON
	// (spec: Limits).
	maxInvokeArgs = 1 << 20
	// MaxInvokeBody caps the REST body of an invoke: 1 MiB of args and the
	// envelope, with room for JSON written with more whitespace or escapes
	// than the args are measured with.
	MaxInvokeBody = 2 << 20
	// maxToolConfig bounds a source's config, maxToolSchema a tool's input
	// schema, maxToolBinding a binding: definitions, not data.
	maxToolConfig  = 16 << 10
	maxToolSchema  = 64 << 10
	maxToolBinding = 64 << 10
	// maxDisplayName bounds a display name.
	maxDisplayName = 128
	// maxCredentialSecret bounds a credential's secret: it travels in a
	// header.
	maxCredentialSecret = 8 << 10
	// maxURL bounds an MCP url.
	maxURL = 2048
	// maxMCPTools bounds the tools one refresh caches.
	maxMCPTools = 1024
)

// customToolNameRE is the name grammar of custom tools: the toolbox calls
// them <slug>__<name>, which MCP clients take up to 128 characters of
// letters, digits, _, - and .
var customToolNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// mcpToolNameRE is the name grammar MCP servers' tools are held to.
var mcpToolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// toolCredentialPurpose binds a sealed credential to its source.
func toolCredentialPurpose(slug string) string { return "svc/tool-credential/" + slug }

// ToolSources implements apiv1.ToolSourcesServer: the registry of tool
// sources and the calls of their tools. Every change runs on the message
// committer with the event that reports it.
type ToolSources struct {
	apiv1.UnimplementedToolSourcesServer
	*core
}

var _ apiv1.ToolSourcesServer = (*ToolSources)(nil)

// toolSourceErr names an unknown source.
func toolSourceErr(err error, slug string) error {
	if errors.Is(err, store.ErrNotFound) {
		return Errorf(CodeNotFound, "no tool source %q", slug)
	}
	return err
}

// toolSourceToProto is s as viewer p sees it. detail adds the tool
// definitions; a tools.manage viewer also gets boundMembers and the
// custom tools' bindings.
func toolSourceToProto(s store.ToolSource, p *auth.Principal, detail bool) *apiv1.ToolSource {
	out := &apiv1.ToolSource{
		Slug: s.Slug, Kind: s.Kind, DisplayName: s.DisplayName, Config: jsonStruct(s.Config),
		Enabled: s.Enabled, AllMembers: s.AllMembers, Bound: slices.Contains(s.Bound, p.Member),
		ToolCount: int32(len(s.Tools)), HasCredential: s.Credential.Kind != "",
		CreatedAt: float64(s.CreatedAt.UnixMilli()), UpdatedAt: float64(s.UpdatedAt.UnixMilli()),
		Tools: []*apiv1.ToolDefinition{},
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
		out.BoundMembers = nameList(s.Bound)
	}
	return out
}

// toolToProto renders a tool; the binding only when withBinding.
func toolToProto(t store.Tool, withBinding bool) *apiv1.ToolDefinition {
	out := &apiv1.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: jsonStruct(t.InputSchema)}
	if withBinding && len(t.Binding) > 0 {
		var b toolcall.Binding
		if err := json.Unmarshal(t.Binding, &b); err == nil {
			out.Binding = &apiv1.ToolBinding{Method: b.Method, Url: b.URL, Headers: b.Headers}
			if len(b.Body) > 0 {
				v := &structpb.Value{}
				if protojson.Unmarshal(b.Body, v) == nil {
					out.Binding.Body = v
				}
			}
		}
	}
	return out
}

// ListToolSources implements apiv1.ToolSourcesServer.
func (s *ToolSources) ListToolSources(ctx context.Context, _ *apiv1.ListToolSourcesRequest) (*apiv1.ListToolSourcesResponse, error) {
	p := mustPrincipal(ctx)
	list, err := s.store.ListToolSources(ctx)
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
func (s *ToolSources) GetToolSource(ctx context.Context, req *apiv1.GetToolSourceRequest) (*apiv1.GetToolSourceResponse, error) {
	p := mustPrincipal(ctx)
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	x, err := s.store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, toolSourceErr(err, req.GetSlug())
	}
	return &apiv1.GetToolSourceResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// validDisplayName checks a display name: short, UTF-8, no control
// characters.
func validDisplayName(s string) error {
	if err := validText("displayName", s, maxDisplayName, false); err != nil {
		return err
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return invalid("displayName", "must not hold control characters")
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
		return nil, invalid("config", "%v", err)
	}
	if len(b) > maxToolConfig {
		return nil, invalid("config", "at most %d bytes", maxToolConfig)
	}
	if kind == toolKindMCP {
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
		return "", invalid("config", "must be a JSON object")
	}
	raw, ok := c.URL.(string)
	if !ok || raw == "" {
		return "", invalid("config.url", "is required for an mcp source")
	}
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxURL:
		return "", invalid("config.url", "at most %d bytes", maxURL)
	case err != nil:
		return "", invalid("config.url", "must be a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid("config.url", "must be an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return "", invalid("config.url", "must name a host")
	case u.User != nil:
		return "", invalid("config.url", "must not hold userinfo: set a credential")
	case u.Fragment != "" || strings.ContainsFunc(raw, unicode.IsControl):
		return "", invalid("config.url", "must not hold a fragment or control characters")
	}
	return raw, nil
}

// CreateToolSource implements apiv1.ToolSourcesServer: 201 with the
// source.
func (s *ToolSources) CreateToolSource(ctx context.Context, req *apiv1.CreateToolSourceRequest) (*apiv1.CreateToolSourceResponse, error) {
	p := mustPrincipal(ctx)
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	if req.GetKind() != toolKindCustom && req.GetKind() != toolKindMCP {
		return nil, invalid("kind", "must be custom or mcp")
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
	now := s.now()
	x := store.ToolSource{
		Slug: req.GetSlug(), Kind: req.GetKind(), DisplayName: name, Config: cfg,
		Enabled: req.Enabled == nil || req.GetEnabled(), AllMembers: req.GetAllMembers(), CreatedAt: now, UpdatedAt: now,
	}
	everyone, managers := s.memberNames(), s.holders(auth.ToolsManage)
	err = s.registryCommit(ctx, func(ctx context.Context, tx store.Tx) (*registryChange, error) {
		if err := tx.CreateToolSource(ctx, x); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, Errorf(CodeConflict, "slug %q is taken", x.Slug)
			}
			return nil, err
		}
		return &registryChange{
			kind: registryKindToolSource, slug: x.Slug, event: "created", actor: p.Member,
			after: registryAudience(x.AllMembers, nil, everyone), managers: managers,
		}, nil
	})
	if err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateToolSourceResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// changeSource loads a source on the committer, lets fn change it and
// report the change, and answers the source as it then is. fn returns
// false when nothing changed (no event).
func (s *ToolSources) changeSource(ctx context.Context, slug string, fn func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error)) (store.ToolSource, error) {
	return changeEntry(ctx, s.core, toolSourceRegistry, slug, fn)
}

// toolSourceRegistry describes the tool sources to changeEntry.
var toolSourceRegistry = registryOf[store.ToolSource]{
	kind: registryKindToolSource, manage: auth.ToolsManage,
	get: func(ctx context.Context, tx store.Tx, slug string) (store.ToolSource, error) {
		return tx.GetToolSource(ctx, slug)
	},
	notFound: toolSourceErr,
	audience: func(x store.ToolSource) (bool, []string) { return x.AllMembers, x.Bound },
	noun:     "tool source",
	bind:     func(ctx context.Context, tx store.Tx, slug, m string) error { return tx.PutToolBinding(ctx, slug, m) },
	unbind: func(ctx context.Context, tx store.Tx, slug, m string) error {
		return tx.DeleteToolBinding(ctx, slug, m)
	},
}

// UpdateToolSource implements apiv1.ToolSourcesServer.
func (s *ToolSources) UpdateToolSource(ctx context.Context, req *apiv1.UpdateToolSourceRequest) (*apiv1.UpdateToolSourceResponse, error) {
	p := mustPrincipal(ctx)
	if req.DisplayName != nil {
		if err := validDisplayName(req.GetDisplayName()); err != nil {
			return nil, err
		}
	}
	x, err := s.changeSource(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error) {
		before := *x
		if req.DisplayName != nil {
			x.DisplayName = req.GetDisplayName()
		}
		if req.Config != nil {
			cfg, err := toolConfig(x.Kind, req.GetConfig())
			if err != nil {
				return false, err
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
		x.UpdatedAt = s.now()
		ch.event = "updated"
		return true, tx.UpdateToolSource(ctx, *x)
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateToolSourceResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// DeleteToolSource implements apiv1.ToolSourcesServer: 204.
func (s *ToolSources) DeleteToolSource(ctx context.Context, req *apiv1.DeleteToolSourceRequest) (*apiv1.DeleteToolSourceResponse, error) {
	_, err := s.changeSource(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error) {
		ch.event = "deleted"
		return true, tx.DeleteToolSource(ctx, x.Slug)
	})
	if err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteToolSourceResponse{}, nil
}

// bindingHeaders are the header names a stored custom tool's binding
// sets, by tool.
func bindingHeaders(tools []store.Tool) map[string][]string {
	out := map[string][]string{}
	for _, t := range tools {
		var b toolcall.Binding
		if len(t.Binding) == 0 || json.Unmarshal(t.Binding, &b) != nil {
			continue
		}
		for h := range b.Headers {
			out[t.Name] = append(out[t.Name], h)
		}
	}
	return out
}

// SetToolCredential implements apiv1.ToolSourcesServer: the secret is
// sealed under the KEK (503 without one) and never answered. A header
// credential whose header a stored binding sets is refused (409): the
// binding could otherwise override it.
func (s *ToolSources) SetToolCredential(ctx context.Context, req *apiv1.SetToolCredentialRequest) (*apiv1.SetToolCredentialResponse, error) {
	p := mustPrincipal(ctx)
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	cred := store.ToolCredential{Kind: req.GetKind()}
	switch req.GetKind() {
	case "bearer":
		if req.GetHeaderName() != "" {
			return nil, invalid("headerName", "is only for a header credential")
		}
	case "header":
		h := req.GetHeaderName()
		if err := toolcall.CheckCredentialHeader(h); err != nil {
			return nil, invalid("headerName", "%v", err)
		}
		cred.HeaderName = http.CanonicalHeaderKey(h)
	default:
		return nil, invalid("kind", "must be bearer or header")
	}
	secret := req.GetSecret()
	switch {
	case secret == "":
		return nil, invalid("secret", "is required")
	case len(secret) > maxCredentialSecret:
		return nil, Errorf(CodePayloadTooLarge, "secret: over %d bytes", maxCredentialSecret)
	case !httpguts.ValidHeaderFieldValue(secret) || strings.TrimSpace(secret) != secret:
		return nil, invalid("secret", "must be a valid header value without leading or trailing space")
	}
	sealed, err := s.seal([]byte(secret), toolCredentialPurpose(req.GetSlug()))
	if err != nil {
		return nil, err
	}
	cred.Secret = sealed
	x, err := s.changeSource(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error) {
		if cred.HeaderName != "" {
			for tool, hs := range bindingHeaders(x.Tools) {
				for _, h := range hs {
					if strings.EqualFold(h, cred.HeaderName) {
						return false, Errorf(CodeConflict, "tool %s's binding sets %s: the credential cannot use it", tool, cred.HeaderName)
					}
				}
			}
		}
		ch.event = "credential_set"
		return true, tx.SetToolCredential(ctx, x.Slug, cred, s.now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.SetToolCredentialResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// DeleteToolCredential implements apiv1.ToolSourcesServer: 204, 404 when
// the source has none.
func (s *ToolSources) DeleteToolCredential(ctx context.Context, req *apiv1.DeleteToolCredentialRequest) (*apiv1.DeleteToolCredentialResponse, error) {
	_, err := s.changeSource(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error) {
		if x.Credential.Kind == "" {
			return false, Errorf(CodeNotFound, "tool source %q has no credential", x.Slug)
		}
		ch.event = "credential_deleted"
		return true, tx.SetToolCredential(ctx, x.Slug, store.ToolCredential{}, s.now())
	})
	if err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteToolCredentialResponse{}, nil
}

// AddToolBinding implements apiv1.ToolSourcesServer: an unknown member is
// 400.
func (s *ToolSources) AddToolBinding(ctx context.Context, req *apiv1.AddToolBindingRequest) (*apiv1.AddToolBindingResponse, error) {
	x, err := addBinding(ctx, s.core, toolSourceRegistry, req.GetSlug(), req.GetMember())
	if err != nil {
		return nil, err
	}
	return &apiv1.AddToolBindingResponse{Source: toolSourceToProto(x, mustPrincipal(ctx), true)}, nil
}

// RemoveToolBinding implements apiv1.ToolSourcesServer: 204, 404 when the
// member is not bound; the member is told.
func (s *ToolSources) RemoveToolBinding(ctx context.Context, req *apiv1.RemoveToolBindingRequest) (*apiv1.RemoveToolBindingResponse, error) {
	if err := removeBinding(ctx, s.core, toolSourceRegistry, req.GetSlug(), req.GetName()); err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RemoveToolBindingResponse{}, nil
}

// bindingFromProto converts a binding of the wire.
func bindingFromProto(b *apiv1.ToolBinding) (toolcall.Binding, error) {
	out := toolcall.Binding{Method: b.GetMethod(), URL: b.GetUrl(), Headers: b.GetHeaders()}
	if b.Body != nil {
		body, err := protojson.Marshal(b.GetBody())
		if err != nil {
			return out, invalid("binding.body", "%v", err)
		}
		out.Body = body
	}
	return out, nil
}

// invalidBinding turns the engine's refusal of a binding into a 400.
func invalidBinding(err error) error {
	var ie *toolcall.InvalidError
	if errors.As(err, &ie) {
		return invalid("binding."+ie.Field, "%s", ie.Message)
	}
	return err
}

// PutTool implements apiv1.ToolSourcesServer: custom sources only (an mcp
// source's tools come from refresh: 409). The binding is validated by the
// engine against the source's credential header.
func (s *ToolSources) PutTool(ctx context.Context, req *apiv1.PutToolRequest) (*apiv1.PutToolResponse, error) {
	p := mustPrincipal(ctx)
	if !customToolNameRE.MatchString(req.GetName()) {
		return nil, invalid("name", "must be 1 to 64 letters, digits, _ and -, starting with a letter or digit")
	}
	if err := validText("description", req.GetDescription(), maxRegistryDescription, false); err != nil {
		return nil, err
	}
	if req.GetInputSchema() == nil {
		return nil, invalid("inputSchema", "is required: a JSON Schema object")
	}
	schema, err := protojson.Marshal(req.GetInputSchema())
	if err != nil {
		return nil, invalid("inputSchema", "%v", err)
	}
	if len(schema) > maxToolSchema {
		return nil, invalid("inputSchema", "at most %d bytes", maxToolSchema)
	}
	if req.GetBinding() == nil {
		return nil, invalid("binding", "is required: {method, url, headers?, body?}")
	}
	b, err := bindingFromProto(req.GetBinding())
	if err != nil {
		return nil, err
	}
	bj, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	if len(bj) > maxToolBinding {
		return nil, invalid("binding", "at most %d bytes", maxToolBinding)
	}
	tool := store.Tool{Name: req.GetName(), Description: req.GetDescription(), InputSchema: schema, Binding: bj}
	x, err := s.changeSource(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error) {
		if x.Kind != toolKindCustom {
			return false, Errorf(CodeConflict, "tool source %q is %s: its tools come from refresh", x.Slug, x.Kind)
		}
		if err := s.tools.Validate(b, x.Credential.HeaderName); err != nil {
			return false, invalidBinding(err)
		}
		ch.event, ch.tool = "tool_defined", tool.Name
		return true, tx.PutTool(ctx, x.Slug, tool, s.now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.PutToolResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// DeleteTool implements apiv1.ToolSourcesServer: custom sources only; 204,
// 404 for an unknown tool.
func (s *ToolSources) DeleteTool(ctx context.Context, req *apiv1.DeleteToolRequest) (*apiv1.DeleteToolResponse, error) {
	if !mcpToolNameRE.MatchString(req.GetName()) {
		return nil, invalid("name", "must be a tool name")
	}
	_, err := s.changeSource(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registryChange) (bool, error) {
		if x.Kind != toolKindCustom {
			return false, Errorf(CodeConflict, "tool source %q is %s: its tools come from refresh", x.Slug, x.Kind)
		}
		if err := tx.DeleteTool(ctx, x.Slug, req.GetName(), s.now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return false, Errorf(CodeNotFound, "tool source %q has no tool %q", x.Slug, req.GetName())
			}
			return false, err
		}
		ch.event, ch.tool = "tool_deleted", req.GetName()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteToolResponse{}, nil
}

// credential opens a source's credential for a call; nil when it has
// none, errNoKEK without a KEK.
func (c *core) credential(x store.ToolSource) (*toolcall.Credential, error) {
	if x.Credential.Kind == "" {
		return nil, nil
	}
	secret, err := c.open(x.Credential.Secret, toolCredentialPurpose(x.Slug))
	if err != nil {
		return nil, err
	}
	return &toolcall.Credential{Kind: x.Credential.Kind, HeaderName: x.Credential.HeaderName, Secret: string(secret)}, nil
}

// RefreshToolSource implements apiv1.ToolSourcesServer: mcp sources only
// (409 otherwise). The upstream list replaces the cache; an upstream that
// cannot be reached or does not speak MCP is 502 and the cache stays.
func (s *ToolSources) RefreshToolSource(ctx context.Context, req *apiv1.RefreshToolSourceRequest) (*apiv1.RefreshToolSourceResponse, error) {
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	x, err := s.store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, toolSourceErr(err, req.GetSlug())
	}
	if x.Kind != toolKindMCP {
		return nil, Errorf(CodeConflict, "tool source %q is %s: only mcp sources refresh", x.Slug, x.Kind)
	}
	u, err := mcpURL(x.Config)
	if err != nil {
		return nil, err
	}
	cred, err := s.credential(x)
	if err != nil {
		return nil, err
	}
	listed, err := s.tools.ListMCP(ctx, u, cred)
	if err != nil {
		var ue *toolcall.UpstreamError
		if errors.As(err, &ue) {
			return nil, &Error{Code: CodeBadGateway, Message: "the MCP server could not be listed: " + truncateUTF8(ue.Error(), 512), Err: err}
		}
		return nil, err
	}
	tools := mcpTools(listed)
	var changed bool
	x, err = s.changeSource(ctx, x.Slug, func(ctx context.Context, tx store.Tx, cur *store.ToolSource, ch *registryChange) (bool, error) {
		if cur.Kind != toolKindMCP {
			return false, Errorf(CodeConflict, "tool source %q is %s: only mcp sources refresh", cur.Slug, cur.Kind)
		}
		if sameTools(cur.Tools, tools) {
			return false, nil
		}
		changed = true
		ch.event = "refreshed"
		return true, tx.ReplaceTools(ctx, cur.Slug, tools, s.now())
	})
	if err != nil {
		return nil, err
	}
	out := &apiv1.RefreshToolSourceResponse{Changed: changed, Tools: make([]*apiv1.ToolDefinition, len(x.Tools))}
	for i, t := range x.Tools {
		out.Tools[i] = toolToProto(t, false)
	}
	return out, nil
}

// mcpTools keeps the tools an MCP server listed that svc can hold: a valid
// name, each once, at most maxMCPTools; a schema that is not a bounded
// JSON object becomes the empty object schema, a long description is cut.
func mcpTools(listed []toolcall.Tool) []store.Tool {
	out := []store.Tool{}
	seen := map[string]bool{}
	for _, t := range listed {
		if len(out) == maxMCPTools {
			break
		}
		if !mcpToolNameRE.MatchString(t.Name) || seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		schema := []byte(`{"type":"object"}`)
		var obj map[string]any
		if len(t.InputSchema) <= maxToolSchema && json.Unmarshal(t.InputSchema, &obj) == nil && obj != nil {
			if b, err := json.Marshal(obj); err == nil {
				schema = b
			}
		}
		out = append(out, store.Tool{Name: t.Name, Description: truncateUTF8(t.Description, maxRegistryDescription), InputSchema: schema})
	}
	slices.SortFunc(out, func(a, b store.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// sameTools reports whether two tool lists (by name) say the same.
func sameTools(a, b []store.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !sameJSON(a[i].InputSchema, b[i].InputSchema) {
			return false
		}
	}
	return true
}

// sameJSON compares two JSON values by what they mean.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// InvokeTool implements apiv1.ToolSourcesServer. Failures come in the
// spec's order: an unknown source 404, then 403 for a caller neither bound
// nor covered by allMembers, 409 for a disabled source, 404 for an unknown
// tool. An MCP tool must be in the cached list (refresh fills it; a miss
// does not call upstream). The tool's own failure is 200 with isError. The
// call is recorded as a tool_action in the caller's activity, its input
// redacted of the credential and of every secret value the caller may use.
func (s *ToolSources) InvokeTool(ctx context.Context, req *apiv1.InvokeToolRequest) (*apiv1.InvokeToolResponse, error) {
	p := mustPrincipal(ctx)
	if err := validRegistrySlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	if !mcpToolNameRE.MatchString(req.GetName()) {
		return nil, invalid("name", "must be a tool name")
	}
	args := map[string]any{}
	if req.GetArgs() != nil {
		// Measured as compact JSON: protojson's output is deliberately
		// unstable (it may add spaces), so it cannot be the measure.
		args = req.GetArgs().AsMap()
		b, err := json.Marshal(args)
		if err != nil {
			return nil, invalid("args", "%v", err)
		}
		if len(b) > maxInvokeArgs {
			return nil, Errorf(CodePayloadTooLarge, "args: over %d bytes", maxInvokeArgs)
		}
	}
	x, err := s.store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, toolSourceErr(err, req.GetSlug())
	}
	if !x.AllMembers && !slices.Contains(x.Bound, p.Member) {
		return nil, Errorf(CodeForbidden, "you are not bound to tool source %q", x.Slug)
	}
	if !x.Enabled {
		return nil, Errorf(CodeConflict, "tool source %q is disabled", x.Slug)
	}
	i := slices.IndexFunc(x.Tools, func(t store.Tool) bool { return t.Name == req.GetName() })
	if i < 0 {
		return nil, Errorf(CodeNotFound, "tool source %q has no tool %q", x.Slug, req.GetName())
	}
	tool := x.Tools[i]
	cred, err := s.credential(x)
	if err != nil {
		return nil, err
	}
	start := s.now()
	var res toolcall.Result
	switch x.Kind {
	case toolKindCustom:
		var b toolcall.Binding
		if err := json.Unmarshal(tool.Binding, &b); err != nil {
			return nil, err
		}
		res, err = s.tools.InvokeHTTP(ctx, b, args, cred)
	default:
		u, uerr := mcpURL(x.Config)
		if uerr != nil {
			return nil, uerr
		}
		res, err = s.tools.CallMCP(ctx, u, cred, tool.Name, args)
	}
	var ue *toolcall.UpstreamError
	var ie *toolcall.InvalidError
	switch {
	case errors.As(err, &ie):
		return nil, invalid("args", "%s: %s", ie.Field, ie.Message)
	case errors.As(err, &ue):
		text, _ := json.Marshal(map[string]any{"type": "text", "text": truncateUTF8(ue.Error(), 1024)})
		res, err = toolcall.Result{Content: []json.RawMessage{text}, IsError: true}, nil
	case err != nil:
		return nil, err
	}
	s.recordToolAction(ctx, p.Member, x, tool.Name, args, cred, res, s.now().Sub(start))
	return resultToProto(res)
}

// resultToProto renders a CallToolResult.
func resultToProto(res toolcall.Result) (*apiv1.InvokeToolResponse, error) {
	out := &apiv1.InvokeToolResponse{IsError: res.IsError, Content: make([]*structpb.Value, 0, len(res.Content))}
	for _, c := range res.Content {
		v := &structpb.Value{}
		if err := protojson.Unmarshal(c, v); err != nil {
			return nil, Errorf(CodeBadGateway, "the tool answered a content block that is not JSON")
		}
		out.Content = append(out.Content, v)
	}
	if len(res.StructuredContent) > 0 && string(res.StructuredContent) != "null" {
		sc := &structpb.Struct{}
		if err := protojson.Unmarshal(res.StructuredContent, sc); err == nil {
			out.StructuredContent = sc
		}
	}
	return out, nil
}

// recordToolAction appends the tool_action of a call to member's activity
// (when the broker keeps activity). Its input has the credential and every
// secret value member may use replaced by [REDACTED]. The call already
// happened, so a failure to record it is logged, not answered.
// maxToolInput caps the redacted input a tool_action row records; past it
// the row holds the input's JSON text cut to this size, and
// inputTruncated.
const maxToolInput = 64 << 10

func (s *ToolSources) recordToolAction(ctx context.Context, member string, x store.ToolSource, tool string, args map[string]any, cred *toolcall.Credential, res toolcall.Result, took time.Duration) {
	if !s.act.Enabled() {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var secrets []string
	if cred != nil {
		secrets = append(secrets, cred.Secret)
	}
	env, err := s.memberSecrets(ctx, member, false)
	if err != nil {
		s.log.WarnContext(ctx, "tool action not recorded: secrets unreadable", "member", member, "err", err)
		return
	}
	for _, e := range env {
		secrets = append(secrets, e.value)
	}
	row := map[string]any{
		"tool": x.Slug + "__" + tool, "phase": "result", "source": "broker", "toolSource": x.Slug,
		"success": !res.IsError, "durationMs": float64(took.Milliseconds()),
	}
	input, err := json.Marshal(s.tools.Redact(args, secrets...))
	if err != nil {
		s.log.WarnContext(ctx, "tool action not recorded", "member", member, "err", err)
		return
	}
	// Redaction can grow the input (a one-byte secret becomes ten bytes
	// wherever it occurs); a row never holds more than maxToolInput of it.
	if len(input) > maxToolInput {
		row["input"] = truncateUTF8(string(input), maxToolInput)
		row["inputTruncated"] = true
	} else {
		row["input"] = json.RawMessage(input)
	}
	data, err := json.Marshal(row)
	if err != nil {
		s.log.WarnContext(ctx, "tool action not recorded", "member", member, "err", err)
		return
	}
	ev := store.ActivityEvent{Member: member, Kind: kindToolAction, TS: s.now(), Data: data}
	if _, err := s.act.Write(ctx, store.ActivityBatch{Events: []store.ActivityEvent{ev}}); err != nil {
		s.log.WarnContext(ctx, "tool action not recorded", "member", member, "err", err)
	}
}
