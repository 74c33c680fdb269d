package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"svc/store"
)

// toolSources read a source with its bindings and tools in one statement,
// so a read never sees a source half changed.
var toolSources = newRegistry(registry[store.ToolSource]{
	noun: "tool source", table: "tool_sources", alias: "s",
	columns: `s.slug, s.kind, s.display_name, s.config, s.enabled, s.all_members, s.cred_kind, s.cred_header, s.cred_secret, s.created_at, s.updated_at,
` + boundColumn("tool_bindings", "s") + `,
(SELECT COALESCE(json_agg(json_build_object('name', name, 'description', description, 'inputSchema', input_schema::json, 'binding', binding::json) ORDER BY name), '[]')::text
 FROM tools t WHERE t.slug = s.slug)`,
	scan:     scanToolSource,
	bindings: "tool_bindings", bindNoun: "tool binding",
})

// CreateToolSource stores a source.
func (q queries) CreateToolSource(ctx context.Context, s store.ToolSource) error {
	return toolSources.create(ctx, q, s.CreatedAt, s.UpdatedAt, `slug, kind, display_name, config, enabled, all_members, cred_kind, cred_header, cred_secret`,
		s.Slug, s.Kind, s.DisplayName, jsonObject(s.Config), s.Enabled, s.AllMembers, s.Credential.Kind, s.Credential.HeaderName, nullBytes(s.Credential.Secret))
}

// GetToolSource returns a source with its bindings and tools.
func (q queries) GetToolSource(ctx context.Context, slug string) (store.ToolSource, error) {
	return toolSources.get(ctx, q, slug)
}

// ListToolSources returns every source, by slug.
func (q queries) ListToolSources(ctx context.Context) ([]store.ToolSource, error) {
	return toolSources.list(ctx, q)
}

// UpdateToolSource replaces a source's mutable fields.
func (q queries) UpdateToolSource(ctx context.Context, s store.ToolSource) error {
	return toolSources.update(ctx, q, "update tool source", `display_name = ?, config = ?, enabled = ?, all_members = ?`, s.Slug, s.UpdatedAt,
		s.DisplayName, jsonObject(s.Config), s.Enabled, s.AllMembers)
}

// DeleteToolSource removes a source; bindings and tools go with it.
func (q queries) DeleteToolSource(ctx context.Context, slug string) error {
	return toolSources.remove(ctx, q, slug)
}

// SetToolCredential replaces a source's credential.
func (q queries) SetToolCredential(ctx context.Context, slug string, c store.ToolCredential, at time.Time) error {
	if c.Kind == "" {
		c = store.ToolCredential{}
	}
	return toolSources.update(ctx, q, "set tool credential", `cred_kind = ?, cred_header = ?, cred_secret = ?`, slug, at,
		c.Kind, c.HeaderName, nullBytes(c.Secret))
}

// PutToolBinding binds a member to a source.
func (q queries) PutToolBinding(ctx context.Context, slug, member string) error {
	return toolSources.bind(ctx, q, slug, member)
}

// DeleteToolBinding removes a binding.
func (q queries) DeleteToolBinding(ctx context.Context, slug, member string) error {
	return toolSources.unbind(ctx, q, slug, member)
}

// PutTool defines or replaces one tool and touches its source.
func (q queries) PutTool(ctx context.Context, slug string, t store.Tool, at time.Time) error {
	if err := q.touchToolSource(ctx, "put tool", slug, at); err != nil {
		return err
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO tools (slug, name, description, input_schema, binding) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (slug, name) DO UPDATE SET description = excluded.description, input_schema = excluded.input_schema, binding = excluded.binding`,
		slug, t.Name, t.Description, jsonObject(t.InputSchema), nullText(t.Binding))
	return translate("put tool", err)
}

// DeleteTool removes one tool and touches its source.
func (q queries) DeleteTool(ctx context.Context, slug, name string, at time.Time) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM tools WHERE slug = ? AND name = ?`, slug, name)
	if err != nil {
		return translate("delete tool", err)
	}
	if err := notFound("delete tool", res); err != nil {
		return err
	}
	return q.touchToolSource(ctx, "delete tool", slug, at)
}

// ReplaceTools makes a source's tools exactly tools.
func (q queries) ReplaceTools(ctx context.Context, slug string, tools []store.Tool, at time.Time) error {
	if err := q.touchToolSource(ctx, "replace tools", slug, at); err != nil {
		return err
	}
	if _, err := q.w.ExecContext(ctx, `DELETE FROM tools WHERE slug = ?`, slug); err != nil {
		return translate("replace tools", err)
	}
	for _, t := range tools {
		if _, err := q.w.ExecContext(ctx, `INSERT INTO tools (slug, name, description, input_schema, binding) VALUES (?, ?, ?, ?, ?)`,
			slug, t.Name, t.Description, jsonObject(t.InputSchema), nullText(t.Binding)); err != nil {
			return translate("replace tools", err)
		}
	}
	return nil
}

// touchToolSource moves a source's updatedAt: ErrNotFound when there is
// no such source.
func (q queries) touchToolSource(ctx context.Context, op, slug string, at time.Time) error {
	return toolSources.update(ctx, q, op, "", slug, at)
}

// toolJSON is one tool as toolSourceColumns aggregate it.
type toolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Binding     json.RawMessage `json:"binding"`
}

func scanToolSource(s scanner) (store.ToolSource, error) {
	var (
		out                  store.ToolSource
		config, bound, tools string
		created, updated     int64
		err                  error
	)
	if err := s.Scan(&out.Slug, &out.Kind, &out.DisplayName, &config, &out.Enabled, &out.AllMembers,
		&out.Credential.Kind, &out.Credential.HeaderName, &out.Credential.Secret, &created, &updated, &bound, &tools); err != nil {
		return store.ToolSource{}, err
	}
	out.Config = []byte(config)
	out.Credential.Secret = sealed(out.Credential.Secret)
	out.CreatedAt, out.UpdatedAt = fromMS(created), fromMS(updated)
	if out.Bound, err = decodeBound("tool bindings", bound); err != nil {
		return store.ToolSource{}, err
	}
	var ts []toolJSON
	if err := json.Unmarshal([]byte(tools), &ts); err != nil {
		return store.ToolSource{}, fmt.Errorf("tools: %w", err)
	}
	out.Tools = make([]store.Tool, len(ts))
	for i, t := range ts {
		out.Tools[i] = store.Tool{Name: t.Name, Description: t.Description, InputSchema: []byte(t.InputSchema)}
		if len(t.Binding) > 0 && string(t.Binding) != "null" {
			out.Tools[i].Binding = []byte(t.Binding)
		}
	}
	return out, nil
}

// jsonObject stores empty JSON as the empty object.
func jsonObject(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// nullText stores empty bytes as NULL text.
func nullText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// PutToolBinding runs its two statements in one transaction.
func (db *DB) PutToolBinding(ctx context.Context, slug, member string) error {
	return inTxErr(ctx, db, func(q queries) error { return q.PutToolBinding(ctx, slug, member) })
}

// PutTool runs its two statements in one transaction.
func (db *DB) PutTool(ctx context.Context, slug string, t store.Tool, at time.Time) error {
	return inTxErr(ctx, db, func(q queries) error { return q.PutTool(ctx, slug, t, at) })
}

// DeleteTool runs its two statements in one transaction.
func (db *DB) DeleteTool(ctx context.Context, slug, name string, at time.Time) error {
	return inTxErr(ctx, db, func(q queries) error { return q.DeleteTool(ctx, slug, name, at) })
}

// ReplaceTools runs its statements in one transaction.
func (db *DB) ReplaceTools(ctx context.Context, slug string, tools []store.Tool, at time.Time) error {
	return inTxErr(ctx, db, func(q queries) error { return q.ReplaceTools(ctx, slug, tools, at) })
}
