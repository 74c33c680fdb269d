package toolbox

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"svc/cmd/internal/client"
)

func TestFormatRoster(t *testing.T) {
	const roster = `{"teammates":[
		{"name":"alice","role":{"title":"Lead"},"permissions":["members.manage","objectives.create"]},
		{"name":"bob","role":{"title":"Reviewer"},"permissions":[]},
		{"name":"carol","role":{"title":""},"permissions":["objectives.create"]},
		{"name":"dave","role":null,"permissions":["members.manage"]},
		{"name":"eve","role":{"title":"Ops\nlead"},"permissions":["tools.manage"]}
	],"connected":[{"name":"alice","connected":2},{"name":"carol","connected":1},{"name":"bob","connected":0}]}`
	var r rosterAnswer
	require.NoError(t, json.Unmarshal([]byte(roster), &r))
	tests := []struct {
		name string
		self string
		want []string
	}{
		{name: "as alice", self: "alice", want: []string{
			"- alice (you) [Lead] [admin operator] connected=2",
			"- bob [Reviewer] offline",
			"- carol [operator] connected=1",
			"- dave [admin] offline",
			"- eve [Ops lead] offline",
		}},
		{name: "as bob", self: "bob", want: []string{
			"- alice [Lead] [admin operator] connected=2",
			"- bob (you) [Reviewer] offline",
			"- carol [operator] connected=1",
			"- dave [admin] offline",
			"- eve [Ops lead] offline",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, strings.Join(tc.want, "\n"), formatRoster(tc.self, r))
		})
	}
	require.Equal(t, "(no members)", formatRoster("x", rosterAnswer{}))
}

func TestParseArgs(t *testing.T) {
	fields := []field{
		{name: "id", typ: tString, required: true},
		{name: "status", typ: tString, required: true, enum: []string{"active", "blocked"}},
		{name: "n", typ: tInteger},
		{name: "on", typ: tBoolean},
		{name: "cfg", typ: tObject},
		{name: "tags", typ: tStrings},
		{name: "rules", typ: tObjects},
	}
	tests := []struct {
		name, raw, wantErr string
	}{
		{name: "ok", raw: `{"id":"1","status":"active","n":3,"on":true,"cfg":{},"tags":["a"],"rules":[{}]}`},
		{name: "nulls are absent", raw: `{"id":"1","status":"blocked","n":null,"tags":null}`},
		{name: "missing first required", raw: `{}`, wantErr: "t: id is required"},
		{name: "empty required string", raw: `{"id":"","status":"active"}`, wantErr: "t: id is required"},
		{name: "null required", raw: `{"id":null,"status":"active"}`, wantErr: "t: id is required"},
		{name: "no arguments at all", raw: ``, wantErr: "t: id is required"},
		{name: "json null", raw: `null`, wantErr: "t: id is required"},
		{name: "enum", raw: `{"id":"1","status":"done"}`, wantErr: "t: invalid status 'done'"},
		{name: "enum value clipped and one line", raw: `{"id":"1","status":"a\nb"}`, wantErr: "t: invalid status 'a b'"},
		{name: "wrong string type", raw: `{"id":1,"status":"active"}`, wantErr: "t: id must be a string"},
		{name: "fractional integer", raw: `{"id":"1","status":"active","n":1.5}`, wantErr: "t: n must be an integer"},
		{name: "string boolean", raw: `{"id":"1","status":"active","on":"yes"}`, wantErr: "t: on must be true or false"},
		{name: "array object", raw: `{"id":"1","status":"active","cfg":[]}`, wantErr: "t: cfg must be an object"},
		{name: "mixed list", raw: `{"id":"1","status":"active","tags":["a",1]}`, wantErr: "t: tags must be a list of strings"},
		{name: "list of non-objects", raw: `{"id":"1","status":"active","rules":[1]}`, wantErr: "t: rules must be a list of objects"},
		{name: "null in object list", raw: `{"id":"1","status":"active","rules":[null]}`, wantErr: "t: rules must be a list of objects"},
		{name: "too many items", raw: `{"id":"1","status":"active","tags":[` + strings.Repeat(`"a",`, maxListItems) + `"a"]}`, wantErr: "t: tags has more than 256 items"},
		{name: "unknown field", raw: `{"id":"1","status":"active","zz":1,"aa":2}`, wantErr: "t: unknown field 'aa'"},
		{name: "not an object", raw: `[1]`, wantErr: "t: arguments must be a JSON object"},
		{name: "garbage", raw: `{"id":`, wantErr: "t: arguments must be a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseArgs("t", fields, json.RawMessage(tc.raw))
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "1", a.str("id"))
		})
	}
	_, err := parseArgs("t", fields, make(json.RawMessage, maxArgsBytes+1))
	require.EqualError(t, err, "t: arguments are larger than 50331648 bytes")
}

func TestSchemaFromFields(t *testing.T) {
	s := schema([]field{{name: "id", typ: tString, required: true}, {name: "level", typ: tString, enum: levels}, {name: "l", typ: tStrings}})
	enc, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object","additionalProperties":false,"required":["id"],"properties":{
		"id":{"type":"string"},"level":{"type":"string","enum":["debug","info","notice","warning","error","critical"]},
		"l":{"type":"array","items":{"type":"string"}}}}`, string(enc))
	// Every static tool's schema is an object listing its required fields.
	for _, tl := range staticTools() {
		var req []string
		for _, f := range tl.fields {
			if f.required {
				req = append(req, f.name)
			}
		}
		got := schema(tl.fields)["required"].([]string)
		require.Equal(t, len(req), len(got), tl.name)
	}
}

func TestVisibleTools(t *testing.T) {
	all := staticTools()
	gated := func(names []string, prefix string) int {
		n := 0
		for _, s := range names {
			if strings.HasPrefix(s, prefix) {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name    string
		perms   []string
		has     []string
		hasNot  []string
		sources int
		secrets int
		notifs  int
	}{
		{name: "none", has: []string{"roster", "objectives_cancel", "objectives_watchers", "fs_read"},
			hasNot: []string{"objectives_create", "objectives_reassign"}},
		{name: "operator", perms: []string{"objectives.create", "objectives.cancel", "objectives.watch"},
			has: []string{"objectives_create"}, hasNot: []string{"objectives_reassign"}},
		{name: "manager", perms: []string{"members.manage"}, has: []string{"objectives_reassign"}, hasNot: []string{"objectives_create"}},
		{name: "tools", perms: []string{"tools.manage"}, sources: 11},
		{name: "secrets", perms: []string{"secrets.manage"}, secrets: 8},
		{name: "notifications", perms: []string{"notifications.manage"}, notifs: 13},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			perms := map[string]bool{}
			for _, p := range tc.perms {
				perms[p] = true
			}
			got := visibleTools(all, perms)
			for _, n := range tc.has {
				require.Contains(t, got, n)
			}
			for _, n := range tc.hasNot {
				require.NotContains(t, got, n)
			}
			require.Equal(t, tc.sources, gated(got, "tool_sources_"))
			require.Equal(t, tc.secrets, gated(got, "secrets_"))
			require.Equal(t, tc.notifs, gated(got, "notifications_"))
		})
	}
}

func TestEndpointRequestFlattening(t *testing.T) {
	var create *tool
	for _, tl := range staticTools() {
		if tl.name == "notifications_create" {
			create = tl
		}
	}
	require.NotNil(t, create)
	tests := []struct {
		name, raw, want, wantErr string
	}{
		{name: "everything",
			raw: `{"slug":"gh","targets":["@alice"," #ops "],"authKind":"hmac-sha256","headerName":"X-Sig","prefix":"v1=",
				"ifOffline":"queue","ifBusy":"wait","debounceMs":250,"debounceMax":5,"queueTtlMs":60000,"maxWaitMs":1000,"level":"error",
				"authProfile":"p","template":"{{payload.a}}","dedupeHeader":"X-Id","enabled":false,"displayName":"GH","filters":[{"path":"a","op":"eq","value":1}]}`,
			want: `{"targets":[{"member":"alice"},{"channel":"ops"}],"auth":{"kind":"hmac-sha256","headerName":"X-Sig","prefix":"v1="},
				"policy":{"ifOffline":"queue","ifBusy":"wait","debounceMs":250,"debounceMax":5,"queueTtlMs":60000,"maxWaitMs":1000},
				"level":"error","authProfile":"p","template":"{{payload.a}}","dedupeHeader":"X-Id","enabled":false,"displayName":"GH",
				"filters":[{"path":"a","op":"eq","value":1}]}`},
		{name: "minimal", raw: `{"slug":"gh","targets":["@bob"]}`, want: `{"targets":[{"member":"bob"}]}`},
		{name: "header only auth", raw: `{"slug":"gh","targets":["@bob"],"headerName":"X-T"}`, want: `{"targets":[{"member":"bob"}],"auth":{"headerName":"X-T"}}`},
		{name: "bare name", raw: `{"slug":"gh","targets":["bob"]}`, wantErr: "notifications_create: invalid target 'bob' (want @member or #channel)"},
		{name: "empty member", raw: `{"slug":"gh","targets":["@"]}`, wantErr: "notifications_create: invalid target '@' (want @member or #channel)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseArgs(create.name, create.fields, json.RawMessage(tc.raw))
			require.NoError(t, err)
			req, err := endpointRequest(&call{tool: create.name, a: a})
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			enc, err := json.Marshal(req)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(enc))
		})
	}
}

func TestIsTextType(t *testing.T) {
	for mt, want := range map[string]bool{
		"text/plain": true, "text/markdown; charset=utf-8": true, "application/json": true, "APPLICATION/XML": true,
		"application/octet-stream": false, "image/png": false, "application/jsonx": false, "": false,
	} {
		require.Equal(t, want, isTextType(mt), mt)
	}
	require.Equal(t, "/fs/read/alice/a%20b/c%3Fd%23", fsReadPath("/alice/a b/c?d#"))
}

// fakeBroker answers REST calls from a table and records them.
type fakeBroker struct {
	mu    sync.Mutex
	calls []string
	h     func(method, path string, body []byte) (int, string)
}

func (f *fakeBroker) DoRaw(_ context.Context, method, path string, body io.Reader, _ string) (*client.RawResponse, error) {
	var b []byte
	if body != nil {
		b, _ = io.ReadAll(body)
	}
	f.mu.Lock()
	f.calls = append(f.calls, method+" "+path)
	f.mu.Unlock()
	st, out := f.h(method, path, b)
	return &client.RawResponse{Status: st, ContentType: "application/json", Body: []byte(out)}, nil
}

func (f *fakeBroker) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func TestHandlersAgainstFakeBroker(t *testing.T) {
	perms := `[]`
	fb := &fakeBroker{}
	fb.h = func(method, path string, body []byte) (int, string) {
		switch {
		case path == "/briefing":
			return 200, `{"member":{"name":"bob","permissions":` + perms + `}}`
		case path == "/tool-sources":
			return 200, `{"sources":[{"slug":"up","enabled":true,"bound":true},{"slug":"off","enabled":false,"allMembers":true},{"slug":"all","enabled":true,"allMembers":true}]}`
		case path == "/tool-sources/up":
			return 200, `{"tools":[{"name":"echo","description":"E","inputSchema":{"properties":{}}},{"name":"bad name!","description":"x"}]}`
		case path == "/tool-sources/all":
			return 404, `{"error":"not_found","message":"gone"}`
		case strings.HasPrefix(path, "/fs/stat?path=%2Fbob%2Fd"):
			return 200, `{"entry":{"kind":"dir"}}`
		case strings.HasPrefix(path, "/fs/stat?path=%2Fbob%2Ff"):
			return 200, `{"entry":{"kind":"file"}}`
		case strings.HasPrefix(path, "/fs/stat"):
			return 404, `{"error":"not_found","message":"no such file"}`
		case path == "/objectives/o1/cancel":
			return 403, `{"error":"forbidden","message":"no"}`
		case path == "/channels/ops":
			return 200, `{"channel":{"id":"c1","slug":"ops"},"members":[{"member":"alice","role":"admin"}]}`
		case path == "/tool-sources/up/tools/echo/invoke":
			return 200, `{"content":[{"type":"text","text":"echoed ` + strings.ReplaceAll(string(body), `"`, `'`) + `"}],"isError":false}`
		case path == "/push":
			return 200, `{"delivery":{"live":0,"targets":1},"message":{"id":"m1"}}`
		case strings.HasPrefix(path, "/history"):
			return 200, `{"messages":[]}`
		}
		return 500, `{"error":"internal","message":"unexpected ` + path + `"}`
	}
	ctx := context.Background()
	tb, err := New(ctx, fb, Options{URL: "http://x"})
	require.NoError(t, err)
	require.Equal(t, "bob", tb.Self())
	require.True(t, tb.registered("up__echo"))
	require.False(t, tb.registered("up__bad name!"), "names outside the MCP alphabet are skipped")
	require.False(t, tb.registered("secrets_create"))

	run := func(name, raw string) (string, bool) {
		res := tb.runStatic(ctx, tb.static[name], json.RawMessage(raw))
		require.Len(t, res.Content, 1)
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	tests := []struct {
		name, tool, raw, want string
		isErr                 bool
	}{
		{name: "first missing attachment", tool: "send", raw: `{"to":"x","body":"b","attachments":["/bob/f","/bob/m","/bob/d"]}`, want: "attachment not found: /bob/m", isErr: true},
		{name: "directory attachment", tool: "broadcast", raw: `{"body":"b","attachments":["/bob/d","/bob/m"]}`, want: "attachment is a directory: /bob/d", isErr: true},
		{name: "attachments ok", tool: "broadcast", raw: `{"body":"b","attachments":["/bob/f"]}`, want: `{"delivery":{"live":0,"targets":1},"message":{"id":"m1"}}`},
		{name: "authority", tool: "objectives_cancel", raw: `{"id":"o1"}`, want: "objectives_cancel: requires director or manager authority", isErr: true},
		{name: "not a channel member", tool: "channels_post", raw: `{"channel":"#ops","body":"b"}`, want: "you are not a member of #ops", isErr: true},
		{name: "broker error is raw", tool: "secrets_list", raw: `{}`, want: `broker error 500: {"error":"internal","message":"unexpected /secrets"}`, isErr: true},
		{name: "recent resolves a channel", tool: "recent", raw: `{"channel":"ops","limit":900}`, want: `{"messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, isErr := run(tc.tool, tc.raw)
			require.Equal(t, tc.isErr, isErr)
			require.Equal(t, tc.want, text)
		})
	}
	require.Contains(t, fb.seen(), "GET /history?channel=c1&limit=500")
	require.NotContains(t, fb.seen(), "POST /objectives", "nothing is sent after a refused attachment")

	res, err := tb.boundHandler("up", "echo")(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "up__echo", Arguments: json.RawMessage(`{"q":1}`)}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, `echoed {'args':{'q':1}}`, res.Content[0].(*mcp.TextContent).Text)
	res, err = tb.boundHandler("up", "echo")(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "up__echo", Arguments: json.RawMessage(`[1]`)}})
	require.NoError(t, err)
	require.True(t, res.IsError)

	// Gaining a permission adds its tools on the next recompute.
	perms = `["secrets.manage"]`
	require.NoError(t, tb.Recompute(ctx))
	require.True(t, tb.registered("secrets_create"))
	perms = `[]`
	require.NoError(t, tb.Recompute(ctx))
	require.False(t, tb.registered("secrets_create"))
}

func TestObjectSchema(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "kept", in: `{"type":"object","properties":{"a":{}}}`, want: `{"type":"object","properties":{"a":{}}}`},
		{name: "no type", in: `{"properties":{}}`, want: `{"type":"object","properties":{}}`},
		{name: "not an object", in: `[1]`, want: `{"type":"object"}`},
		{name: "absent", in: ``, want: `{"type":"object"}`},
		{name: "null", in: `null`, want: `{"type":"object"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.JSONEq(t, tc.want, string(objectSchema(json.RawMessage(tc.in))))
		})
	}
}
