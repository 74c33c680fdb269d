package capture

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultMaxBody is the most bytes of one request or response body the
// proxy captures (after decompression). The broker takes at most 16 MiB
// for a whole upload, so a larger body could never be stored: past the
// cap the exchange is not captured, and still forwarded whole.
const DefaultMaxBody = 16 << 20

// minCredential is the shortest header credential the proxy reports for
// redaction: a shorter one ("sk-x" of a stub) would blank out ordinary
// text everywhere in the record.
const minCredential = 8

// Exchange is one captured model API call.
type Exchange struct {
	// Start is when the request arrived, End when the response ended.
	Start, End time.Time
	// Path is the request path relative to the upstream base, e.g.
	// "/responses" or "/chat/completions".
	Path string
	// API is the model API the path names.
	API API
	// Request is the request body as JSON (decoded if it was compressed).
	Request []byte
	// Response is the response body as JSON: a streamed response is
	// reassembled into the provider's non-streamed shape.
	Response []byte
	// Credentials are the credential values the request carried in its
	// headers (the bearer token of Authorization, x-api-key, api-key,
	// x-goog-api-key), at least 8 bytes long: the consumer redacts them
	// wherever they appear in Request and Response.
	Credentials []string
}

// Options configures a Proxy.
type Options struct {
	// Upstream is the provider's base URL, e.g. https://api.openai.com/v1:
	// a request for <proxy>/v1/responses goes to <Upstream>/responses.
	Upstream *url.URL
	// Sink receives each finished exchange of a model call, on a goroutine
	// of its own after the agent has its answer; it must not block. Nil
	// captures nothing (the proxy only forwards).
	Sink func(Exchange)
	// Log receives one line per problem (never request content or
	// credentials); nil discards them.
	Log io.Writer
	// MaxBody caps the captured bytes of each body; 0 is DefaultMaxBody.
	MaxBody int64
	// Key, when set, must arrive in the KeyHeader of every request (the
	// agent sends it from its environment, which other local users cannot
	// read, unlike a command line); the header never goes upstream.
	Key string
}

// KeyHeader carries Options.Key.
const KeyHeader = "X-Svc-Capture-Key"

// Proxy is a running capturing proxy on 127.0.0.1.
type Proxy struct {
	ln      net.Listener
	srv     *http.Server
	rp      *httputil.ReverseProxy
	tr      *http.Transport
	prefix  string // "/<random>": a request without it is refused
	base    string // the upstream's base path, no trailing slash
	baseEsc string // the same, escaped
	host    string // 127.0.0.1:<port>, the only Host accepted
	sink    func(Exchange)
	log     *log.Logger
	maxBody int64
	key     string
	cancel  context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // handlers and sink hand-offs in flight
}

// Start listens on a random loopback port and serves until Close.
func Start(o Options) (*Proxy, error) {
	if o.Upstream == nil || (o.Upstream.Scheme != "http" && o.Upstream.Scheme != "https") || o.Upstream.Host == "" {
		return nil, errors.New("capture: upstream must be an absolute http or https URL")
	}
	if o.Upstream.User != nil {
		return nil, errors.New("capture: upstream must not carry credentials in its URL")
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	up := *o.Upstream
	up.Fragment, up.RawFragment = "", ""
	base := strings.TrimRight(up.Path, "/")
	baseEsc := strings.TrimRight(up.EscapedPath(), "/")
	if base == "" {
		baseEsc = ""
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// What the agent asked for is what the upstream sees: the transport
	// must not add its own Accept-Encoding and decompress behind the
	// agent's back.
	tr.DisableCompression = true
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		key: o.Key, ln: ln, tr: tr, prefix: "/" + hex.EncodeToString(secret), base: base, baseEsc: baseEsc,
		host: ln.Addr().String(), sink: o.Sink, log: log.New(logw, "capture: ", 0),
		maxBody: o.MaxBody, cancel: cancel,
	}
	if p.maxBody <= 0 {
		p.maxBody = DefaultMaxBody
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			suffix, escSuffix := p.suffix(r.In.URL)
			r.Out.URL.Scheme, r.Out.URL.Host = up.Scheme, up.Host
			r.Out.URL.Path, r.Out.URL.RawPath = base+suffix, baseEsc+escSuffix
			if up.RawQuery != "" {
				r.Out.URL.RawQuery = strings.TrimSuffix(up.RawQuery+"&"+r.In.URL.RawQuery, "&")
			}
			r.Out.Host = "" // the upstream's own host
			if r.Out.Body == nil || r.Out.Body == http.NoBody {
				return
			}
			if r.In.ContentLength > 0 {
				r.Out.Body = &lengthBody{rc: r.Out.Body, left: r.In.ContentLength}
			}
			if st, ok := r.In.Context().Value(stateKey{}).(*state); ok {
				r.Out.Body = &teeBody{rc: r.Out.Body, buf: &st.req}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			st, ok := resp.Request.Context().Value(stateKey{}).(*state)
			if !ok {
				return nil
			}
			st.mu.Lock()
			st.status = resp.StatusCode
			st.respType = resp.Header.Get("Content-Type")
			st.respEncoding = resp.Header.Get("Content-Encoding")
			st.mu.Unlock()
			if resp.StatusCode >= 200 && resp.StatusCode < 300 {
				resp.Body = &teeBody{rc: resp.Body, buf: &st.resp}
			}
			return nil
		},
		ErrorHandler:  p.upstreamError,
		FlushInterval: -1, // every write reaches the agent at once
		Transport:     tr,
		ErrorLog:      p.log,
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          p.log,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the base URL to give the agent in place of the upstream's: the
// proxy's address, a random path prefix only this URL carries, and the
// upstream's path (http://127.0.0.1:<port>/<hex>/v1). Hand it to the agent
// in a private file or its environment, not on a command line other users
// can read.
func (p *Proxy) URL() string { return "http://" + p.host + p.prefix + p.baseEsc }

// Close stops the proxy: exchanges in flight are cut, and the exchanges
// already finished reach the sink before Close returns.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	err := p.srv.Close()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	return err
}

// enter counts a handler in, unless the proxy is closed.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// suffix is the request path past the proxy's prefix and the upstream's
// base path, plain and escaped: what is joined onto the upstream's base.
func (p *Proxy) suffix(u *url.URL) (string, string) {
	cut := func(path, base string) string {
		path = strings.TrimPrefix(path, p.prefix)
		if base != "" && (path == base || strings.HasPrefix(path, base+"/")) {
			path = path[len(base):]
		}
		return path
	}
	return cut(u.Path, p.base), cut(u.EscapedPath(), p.baseEsc)
}

// ServeHTTP forwards one request; a model call is captured on the way.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		writeError(w, http.StatusServiceUnavailable, "proxy_closed", "the capturing proxy is shutting down")
		return
	}
	defer p.wg.Done()
	// Only the agent knows the prefix; the Host check keeps a web page
	// that rebinds a DNS name to 127.0.0.1 out as well.
	if r.Host != p.host {
		writeError(w, http.StatusMisdirectedRequest, "wrong_host", "the capturing proxy answers only for "+p.host)
		return
	}
	if r.URL.Path != p.prefix && !strings.HasPrefix(r.URL.Path, p.prefix+"/") {
		writeError(w, http.StatusNotFound, "not_found", "no such path on the capturing proxy")
		return
	}
	if p.key != "" {
		got := r.Header.Get(KeyHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(p.key)) != 1 {
			writeError(w, http.StatusUnauthorized, "unauthorized", "the capturing proxy needs its key")
			return
		}
	}
	r.Header.Del(KeyHeader)
	suffix, _ := p.suffix(r.URL)
	api := apiOf(r.Method, suffix)
	if api == "" || p.sink == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	st := &state{
		start: time.Now(), method: r.Method, path: suffix, api: api,
		reqEncoding: r.Header.Get("Content-Encoding"), creds: credentials(r.Header),
	}
	st.req.max, st.resp.max = p.maxBody, p.maxBody
	if r.ContentLength > 0 && r.ContentLength <= p.maxBody {
		st.req.b = make([]byte, 0, r.ContentLength)
	}
	// Deferred, so it also runs when the proxy aborts a response the
	// upstream cut (ReverseProxy panics with http.ErrAbortHandler).
	defer func() {
		st.end = time.Now()
		p.wg.Add(1) // the handler's own count is held, so this cannot race Wait
		go func() {
			defer p.wg.Done()
			if ex, ok := p.exchange(st); ok {
				p.sink(ex)
			}
		}()
	}()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
}

// upstreamError answers a request the upstream never answered: 502 with a
// JSON error body in the shape OpenAI and Anthropic clients both show.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL may carry a key in its query: never logged
	}
	if r.Context().Err() == nil {
		p.log.Printf("%s %s: upstream unreachable: %v", r.Method, p.logPath(r.URL), err)
	}
	writeError(w, http.StatusBadGateway, "upstream_unreachable", "the capturing proxy could not reach the model provider: "+err.Error())
}

// logPath is a request path fit for the log: without the proxy's prefix.
func (p *Proxy) logPath(u *url.URL) string {
	s, _ := p.suffix(u)
	return oneLine(s, 200)
}

// writeError writes {"error":{"type","message"}}.
func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
}

// credentials are the credential values of a request's headers.
func credentials(h http.Header) []string {
	var out []string
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) >= minCredential {
			out = append(out, v)
		}
	}
	for _, v := range h.Values("Authorization") {
		if scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " "); ok && scheme != "" {
			add(tok)
		} else {
			add(v)
		}
	}
	for _, k := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		for _, v := range h.Values(k) {
			add(v)
		}
	}
	return out
}

// stateKey is the request-context key of a model call's *state.
type stateKey struct{}

// state is what the proxy learns of one model call while forwarding it.
type state struct {
	start, end  time.Time
	method      string
	path        string
	api         API
	reqEncoding string
	creds       []string
	req, resp   capBuf

	mu           sync.Mutex
	status       int
	respType     string
	respEncoding string
}

// capBuf keeps the bytes read through a teeBody up to max; past it the
// capture is given up (over) and the buffer freed.
type capBuf struct {
	mu   sync.Mutex
	max  int64
	b    []byte
	over bool
	eof  bool // the body was read to its end
}

func (c *capBuf) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.over {
		return
	}
	if int64(len(c.b)+len(p)) > c.max {
		c.over, c.b = true, nil
		return
	}
	c.b = append(c.b, p...)
}

func (c *capBuf) snapshot() (b []byte, over, eof bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b, c.over, c.eof
}

// lengthBody ends a request body of known length at that length, without
// asking the server's body for the end. The transport reads once more past
// the length to check nothing follows, and by then the server may have
// closed the body (it does as the answer's headers go out): that read
// failing would make the transport drop the upstream connection in the
// middle of the answer.
type lengthBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return b.rc.Close() }

// teeBody copies what is read through it into a capBuf; the reader gets
// every byte as it comes, unbuffered.
type teeBody struct {
	rc  io.ReadCloser
	buf *capBuf
}

func (t *teeBody) Read(p []byte) (int, error) {
	t.buf.mu.Lock()
	eof := t.buf.eof
	t.buf.mu.Unlock()
	if eof {
		return 0, io.EOF // the end stays the end, whatever the body does after
	}
	n, err := t.rc.Read(p)
	if n > 0 {
		t.buf.write(p[:n])
	}
	if errors.Is(err, io.EOF) {
		t.buf.mu.Lock()
		t.buf.eof = true
		t.buf.mu.Unlock()
	}
	return n, err
}

func (t *teeBody) Close() error { return t.rc.Close() }

// exchange turns a finished model call into an Exchange. Not captured
// (false): a call the upstream did not answer with 2xx, a body over the
// cap, a request not read whole or not a JSON object, a non-streamed
// response cut short, a stream that never named its response, a body in
// an encoding the proxy cannot decode, and a response of no provider's
// shape. A stream cut short (the agent went away, the upstream failed) is
// captured with what arrived.
func (p *Proxy) exchange(st *state) (Exchange, bool) {
	st.mu.Lock()
	status, respType, respEnc := st.status, st.respType, st.respEncoding
	st.mu.Unlock()
	if status < 200 || status >= 300 {
		return Exchange{}, false
	}
	what := st.method + " " + oneLine(st.path, 200)
	req, reqOver, reqEOF := st.req.snapshot()
	resp, respOver, respEOF := st.resp.snapshot()
	if reqOver || respOver {
		p.log.Printf("%s: a body is over %d bytes; not captured", what, p.maxBody)
		return Exchange{}, false
	}
	if !reqEOF {
		p.log.Printf("%s: the request body was not read whole; not captured", what)
		return Exchange{}, false
	}
	req, err := decodeBody(st.reqEncoding, req, p.maxBody)
	if err != nil {
		p.log.Printf("%s: request body: %v; not captured", what, err)
		return Exchange{}, false
	}
	if t := bytes.TrimSpace(req); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		p.log.Printf("%s: the request body is not a JSON object; not captured", what)
		return Exchange{}, false
	}
	resp, err = decodeBody(respEnc, resp, p.maxBody)
	if err != nil {
		if respEOF || !errors.Is(err, io.ErrUnexpectedEOF) {
			p.log.Printf("%s: response body: %v; not captured", what, err)
		}
		return Exchange{}, false
	}
	if mt, _, _ := mime.ParseMediaType(respType); mt == "text/event-stream" {
		if resp, err = Reassemble(st.api, resp); err != nil {
			p.log.Printf("%s: %v; not captured", what, err)
			return Exchange{}, false
		}
	} else if !respEOF {
		return Exchange{}, false // a JSON answer cut short is no answer
	}
	if shapeOf(resp) == "" {
		p.log.Printf("%s: the response has no %s shape; not captured", what, st.api)
		return Exchange{}, false
	}
	return Exchange{
		Start: st.start, End: st.end, Path: st.path, API: st.api,
		Request: req, Response: resp, Credentials: st.creds,
	}, true
}

// oneLine cuts s to one line of at most n bytes, for the log.
func oneLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
