package vfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"svc/server/teamconfig"
)

// Limits of virtual paths, in bytes.
const (
	// MaxPathLen bounds a whole canonical path, as PATH_MAX does on Linux.
	MaxPathLen = 4096
	// MaxNameLen bounds one segment, as NAME_MAX does on most filesystems.
	MaxNameLen = 255
)

// ErrInvalidPath is wrapped by every error of Parse, FromSegments, Join and
// Suffixed; the service maps it to a validation error.
var ErrInvalidPath = errors.New("invalid path")

// PathError says why a virtual path or name was refused.
type PathError struct {
	Path   string // the input, as given
	Reason string
}

// Error implements error.
func (e *PathError) Error() string {
	return fmt.Sprintf("invalid path %q: %s", e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidPath) hold.
func (e *PathError) Unwrap() error { return ErrInvalidPath }

// Path is a valid, canonical virtual path: "/" (the root), "/<member>" (a
// member's home) or "/<member>/<name>/...". Its segments are never empty,
// "." or "..", and its first segment is always its home, so a Path cannot
// name anything outside the home it claims.
//
// The zero Path is not a path: String returns "" and it is neither the root
// nor a home, so a forgotten Path never silently means "/".
type Path struct {
	s string // canonical: "/" or "/seg/seg" without a trailing slash
}

// Root returns the root path "/".
func Root() Path { return Path{s: "/"} }

// Parse validates p and returns it as a Path. It decodes nothing: the
// gateway URL-decodes each segment exactly once before calling it, so an
// escaped "%2e%2e" arrives here as ".." and is refused, while a name that
// literally is "%2e" stays that name.
//
// p must be absolute and may end in one slash, which is dropped ("/alice/"
// is "/alice"). Refused, with an error wrapping ErrInvalidPath: a relative
// or empty p; an empty segment ("//"); a "." or ".." segment; a segment
// over MaxNameLen bytes or a path over MaxPathLen bytes; invalid UTF-8;
// control characters (NUL, C0, DEL, C1); backslashes, which some clients
// treat as separators; Unicode bidirectional controls, which disguise
// names ("txt.exe" shown as "exe.txt"); and a first segment that is not a
// member name (1–64 bytes of A-Z a-z 0-9 . _ -, starting with a letter or
// digit).
func Parse(p string) (Path, error) {
	switch {
	case p == "":
		return Path{}, pathError(p, "empty")
	case p[0] != '/':
		return Path{}, pathError(p, "not absolute")
	case p == "/":
		return Root(), nil
	case len(p) > MaxPathLen+1: // +1: the trailing slash that may go
		return Path{}, pathError(p, "longer than "+strconv.Itoa(MaxPathLen)+" bytes")
	}
	body := strings.TrimSuffix(p[1:], "/")
	if len(body)+1 > MaxPathLen {
		return Path{}, pathError(p, "longer than "+strconv.Itoa(MaxPathLen)+" bytes")
	}
	first := true
	for seg := range strings.SplitSeq(body, "/") {
		if reason := checkSegment(seg, first); reason != "" {
			return Path{}, pathError(p, reason)
		}
		first = false
	}
	return Path{s: "/" + body}, nil
}

// FromSegments builds a Path from segments that were URL-decoded one by one
// (GET /fs/read/<seg>/<seg>...), validating each as Parse does; a decoded
// "/" inside a segment is refused instead of becoming a separator. No
// segments give the root; one empty last segment (a trailing slash) is
// ignored.
func FromSegments(segs ...string) (Path, error) {
	if n := len(segs); n > 0 && segs[n-1] == "" {
		segs = segs[:n-1]
	}
	if len(segs) == 0 {
		return Root(), nil
	}
	joined := "/" + strings.Join(segs, "/")
	for i, seg := range segs {
		if reason := checkSegment(seg, i == 0); reason != "" {
			return Path{}, pathError(joined, reason)
		}
	}
	if len(joined) > MaxPathLen {
		return Path{}, pathError(joined, "longer than "+strconv.Itoa(MaxPathLen)+" bytes")
	}
	return Path{s: joined}, nil
}

// String returns the canonical form: "/" for the root, no trailing slash
// otherwise, "" for the zero Path. Parse(p.String()) == p.
func (p Path) String() string { return p.s }

// IsZero reports whether p is the zero Path.
func (p Path) IsZero() bool { return p.s == "" }

// IsRoot reports whether p is "/".
func (p Path) IsRoot() bool { return p.s == "/" }

// IsHome reports whether p is a member's home "/<name>".
func (p Path) IsHome() bool {
	return len(p.s) > 1 && strings.IndexByte(p.s[1:], '/') < 0
}

// Home returns the member whose home p is in (its first segment); "" for
// the root and the zero Path.
func (p Path) Home() string {
	if len(p.s) <= 1 {
		return ""
	}
	home, _, _ := strings.Cut(p.s[1:], "/")
	return home
}

// HomePath returns the home p is in as a Path; the zero Path for the root
// and the zero Path.
func (p Path) HomePath() Path {
	if h := p.Home(); h != "" {
		return Path{s: "/" + h}
	}
	return Path{}
}

// Parent returns the directory containing p: the root for a home and for
// the root itself, the zero Path for the zero Path.
func (p Path) Parent() Path {
	if len(p.s) <= 1 {
		return p
	}
	i := strings.LastIndexByte(p.s, '/')
	if i == 0 {
		return Root()
	}
	return Path{s: p.s[:i]}
}

// Base returns the last segment of p (the entry's name); "" for the root
// and the zero Path.
func (p Path) Base() string {
	if len(p.s) <= 1 {
		return ""
	}
	return p.s[strings.LastIndexByte(p.s, '/')+1:]
}

// Segments returns p's segments; none for the root.
func (p Path) Segments() []string {
	if len(p.s) <= 1 {
		return nil
	}
	return strings.Split(p.s[1:], "/")
}

// Within reports whether p is dir or lies below it. Everything valid lies
// within the root; nothing lies within the zero Path.
func (p Path) Within(dir Path) bool {
	switch {
	case p.IsZero() || dir.IsZero():
		return false
	case dir.IsRoot():
		return true
	}
	return strings.HasPrefix(p.s, dir.s) && (len(p.s) == len(dir.s) || p.s[len(dir.s)] == '/')
}

// Join returns the path of the entry name inside directory p, validating
// name as one segment: below the root it must be a member name, and a "/"
// inside it is refused. Joining onto the zero Path fails.
func (p Path) Join(name string) (Path, error) {
	if p.IsZero() {
		return Path{}, pathError(name, "join onto the zero path")
	}
	joined := p.s + "/" + name
	if p.IsRoot() {
		joined = "/" + name
	}
	if reason := checkSegment(name, p.IsRoot()); reason != "" {
		return Path{}, pathError(joined, reason)
	}
	if len(joined) > MaxPathLen {
		return Path{}, pathError(joined, "longer than "+strconv.Itoa(MaxPathLen)+" bytes")
	}
	return Path{s: joined}, nil
}

// Suffixed returns p with "-n" inserted before the extension of its name,
// the collision strategy "suffix": "/a/x.txt" gives "/a/x-1.txt" for n 1,
// "/a/x" gives "/a/x-1", "/a/.env" gives "/a/.env-1" and "/a/x.tar.gz"
// gives "/a/x.tar-1.gz". It fails for the root, a home and n < 1, and
// when the result is too long.
func (p Path) Suffixed(n int) (Path, error) {
	if len(p.s) <= 1 || p.IsHome() || n < 1 {
		return Path{}, pathError(p.s, "cannot be suffixed")
	}
	name := p.Base()
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	return p.Parent().Join(stem + "-" + strconv.Itoa(n) + ext)
}

// checkSegment returns why seg is not a valid segment, "" when it is. A
// home segment must also be a member name.
func checkSegment(seg string, home bool) string {
	switch {
	case seg == "":
		return "empty segment"
	case seg == "." || seg == "..":
		return "dot segment"
	case len(seg) > MaxNameLen:
		return "segment longer than " + strconv.Itoa(MaxNameLen) + " bytes"
	case !utf8.ValidString(seg):
		return "invalid UTF-8"
	}
	for _, r := range seg {
		switch {
		case r == '/':
			return "slash inside a segment"
		case r == '\\':
			return "backslash"
		case unicode.IsControl(r):
			return "control character"
		case isBidiControl(r):
			return "bidirectional control character"
		}
	}
	if home && !teamconfig.ValidName(seg) {
		return "home is not a member name"
	}
	return ""
}

// isBidiControl reports the explicit directional formatting characters of
// Unicode (UAX #9): embeddings, overrides, isolates and the marks.
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}

func pathError(p, reason string) error { return &PathError{Path: p, Reason: reason} }
