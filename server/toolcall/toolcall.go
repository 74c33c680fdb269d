// Package toolcall is the engine behind tool sources: it validates custom
// tools' HTTP bindings, calls them with a caller's arguments, and speaks
// MCP's Streamable HTTP transport to MCP sources to list and call their
// tools. It knows nothing of the services: they hand it a decrypted
// credential, a binding or a URL, and arguments, and get back MCP's
// CallToolResult shape.
//
// Every request goes through the one egress client the broker gives it,
// with a timeout and a cap on what is read back.
package toolcall

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Credential is a tool source's decrypted credential (docs/API.md, Tool
// sources: PUT /tool-sources/:slug/credential).
type Credential struct {
	Kind       string // "bearer" or "header"
	HeaderName string // with "header": the header it is sent in
	Secret     string
}

// Binding is a custom tool's HTTP binding ({ method, url, headers?, body? }:
// docs/TOOLCALL.md, Bindings). {{args.<path>}} may appear in the URL's path and
// query, in header values and in strings of the body; never in the
// scheme, host or port.
type Binding struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	// Optional names the arguments the tool's inputSchema declares but
	// does not require (OptionalArgs). Left out of the query, a header
	// value or the body they render empty; the path may not use them.
	// Derived from the schema, never stored with the binding.
	Optional []string `json:"-"`
}

// Tool is one tool an MCP source lists.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage // a JSON object
}

// Result is MCP's CallToolResult: content blocks and whether the call
// failed. Content blocks are kept as the upstream sent them.
type Result struct {
	Content           []json.RawMessage `json:"content"`
	IsError           bool              `json:"isError"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
}

// InvalidError says why a binding or an argument set is refused; Field
// names the offending part ("url", "headers.X-Api-Key", "body").
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// UpstreamError is an upstream that could not be reached or did not speak
// the protocol (a refresh answers it 502).
type UpstreamError struct {
	Err error
}

func (e *UpstreamError) Error() string { return "upstream: " + e.Err.Error() }
func (e *UpstreamError) Unwrap() error { return e.Err }

// Options tunes a Caller; zero values take the defaults.
type Options struct {
	Timeout     time.Duration // one upstream call, default 30 s
	MaxResponse int64         // bytes read back from an upstream, default 4 MiB
}

// Caller makes tool calls through one HTTP client (the broker's egress
// client).
type Caller struct {
	client *http.Client
	opts   Options
}

// New returns a Caller sending through client.
func New(client *http.Client, o Options) *Caller {
	return &Caller{client: client, opts: o}
}

// Validate checks a binding at save time: a static origin (http or https,
// no template, userinfo or encoded tricks in scheme, host or port), the
// header guards (no Authorization, Cookie, Host or credHeader, in any
// case), and no optional argument in the URL's path. credHeader is the source credential's header name, "" if none.
// The error is an *InvalidError.
func (b Binding) Validate(credHeader string) error {
	c, err := compile(b, credHeader)
	if err != nil {
		return err
	}
	return checkOptionalInPath(c)
}

// InvokeHTTP calls a custom tool: it substitutes args into b (percent-
// encoded in path and query, CR/LF refused in header values), adds cred,
// and sends the request. An upstream failure or a non-2xx answer is a
// Result with IsError set, not an error; the error is for arguments that
// cannot be substituted (*InvalidError) or a cancelled ctx.
func (c *Caller) InvokeHTTP(ctx context.Context, b Binding, args map[string]any, cred *Credential) (Result, error) {
	return c.invokeHTTP(ctx, b, args, cred)
}

// ListMCP lists an MCP source's tools at url. An upstream that cannot be
// reached or does not speak MCP is an *UpstreamError.
func (c *Caller) ListMCP(ctx context.Context, url string, cred *Credential) ([]Tool, error) {
	return c.listMCP(ctx, url, cred)
}

// CallMCP calls tool name of the MCP source at url. As with InvokeHTTP,
// upstream failures are a Result with IsError set.
func (c *Caller) CallMCP(ctx context.Context, url string, cred *Credential, name string, args map[string]any) (Result, error) {
	return c.callMCP(ctx, url, cred, name, args)
}

// Redact returns a deep copy of v (a decoded JSON value) in which every
// occurrence of each non-empty secret inside a string is replaced by
// "[REDACTED]".
func Redact(v any, secrets ...string) any {
	var live []string
	for _, s := range secrets {
		if s != "" {
			live = append(live, s)
		}
	}
	return redactValue(v, live)
}
