package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/cmd/internal/client"
)

// Broker is what the toolbox needs of a broker: one REST call whose answer
// comes back whatever its status. *client.Client is one.
type Broker interface {
	DoRaw(ctx context.Context, method, path string, body io.Reader, contentType string) (*client.RawResponse, error)
}

// Debounce is how long the toolbox waits after a registry event before it
// recomputes its tool set: a burst of events costs one recompute.
const Debounce = 150 * time.Millisecond

// maxErrorBody bounds the broker body quoted in "broker error" texts.
const maxErrorBody = 8 << 10

// maxBoundTools bounds the tools all bound sources may add.
const maxBoundTools = 512

// callTimeout bounds one broker call.
const callTimeout = 60 * time.Second

// Toolbox is one MCP server for one member.
type Toolbox struct {
	b      Broker
	url    string
	log    *slog.Logger
	srv    *mcp.Server
	static map[string]*tool

	trigger chan struct{}
	// inflight counts requests being handled, so the end of stdin can wait
	// for their answers (see drainReader).
	inflight atomic.Int64

	mu      sync.Mutex
	self    string
	perms   map[string]bool
	current map[string]string // registered tool name -> its JSON, to add only what changed
}

// Options configure New.
type Options struct {
	// URL names the broker in error texts.
	URL string
	// Logger receives diagnostics (never tokens); nil discards them.
	Logger *slog.Logger
	// Version is reported to MCP clients.
	Version string
}

// New builds the toolbox for the member b's credential names. It fetches
// the briefing and the bound tool sources, so a refused credential or a
// broker that is down fails here, before any client connects.
func New(ctx context.Context, b Broker, o Options) (*Toolbox, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := o.Version
	if v == "" {
		v = "dev"
	}
	t := &Toolbox{
		b: b, url: o.URL, log: log,
		static:  map[string]*tool{},
		trigger: make(chan struct{}, 1),
		current: map[string]string{},
	}
	for _, tl := range staticTools() {
		t.static[tl.name] = tl
	}
	t.srv = mcp.NewServer(&mcp.Implementation{Name: "svc", Version: v}, &mcp.ServerOptions{
		Logger: log,
		// Tools only; list_changed is announced when the tool set changes.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	t.srv.AddReceivingMiddleware(t.hiddenTools)
	if err := t.Recompute(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Server is the MCP server; Run serves it on a transport.
func (t *Toolbox) Server() *mcp.Server { return t.srv }

// Self is the member the credential names.
func (t *Toolbox) Self() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.self
}

// hiddenTools lets a static tool hidden from tools/list still be called by
// name: the call goes to the broker, which refuses it: the server enforces
// permissions whatever the list shows (docs/MCP.md, Hidden tools).
func (t *Toolbox) hiddenTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		t.inflight.Add(1)
		defer t.inflight.Add(-1)
		if method == "tools/call" {
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
				if tl, ok := t.static[r.Params.Name]; ok && !t.registered(tl.name) {
					return t.runStatic(ctx, tl, r.Params.Arguments), nil
				}
			}
		}
		return next(ctx, method, req)
	}
}

func (t *Toolbox) registered(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.current[name]
	return ok
}

func (t *Toolbox) runStatic(ctx context.Context, tl *tool, raw json.RawMessage) *mcp.CallToolResult {
	a, err := parseArgs(tl.name, tl.fields, raw)
	if err != nil {
		return errorResult(err)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c := &call{t: t, tool: tl.name, a: a}
	text, err := tl.run(ctx, c)
	if err != nil {
		return errorResult(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// errorResult is the spec's error shape: isError and exactly one text block.
// Errors that are not the toolbox's own texts (a transport failure) are
// described without any credential.
func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// brokerError is a broker refusal: "broker error <STATUS>: <BODY>".
type brokerError struct {
	status int
	body   []byte
}

func (e *brokerError) Error() string {
	body := e.body
	if len(body) > maxErrorBody {
		body = append(slices.Clip(body[:maxErrorBody]), "…"...)
	}
	return fmt.Sprintf("broker error %d: %s", e.status, bytes.TrimSpace(body))
}

// do is one broker call: JSON in (when in is not nil), the 2xx body out,
// a *brokerError for a refusal, a one-line toolError when the broker
// cannot be reached.
func (t *Toolbox) do(ctx context.Context, method, path string, in any) ([]byte, error) {
	var body io.Reader
	ct := ""
	if in != nil {
		enc, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body, ct = bytes.NewReader(enc), "application/json"
	}
	return t.doRaw(ctx, method, path, body, ct)
}

func (t *Toolbox) doRaw(ctx context.Context, method, path string, body io.Reader, ct string) ([]byte, error) {
	resp, err := t.b.DoRaw(ctx, method, path, body, ct)
	if err != nil {
		return nil, toolError(client.Describe(err, t.url))
	}
	if resp.Status/100 != 2 {
		return nil, &brokerError{status: resp.Status, body: resp.Body}
	}
	return resp.Body, nil
}

// doInto decodes a 2xx JSON answer into out.
func (t *Toolbox) doInto(ctx context.Context, method, path string, in, out any) error {
	raw, err := t.do(ctx, method, path, in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return errorf("the broker answered %s %s with something that is not its JSON", method, path)
	}
	return nil
}

// briefing is the part of GET /briefing the toolbox uses.
type briefing struct {
	Member struct {
		Name        string   `json:"name"`
		Permissions []string `json:"permissions"`
	} `json:"member"`
}

type sourceSummary struct {
	Slug       string `json:"slug"`
	Enabled    bool   `json:"enabled"`
	AllMembers bool   `json:"allMembers"`
	Bound      bool   `json:"bound"`
}

type toolDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// invocable is whether the caller may invoke a source's tools: enabled,
// and bound or open to all members.
func (s sourceSummary) invocable() bool { return s.Enabled && (s.Bound || s.AllMembers) }

// toolNameRE is what a bound tool's full name must look like: MCP's tool
// name alphabet, at most 128 characters.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// desired is one tool of the resolved set with its handler.
type desired struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// Recompute fetches the caller's permissions and bound tool sources and
// makes the registered tools match them. Adding or removing a tool makes
// the SDK send notifications/tools/list_changed to the client; a set that
// did not change sends nothing.
func (t *Toolbox) Recompute(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var br briefing
	if err := t.doInto(ctx, http.MethodGet, "/briefing", nil, &br); err != nil {
		return fmt.Errorf("briefing: %w", err)
	}
	if br.Member.Name == "" {
		return errors.New("briefing: the broker named no member")
	}
	perms := map[string]bool{}
	for _, p := range br.Member.Permissions {
		perms[p] = true
	}
	if perms[permMembersManage] || perms[permObjectivesCreate] || t.isApprover(ctx, br.Member.Name) {
		perms[gateApprover] = true
	}
	want := map[string]desired{}
	for _, name := range visibleTools(staticTools(), perms) {
		tl := t.static[name]
		want[name] = desired{tool: tl.mcpTool(), handler: t.staticHandler(tl)}
	}
	bound, err := t.boundTools(ctx)
	if err != nil {
		return err
	}
	for name, d := range bound {
		want[name] = d
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	t.self, t.perms = br.Member.Name, perms
	var gone []string
	for name := range t.current {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		t.srv.RemoveTools(gone...)
		for _, n := range gone {
			delete(t.current, n)
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d := want[n]
		enc, _ := json.Marshal(d.tool)
		if t.current[n] == string(enc) {
			continue
		}
		t.srv.AddTool(d.tool, d.handler)
		t.current[n] = string(enc)
	}
	return nil
}

func (t *Toolbox) staticHandler(tl *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return t.runStatic(ctx, tl, req.Params.Arguments), nil
	}
}

// boundTools lists the tools of every source the caller can invoke. A
// source that vanished between the list and its detail is skipped.
func (t *Toolbox) boundTools(ctx context.Context) (map[string]desired, error) {
	var list struct {
		Sources []sourceSummary `json:"sources"`
	}
	if err := t.doInto(ctx, http.MethodGet, "/tool-sources", nil, &list); err != nil {
		return nil, fmt.Errorf("tool sources: %w", err)
	}
	out := map[string]desired{}
	for _, s := range list.Sources {
		if !s.invocable() {
			continue
		}
		var detail struct {
			Tools []toolDefinition `json:"tools"`
		}
		if err := t.doInto(ctx, http.MethodGet, "/tool-sources/"+url.PathEscape(s.Slug), nil, &detail); err != nil {
			t.log.Warn("tool source skipped", "slug", clip(s.Slug, 64), "error", err.Error())
			continue
		}
		for _, d := range detail.Tools {
			full := s.Slug + "__" + d.Name
			if !toolNameRE.MatchString(full) {
				t.log.Warn("bound tool skipped: name outside the MCP alphabet", "slug", clip(s.Slug, 64), "tool", clip(d.Name, 64))
				continue
			}
			if len(out) >= maxBoundTools {
				t.log.Warn("bound tools capped", "max", maxBoundTools)
				return out, nil
			}
			out[full] = desired{tool: &mcp.Tool{Name: full, Description: d.Description, InputSchema: objectSchema(d.InputSchema)}, handler: t.boundHandler(s.Slug, d.Name)}
		}
	}
	return out, nil
}

// objectSchema is a bound tool's input schema as the SDK needs it: a JSON
// object of type "object" (a definition without one gets the empty object
// schema).
func objectSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	if m["type"] != "object" {
		m["type"] = "object"
		enc, _ := json.Marshal(m)
		return enc
	}
	return raw
}

// boundHandler invokes one bound tool through the broker and answers the
// broker's CallToolResult as it is.
func (t *Toolbox) boundHandler(slug, name string) mcp.ToolHandler {
	path := "/tool-sources/" + url.PathEscape(slug) + "/tools/" + url.PathEscape(name) + "/invoke"
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		argsRaw := bytes.TrimSpace(req.Params.Arguments)
		if len(argsRaw) == 0 || bytes.Equal(argsRaw, []byte("null")) {
			argsRaw = []byte("{}")
		}
		if len(argsRaw) > 1<<20 {
			return errorResult(errorf("%s__%s: arguments are larger than 1 MiB", slug, name)), nil
		}
		if argsRaw[0] != '{' || !json.Valid(argsRaw) {
			return errorResult(errorf("%s__%s: arguments must be a JSON object", slug, name)), nil
		}
		raw, err := t.do(ctx, http.MethodPost, path, map[string]json.RawMessage{"args": argsRaw})
		if err != nil {
			return errorResult(err), nil
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return errorResult(errorf("%s__%s: the broker's answer is not a tool result", slug, name)), nil
		}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return &res, nil
	}
}

// Notify asks for a recompute; a burst of calls within Debounce costs one.
func (t *Toolbox) Notify() {
	select {
	case t.trigger <- struct{}{}:
	default:
	}
}

// RegistryKinds are the data.kind values of registry events: each may
// change the caller's resolved tool set.
var RegistryKinds = []string{"tool_source", "secret", "notification_endpoint", "notification_profile"}

// IsRegistryKind says whether kind is a registry event's data.kind.
func IsRegistryKind(kind string) bool { return slices.Contains(RegistryKinds, kind) }

// RunRecomputer recomputes after each burst of Notify calls until ctx ends.
func (t *Toolbox) RunRecomputer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.trigger:
		}
		timer := time.NewTimer(Debounce)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		// Events during the wait are covered by this recompute.
		select {
		case <-t.trigger:
		default:
		}
		if err := t.Recompute(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("tool set recompute failed", "error", err.Error())
		}
	}
}
