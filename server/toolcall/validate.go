package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Bounds on a binding (docs/TOOLCALL.md).
const (
	maxURLLen         = 8 << 10   // the binding's URL as written
	maxHeaders        = 64        // headers a binding may set
	maxHeaderValueLen = 8 << 10   // one header value as written
	maxBodyLen        = 256 << 10 // the body template
	maxSentURLLen     = 32 << 10  // the URL once substituted
	maxSentHeaderLen  = 16 << 10  // one header value once substituted
)

// methods a binding may use. HEAD is not one: it has no body, so a tool
// would have nothing to return.
var methods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true,
}

// forbiddenHeaders a binding may not set (canonical form): the credential
// headers the broker owns (Authorization, Proxy-Authorization, Cookie),
// Host (it would move the request to another virtual host), and the
// framing and hop-by-hop headers net/http computes itself, which a binding
// could only use to desynchronize the request.
var forbiddenHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
	"Host":                true,
	"Content-Length":      true,
	"Transfer-Encoding":   true,
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Upgrade":             true,
	"Expect":              true,
}

// compiled is a validated binding, ready for substitution.
type compiled struct {
	method    string
	origin    string // scheme://authority, static
	scheme    string
	authority string
	path      []part
	hasQuery  bool
	query     []part
	headers   []compiledHeader // sorted by name
	body      any              // decoded with UseNumber; nil when none
	hasBody   bool
	optional  map[string]bool // Binding.Optional
}

type compiledHeader struct {
	name  string // canonical
	value []part
}

func invalid(field, format string, a ...any) *InvalidError {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, a...)}
}

func compile(b Binding, credHeader string) (*compiled, error) {
	c := &compiled{}
	if len(b.Optional) > 0 {
		c.optional = make(map[string]bool, len(b.Optional))
		for _, name := range b.Optional {
			c.optional[name] = true
		}
	}
	if !methods[b.Method] {
		return nil, invalid("method", "must be one of GET, POST, PUT, PATCH, DELETE (upper case)")
	}
	c.method = b.Method
	if err := compileURL(c, b.URL); err != nil {
		return nil, err
	}
	if err := compileHeaders(c, b.Headers, credHeader); err != nil {
		return nil, err
	}
	if err := compileBody(c, b.Body); err != nil {
		return nil, err
	}
	return c, nil
}

// checkOptionalInPath refuses a path that templates an optional
// argument: rendered empty, it would make another call (DELETE
// /items/{{args.id}} would become DELETE /items/). Save time only, so a
// tool saved before this rule still runs while the argument is given.
func checkOptionalInPath(c *compiled) error {
	for _, p := range c.path {
		if p.Path != nil && c.optional[p.Path[0]] {
			return invalid("url", "the path uses argument %q, which the inputSchema does not require; an empty path segment would change the call, so list %q in the inputSchema's required", p.Path[0], p.Path[0])
		}
	}
	return nil
}

func compileURL(c *compiled, raw string) error {
	if raw == "" {
		return invalid("url", "is required")
	}
	if len(raw) > maxURLLen {
		return invalid("url", "longer than %d bytes", maxURLLen)
	}
	var rest string
	switch {
	case hasPrefixFold(raw, "https://"):
		c.scheme, rest = "https", raw[len("https://"):]
	case hasPrefixFold(raw, "http://"):
		c.scheme, rest = "http", raw[len("http://"):]
	default:
		return invalid("url", "must be an absolute http:// or https:// URL")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if strings.Contains(authority, "{{") || strings.Contains(authority, "}}") {
		return invalid("url", "templates may appear only in the path and query, never in the scheme, host or port")
	}
	if err := checkAuthority(authority); err != nil {
		return invalid("url", "%s", err)
	}
	c.authority = authority
	c.origin = c.scheme + "://" + authority
	if strings.Contains(tail, "#") {
		return invalid("url", "may not have a fragment (#)")
	}
	path, query, hasQuery := strings.Cut(tail, "?")
	pp, err := parseTemplated(path)
	if err != nil {
		return invalid("url", "%s", err)
	}
	for _, p := range pp {
		if p.Path == nil {
			if err := checkStaticURLText(p.Text, false); err != nil {
				return invalid("url", "%s", err)
			}
		}
	}
	// Dot segments as written (a substituted one is refused at call time).
	for _, seg := range strings.Split(staticSkeleton(pp), "/") {
		if seg == "." || seg == ".." {
			return invalid("url", "may not have . or .. path segments")
		}
	}
	c.path = pp
	if hasQuery {
		qp, err := parseTemplated(query)
		if err != nil {
			return invalid("url", "%s", err)
		}
		for _, p := range qp {
			if p.Path == nil {
				if err := checkStaticURLText(p.Text, true); err != nil {
					return invalid("url", "%s", err)
				}
			}
		}
		c.hasQuery, c.query = true, qp
	}
	return nil
}

// staticSkeleton is the parts' static text with each template replaced by
// a placeholder that is neither "." nor "..", nor holds a "/".
func staticSkeleton(pp []part) string {
	var b strings.Builder
	for _, p := range pp {
		if p.Path != nil {
			b.WriteString("\x00")
		} else {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// checkAuthority accepts host[:port] where host is a DNS name (ASCII
// letters, digits, '-', '_', dot-separated), an IPv4 address or a
// bracketed IPv6 address without a zone. No userinfo, no percent-encoding,
// no backslash.
func checkAuthority(a string) error {
	if a == "" {
		return fmt.Errorf("has no host")
	}
	if strings.ContainsAny(a, "@") {
		return fmt.Errorf("may not hold userinfo (@) before the host")
	}
	if strings.ContainsAny(a, "%\\") {
		return fmt.Errorf("host may not hold %% or \\")
	}
	host, port := a, ""
	if strings.HasPrefix(a, "[") {
		end := strings.Index(a, "]")
		if end < 0 {
			return fmt.Errorf("unterminated IPv6 literal")
		}
		ip, err := netip.ParseAddr(a[1:end])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return fmt.Errorf("bad IPv6 literal")
		}
		host, port = "", a[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return fmt.Errorf("bad host")
		}
	} else if i := strings.LastIndex(a, ":"); i >= 0 {
		host, port = a[:i], a[i:]
	}
	if port != "" {
		digits := port[1:]
		n, err := strconv.Atoi(digits)
		if digits == "" || len(digits) > 5 || err != nil || n < 1 || n > 65535 || strings.TrimLeft(digits, "0123456789") != "" {
			return fmt.Errorf("bad port")
		}
	}
	if strings.HasPrefix(a, "[") {
		return nil
	}
	if len(host) > 253 || host == "" {
		return fmt.Errorf("bad host")
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("bad host")
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
				return fmt.Errorf("bad host (ASCII letters, digits, '-', '_' and dots; write an internationalized name in punycode)")
			}
		}
	}
	return nil
}

// checkStaticURLText accepts RFC 3986 path (or query) characters and
// well-formed percent escapes; in the path it refuses encoded '/', '\' and
// '.', which a server may decode into a different path; %00 nowhere.
func checkStaticURLText(s string, query bool) error {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/", ch) >= 0:
		case ch == '?' && query:
		case ch == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return fmt.Errorf("bad percent-escape")
			}
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if v == 0 {
				return fmt.Errorf("may not hold %%00")
			}
			if !query && (v == '/' || v == '\\' || v == '.') {
				return fmt.Errorf("path may not hold an encoded '/', '\\' or '.'")
			}
			i += 2
		case ch == '\\':
			return fmt.Errorf("may not hold a backslash")
		default:
			return fmt.Errorf("character %q is not allowed in a URL (percent-encode it)", ch)
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func compileHeaders(c *compiled, h map[string]string, credHeader string) error {
	if len(h) > maxHeaders {
		return invalid("headers", "more than %d headers", maxHeaders)
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	for _, name := range names {
		field := "headers." + name
		if !httpguts.ValidHeaderFieldName(name) {
			return invalid(field, "is not a valid header name")
		}
		canon := http.CanonicalHeaderKey(name)
		if forbiddenHeaders[canon] {
			return invalid(field, "may not be set by a binding")
		}
		if credHeader != "" && strings.EqualFold(name, credHeader) {
			return invalid(field, "is the credential's header; the broker sets it")
		}
		if seen[canon] {
			return invalid(field, "set twice (header names are case-insensitive)")
		}
		seen[canon] = true
		v := h[name]
		if len(v) > maxHeaderValueLen {
			return invalid(field, "longer than %d bytes", maxHeaderValueLen)
		}
		parts, err := parseTemplated(v)
		if err != nil {
			return invalid(field, "%s", err)
		}
		for _, p := range parts {
			if p.Path == nil && !httpguts.ValidHeaderFieldValue(p.Text) {
				return invalid(field, "holds a control character (CR, LF, NUL...)")
			}
		}
		c.headers = append(c.headers, compiledHeader{name: canon, value: parts})
	}
	return nil
}

// bodyString is a string of the body template: its parts, and whether it
// is exactly one template (it then takes the argument's JSON value).
type bodyString struct {
	parts []part
	whole bool
}

func compileBody(c *compiled, raw json.RawMessage) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil
	}
	if len(raw) > maxBodyLen {
		return invalid("body", "longer than %d bytes", maxBodyLen)
	}
	if c.method == http.MethodGet {
		return invalid("body", "a GET binding may not have a body")
	}
	d := json.NewDecoder(bytes.NewReader(trimmed))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return invalid("body", "is not valid JSON")
	}
	if d.More() {
		return invalid("body", "is not one JSON value")
	}
	tv, err := compileBodyValue(v, "body")
	if err != nil {
		return err
	}
	c.body, c.hasBody = tv, true
	return nil
}

func compileBodyValue(v any, field string) (any, error) {
	switch x := v.(type) {
	case string:
		parts, err := parseTemplated(x)
		if err != nil {
			return nil, invalid(field, "%s", err)
		}
		hasTemplate := false
		for _, p := range parts {
			if p.Path != nil {
				hasTemplate = true
			}
		}
		if !hasTemplate {
			return x, nil
		}
		return bodyString{parts: parts, whole: len(parts) == 1}, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if strings.Contains(k, "{{") || strings.Contains(k, "}}") {
				return nil, invalid(field, "templates may not appear in object keys")
			}
			t, err := compileBodyValue(e, field)
			if err != nil {
				return nil, err
			}
			out[k] = t
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			t, err := compileBodyValue(e, field)
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
		return out, nil
	default:
		return v, nil
	}
}
