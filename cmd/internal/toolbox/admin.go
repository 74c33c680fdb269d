package toolbox

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

func slugPath(prefix string, c *call) string { return prefix + seg(c.a.str("slug")) }

// bindings applies a _bindings tool's add and remove lists in order (adds
// first) and answers the source's or secret's detail afterwards. The first
// refusal stops it; what was applied before stays applied.
func (c *call) bindings(ctx context.Context, base string) (string, error) {
	add, remove := c.a.strs("add"), c.a.strs("remove")
	if len(add) == 0 && len(remove) == 0 {
		return "", errorf("%s: add or remove is required", c.tool)
	}
	for _, m := range add {
		if _, err := c.t.do(ctx, http.MethodPost, base+"/bindings", map[string]string{"member": m}); err != nil {
			return c.text(nil, err)
		}
	}
	for _, m := range remove {
		if _, err := c.t.do(ctx, http.MethodDelete, base+"/bindings/"+seg(m), nil); err != nil {
			return c.text(nil, err)
		}
	}
	return c.do(ctx, http.MethodGet, base, nil)
}

var (
	fAdd    = field{name: "add", typ: tStrings, desc: "Member names to bind."}
	fRemove = field{name: "remove", typ: tStrings, desc: "Member names to unbind."}
)

func toolSourceTools() []*tool {
	g := permToolsManage
	base := func(c *call) string { return slugPath("/tool-sources/", c) }
	fName := field{name: "name", typ: tString, required: true, desc: "Tool name."}
	return []*tool{
		{name: "tool_sources_list", gate: g, desc: "List tool sources.", run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/tool-sources", nil)
		}},
		{name: "tool_sources_view", gate: g, desc: "Show a tool source with its tools and bound members.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, base(c), nil)
		}},
		{name: "tool_sources_create", gate: g, desc: "Register a tool source (custom: HTTP-bound tools; mcp: an MCP server at config.url).",
			fields: []field{fSlug, {name: "kind", typ: tString, required: true, enum: []string{"custom", "mcp"}},
				{name: "displayName", typ: tString}, {name: "config", typ: tObject, desc: "Source config; url for mcp."},
				{name: "enabled", typ: tBoolean}, {name: "allMembers", typ: tBoolean, desc: "Every member may invoke it."}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/tool-sources", c.body("slug", "kind", "displayName", "config", "enabled", "allMembers"))
			}},
		{name: "tool_sources_update", gate: g, desc: "Change a tool source's displayName, config, enabled or allMembers.",
			fields: []field{fSlug, {name: "displayName", typ: tString}, {name: "config", typ: tObject}, {name: "enabled", typ: tBoolean}, {name: "allMembers", typ: tBoolean}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPatch, base(c), c.body("displayName", "config", "enabled", "allMembers"))
			}},
		{name: "tool_sources_delete", gate: g, desc: "Delete a tool source with its bindings, credential and tools.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c), nil)
		}},
		{name: "tool_sources_define_tool", gate: g, desc: "Define or replace a tool of a custom source.",
			fields: []field{fSlug, fName, {name: "description", typ: tString, required: true}, {name: "inputSchema", typ: tObject, required: true, desc: "JSON Schema of the arguments."},
				{name: "binding", typ: tObject, required: true, desc: "HTTP binding: {method, url, headers?, body?}; {{args.<path>}} placeholders."}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPut, base(c)+"/tools/"+seg(c.a.str("name")), c.body("description", "inputSchema", "binding"))
			}},
		{name: "tool_sources_delete_tool", gate: g, desc: "Delete a tool of a custom source.", fields: []field{fSlug, fName}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c)+"/tools/"+seg(c.a.str("name")), nil)
		}},
		{name: "tool_sources_bindings", gate: g, desc: "Bind members to a tool source (add) or unbind them (remove).",
			fields: []field{fSlug, fAdd, fRemove}, run: func(ctx context.Context, c *call) (string, error) { return c.bindings(ctx, base(c)) }},
		{name: "tool_sources_set_credential", gate: g, desc: "Set the source's write-only credential.",
			fields: []field{fSlug, {name: "kind", typ: tString, required: true, enum: []string{"bearer", "header"}},
				{name: "headerName", typ: tString, desc: "The header of a header credential."}, {name: "secret", typ: tString, required: true}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPut, base(c)+"/credential", c.body("kind", "headerName", "secret"))
			}},
		{name: "tool_sources_delete_credential", gate: g, desc: "Remove the source's credential.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c)+"/credential", nil)
		}},
		{name: "tool_sources_refresh", gate: g, desc: "Rediscover an MCP source's tools upstream.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodPost, base(c)+"/refresh", map[string]any{})
		}},
	}
}

func secretTools() []*tool {
	g := permSecretsManage
	base := func(c *call) string { return slugPath("/secrets/", c) }
	return []*tool{
		{name: "secrets_list", gate: g, desc: "List environment secrets (never their values).", run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/secrets", nil)
		}},
		{name: "secrets_view", gate: g, desc: "Show a secret with its bound members.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, base(c), nil)
		}},
		{name: "secrets_create", gate: g, desc: "Register an environment secret (its value is set with secrets_set_value).",
			fields: []field{fSlug, {name: "envName", typ: tString, required: true, desc: "Environment variable name."}, {name: "description", typ: tString}, {name: "allMembers", typ: tBoolean}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/secrets", c.body("slug", "envName", "description", "allMembers"))
			}},
		{name: "secrets_update", gate: g, desc: "Change a secret's envName, description, enabled or allMembers.",
			fields: []field{fSlug, {name: "envName", typ: tString}, {name: "description", typ: tString}, {name: "enabled", typ: tBoolean}, {name: "allMembers", typ: tBoolean}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPatch, base(c), c.body("envName", "description", "enabled", "allMembers"))
			}},
		{name: "secrets_delete", gate: g, desc: "Delete a secret with its bindings and value.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c), nil)
		}},
		{name: "secrets_set_value", gate: g, desc: "Set a secret's write-only value (at most 32 KiB); applies at each member's next runner start.",
			fields: []field{fSlug, {name: "value", typ: tString, required: true}}, run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPut, base(c)+"/value", c.body("value"))
			}},
		{name: "secrets_delete_value", gate: g, desc: "Remove a secret's value.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c)+"/value", nil)
		}},
		{name: "secrets_bindings", gate: g, desc: "Bind members to a secret (add) or unbind them (remove).",
			fields: []field{fSlug, fAdd, fRemove}, run: func(ctx context.Context, c *call) (string, error) { return c.bindings(ctx, base(c)) }},
	}
}

// Flattened fields of the notification tools (hooks.md: Agent tools).
var (
	endpointFields = []field{
		{name: "displayName", typ: tString},
		{name: "targets", typ: tStrings, desc: "Targets as @member or #channel."},
		{name: "authKind", typ: tString, enum: []string{"hmac-sha256", "header-secret"}, desc: "Verification kind."},
		{name: "headerName", typ: tString, desc: "Signature or secret header."},
		{name: "prefix", typ: tString, desc: "Signature prefix (hmac-sha256)."},
		{name: "authProfile", typ: tString, desc: "Profile slug; its verification wins over the inline one."},
		{name: "filters", typ: tObjects, desc: "Drop rules {path, op, value}."},
		{name: "template", typ: tString},
		{name: "dedupeHeader", typ: tString},
		{name: "enabled", typ: tBoolean},
		{name: "level", typ: tString, enum: levels, desc: "Endpoint level."},
		{name: "ifOffline", typ: tString, enum: []string{"drop", "queue"}},
		{name: "ifBusy", typ: tString, enum: []string{"now", "wait"}},
		{name: "debounceMs", typ: tInteger},
		{name: "debounceMax", typ: tInteger},
		{name: "queueTtlMs", typ: tInteger},
		{name: "maxWaitMs", typ: tInteger},
	}
	policyFields = []string{"ifOffline", "ifBusy", "debounceMs", "debounceMax", "queueTtlMs", "maxWaitMs"}
)

// endpointRequest turns the flattened fields into the broker's
// create/update request: targets to {member}/{channel}, authKind,
// headerName and prefix to auth, the policy names to policy.
func endpointRequest(c *call) (map[string]any, error) {
	req := map[string]any{}
	for k, v := range c.body("displayName", "authProfile", "filters", "template", "dedupeHeader", "enabled", "level") {
		req[k] = v
	}
	if c.a.has("targets") {
		targets := []map[string]string{}
		for _, s := range c.a.strs("targets") {
			t, err := parseTarget(s)
			if err != nil {
				return nil, errorf("%s: %v", c.tool, err)
			}
			targets = append(targets, t)
		}
		req["targets"] = targets
	}
	if a := authOf(c); a != nil {
		req["auth"] = a
	}
	pol := map[string]any{}
	for _, n := range policyFields {
		if !c.a.has(n) {
			continue
		}
		if n == "ifOffline" || n == "ifBusy" {
			pol[n] = c.a.str(n)
		} else {
			pol[n] = c.a.integer(n)
		}
	}
	if len(pol) > 0 {
		req["policy"] = pol
	}
	return req, nil
}

// authOf is the auth object of authKind, headerName and prefix; nil when
// none is given. headerName or prefix alone is an auth without a kind,
// which the broker refuses with its own reason.
func authOf(c *call) map[string]json.RawMessage {
	a := c.body("authKind:kind", "headerName", "prefix")
	if len(a) == 0 {
		return nil
	}
	return a
}

// parseTarget reads "@member" or "#channel".
func parseTarget(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	switch {
	case len(s) > 1 && s[0] == '@':
		return map[string]string{"member": s[1:]}, nil
	case len(s) > 1 && s[0] == '#':
		return map[string]string{"channel": s[1:]}, nil
	}
	return nil, errorf("invalid target '%s' (want @member or #channel)", clip(s, 64))
}

func notificationTools() []*tool {
	g := permNotificationsManage
	base := func(c *call) string { return slugPath("/notifications/endpoints/", c) }
	pbase := func(c *call) string { return slugPath("/notifications/profiles/", c) }
	fSecret := field{name: "secret", typ: tString, required: true, desc: "Write-only; at most 4 KiB."}
	createFields := append([]field{fSlug}, endpointFields...)
	createFields[2] = field{name: "targets", typ: tStrings, required: true, desc: "Targets as @member or #channel."}
	return []*tool{
		{name: "notifications_list", gate: g, desc: "Inbound notification endpoints: slug, targets, verification, policy, whether a secret is set.", run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/notifications/endpoints", nil)
		}},
		{name: "notifications_view", gate: g, desc: "One endpoint's full config with its ingress path.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, base(c), nil)
		}},
		{name: "notifications_create", gate: g, desc: "Register an endpoint; it rejects every delivery until a secret is set.", fields: createFields,
			run: func(ctx context.Context, c *call) (string, error) {
				req, err := endpointRequest(c)
				if err != nil {
					return "", err
				}
				req["slug"] = c.a.str("slug")
				return c.do(ctx, http.MethodPost, "/notifications/endpoints", req)
			}},
		{name: "notifications_update", gate: g, desc: "Change an endpoint's targets, verification, filters, template, policy or enabled.", fields: append([]field{fSlug}, endpointFields...),
			run: func(ctx context.Context, c *call) (string, error) {
				req, err := endpointRequest(c)
				if err != nil {
					return "", err
				}
				return c.do(ctx, http.MethodPatch, base(c), req)
			}},
		{name: "notifications_delete", gate: g, desc: "Delete an endpoint with its receipts and queued deliveries.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c), nil)
		}},
		{name: "notifications_set_secret", gate: g, desc: "Set or rotate an endpoint's verification secret.", fields: []field{fSlug, fSecret}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodPut, base(c)+"/secret", c.body("secret"))
		}},
		{name: "notifications_delete_secret", gate: g, desc: "Remove an endpoint's secret (it then rejects everything).", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, base(c)+"/secret", nil)
		}},
		{name: "notifications_deliveries", gate: g, desc: "Delivery receipts newest first, rejected ones with their reason.",
			fields: []field{fSlug, {name: "limit", typ: tInteger, desc: "1 to 500; default 50."}, {name: "before", typ: tInteger, desc: "Epoch ms cursor."}},
			run: func(ctx context.Context, c *call) (string, error) {
				q := url.Values{}
				if c.a.has("limit") {
					q.Set("limit", strconv.FormatInt(c.a.integer("limit"), 10))
				}
				if c.a.has("before") {
					q.Set("before", strconv.FormatInt(c.a.integer("before"), 10))
				}
				p := base(c) + "/deliveries"
				if len(q) > 0 {
					p += "?" + q.Encode()
				}
				return c.do(ctx, http.MethodGet, p, nil)
			}},
		{name: "notifications_replay", gate: g, desc: "Replay a stored delivery through filters, template and policy.",
			fields: []field{{name: "id", typ: tString, required: true, desc: "Delivery id."}}, run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/notifications/deliveries/"+seg(c.a.str("id"))+"/replay", map[string]any{})
			}},
		{name: "notifications_profiles", gate: g, desc: "Verification profiles with how many endpoints use each.", run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/notifications/profiles", nil)
		}},
		{name: "notifications_profile_create", gate: g, desc: "Register a shared verification profile.",
			fields: []field{fSlug, {name: "authKind", typ: tString, required: true, enum: []string{"hmac-sha256", "header-secret"}},
				{name: "headerName", typ: tString}, {name: "prefix", typ: tString}, {name: "description", typ: tString}},
			run: func(ctx context.Context, c *call) (string, error) {
				req := map[string]any{"slug": c.a.str("slug"), "auth": authOf(c)}
				if c.a.has("description") {
					req["description"] = c.a.str("description")
				}
				return c.do(ctx, http.MethodPost, "/notifications/profiles", req)
			}},
		{name: "notifications_profile_delete", gate: g, desc: "Delete a profile; refused while an endpoint uses it.", fields: []field{fSlug}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodDelete, pbase(c), nil)
		}},
		{name: "notifications_profile_set_secret", gate: g, desc: "Rotate a profile's secret for every endpoint using it.", fields: []field{fSlug, fSecret}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodPut, pbase(c)+"/secret", c.body("secret"))
		}},
	}
}
