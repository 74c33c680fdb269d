package vfs

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// memberNameRE mirrors teamconfig.ValidName, the oracle for
// home segments. It is copied rather than imported so that this package's
// tests do not depend on the config package.
var memberNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func addPathSeeds(f *testing.F) {
	for _, s := range []string{
		"", "/", "//", "///", "/alice", "/alice/", "/alice//", "/alice/x", "/alice/x/",
		"/alice/..", "/alice/../bob", "/..", "/.", "/alice/.", "alice", "./alice",
		"/alice/%2e%2e", "/alice/%2F", "/alice/a\x00b", "/alice/\xff", "/alice/\xc0\xae",
		`/alice/a\b`, "/alice/\u202e", "/alice/日本", "/dörte/x", "/-a/x", "/a.b_c-d/e",
		"/alice/" + strings.Repeat("n", 256), "/" + strings.Repeat("a", 65),
		"/alice" + strings.Repeat("/n", 2045),
	} {
		f.Add(s)
	}
}

// checkPath asserts the invariants of every Path Parse returns.
func checkPath(t *testing.T, p Path) {
	t.Helper()
	s := p.String()
	if !strings.HasPrefix(s, "/") {
		t.Fatalf("%q: not absolute", s)
	}
	if len(s) > MaxPathLen {
		t.Fatalf("%q: %d bytes", s, len(s))
	}
	again, err := Parse(s)
	if err != nil || again != p {
		t.Fatalf("%q: does not round-trip: %v, %q", s, err, again.String())
	}
	if p.IsRoot() {
		if s != "/" || p.Home() != "" || p.Base() != "" || len(p.Segments()) != 0 || p.IsHome() {
			t.Fatalf("root %q: inconsistent helpers", s)
		}
		return
	}
	if strings.HasSuffix(s, "/") {
		t.Fatalf("%q: trailing slash", s)
	}
	segs := p.Segments()
	if strings.Join(segs, "/") != s[1:] {
		t.Fatalf("%q: segments %q", s, segs)
	}
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." || len(seg) > MaxNameLen || !utf8.ValidString(seg) {
			t.Fatalf("%q: bad segment %q", s, seg)
		}
		if strings.ContainsAny(seg, "\\/") || strings.ContainsFunc(seg, unicode.IsControl) || strings.ContainsFunc(seg, isBidiControl) {
			t.Fatalf("%q: bad character in %q", s, seg)
		}
	}
	// A path can name nothing outside the home it claims.
	if p.Home() != segs[0] || !memberNameRE.MatchString(p.Home()) {
		t.Fatalf("%q: home %q, first segment %q", s, p.Home(), segs[0])
	}
	if !p.Within(p.HomePath()) || p.HomePath().String() != "/"+segs[0] {
		t.Fatalf("%q: not within its home", s)
	}
	if p.IsHome() != (len(segs) == 1) || p.Base() != segs[len(segs)-1] {
		t.Fatalf("%q: IsHome or Base wrong", s)
	}
	// Walking up stays in the home, shrinks each step and ends at the root.
	steps := 0
	for q := p; !q.IsRoot(); q = q.Parent() {
		parent := q.Parent()
		if len(parent.String()) >= len(q.String()) || !q.Within(parent) || parent.IsZero() {
			t.Fatalf("%q: parent %q of %q", s, parent.String(), q.String())
		}
		if !parent.IsRoot() && parent.Home() != p.Home() {
			t.Fatalf("%q: parent %q left the home", s, parent.String())
		}
		if steps < 3 { // Join copies the path: checking every step is quadratic
			if joined, err := parent.Join(q.Base()); err != nil || joined != q {
				t.Fatalf("%q: Join(Parent, Base) of %q: %v", s, q.String(), err)
			}
		}
		steps++
	}
	if steps != len(segs) {
		t.Fatalf("%q: %d steps up for %d segments", s, steps, len(segs))
	}
	if fs, err := FromSegments(segs...); err != nil || fs != p {
		t.Fatalf("%q: FromSegments: %v", s, err)
	}
}

func FuzzParse(f *testing.F) {
	addPathSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) || !p.IsZero() {
				t.Fatalf("%q: error %v with path %q", in, err, p.String())
			}
			return
		}
		// Parse rewrites nothing but one trailing slash.
		if s := p.String(); s != in && s+"/" != in {
			t.Fatalf("%q became %q", in, s)
		}
		checkPath(t, p)
	})
}

func FuzzJoin(f *testing.F) {
	for _, s := range []string{"x", "..", ".", "", "a/b", "a\x00", `a\b`, "%2e%2e", "alice", "日本", "\u202e", "\xff"} {
		f.Add("/alice/d", s)
		f.Add("/", s)
	}
	f.Fuzz(func(t *testing.T, dir, name string) {
		d, err := Parse(dir)
		if err != nil {
			return
		}
		p, err := d.Join(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("%q + %q: %v", dir, name, err)
			}
			return
		}
		if p.Parent() != d || p.Base() != name {
			t.Fatalf("%q + %q = %q", dir, name, p.String())
		}
		if !d.IsRoot() && p.Home() != d.Home() {
			t.Fatalf("%q + %q left the home: %q", dir, name, p.String())
		}
		checkPath(t, p)
		for n := 1; n <= 2; n++ {
			if sp, err := p.Suffixed(n); err == nil {
				if sp.Parent() != p.Parent() || sp == p {
					t.Fatalf("%q suffixed %d: %q", p.String(), n, sp.String())
				}
				checkPath(t, sp)
			}
		}
	})
}
