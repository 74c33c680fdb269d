package toolsources

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/registry"
	"svc/server/toolcall"
	"svc/store"
)

// credential opens a source's credential for a call to target (a URL);
// nil when it has none, or when it is bound to another origin than
// target's (a value sealed before origins were recorded is bound to none),
// registry.ErrNoKEK without a KEK.
func (s *Service) credential(x store.ToolSource, target string) (*toolcall.Credential, error) {
	if x.Credential.Kind == "" {
		return nil, nil
	}
	c, legacy, err := s.openCred(x)
	if err != nil {
		return nil, err
	}
	if legacy || c.Origin == "" || c.Origin != origin(target) {
		s.d.Log.Warn("tool credential withheld: it is bound to another origin; set it again", "source", x.Slug, "legacy", legacy)
		return nil, nil
	}
	return &toolcall.Credential{Kind: x.Credential.Kind, HeaderName: x.Credential.HeaderName, Secret: c.Secret}, nil
}

// InvokeTool implements apiv1.ToolSourcesServer. Failures come in the
// order docs/API.md gives (Tool sources): an unknown source 404, then 403 for a caller neither bound
// nor covered by allMembers, 409 for a disabled source, 404 for an unknown
// tool. An MCP tool must be in the cached list (refresh fills it; a miss
// does not call upstream). The tool's own failure is 200 with isError. The
// call is recorded as a tool_action in the caller's activity, its input
// redacted of the credential and of every secret value the caller may use.
func (s *Service) InvokeTool(ctx context.Context, req *apiv1.InvokeToolRequest) (*apiv1.InvokeToolResponse, error) {
	p := registry.Caller(ctx)
	if err := registry.ValidSlug("slug", req.GetSlug()); err != nil {
		return nil, err
	}
	if !mcpToolNameRE.MatchString(req.GetName()) {
		return nil, apierr.Invalid("name", "must be a tool name")
	}
	args := map[string]any{}
	if req.GetArgs() != nil {
		// Measured as compact JSON: protojson's output is deliberately
		// unstable (it may add spaces), so it cannot be the measure.
		args = req.GetArgs().AsMap()
		b, err := json.Marshal(args)
		if err != nil {
			return nil, apierr.Invalid("args", "%v", err)
		}
		if len(b) > MaxInvokeArgs {
			return nil, apierr.Errorf(apierr.CodePayloadTooLarge, "args: over %d bytes", MaxInvokeArgs)
		}
	}
	x, err := s.d.Store.GetToolSource(ctx, req.GetSlug())
	if err != nil {
		return nil, s.r.NotFound(err, req.GetSlug())
	}
	if !x.AllMembers && !slices.Contains(x.Bound, p.Member) {
		return nil, apierr.Errorf(apierr.CodeForbidden, "you are not bound to tool source %q", x.Slug)
	}
	if !x.Enabled {
		return nil, apierr.Errorf(apierr.CodeConflict, "tool source %q is disabled", x.Slug)
	}
	i := slices.IndexFunc(x.Tools, func(t store.Tool) bool { return t.Name == req.GetName() })
	if i < 0 {
		return nil, apierr.Errorf(apierr.CodeNotFound, "tool source %q has no tool %q", x.Slug, req.GetName())
	}
	tool := x.Tools[i]
	var b toolcall.Binding
	target := ""
	if x.Kind == KindCustom {
		if err := json.Unmarshal(tool.Binding, &b); err != nil {
			return nil, err
		}
		b.Optional = toolcall.OptionalArgs(tool.InputSchema)
		target = b.URL
	} else {
		if target, err = mcpURL(x.Config); err != nil {
			return nil, err
		}
	}
	cred, err := s.credential(x, target)
	if err != nil {
		return nil, err
	}
	start := s.d.Now()
	var res toolcall.Result
	if x.Kind == KindCustom {
		res, err = s.d.Engine.InvokeHTTP(ctx, b, args, cred)
	} else {
		res, err = s.d.Engine.CallMCP(ctx, target, cred, tool.Name, args)
	}
	var ue *toolcall.UpstreamError
	var ie *toolcall.InvalidError
	switch {
	case errors.As(err, &ie):
		return nil, apierr.Invalid("args", "%s: %s", ie.Field, ie.Message)
	case errors.As(err, &ue):
		text, _ := json.Marshal(map[string]any{"type": "text", "text": apierr.TruncateUTF8(ue.Error(), 1024)})
		res, err = toolcall.Result{Content: []json.RawMessage{text}, IsError: true}, nil
	case err != nil:
		return nil, err
	}
	s.recordToolAction(ctx, p.Member, x, tool.Name, args, cred, res, s.d.Now().Sub(start))
	return resultToProto(res)
}

// resultToProto renders a CallToolResult.
func resultToProto(res toolcall.Result) (*apiv1.InvokeToolResponse, error) {
	out := &apiv1.InvokeToolResponse{IsError: res.IsError, Content: make([]*structpb.Value, 0, len(res.Content))}
	for _, c := range res.Content {
		v := &structpb.Value{}
		if err := protojson.Unmarshal(c, v); err != nil {
			return nil, apierr.Errorf(apierr.CodeBadGateway, "the tool answered a content block that is not JSON")
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

// MaxToolInput caps the redacted input a tool_action row records; past it
// the row holds the input's JSON text cut to this size, and
// inputTruncated.
const MaxToolInput = 64 << 10

// kindToolAction is the activity kind of a tool call's record.
const kindToolAction = "tool_action"

// recordToolAction appends the tool_action of a call to member's activity
// (when the broker keeps activity). Its input has the credential and every
// secret value member may use replaced by [REDACTED]. The call already
// happened, so a failure to record it is logged, not answered.
func (s *Service) recordToolAction(ctx context.Context, member string, x store.ToolSource, tool string, args map[string]any, cred *toolcall.Credential, res toolcall.Result, took time.Duration) {
	if s.d.Record == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var secrets []string
	if cred != nil {
		secrets = append(secrets, cred.Secret)
	}
	values, err := s.d.SecretValues(ctx, member)
	if err != nil {
		s.d.Log.WarnContext(ctx, "tool action not recorded: secrets unreadable", "member", member, "err", err)
		return
	}
	secrets = append(secrets, values...)
	row := map[string]any{
		"tool": x.Slug + "__" + tool, "phase": "result", "source": "broker", "toolSource": x.Slug,
		"success": !res.IsError, "durationMs": float64(took.Milliseconds()),
	}
	input, err := json.Marshal(s.d.Engine.Redact(args, secrets...))
	if err != nil {
		s.d.Log.WarnContext(ctx, "tool action not recorded", "member", member, "err", err)
		return
	}
	// Redaction can grow the input (a one-byte secret becomes ten bytes
	// wherever it occurs); a row never holds more than MaxToolInput of it.
	if len(input) > MaxToolInput {
		row["input"] = apierr.TruncateUTF8(string(input), MaxToolInput)
		row["inputTruncated"] = true
	} else {
		row["input"] = json.RawMessage(input)
	}
	data, err := json.Marshal(row)
	if err != nil {
		s.d.Log.WarnContext(ctx, "tool action not recorded", "member", member, "err", err)
		return
	}
	ev := store.ActivityEvent{Member: member, Kind: kindToolAction, TS: s.d.Now(), Data: data}
	if err := s.d.Record(ctx, ev); err != nil {
		s.d.Log.WarnContext(ctx, "tool action not recorded", "member", member, "err", err)
	}
}
