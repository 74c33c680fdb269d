package toolsources

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
)

// TestToolOptionalArgs: through the service and the real engine, a
// binding that uses an optional argument in its URL path is refused at
// save (400 binding.url naming it); one that uses it in the query, a
// header or the body is called without it, rendered empty; an argument
// the schema does not declare is still refused at call time when left out.
func TestToolOptionalArgs(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" X-Q="+r.Header.Get("X-Q")+" "+string(b))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return ""
		}
		return got[len(got)-1]
	}

	e := newEnv(t, false, nil)
	svc := realEngine(e)
	admin := e.as("admin")
	all := true
	_, err := svc.CreateToolSource(admin, &apiv1.CreateToolSourceRequest{Slug: "src", Kind: KindCustom, AllMembers: &all})
	require.NoError(t, err)
	schema, err := structpb.NewStruct(map[string]any{
		"type":       "object",
		"properties": map[string]any{"id": map[string]any{"type": "string"}, "q": map[string]any{"type": "string"}},
		"required":   []any{"id"},
	})
	require.NoError(t, err)
	empty, err := structpb.NewStruct(map[string]any{})
	require.NoError(t, err)

	put := func(name string, schema *structpb.Struct, b *apiv1.ToolBinding) error {
		_, err := svc.PutTool(admin, &apiv1.PutToolRequest{Slug: "src", Name: name, Description: "d", InputSchema: schema, Binding: b})
		return err
	}
	body, err := structpb.NewStruct(map[string]any{"q": "{{args.q}}", "s": "q={{args.q}}", "id": "{{args.id}}"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		schema  *structpb.Struct
		binding *apiv1.ToolBinding
		saveErr string // a 400 naming this field and "q"
		args    map[string]any
		want    string // the request the upstream saw
		callErr string // a 400 naming this
	}{
		{name: "del", schema: schema, binding: &apiv1.ToolBinding{Method: "DELETE", Url: up.URL + "/items/{{args.q}}"}, saveErr: "binding.url"},
		{name: "query", schema: schema, binding: &apiv1.ToolBinding{Method: "GET", Url: up.URL + "/items/{{args.id}}?q={{args.q}}"},
			args: map[string]any{"id": "7"}, want: "GET /items/7?q= X-Q= "},
		{name: "header", schema: schema, binding: &apiv1.ToolBinding{Method: "GET", Url: up.URL + "/h", Headers: map[string]string{"X-Q": "v{{args.q}}"}},
			args: map[string]any{"id": "7"}, want: "GET /h X-Q=v "},
		{name: "body", schema: schema, binding: &apiv1.ToolBinding{Method: "POST", Url: up.URL + "/b", Body: structpb.NewStructValue(body)},
			args: map[string]any{"id": "7"}, want: `POST /b X-Q= {"id":"7","q":"","s":"q="}`},
		{name: "undeclared", schema: empty, binding: &apiv1.ToolBinding{Method: "DELETE", Url: up.URL + "/items/{{args.q}}"},
			args: map[string]any{}, callErr: "args.q: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := put(tc.name, tc.schema, tc.binding)
			if tc.saveErr != "" {
				requireCode(t, err, apierr.CodeBadRequest)
				require.Contains(t, err.Error(), tc.saveErr)
				require.Contains(t, err.Error(), `"q"`)
				return
			}
			require.NoError(t, err)
			args, err := structpb.NewStruct(tc.args)
			require.NoError(t, err)
			mu.Lock()
			n := len(got)
			mu.Unlock()
			res, err := svc.InvokeTool(admin, &apiv1.InvokeToolRequest{Slug: "src", Name: tc.name, Args: args})
			if tc.callErr != "" {
				requireCode(t, err, apierr.CodeBadRequest)
				require.Contains(t, err.Error(), tc.callErr)
				mu.Lock()
				require.Len(t, got, n, "nothing was sent")
				mu.Unlock()
				return
			}
			require.NoError(t, err)
			require.False(t, res.GetIsError(), "%v", res)
			require.Equal(t, tc.want, last())
		})
	}
}
