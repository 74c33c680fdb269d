package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxListPages bounds the tools/list pages one ListMCP follows.
const maxListPages = 100

// clientImpl is what the broker calls itself in MCP's initialize.
var clientImpl = &mcp.Implementation{Name: "svc", Version: "1"}

// errTooLarge is a session that read more than MaxResponse bytes.
var errTooLarge = errors.New("toolcall: upstream answer too large")

// mcpSession is one MCP session's plumbing: the HTTP client the SDK's
// transport uses (credential added, bytes counted) and what went wrong in
// it.
type mcpSession struct {
	// ctx bounds every exchange of the session, including those the SDK
	// makes on a context of its own (the DELETE on close, a cancellation
	// notice), so an upstream cannot hold a call past the timeout.
	ctx      context.Context
	base     http.RoundTripper
	endpoint *url.URL
	credName string
	credVal  string

	mu         sync.Mutex
	budget     int64 // bytes the session may still read
	overflown  bool
	lastErr    error // the last exchange that failed below HTTP
	lastStatus int   // the last HTTP status >= 400
}

func (s *mcpSession) RoundTrip(req *http.Request) (*http.Response, error) {
	// The SDK only talks to the endpoint; the credential goes nowhere else.
	if s.credName != "" && sameOrigin(req.URL, s.endpoint) {
		req = req.Clone(req.Context())
		req.Header.Set(s.credName, s.credVal)
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	done := func() { stop(); cancel() }
	resp, err := s.base.RoundTrip(req.WithContext(ctx))
	s.mu.Lock()
	if err != nil {
		s.lastErr = err
	} else if resp.StatusCode >= 400 {
		s.lastStatus = resp.StatusCode
	}
	s.mu.Unlock()
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &countingBody{rc: resp.Body, s: s, done: done}
	return resp, nil
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// countingBody charges what is read against the session's budget.
type countingBody struct {
	rc   io.ReadCloser
	s    *mcpSession
	done func() // releases the exchange's context
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.s.mu.Lock()
	b.s.budget -= int64(n)
	over := b.s.budget < 0
	if over {
		b.s.overflown = true
	}
	b.s.mu.Unlock()
	if over {
		return n, errTooLarge
	}
	return n, err
}

func (b *countingBody) Close() error {
	err := b.rc.Close()
	b.done()
	return err
}

func (s *mcpSession) state() (overflown bool, lastErr error, lastStatus int) {
	if s == nil {
		return false, nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflown, s.lastErr, s.lastStatus
}

// connect opens an MCP session at endpoint. The error says why, without
// the credential.
func (c *Caller) connect(ctx context.Context, endpoint string, cred *Credential) (*mcp.ClientSession, *mcpSession, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, nil, errors.New("the MCP URL must be an absolute http:// or https:// URL without userinfo")
	}
	credName, credVal, err := credentialHeader(cred)
	if err != nil {
		return nil, nil, fmt.Errorf("the tool source's credential cannot be sent: %w", err)
	}
	base := http.DefaultTransport
	if c.client != nil && c.client.Transport != nil {
		base = c.client.Transport
	}
	s := &mcpSession{ctx: ctx, base: base, endpoint: u, credName: credName, credVal: credVal, budget: c.maxResponse()}
	hc := &http.Client{Transport: s}
	if c.client != nil {
		hc.CheckRedirect = c.client.CheckRedirect
		hc.Jar = c.client.Jar
		hc.Timeout = c.client.Timeout
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: hc,
		// No reconnection attempts, no standalone GET stream: a list or a
		// call is one short exchange.
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         int(c.maxResponse()),
	}
	client := mcp.NewClient(clientImpl, &mcp.ClientOptions{
		Logger: slog.New(slog.DiscardHandler),
	})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, s, err
	}
	return cs, s, nil
}

// describe turns an MCP failure into a message for a result or an
// *UpstreamError, without the credential. The SDK wraps transport failures
// in a JSON-RPC "rejected by transport" error; what the session saw on the
// wire says more.
func (c *Caller) describe(tctx context.Context, s *mcpSession, cred *Credential, err error) string {
	overflown, lastErr, lastStatus := s.state()
	var msg string
	var werr *jsonrpc.Error
	switch {
	case overflown:
		msg = fmt.Sprintf("the upstream's answer is larger than %d bytes", c.maxResponse())
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		msg = fmt.Sprintf("the upstream did not answer within %s", c.timeout())
	case errors.As(err, &werr) && werr.Code != codeRejectedByTransport:
		msg = fmt.Sprintf("MCP error %d: %s", werr.Code, werr.Message)
	case lastErr != nil:
		var ue *url.Error
		if errors.As(lastErr, &ue) {
			lastErr = ue.Err
		}
		msg = lastErr.Error()
	case lastStatus != 0:
		msg = fmt.Sprintf("the upstream answered %d %s: not an MCP Streamable HTTP endpoint", lastStatus, http.StatusText(lastStatus))
	default:
		msg = err.Error()
	}
	return redactEchoes(msg, secretOf(cred))
}

// codeRejectedByTransport is the go-sdk's JSON-RPC code for a message its
// transport could not deliver (jsonrpc2.ErrRejected, internal to the SDK).
const codeRejectedByTransport = -32005

// listMCP is ListMCP (toolcall.go).
func (c *Caller) listMCP(ctx context.Context, endpoint string, cred *Credential) ([]Tool, error) {
	tctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	cs, s, err := c.connect(tctx, endpoint, cred)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UpstreamError{Err: errors.New(c.describe(tctx, s, cred, err))}
	}
	defer cs.Close()
	var tools []Tool
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, &UpstreamError{Err: fmt.Errorf("more than %d pages of tools", maxListPages)}
		}
		res, err := cs.ListTools(tctx, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &UpstreamError{Err: errors.New(c.describe(tctx, s, cred, err))}
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			schema, err := json.Marshal(t.InputSchema)
			if err != nil || len(schema) == 0 || schema[0] != '{' {
				return nil, &UpstreamError{Err: fmt.Errorf("tool %q: inputSchema is not a JSON object", clip(t.Name, 64))}
			}
			tools = append(tools, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
		if res.NextCursor == "" {
			break
		}
		if res.NextCursor == params.Cursor {
			return nil, &UpstreamError{Err: errors.New("tools/list repeated its cursor")}
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	return tools, nil
}

// callMCP is CallMCP (toolcall.go).
func (c *Caller) callMCP(ctx context.Context, endpoint string, cred *Credential, name string, args map[string]any) (Result, error) {
	tctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	secret := secretOf(cred)
	cs, s, err := c.connect(tctx, endpoint, cred)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return textResult("the MCP upstream could not be reached: "+c.describe(tctx, s, cred, err), true), nil
	}
	defer cs.Close()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(tctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return textResult(c.describe(tctx, s, cred, err), true), nil
	}
	out, err := convertResult(res, secret)
	if err != nil {
		return errorResult(secret, "the upstream's result cannot be read: %s", err), nil
	}
	return out, nil
}

// joinTexts redacts the text blocks of content read one after the other,
// as one JSON array of their texts, so that a credential split across
// two blocks is found (each block's part redacted in it); the other
// blocks and the order stay. content is not changed.
func joinTexts(content []mcp.Content, secret string) []mcp.Content {
	var texts []string
	for _, b := range content {
		if tc, ok := b.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if len(texts) < 2 {
		return content
	}
	raw, err := json.Marshal(texts)
	if err != nil {
		return content
	}
	var red []string
	if json.Unmarshal([]byte(redactEchoes(string(raw), secret)), &red) != nil || len(red) != len(texts) {
		return content
	}
	out := make([]mcp.Content, len(content))
	k := 0
	for i, b := range content {
		out[i] = b
		if tc, ok := b.(*mcp.TextContent); ok {
			c := *tc
			c.Text = red[k]
			out[i] = &c
			k++
		}
	}
	return out
}

// convertResult maps the SDK's CallToolResult to raw JSON blocks, the
// credential redacted from every string (redactJSON).
func convertResult(res *mcp.CallToolResult, secret string) (Result, error) {
	out := Result{IsError: res.IsError, Content: []json.RawMessage{}}
	if len(res.Content) > 0 {
		raw, err := json.Marshal(joinTexts(res.Content, secret))
		if err != nil {
			return Result{}, err
		}
		if raw, err = redactJSON(raw, secret); err != nil {
			return Result{}, err
		}
		if err := json.Unmarshal(raw, &out.Content); err != nil {
			return Result{}, err
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return Result{}, err
		}
		raw, err = redactJSON(raw, secret)
		if err != nil {
			return Result{}, err
		}
		out.StructuredContent = raw
	}
	return out, nil
}
