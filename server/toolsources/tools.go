package toolsources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"svc/server/wire"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/registry"
	"svc/server/toolcall"
	"svc/store"
)

// toolToProto renders a tool; the binding only when withBinding.
func toolToProto(t store.Tool, withBinding bool) *apiv1.ToolDefinition {
	out := &apiv1.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: wire.Struct(t.InputSchema)}
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

// bindingFromProto converts a binding of the wire.
func bindingFromProto(b *apiv1.ToolBinding) (toolcall.Binding, error) {
	out := toolcall.Binding{Method: b.GetMethod(), URL: b.GetUrl(), Headers: b.GetHeaders()}
	if b.Body != nil {
		body, err := protojson.Marshal(b.GetBody())
		if err != nil {
			return out, apierr.Invalid("binding.body", "%v", err)
		}
		out.Body = body
	}
	return out, nil
}

// invalidBinding turns the engine's refusal of a binding into a 400.
func invalidBinding(err error) error {
	var ie *toolcall.InvalidError
	if errors.As(err, &ie) {
		return apierr.Invalid("binding."+ie.Field, "%s", ie.Message)
	}
	return err
}

// PutTool implements apiv1.ToolSourcesServer: custom sources only (an mcp
// source's tools come from refresh: 409). The binding is validated by the
// engine against the source's credential header.
func (s *Service) PutTool(ctx context.Context, req *apiv1.PutToolRequest) (*apiv1.PutToolResponse, error) {
	p := registry.Caller(ctx)
	if !customToolNameRE.MatchString(req.GetName()) {
		return nil, apierr.Invalid("name", "must be 1 to 64 letters, digits, _ and -, starting with a letter or digit")
	}
	if err := apierr.ValidText("description", req.GetDescription(), registry.MaxDescription, false); err != nil {
		return nil, err
	}
	if req.GetInputSchema() == nil {
		return nil, apierr.Invalid("inputSchema", "is required: a JSON Schema object")
	}
	schema, err := protojson.Marshal(req.GetInputSchema())
	if err != nil {
		return nil, apierr.Invalid("inputSchema", "%v", err)
	}
	if len(schema) > maxToolSchema {
		return nil, apierr.Invalid("inputSchema", "at most %d bytes", maxToolSchema)
	}
	if req.GetBinding() == nil {
		return nil, apierr.Invalid("binding", "is required: {method, url, headers?, body?}")
	}
	b, err := bindingFromProto(req.GetBinding())
	if err != nil {
		return nil, err
	}
	bj, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	b.Optional = toolcall.OptionalArgs(schema)
	if len(bj) > maxToolBinding {
		return nil, apierr.Invalid("binding", "at most %d bytes", maxToolBinding)
	}
	tool := store.Tool{Name: req.GetName(), Description: req.GetDescription(), InputSchema: schema, Binding: bj}
	x, err := s.r.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registry.Change) (bool, error) {
		if x.Kind != KindCustom {
			return false, apierr.Errorf(apierr.CodeConflict, "tool source %q is %s: its tools come from refresh", x.Slug, x.Kind)
		}
		if err := s.d.Engine.Validate(b, x.Credential.HeaderName); err != nil {
			return false, invalidBinding(err)
		}
		if err := s.pinCredential(ctx, tx, x, b.URL); err != nil {
			return false, err
		}
		ch.Event, ch.Tool = "tool_defined", tool.Name
		return true, tx.PutTool(ctx, x.Slug, tool, s.d.Now())
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.PutToolResponse{Source: toolSourceToProto(x, p, true)}, nil
}

// DeleteTool implements apiv1.ToolSourcesServer: custom sources only; 204,
// 404 for an unknown tool.
func (s *Service) DeleteTool(ctx context.Context, req *apiv1.DeleteToolRequest) (*apiv1.DeleteToolResponse, error) {
	if !mcpToolNameRE.MatchString(req.GetName()) {
		return nil, apierr.Invalid("name", "must be a tool name")
	}
	_, err := s.r.Change(ctx, req.GetSlug(), func(ctx context.Context, tx store.Tx, x *store.ToolSource, ch *registry.Change) (bool, error) {
		if x.Kind != KindCustom {
			return false, apierr.Errorf(apierr.CodeConflict, "tool source %q is %s: its tools come from refresh", x.Slug, x.Kind)
		}
		if err := tx.DeleteTool(ctx, x.Slug, req.GetName(), s.d.Now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return false, apierr.Errorf(apierr.CodeNotFound, "tool source %q has no tool %q", x.Slug, req.GetName())
			}
			return false, err
		}
		ch.Event, ch.Tool = "tool_deleted", req.GetName()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	apierr.SetHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteToolResponse{}, nil
}

// RefreshToolSource implements apiv1.ToolSourcesServer: mcp sources only
// (409 otherwise). The upstream list replaces the cache; an upstream that
// cannot be reached or does not speak MCP is 502 and the cache stays.
func (s *Service) RefreshToolSource(ctx context.Context, req *apiv1.RefreshToolSourceRequest) (*apiv1.RefreshToolSourceResponse, error) {
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	x, err := s.d.Store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, s.r.NotFound(err, req.GetSlug())
	}
	if x.Kind != KindMCP {
		return nil, apierr.Errorf(apierr.CodeConflict, "tool source %q is %s: only mcp sources refresh", x.Slug, x.Kind)
	}
	u, err := mcpURL(x.Config)
	if err != nil {
		return nil, err
	}
	cred, err := s.credential(x, u)
	if err != nil {
		return nil, err
	}
	listed, err := s.d.Engine.ListMCP(ctx, u, cred)
	if err != nil {
		var ue *toolcall.UpstreamError
		if errors.As(err, &ue) {
			return nil, &apierr.Error{Code: apierr.CodeBadGateway, Message: "the MCP server could not be listed: " + apierr.TruncateUTF8(ue.Error(), 512), Err: err}
		}
		return nil, err
	}
	tools := mcpTools(listed)
	var changed bool
	x, err = s.r.Change(ctx, x.Slug, func(ctx context.Context, tx store.Tx, cur *store.ToolSource, ch *registry.Change) (bool, error) {
		if cur.Kind != KindMCP {
			return false, apierr.Errorf(apierr.CodeConflict, "tool source %q is %s: only mcp sources refresh", cur.Slug, cur.Kind)
		}
		if sameTools(cur.Tools, tools) {
			return false, nil
		}
		changed = true
		ch.Event = "refreshed"
		return true, tx.ReplaceTools(ctx, cur.Slug, tools, s.d.Now())
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
		out = append(out, store.Tool{Name: t.Name, Description: apierr.TruncateUTF8(t.Description, registry.MaxDescription), InputSchema: schema})
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
