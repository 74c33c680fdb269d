package relay

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// OTLPKeyHeader carries the OTLP relay's key. The agent's exporter sends it
// from OTEL_EXPORTER_OTLP_HEADERS; it never goes to the broker.
const OTLPKeyHeader = "X-Svc-Relay-Key"

// otlpPaths are what the relay forwards: the broker's OTLP/HTTP routes.
var otlpPaths = map[string]bool{"/otlp/v1/logs": true, "/otlp/v1/metrics": true}

// OTLP is the runner's local OTLP relay. The agent's telemetry exporter
// posts to it on loopback with the relay's key, and the relay forwards the
// request to the broker with the member's bearer, so the agent's
// environment holds no credential of the broker: only the key, which is
// worth nothing off this machine or once the runner stops, and which lets
// its holder do one thing, send telemetry as the member.
//
// Like the capturing proxy it answers only for its own Host (a web page
// that rebinds a DNS name to 127.0.0.1 is kept out) and only with the key
// (the loopback interface is open to every user of the machine).
type OTLP struct {
	ln     net.Listener
	srv    *http.Server
	tr     *http.Transport
	host   string // 127.0.0.1:<port>
	key    string
	cancel context.CancelFunc
}

// OTLPOptions configures StartOTLP.
type OTLPOptions struct {
	// Broker is the broker's URL (http or https; a base path is kept).
	Broker string
	// Token is the member's bearer, added to every forwarded request.
	Token string
	// Log receives one line per problem, never a body or a credential.
	Log io.Writer
}

// StartOTLP listens on a random loopback port and relays until Close.
func StartOTLP(o OTLPOptions) (*OTLP, error) {
	up, err := url.Parse(o.Broker)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" || up.User != nil {
		return nil, errors.New("relay: the broker URL must be an absolute http or https URL without credentials")
	}
	if o.Token == "" {
		return nil, errors.New("relay: no token to relay with")
	}
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
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
	lg := log.New(logw, "svc runner: otlp relay: ", 0)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The exporter's own encoding goes through as it is.
	tr.DisableCompression = true
	base := strings.TrimRight(up.Path, "/")
	bearer := "Bearer " + o.Token
	ctx, cancel := context.WithCancel(context.Background())
	r := &OTLP{ln: ln, tr: tr, host: ln.Addr().String(), key: hex.EncodeToString(key), cancel: cancel}
	var once sync.Once
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = up.Scheme, up.Host
			pr.Out.URL.Path, pr.Out.URL.RawPath = base+pr.In.URL.Path, ""
			pr.Out.URL.RawQuery = ""
			pr.Out.Host = ""
			// Whatever credential the agent sent is not the member's:
			// only the relay's goes.
			for _, h := range []string{OTLPKeyHeader, "Authorization", "Cookie", "Proxy-Authorization"} {
				pr.Out.Header.Del(h)
			}
			pr.Out.Header.Set("Authorization", bearer)
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			if req.Context().Err() == nil {
				// One line, not one per export: an exporter retries often.
				once.Do(func() { lg.Printf("the broker is unreachable: %v", err) })
			}
			writeRelayError(w, http.StatusBadGateway, "upstream_unreachable", "the runner could not reach the broker")
		},
		Transport: tr,
		ErrorLog:  lg,
	}
	r.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			switch {
			case req.Host != r.host:
				writeRelayError(w, http.StatusMisdirectedRequest, "wrong_host", "the OTLP relay answers only for "+r.host)
			case subtle.ConstantTimeCompare([]byte(req.Header.Get(OTLPKeyHeader)), []byte(r.key)) != 1:
				writeRelayError(w, http.StatusUnauthorized, "unauthenticated", "the OTLP relay needs its key")
			case req.Method != http.MethodPost || !otlpPaths[req.URL.Path]:
				writeRelayError(w, http.StatusNotFound, "not_found", "the OTLP relay forwards only POST /otlp/v1/logs and /otlp/v1/metrics")
			default:
				rp.ServeHTTP(w, req)
			}
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          lg,
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Endpoint is the OTLP/HTTP base URL to give the agent
// (OTEL_EXPORTER_OTLP_ENDPOINT): the exporter appends /v1/logs.
func (r *OTLP) Endpoint() string { return "http://" + r.host + "/otlp" }

// Headers is the value of OTEL_EXPORTER_OTLP_HEADERS: the relay's key.
func (r *OTLP) Headers() string { return OTLPKeyHeader + "=" + r.key }

// Key is the relay's key alone.
func (r *OTLP) Key() string { return r.key }

// Close stops the relay; requests in flight are cut.
func (r *OTLP) Close() error {
	r.cancel()
	err := r.srv.Close()
	r.tr.CloseIdleConnections()
	return err
}

// writeRelayError writes the spec's {error, message} body.
func writeRelayError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": typ, "message": msg})
}
