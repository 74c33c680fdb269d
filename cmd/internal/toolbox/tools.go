package toolbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/cmd/internal/client"
)

// tool is one static tool of the toolbox.
type tool struct {
	name   string
	desc   string
	gate   string // the permission leaf that lists it; "" lists it for all
	fields []field
	run    func(ctx context.Context, c *call) (string, error)
}

func (tl *tool) mcpTool() *mcp.Tool {
	return &mcp.Tool{Name: tl.name, Description: tl.desc, InputSchema: schema(tl.fields)}
}

// call is one invocation of a static tool.
type call struct {
	t    *Toolbox
	tool string
	a    *args
}

// Permission leaves that gate tools in tools/list.
const (
	permMembersManage       = "members.manage"
	permObjectivesCreate    = "objectives.create"
	permToolsManage         = "tools.manage"
	permSecretsManage       = "secrets.manage"
	permNotificationsManage = "notifications.manage"
)

// visibleTools are the names of tools listed for a caller holding perms:
// a tool with a gate is left out unless its leaf is held. The broker
// refuses them anyway; hiding keeps the agent's list to what it can use.
func visibleTools(tools []*tool, perms map[string]bool) []string {
	var out []string
	for _, tl := range tools {
		if tl.gate == "" || perms[tl.gate] {
			out = append(out, tl.name)
		}
	}
	return out
}

// authorityTools answer a broker 403 with "<TOOL>: requires director or
// manager authority": the objectives tools gated on a permission or on
// being the originator or assignee.
var authorityTools = []string{"objectives_create", "objectives_cancel", "objectives_watchers", "objectives_reassign", "objectives_update"}

// do is a broker call whose answer is the tool's text: the broker's JSON
// as it came, or "ok" for an empty answer (a 204).
func (c *call) do(ctx context.Context, method, path string, in any) (string, error) {
	raw, err := c.t.do(ctx, method, path, in)
	return c.text(raw, err)
}

func (c *call) text(raw []byte, err error) (string, error) {
	if err != nil {
		var be *brokerError
		if errors.As(err, &be) && be.status == http.StatusForbidden && slices.Contains(authorityTools, c.tool) {
			return "", errorf("%s: requires director or manager authority", c.tool)
		}
		return "", err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return "ok", nil
	}
	return string(raw), nil
}

// body builds a JSON request body from the named arguments that are
// present, renamed where the broker's field differs (from:to).
func (c *call) body(names ...string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, n := range names {
		from, to, ok := strings.Cut(n, ":")
		if !ok {
			to = from
		}
		if c.a.has(from) {
			out[to] = c.a.raw(from)
		}
	}
	return out
}

func seg(s string) string { return url.PathEscape(s) }

// Fields shared by several tools.
var (
	fBody        = field{name: "body", typ: tString, required: true, desc: "Message text."}
	fTitle       = field{name: "title", typ: tString, desc: "Optional title."}
	fLevel       = field{name: "level", typ: tString, enum: levels, desc: "Log level; default info."}
	fAttachments = field{name: "attachments", typ: tStrings, desc: "Virtual file paths to attach; each is checked first."}
	fID          = field{name: "id", typ: tString, required: true, desc: "Objective id."}
	fSlug        = field{name: "slug", typ: tString, required: true, desc: "Slug."}
	levels       = []string{"debug", "info", "notice", "warning", "error", "critical"}
)

func staticTools() []*tool {
	tools := []*tool{
		{name: "roster", desc: "List the team: one line per member with role, privileges and whether they are connected.", run: runRoster},
		{name: "broadcast", desc: "Post a message to the general channel (everyone).",
			fields: []field{fBody, fTitle, fLevel, fAttachments}, run: runBroadcast},
		{name: "send", desc: "Send a direct message to a member.",
			fields: []field{{name: "to", typ: tString, required: true, desc: "Member name."}, fBody, fTitle, fLevel, fAttachments}, run: runSend},
		{name: "channels_list", desc: "List channels, with whether you joined each.", run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/channels", nil)
		}},
		{name: "channels_post", desc: "Post a message to a channel you are a member of.",
			fields: []field{{name: "channel", typ: tString, required: true, desc: "Channel slug (without #)."}, fBody, fTitle, fLevel, fAttachments}, run: runChannelsPost},
		{name: "recent", desc: "Recent messages newest first: a DM thread (with), a channel (channel slug) or, with neither, general.",
			fields: []field{{name: "with", typ: tString, desc: "Member name of a DM thread."}, {name: "channel", typ: tString, desc: "Channel slug."},
				{name: "limit", typ: tInteger, desc: "How many; default 50, at most 500."}}, run: runRecent},
		{name: "objectives_list", desc: "List the objectives assigned to you.",
			fields: []field{{name: "status", typ: tString, enum: []string{"active", "blocked", "done", "cancelled"}, desc: "Only this status."}}, run: runObjectivesList},
		{name: "objectives_view", desc: "Show an objective with its audit log.", fields: []field{fID}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/objectives/"+seg(c.a.str("id")), nil)
		}},
		{name: "objectives_update", desc: "Block (with a reason) or unblock an objective you are assigned.",
			fields: []field{fID, {name: "status", typ: tString, required: true, enum: []string{"active", "blocked"}, desc: "active or blocked."},
				{name: "blockReason", typ: tString, desc: "Why; required when blocked."}}, run: runObjectivesUpdate},
		{name: "objectives_discuss", desc: "Post to an objective's discussion thread.",
			fields: []field{fID, fBody, fTitle, fAttachments}, run: func(ctx context.Context, c *call) (string, error) {
				if err := c.checkAttachments(ctx); err != nil {
					return "", err
				}
				return c.do(ctx, http.MethodPost, "/objectives/"+seg(c.a.str("id"))+"/discuss", c.body("body", "title", "attachments"))
			}},
		{name: "objectives_complete", desc: "Complete an objective you are assigned, with its result.",
			fields: []field{fID, {name: "result", typ: tString, required: true, desc: "What was done; how the outcome is met."}}, run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/objectives/"+seg(c.a.str("id"))+"/complete", c.body("result"))
			}},
		{name: "objectives_create", desc: "Create an objective and assign it.", gate: permObjectivesCreate,
			fields: []field{{name: "title", typ: tString, required: true}, {name: "outcome", typ: tString, required: true, desc: "The verifiable definition of done."},
				{name: "assignee", typ: tString, required: true, desc: "Member name."}, {name: "body", typ: tString, desc: "Longer context."},
				{name: "watchers", typ: tStrings, desc: "Member names."}, fAttachments}, run: func(ctx context.Context, c *call) (string, error) {
				if err := c.checkAttachments(ctx); err != nil {
					return "", err
				}
				return c.do(ctx, http.MethodPost, "/objectives", c.body("title", "outcome", "assignee", "body", "watchers", "attachments"))
			}},
		{name: "objectives_cancel", desc: "Cancel an objective (its originator, or with objectives.cancel).",
			fields: []field{fID, {name: "reason", typ: tString}}, run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/objectives/"+seg(c.a.str("id"))+"/cancel", c.body("reason"))
			}},
		{name: "objectives_watchers", desc: "Add or remove watchers of an objective (its originator, or with objectives.watch).",
			fields: []field{fID, {name: "add", typ: tStrings, desc: "Member names."}, {name: "remove", typ: tStrings, desc: "Member names."}}, run: func(ctx context.Context, c *call) (string, error) {
				if len(c.a.strs("add")) == 0 && len(c.a.strs("remove")) == 0 {
					return "", errorf("%s: add or remove is required", c.tool)
				}
				return c.do(ctx, http.MethodPatch, "/objectives/"+seg(c.a.str("id"))+"/watchers", c.body("add", "remove"))
			}},
		{name: "objectives_reassign", desc: "Reassign an objective to another member.", gate: permMembersManage,
			fields: []field{fID, {name: "to", typ: tString, required: true, desc: "Member name."}, {name: "note", typ: tString}}, run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/objectives/"+seg(c.a.str("id"))+"/reassign", c.body("to", "note"))
			}},
		{name: "fs_ls", desc: "List a directory (default your home).", fields: []field{{name: "path", typ: tString, desc: "Absolute virtual path."}}, run: func(ctx context.Context, c *call) (string, error) {
			p := c.a.str("path")
			if p == "" {
				p = "/" + c.t.Self()
			}
			return c.do(ctx, http.MethodGet, "/fs/ls?"+url.Values{"path": {p}}.Encode(), nil)
		}},
		{name: "fs_stat", desc: "Describe a file or directory.", fields: []field{fPath}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/fs/stat?"+url.Values{"path": {c.a.str("path")}}.Encode(), nil)
		}},
		{name: "fs_read", desc: "Read a file: text types as text, others as base64.", fields: []field{fPath}, run: runFsRead},
		{name: "fs_write", desc: "Write a file from text or base64; parents are created.",
			fields: []field{fPath, {name: "mimeType", typ: tString, required: true, desc: "The file's MIME type."},
				{name: "text", typ: tString, desc: "Content as UTF-8 text."}, {name: "base64", typ: tString, desc: "Content as base64."},
				{name: "collide", typ: tString, enum: []string{"error", "suffix", "overwrite"}, desc: "When the path exists; default error."}}, run: runFsWrite},
		{name: "fs_mkdir", desc: "Make a directory.", fields: []field{fPath, {name: "recursive", typ: tBoolean, desc: "Create parents; default false."}}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodPost, "/fs/mkdir", map[string]any{"path": c.a.str("path"), "recursive": c.a.boolean("recursive")})
		}},
		{name: "fs_rm", desc: "Remove a file or directory.", fields: []field{fPath, {name: "recursive", typ: tBoolean, desc: "Remove a directory's content; default false."}}, run: func(ctx context.Context, c *call) (string, error) {
			q := url.Values{"path": {c.a.str("path")}, "recursive": {strconv.FormatBool(c.a.boolean("recursive"))}}
			return c.do(ctx, http.MethodDelete, "/fs/rm?"+q.Encode(), nil)
		}},
		{name: "fs_mv", desc: "Move or rename one file.", fields: []field{{name: "from", typ: tString, required: true}, {name: "to", typ: tString, required: true}}, run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodPost, "/fs/mv", c.body("from", "to"))
		}},
		{name: "fs_shared", desc: "List files shared with you through messages and objectives.", run: func(ctx context.Context, c *call) (string, error) {
			return c.do(ctx, http.MethodGet, "/fs/shared", nil)
		}},
	}
	tools = append(tools, toolSourceTools()...)
	tools = append(tools, secretTools()...)
	tools = append(tools, approvalTools()...)
	return append(tools, notificationTools()...)
}

var fPath = field{name: "path", typ: tString, required: true, desc: "Absolute virtual path."}

func runRoster(ctx context.Context, c *call) (string, error) {
	var r rosterAnswer
	if err := c.t.doInto(ctx, http.MethodGet, "/roster", nil, &r); err != nil {
		return c.text(nil, err)
	}
	return formatRoster(c.t.Self(), r), nil
}

// checkAttachments stats each attachment in order: the first that is
// missing or a directory fails the call before anything is sent.
func (c *call) checkAttachments(ctx context.Context) error {
	for _, p := range c.a.strs("attachments") {
		raw, err := c.t.do(ctx, http.MethodGet, "/fs/stat?"+url.Values{"path": {p}}.Encode(), nil)
		var be *brokerError
		if errors.As(err, &be) && be.status == http.StatusNotFound {
			return errorf("attachment not found: %s", clip(p, 1024))
		}
		if err != nil {
			return err
		}
		var st struct {
			Entry struct {
				Kind string `json:"kind"`
			} `json:"entry"`
		}
		if json.Unmarshal(raw, &st) != nil {
			return errorf("the broker's stat of %s is not its JSON", clip(p, 1024))
		}
		if st.Entry.Kind == "dir" {
			return errorf("attachment is a directory: %s", clip(p, 1024))
		}
	}
	return nil
}

func (c *call) push(ctx context.Context, extra map[string]any) (string, error) {
	if err := c.checkAttachments(ctx); err != nil {
		return "", err
	}
	req := map[string]any{}
	for k, v := range c.body("body", "title", "level", "attachments") {
		req[k] = v
	}
	for k, v := range extra {
		req[k] = v
	}
	return c.do(ctx, http.MethodPost, "/push", req)
}

func runBroadcast(ctx context.Context, c *call) (string, error) { return c.push(ctx, nil) }

func runSend(ctx context.Context, c *call) (string, error) {
	return c.push(ctx, map[string]any{"to": c.a.str("to")})
}

// channel is GET /channels/:slug.
type channel struct {
	Channel struct {
		ID   string `json:"id"`
		Slug string `json:"slug"`
	} `json:"channel"`
	Members []struct {
		Member string `json:"member"`
	} `json:"members"`
}

func (c *call) channel(ctx context.Context, slug string) (*channel, error) {
	var ch channel
	if err := c.t.doInto(ctx, http.MethodGet, "/channels/"+seg(slug), nil, &ch); err != nil {
		return nil, err
	}
	if ch.Channel.ID == "" {
		return nil, errorf("the broker named no id for #%s", clip(slug, 64))
	}
	return &ch, nil
}

func runChannelsPost(ctx context.Context, c *call) (string, error) {
	slug := strings.TrimPrefix(c.a.str("channel"), "#")
	ch, err := c.channel(ctx, slug)
	if err != nil {
		return "", err
	}
	self := c.t.Self()
	if !slices.ContainsFunc(ch.Members, func(m struct {
		Member string `json:"member"`
	}) bool {
		return m.Member == self
	}) {
		return "", errorf("you are not a member of #%s", clip(slug, 64))
	}
	return c.push(ctx, map[string]any{"data": map[string]string{"thread": "chan:" + ch.Channel.ID}})
}

// History page bounds (docs/MCP.md, recent).
const (
	defaultLimit = 50
	maxLimit     = 500
)

func runRecent(ctx context.Context, c *call) (string, error) {
	with, chSlug := c.a.str("with"), strings.TrimPrefix(c.a.str("channel"), "#")
	if with != "" && chSlug != "" {
		return "", errorf("%s: give with or channel, not both", c.tool)
	}
	limit := int64(defaultLimit)
	if c.a.has("limit") {
		limit = c.a.integer("limit")
		if limit < 1 {
			return "", errorf("%s: limit must be at least 1", c.tool)
		}
		limit = min(limit, maxLimit)
	}
	q := url.Values{"limit": {strconv.FormatInt(limit, 10)}}
	switch {
	case with != "":
		q.Set("with", with)
	case chSlug != "":
		ch, err := c.channel(ctx, chSlug)
		if err != nil {
			return "", err
		}
		q.Set("channel", ch.Channel.ID)
	}
	return c.do(ctx, http.MethodGet, "/history?"+q.Encode(), nil)
}

func runObjectivesList(ctx context.Context, c *call) (string, error) {
	q := url.Values{"assignee": {c.t.Self()}}
	if s := c.a.str("status"); s != "" {
		q.Set("status", s)
	}
	return c.do(ctx, http.MethodGet, "/objectives?"+q.Encode(), nil)
}

func runObjectivesUpdate(ctx context.Context, c *call) (string, error) {
	status := c.a.str("status")
	req := map[string]any{"status": status}
	if status == "blocked" {
		reason := c.a.str("blockReason")
		if reason == "" {
			return "", errorf("%s: blockReason is required", c.tool)
		}
		req["blockReason"] = reason
	}
	return c.do(ctx, http.MethodPatch, "/objectives/"+seg(c.a.str("id")), req)
}

// isTextType says whether a MIME type is returned by fs_read as text
// (text/*, application/json, application/xml: docs/MCP.md, fs_read).
func isTextType(mt string) bool {
	mt = strings.ToLower(strings.TrimSpace(mt))
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "application/xml"
}

// fsReadPath is /fs/read/<path> with each segment escaped on its own.
func fsReadPath(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/fs/read/" + strings.Join(segs, "/")
}

func runFsRead(ctx context.Context, c *call) (string, error) {
	p := c.a.str("path")
	if !strings.HasPrefix(p, "/") {
		return "", errorf("%s: path must be absolute", c.tool)
	}
	resp, err := c.t.b.DoRaw(ctx, http.MethodGet, fsReadPath(p), nil, "")
	if err != nil {
		return "", toolError(client.Describe(err, c.t.url))
	}
	if resp.Status/100 != 2 {
		return "", &brokerError{status: resp.Status, body: resp.Body}
	}
	// Text types that are not valid UTF-8 still go as base64: the text
	// block must be UTF-8.
	if isTextType(resp.ContentType) && utf8.Valid(resp.Body) {
		return string(resp.Body), nil
	}
	return base64.StdEncoding.EncodeToString(resp.Body), nil
}

func runFsWrite(ctx context.Context, c *call) (string, error) {
	hasText, hasB64 := c.a.has("text"), c.a.has("base64")
	switch {
	case hasText && hasB64:
		return "", errorf("%s: give text or base64, not both", c.tool)
	case !hasText && !hasB64:
		return "", errorf("%s: text or base64 is required", c.tool)
	}
	var data []byte
	if hasText {
		data = []byte(c.a.str("text"))
	} else {
		var err error
		if data, err = base64.StdEncoding.DecodeString(c.a.str("base64")); err != nil {
			return "", errorf("%s: base64 is not valid base64", c.tool)
		}
	}
	collide := c.a.str("collide")
	if collide == "" {
		collide = "error"
	}
	q := url.Values{"path": {c.a.str("path")}, "collide": {collide}}
	raw, err := c.t.doRaw(ctx, http.MethodPost, "/fs/write?"+q.Encode(), bytes.NewReader(data), c.a.str("mimeType"))
	return c.text(raw, err)
}
