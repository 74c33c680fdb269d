package vfs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseValid(t *testing.T) {
	long := strings.Repeat("n", MaxNameLen)
	maxPath, last := longestPath()
	require.Len(t, maxPath, MaxPathLen)

	tests := []struct {
		name string
		in   string
		want string
		home string
		base string
	}{
		{"root", "/", "/", "", ""},
		{"home", "/alice", "/alice", "alice", "alice"},
		{"home trailing slash", "/alice/", "/alice", "alice", "alice"},
		{"file", "/alice/docs/a.txt", "/alice/docs/a.txt", "alice", "a.txt"},
		{"dir trailing slash", "/alice/docs/", "/alice/docs", "alice", "docs"},
		{"member name chars", "/A.b_c-9/x", "/A.b_c-9/x", "A.b_c-9", "x"},
		{"encoded dots are a name", "/alice/%2e%2e", "/alice/%2e%2e", "alice", "%2e%2e"},
		{"encoded slash is a name", "/alice/a%2Fb", "/alice/a%2Fb", "alice", "a%2Fb"},
		{"three dots", "/alice/...", "/alice/...", "alice", "..."},
		{"dot prefix", "/alice/.env", "/alice/.env", "alice", ".env"},
		{"dots inside", "/alice/a..b", "/alice/a..b", "alice", "a..b"},
		{"unicode", "/alice/日本語 ü.txt", "/alice/日本語 ü.txt", "alice", "日本語 ü.txt"},
		{"spaces and symbols", "/alice/ a b ?#&=+ ", "/alice/ a b ?#&=+ ", "alice", " a b ?#&=+ "},
		{"name at limit", "/alice/" + long, "/alice/" + long, "alice", long},
		{"path at limit", maxPath, maxPath, "alice", last},
		{"path at limit with trailing slash", maxPath + "/", maxPath, "alice", last},
		{"home of 64", "/" + strings.Repeat("a", 64), "/" + strings.Repeat("a", 64), strings.Repeat("a", 64), strings.Repeat("a", 64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, p.String())
			require.Equal(t, tc.home, p.Home())
			require.Equal(t, tc.base, p.Base())
			again, err := Parse(p.String())
			require.NoError(t, err)
			require.Equal(t, p, again)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"relative", "alice/x"},
		{"relative dot", "./alice"},
		{"double slash root", "//"},
		{"double slash", "/alice//x"},
		{"leading double slash", "//alice"},
		{"two trailing slashes", "/alice/x//"},
		{"dot dot", "/alice/.."},
		{"dot dot escape", "/alice/../bob/secret"},
		{"dot dot first", "/../etc/passwd"},
		{"dot dot trailing slash", "/alice/../"},
		{"dot", "/alice/./x"},
		{"dot home", "/."},
		{"dot dot home", "/.."},
		{"NUL", "/alice/a\x00b"},
		{"NUL at end", "/alice/a\x00"},
		{"newline", "/alice/a\nb"},
		{"tab", "/alice/a\tb"},
		{"DEL", "/alice/a\x7fb"},
		{"C1 control", "/alice/a\u0085b"},
		{"escape", "/alice/\x1b[31m"},
		{"backslash", `/alice/a\b`},
		{"backslash dot dot", `/alice/..\bob`},
		{"right-to-left override", "/alice/cod\u202Etxt.exe"},
		{"isolate", "/alice/a\u2066b"},
		{"invalid UTF-8", "/alice/a\xffb"},
		{"overlong UTF-8 slash", "/alice/a\xc0\xafb"},
		{"overlong UTF-8 dot", "/alice/\xc0\xae\xc0\xae"},
		{"surrogate", "/alice/\xed\xa0\x80"},
		{"name too long", "/alice/" + strings.Repeat("n", MaxNameLen+1)},
		{"path too long", "/alice" + strings.Repeat("/"+strings.Repeat("n", 200), 21)},
		{"path one too long", func() string { p, _ := longestPath(); return p + "m" }()},
		{"path one too long with trailing slash", func() string { p, _ := longestPath(); return p + "m/" }()},
		{"home not a member name", "/.alice/x"},
		{"home with space", "/al ice"},
		{"home with unicode", "/dörte/x"},
		{"home too long", "/" + strings.Repeat("a", 65)},
		{"home starts with dash", "/-alice"},
		{"home starts with underscore", "/_alice"},
		{"home percent", "/%61lice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			require.ErrorIs(t, err, ErrInvalidPath)
			var pe *PathError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.in, pe.Path)
			require.NotEmpty(t, pe.Reason)
			require.True(t, p.IsZero())
		})
	}
}

func TestPathHelpers(t *testing.T) {
	root := Root()
	home := mustParse(t, "/alice")
	dir := mustParse(t, "/alice/docs")
	file := mustParse(t, "/alice/docs/a.txt")
	other := mustParse(t, "/alice2/docs")
	var zero Path

	tests := []struct {
		name           string
		p              Path
		isRoot, isHome bool
		home, base     string
		parent         Path
		homePath       Path
		segments       []string
	}{
		{"root", root, true, false, "", "", root, Path{}, nil},
		{"home", home, false, true, "alice", "alice", root, home, []string{"alice"}},
		{"dir", dir, false, false, "alice", "docs", home, home, []string{"alice", "docs"}},
		{"file", file, false, false, "alice", "a.txt", dir, home, []string{"alice", "docs", "a.txt"}},
		{"zero", zero, false, false, "", "", zero, Path{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.isRoot, tc.p.IsRoot())
			require.Equal(t, tc.isHome, tc.p.IsHome())
			require.Equal(t, tc.home, tc.p.Home())
			require.Equal(t, tc.base, tc.p.Base())
			require.Equal(t, tc.parent, tc.p.Parent())
			require.Equal(t, tc.homePath, tc.p.HomePath())
			require.Equal(t, tc.segments, tc.p.Segments())
		})
	}
	require.Empty(t, zero.String())
	require.True(t, zero.IsZero())

	within := []struct {
		name string
		p    Path
		dir  Path
		want bool
	}{
		{"self", dir, dir, true},
		{"child", file, dir, true},
		{"grandchild of home", file, home, true},
		{"everything within root", file, root, true},
		{"root within root", root, root, true},
		{"parent not within child", dir, file, false},
		{"longer home name is not within", other, home, false},
		{"root not within home", root, home, false},
		{"zero", zero, root, false},
		{"within zero", file, zero, false},
	}
	for _, tc := range within {
		t.Run("within "+tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.p.Within(tc.dir))
		})
	}
}

func TestJoin(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		child   string
		want    string
		wantErr bool
	}{
		{"home from root", "/", "alice", "/alice", false},
		{"file in home", "/alice", "a.txt", "/alice/a.txt", false},
		{"nested", "/alice/d", "e", "/alice/d/e", false},
		{"root child must be a member name", "/", "日本", "", true},
		{"slash", "/alice", "a/b", "", true},
		{"dot dot", "/alice", "..", "", true},
		{"dot", "/alice", ".", "", true},
		{"empty", "/alice", "", "", true},
		{"NUL", "/alice", "a\x00", "", true},
		{"backslash", "/alice", `a\b`, "", true},
		{"too long", "/alice", strings.Repeat("x", MaxNameLen+1), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustParse(t, tc.dir).Join(tc.child)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrInvalidPath)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.String())
			require.Equal(t, tc.dir, got.Parent().String())
			require.Equal(t, tc.child, got.Base())
		})
	}
	_, err := Path{}.Join("x")
	require.ErrorIs(t, err, ErrInvalidPath)

	// Join refuses what would pass MaxPathLen.
	p := mustParse(t, "/alice")
	var err2 error
	for err2 == nil {
		p, err2 = p.Join(strings.Repeat("x", MaxNameLen))
	}
	require.ErrorIs(t, err2, ErrInvalidPath)
}

func TestFromSegments(t *testing.T) {
	tests := []struct {
		name    string
		segs    []string
		want    string
		wantErr bool
	}{
		{"none is root", nil, "/", false},
		{"home", []string{"alice"}, "/alice", false},
		{"file", []string{"alice", "d", "a b.txt"}, "/alice/d/a b.txt", false},
		{"trailing slash", []string{"alice", "d", ""}, "/alice/d", false},
		{"decoded slash refused", []string{"alice", "../bob"}, "", true},
		{"decoded slash in name", []string{"alice", "a/b"}, "", true},
		{"decoded dot dot", []string{"alice", ".."}, "", true},
		{"empty inside", []string{"alice", "", "x"}, "", true},
		{"two empty at end", []string{"alice", "", ""}, "", true},
		{"NUL", []string{"alice", "\x00"}, "", true},
		{"bad home", []string{"..", "x"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromSegments(tc.segs...)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrInvalidPath)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.String())
		})
	}
}

func TestSuffixed(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		n       int
		want    string
		wantErr bool
	}{
		{"extension", "/a/x.txt", 1, "/a/x-1.txt", false},
		{"no extension", "/a/x", 2, "/a/x-2", false},
		{"dot file", "/a/.env", 1, "/a/.env-1", false},
		{"two extensions", "/a/x.tar.gz", 3, "/a/x.tar-3.gz", false},
		{"trailing dot", "/a/x.", 1, "/a/x-1.", false},
		{"nested", "/a/d/x.txt", 12, "/a/d/x-12.txt", false},
		{"home", "/a", 1, "", true},
		{"root", "/", 1, "", true},
		{"zero n", "/a/x", 0, "", true},
		{"too long", "/a/" + strings.Repeat("x", MaxNameLen), 1, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustParse(t, tc.in).Suffixed(tc.n)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrInvalidPath)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.String())
		})
	}
}

// longestPath returns a valid path of exactly MaxPathLen bytes: "/alice",
// segments of MaxNameLen bytes, and a shorter last segment, which it also
// returns.
func longestPath() (p, last string) {
	p = "/alice"
	for len(p)+1+MaxNameLen <= MaxPathLen {
		p += "/" + strings.Repeat("n", MaxNameLen)
	}
	last = strings.Repeat("m", MaxPathLen-len(p)-1)
	return p + "/" + last, last
}

func mustParse(t *testing.T, s string) Path {
	t.Helper()
	p, err := Parse(s)
	require.NoError(t, err)
	return p
}
