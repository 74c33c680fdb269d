// Package capture is the runner's capturing proxy for model APIs: the
// agent's model provider is pointed at it, it forwards every request to the
// provider the user configured, streams the answer back unchanged, and
// hands each finished request/response pair to a sink, streamed (SSE)
// responses reassembled into the provider's non-streamed JSON first.
//
// This first version only forwards; capture and reassembly follow.
package capture

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// Exchange is one captured model API call.
type Exchange struct {
	// Start is when the request arrived, End when the response ended.
	Start, End time.Time
	// Path is the request path relative to the upstream base, e.g.
	// "/responses" or "/chat/completions".
	Path string
	// Request is the request body as JSON (decoded if it was compressed).
	Request []byte
	// Response is the response body as JSON: a streamed response is
	// reassembled into the provider's non-streamed shape.
	Response []byte
}

// Options configures a Proxy.
type Options struct {
	// Upstream is the provider's base URL, e.g. https://api.openai.com/v1:
	// a request for <proxy>/v1/responses goes to <Upstream>/responses.
	Upstream *url.URL
	// Sink receives each finished exchange of a model call; it must not
	// block. Nil captures nothing.
	Sink func(Exchange)
	// Log receives one line per problem (never request content).
	Log io.Writer
}

// Proxy is a running capturing proxy on 127.0.0.1.
type Proxy struct {
	ln       net.Listener
	srv      *http.Server
	basePath string
}

// Start listens on a random loopback port and serves until Close.
func Start(o Options) (*Proxy, error) {
	if o.Upstream == nil || o.Upstream.Scheme == "" || o.Upstream.Host == "" {
		return nil, errors.New("capture: upstream must be an absolute URL")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	up := *o.Upstream
	base := strings.TrimRight(up.Path, "/")
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = up.Scheme, up.Host
			r.Out.URL.Path = base + strings.TrimPrefix(r.In.URL.Path, base)
			r.Out.Host = up.Host
		},
		FlushInterval: -1,
	}
	p := &Proxy{ln: ln, srv: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}, basePath: base}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the base URL to give the agent in place of the upstream's: the
// proxy's address with the upstream's path (http://127.0.0.1:<port>/v1).
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() + p.basePath }

// Close stops the proxy; exchanges in flight are cut.
func (p *Proxy) Close() error { return p.srv.Close() }
