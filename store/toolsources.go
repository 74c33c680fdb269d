package store

import (
	"context"
	"time"
)

// ToolSource is an external tool source of the registry: kind custom (its
// tools are HTTP bindings) or mcp (its tools are cached from the MCP server
// at the config's url).
type ToolSource struct {
	Slug        string
	Kind        string
	DisplayName string
	Config      []byte // JSON object
	Enabled     bool
	AllMembers  bool
	// Credential is how the source authenticates upstream; its Secret is
	// sealed by the server. A zero Kind means none.
	Credential ToolCredential
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Bound are the members bound to it, by name; Tools its tools, by
	// name. Both are filled by reads.
	Bound []string
	Tools []Tool
}

// ToolCredential is a tool source's credential: Kind bearer or header,
// HeaderName for header, Secret sealed (opaque here).
type ToolCredential struct {
	Kind       string
	HeaderName string
	Secret     []byte
}

// Tool is one tool of a source: a custom definition (Binding set, a JSON
// object) or an entry of an MCP source's cached list (Binding nil).
type Tool struct {
	Name        string
	Description string
	InputSchema []byte // JSON object
	Binding     []byte // JSON object; nil for MCP tools
}

// ToolSourceStore keeps tool sources, their credentials, bindings and
// tools.
type ToolSourceStore interface {
	// CreateToolSource stores a source (Bound and Tools are ignored):
	// ErrConflict when the slug is taken.
	CreateToolSource(ctx context.Context, s ToolSource) error
	// GetToolSource returns a source with its bindings and tools;
	// ErrNotFound.
	GetToolSource(ctx context.Context, slug string) (ToolSource, error)
	// ListToolSources returns every source with its bindings and tools, by
	// slug.
	ListToolSources(ctx context.Context) ([]ToolSource, error)
	// UpdateToolSource replaces the displayName, config, enabled,
	// allMembers and updatedAt of the source s.Slug; ErrNotFound.
	UpdateToolSource(ctx context.Context, s ToolSource) error
	// DeleteToolSource removes a source with its credential, bindings and
	// tools; ErrNotFound.
	DeleteToolSource(ctx context.Context, slug string) error
	// SetToolCredential replaces a source's credential (a zero Kind clears
	// it); ErrNotFound.
	SetToolCredential(ctx context.Context, slug string, c ToolCredential, at time.Time) error
	// PutToolBinding binds a member (binding twice is no change):
	// ErrNotFound for an unknown source, ErrPrecondition for an unknown
	// member.
	PutToolBinding(ctx context.Context, slug, member string) error
	// DeleteToolBinding removes a binding; ErrNotFound when absent.
	DeleteToolBinding(ctx context.Context, slug, member string) error
	// PutTool defines or replaces one tool; ErrNotFound for an unknown
	// source.
	PutTool(ctx context.Context, slug string, t Tool, at time.Time) error
	// DeleteTool removes one tool; ErrNotFound when absent.
	DeleteTool(ctx context.Context, slug, name string, at time.Time) error
	// ReplaceTools makes a source's tools exactly tools (an MCP refresh);
	// ErrNotFound for an unknown source.
	ReplaceTools(ctx context.Context, slug string, tools []Tool, at time.Time) error
}
