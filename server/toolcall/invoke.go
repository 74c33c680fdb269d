package toolcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// DefaultTimeout bounds one upstream call unless Options says otherwise;
// the HTTP client a Caller is given must not cut calls sooner.
const DefaultTimeout = 30 * time.Second

const (
	defaultTimeout     = DefaultTimeout
	defaultMaxResponse = 4 << 20
	// maxErrorBody bounds the upstream body quoted in a non-2xx result.
	maxErrorBody = 4 << 10
)

func (c *Caller) timeout() time.Duration {
	if c.opts.Timeout > 0 {
		return c.opts.Timeout
	}
	return defaultTimeout
}

func (c *Caller) maxResponse() int64 {
	if c.opts.MaxResponse > 0 {
		return c.opts.MaxResponse
	}
	return defaultMaxResponse
}

// request is a binding with its arguments substituted.
type request struct {
	method  string
	url     string
	headers http.Header
	body    []byte // nil when none
}

// escapeValue percent-encodes every byte of a substituted value but RFC
// 3986's unreserved characters, so a value is one path segment or one
// query value whatever it holds: it can add no '/', '?', '#', '&' or '='.
func escapeValue(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.' || ch == '_' || ch == '~' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[ch>>4])
		b.WriteByte(hexDigits[ch&15])
	}
	return b.String()
}

// substitute fills a compiled binding with args. Errors are
// *InvalidError.
func (c *compiled) substitute(args map[string]any) (*request, error) {
	r := &request{method: c.method, headers: http.Header{}}
	path, err := render(c.path, args, nil, escapeValue)
	if err != nil {
		return nil, err
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return nil, invalid("url", "an argument made a . or .. path segment")
		}
	}
	u := c.origin + path
	if c.hasQuery {
		q, err := render(c.query, args, c.optional, escapeValue)
		if err != nil {
			return nil, err
		}
		u += "?" + q
	}
	if len(u) > maxSentURLLen {
		return nil, invalid("url", "longer than %d bytes once the arguments are in", maxSentURLLen)
	}
	// Defence in depth: the origin is what was validated.
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != c.scheme || pu.Host != c.authority || pu.User != nil || pu.Fragment != "" || pu.Opaque != "" {
		return nil, invalid("url", "the arguments would change the URL's origin")
	}
	r.url = u
	for _, h := range c.headers {
		v, err := render(h.value, args, c.optional, nil)
		if err != nil {
			return nil, err
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, invalid("headers."+h.name, "an argument put a control character (CR, LF, NUL...) in the value")
		}
		if len(v) > maxSentHeaderLen {
			return nil, invalid("headers."+h.name, "longer than %d bytes once the arguments are in", maxSentHeaderLen)
		}
		r.headers.Set(h.name, v)
	}
	if c.hasBody {
		v, err := substituteBody(c.body, args, c.optional)
		if err != nil {
			return nil, err
		}
		body, err := marshalJSON(v)
		if err != nil {
			return nil, invalid("body", "cannot encode: %s", err)
		}
		r.body = body
		if r.headers.Get("Content-Type") == "" {
			r.headers.Set("Content-Type", "application/json")
		}
	}
	return r, nil
}

func substituteBody(t any, args map[string]any, optional map[string]bool) (any, error) {
	switch x := t.(type) {
	case bodyString:
		if x.whole && !absent(args, x.parts[0].Path, optional) {
			return lookup(args, x.parts[0].Path)
		}
		return render(x.parts, args, optional, nil)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			v, err := substituteBody(e, args, optional)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			v, err := substituteBody(e, args, optional)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	default:
		return t, nil
	}
}

// CheckCredentialHeader says whether a header credential may be sent in
// header name: a valid field name that is not Host, Content-Type or a
// framing or hop-by-hop header. It may be a cookie or an Authorization
// scheme of its own.
func CheckCredentialHeader(name string) error {
	if name == "" || len(name) > 128 || !httpguts.ValidHeaderFieldName(name) {
		return errors.New("the credential's header name is not a valid header name")
	}
	switch canon := http.CanonicalHeaderKey(name); {
	case canon == "Content-Type",
		forbiddenHeaders[canon] && canon != "Authorization" && canon != "Proxy-Authorization" && canon != "Cookie":
		return fmt.Errorf("the credential's header may not be %s", canon)
	}
	return nil
}

// credentialHeader is the header cred is sent in, and its value.
func credentialHeader(cred *Credential) (name, value string, err error) {
	if cred == nil || cred.Secret == "" {
		return "", "", nil
	}
	switch cred.Kind {
	case "bearer":
		name, value = "Authorization", "Bearer "+cred.Secret
	case "header":
		if err := CheckCredentialHeader(cred.HeaderName); err != nil {
			return "", "", err
		}
		name, value = http.CanonicalHeaderKey(cred.HeaderName), cred.Secret
	default:
		return "", "", errors.New("unknown credential kind")
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return "", "", errors.New("the credential holds a control character")
	}
	return name, value, nil
}

func credHeaderName(cred *Credential) string {
	if cred != nil && cred.Kind == "header" {
		return cred.HeaderName
	}
	return ""
}

func secretOf(cred *Credential) string {
	if cred == nil {
		return ""
	}
	return cred.Secret
}

// invokeHTTP is InvokeHTTP (toolcall.go).
func (c *Caller) invokeHTTP(ctx context.Context, b Binding, args map[string]any, cred *Credential) (Result, error) {
	cb, err := compile(b, credHeaderName(cred))
	if err != nil {
		return Result{}, err
	}
	r, err := cb.substitute(args)
	if err != nil {
		return Result{}, err
	}
	secret := secretOf(cred)
	credName, credValue, err := credentialHeader(cred)
	if err != nil {
		return errorResult(secret, "the tool source's credential cannot be sent: %s", err), nil
	}

	tctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(tctx, r.method, r.url, body)
	if err != nil {
		return errorResult(secret, "the request cannot be built: %s", err), nil
	}
	req.Header = r.headers
	if credName != "" {
		req.Header.Set(credName, credValue)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return errorResult(secret, "%s", c.transportMessage(tctx, err)), nil
	}
	defer resp.Body.Close()
	max := c.maxResponse()
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return errorResult(secret, "reading the upstream's answer (%d): %s", resp.StatusCode, c.transportMessage(tctx, err)), nil
	}
	if int64(len(data)) > max {
		return errorResult(secret, "the upstream's answer (%d) is larger than %d bytes", resp.StatusCode, max), nil
	}
	text := redactEchoes(toValidUTF8(data), secret)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("upstream answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if text != "" {
			msg += ": " + clipUTF8(text, maxErrorBody)
		}
		return textResult(msg, true), nil
	}
	res := textResult(text, false)
	// A JSON object also goes in structuredContent.
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		if sc, err := redactJSON(t, secret); err == nil {
			res.StructuredContent = sc
		}
	}
	return res, nil
}

// transportMessage describes a failed exchange without the request URL's
// details Go puts in a *url.Error (they are the caller's arguments, but
// the message needs only the cause).
func (c *Caller) transportMessage(tctx context.Context, err error) string {
	if errors.Is(tctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("the upstream did not answer within %s", c.timeout())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "the upstream did not answer in time"
		}
		err = ue.Err
	}
	return "the upstream could not be reached: " + err.Error()
}

func textBlock(text string) json.RawMessage {
	b, _ := marshalJSON(map[string]string{"type": "text", "text": text})
	return b
}

func textResult(text string, isError bool) Result {
	return Result{Content: []json.RawMessage{textBlock(text)}, IsError: isError}
}

// errorResult is an isError result with a message from which secret is
// removed.
func errorResult(secret, format string, a ...any) Result {
	return textResult(redactEchoes(fmt.Sprintf(format, a...), secret), true)
}

func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// clipUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
