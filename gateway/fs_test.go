package gateway

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/apierr"
	"svc/server/vfs"
)

func TestReadPath(t *testing.T) {
	tests := []struct {
		name    string
		escaped string
		want    string // "" when refused
	}{
		{name: "file", escaped: "alice/notes/a.txt", want: "/alice/notes/a.txt"},
		{name: "escaped space", escaped: "alice/a%20b.txt", want: "/alice/a b.txt"},
		{name: "escaped unicode", escaped: "alice/caf%C3%A9", want: "/alice/café"},
		{name: "literal percent name", escaped: "alice/%252e%252e", want: "/alice/%2e%2e"},
		{name: "home", escaped: "alice", want: "/alice"},
		{name: "empty", escaped: ""},
		{name: "trailing slash", escaped: "alice/dir/"},
		{name: "dot dot", escaped: "alice/../bob/x"},
		{name: "encoded dot dot", escaped: "alice/%2e%2e/bob/x"},
		{name: "upper encoded dot dot", escaped: "alice/%2E%2E/bob/x"},
		{name: "half encoded dot dot", escaped: "alice/.%2e/bob/x"},
		{name: "dot", escaped: "alice/./x"},
		{name: "encoded slash", escaped: "alice%2Fx"},
		{name: "encoded slash mid path", escaped: "alice/..%2Fbob%2Fx"},
		{name: "double slash", escaped: "alice//x"},
		{name: "leading slash", escaped: "/bob/x"},
		{name: "NUL", escaped: "alice/x%00"},
		{name: "backslash", escaped: "alice/..%5Cbob"},
		{name: "bad escape", escaped: "alice/%zz"},
		{name: "truncated escape", escaped: "alice/%2"},
		{name: "overlong segment", escaped: "alice/" + strings.Repeat("a", 256)},
		{name: "longest segment", escaped: "alice/" + strings.Repeat("a", 255), want: "/alice/" + strings.Repeat("a", 255)},
		{name: "overlong path", escaped: "alice/" + strings.Repeat("a/", 2100) + "x"},
		{name: "not a member name", escaped: "-x/y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPath(tc.escaped)
			if tc.want == "" {
				require.Error(t, err)
				require.Equal(t, 400, renderedStatus(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.String())
		})
	}
}

func FuzzReadPath(f *testing.F) {
	for _, s := range []string{
		"alice/a.txt", "", "alice/../bob", "alice/%2e%2e/bob", "alice%2Fbob", "alice//x", "alice/x%00",
		"alice/caf%C3%A9", "%2e", "alice/%E2%80%AEtxt.exe", "alice/\xff", "alice/x/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, escaped string) {
		vp, err := readPath(escaped)
		if err != nil {
			require.Equal(t, 400, renderedStatus(err))
			return
		}
		// The result is canonical and is exactly the decoded segments: no
		// segment was merged, split, dropped or resolved.
		again, err := vfs.Parse(vp.String())
		require.NoError(t, err)
		require.Equal(t, vp, again)
		parts := strings.Split(escaped, "/")
		require.Len(t, vp.Segments(), len(parts))
		for i, s := range parts {
			dec, err := url.PathUnescape(s)
			require.NoError(t, err)
			require.Equal(t, dec, vp.Segments()[i])
			require.NotContains(t, []string{"", ".", ".."}, dec)
		}
	})
}

// renderedStatus is the HTTP status err answers with.
func renderedStatus(err error) int { return apierr.Render(err).HTTPStatus }
