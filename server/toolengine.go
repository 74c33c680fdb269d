package server

import (
	"context"

	"svc/server/toolcall"
)

// ToolEngine is what the tool sources service needs of the tool-call
// engine (package toolcall): binding validation, custom tool calls, MCP
// listing and calls, and redaction. toolEngineOf adapts a
// *toolcall.Caller; tests stand in a fake.
type ToolEngine interface {
	// Validate checks a custom tool's binding at save time (toolcall
	// Binding.Validate); the error is a *toolcall.InvalidError.
	Validate(b toolcall.Binding, credHeader string) error
	InvokeHTTP(ctx context.Context, b toolcall.Binding, args map[string]any, cred *toolcall.Credential) (toolcall.Result, error)
	ListMCP(ctx context.Context, url string, cred *toolcall.Credential) ([]toolcall.Tool, error)
	CallMCP(ctx context.Context, url string, cred *toolcall.Credential, name string, args map[string]any) (toolcall.Result, error)
	// Redact is toolcall.Redact.
	Redact(v any, secrets ...string) any
}

// WithToolEngine sets the tool-call engine; the default is a
// toolcall.Caller over the broker's egress client.
func WithToolEngine(e ToolEngine) Option { return func(o *options) { o.tools = e } }

// callerEngine adapts a *toolcall.Caller to ToolEngine.
type callerEngine struct {
	*toolcall.Caller
}

func (callerEngine) Validate(b toolcall.Binding, credHeader string) error {
	return b.Validate(credHeader)
}

func (callerEngine) Redact(v any, secrets ...string) any { return toolcall.Redact(v, secrets...) }

var _ ToolEngine = callerEngine{}
