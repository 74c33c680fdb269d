// Package toolsources is the tool sources capability: the registry of
// tool sources (custom HTTP tools and MCP servers) on the registry kit,
// their tool definitions and the calls of their tools, which go through
// the tool-call engine (package toolcall) and are recorded in the
// caller's activity, redacted. sources.go holds the registry, tools.go
// the tool definitions and MCP refresh, invoke.go the calls.
package toolsources

import (
	"context"
	"log/slog"
	"regexp"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/registry"
	"svc/server/toolcall"
	"svc/store"
)

// Tool source kinds (docs/API.md, Tool sources).
const (
	KindCustom = "custom"
	KindMCP    = "mcp"
)

// Tool source bounds.
const (
	// MaxInvokeArgs is the most bytes a tool call's args hold as JSON
	// (docs/API.md, Tool sources).
	MaxInvokeArgs = 1 << 20
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

// Engine is what the service needs of the tool-call engine (package
// toolcall): binding validation, custom tool calls, MCP listing and
// calls, and redaction. NewEngine adapts a *toolcall.Caller; tests stand
// in a fake.
type Engine interface {
	// Validate checks a custom tool's binding at save time (toolcall
	// Binding.Validate); the error is a *toolcall.InvalidError.
	Validate(b toolcall.Binding, credHeader string) error
	InvokeHTTP(ctx context.Context, b toolcall.Binding, args map[string]any, cred *toolcall.Credential) (toolcall.Result, error)
	ListMCP(ctx context.Context, url string, cred *toolcall.Credential) ([]toolcall.Tool, error)
	CallMCP(ctx context.Context, url string, cred *toolcall.Credential, name string, args map[string]any) (toolcall.Result, error)
	// Redact is toolcall.Redact.
	Redact(v any, secrets ...string) any
}

// NewEngine adapts a *toolcall.Caller to Engine.
func NewEngine(c *toolcall.Caller) Engine { return callerEngine{c} }

// callerEngine adapts a *toolcall.Caller to Engine.
type callerEngine struct {
	*toolcall.Caller
}

func (callerEngine) Validate(b toolcall.Binding, credHeader string) error {
	return b.Validate(credHeader)
}

func (callerEngine) Redact(v any, secrets ...string) any { return toolcall.Redact(v, secrets...) }

var _ Engine = callerEngine{}

// Deps are what the tool sources service needs of the broker.
type Deps struct {
	// Store reads the sources; changes go through Registry.
	Store    store.Store
	Registry *registry.Kit
	Engine   Engine
	// SecretValues are the values of the secrets member may use: a call's
	// recorded input is redacted of them.
	SecretValues func(ctx context.Context, member string) ([]string, error)
	// Record appends a tool call's tool_action to its caller's activity;
	// nil when the broker keeps no activity.
	Record func(ctx context.Context, ev store.ActivityEvent) error
	Now    func() time.Time
	Log    *slog.Logger
}

// Service implements apiv1.ToolSourcesServer: the registry of tool
// sources and the calls of their tools. Every change runs on the message
// committer with the event that reports it.
type Service struct {
	apiv1.UnimplementedToolSourcesServer
	d Deps
	r registry.Of[store.ToolSource]
}

var _ apiv1.ToolSourcesServer = (*Service)(nil)

// New builds the service.
func New(d Deps) *Service {
	return &Service{d: d, r: registry.Of[store.ToolSource]{
		Kit: d.Registry, Kind: registry.ToolSources,
		Get: func(ctx context.Context, tx store.Tx, slug string) (store.ToolSource, error) {
			return tx.GetToolSource(ctx, slug)
		},
		Audience: func(x store.ToolSource) (bool, []string) { return x.AllMembers, x.Bound },
		Bind:     func(ctx context.Context, tx store.Tx, slug, m string) error { return tx.PutToolBinding(ctx, slug, m) },
		Unbind: func(ctx context.Context, tx store.Tx, slug, m string) error {
			return tx.DeleteToolBinding(ctx, slug, m)
		},
	}}
}
