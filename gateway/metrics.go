package gateway

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"svc/server/auth"
)

// handleMetrics serves GET /metrics in the Prometheus text format
// (docs/PERFORMANCE.md: Metrics). A loopback peer needs no credential
// unless the exemption is switched off, or the request came through a
// proxy (it names a forwarded client, who may be anyone); anyone else
// needs a bearer token whose member holds metrics.read (or team.manage,
// as admins do): 401 without a valid one, 403 without either.
func (g *Gateway) handleMetrics(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
	if g.metricsClosed || !loopbackPeer(r) {
		creds := auth.CredentialsFromHeader(r.Header)
		creds.Session = ""
		p, err := g.authn.Authenticate(r.Context(), creds)
		if err != nil {
			return err
		}
		// metrics.read, or team.manage: the admin preset is the
		// specification's leaves, and an admin reads the metrics too.
		if err := auth.Require(auth.MetricsRead).Admit(p); err != nil {
			if auth.Require(auth.TeamManage).Admit(p) != nil {
				return err
			}
		}
		g.authenticated(r, p)
	}
	promhttp.HandlerFor(g.srv.Metrics(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	return nil
}

// loopbackPeer reports whether r came straight from a loopback address:
// not through a proxy that says it forwards another client.
func loopbackPeer(r *http.Request) bool {
	if r.Header.Get("Forwarded") != "" || r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("X-Real-Ip") != "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
