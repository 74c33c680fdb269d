package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	apiv1 "svc/gen/svc/v1"
)

// Behind a reverse proxy every client arrives from the proxy's address.
// With SVC_TRUSTED_PROXIES naming it, the broker reads the client from
// X-Forwarded-For (right-most untrusted entry) for every per-address
// bound: one client at its bound of unauthenticated requests does not
// lock out the others behind the same proxy, the enrollment mint limit
// counts per forwarded client, and approvers see the client's address.
// The same header from any other peer is ignored. On loopback, 127.0.0.1
// plays the proxy and 127.0.0.2 an untrusted peer.

// untrustedLocal is the source address of an untrusted peer.
const untrustedLocal = "127.0.0.2"

// proxyReq is a one-shot HTTP request to p from the source address local
// ("" for the default, 127.0.0.1), with X-Forwarded-For xff when set.
func proxyReq(t *testing.T, p *proc, local, method, path, xff, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	d := &net.Dialer{Timeout: callTimeout}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c := &http.Client{Timeout: callTimeout, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	require.NoError(t, err)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err.Error() // closed at accept
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

// holdUnauthenticated opens a request through the proxy from client xff
// that stays unauthenticated and in flight: a webhook body trickled at
// 2 KiB/s (above the 1 KiB/s pace floor) until the test ends. It returns
// once the broker has taken the request in and started reading its body
// (it answers Expect: 100-continue then), so the request is counted.
func holdUnauthenticated(t *testing.T, p *proc, slug, xff string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.addr, callTimeout)
	require.NoError(t, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); _ = c.Close(); <-done })
	_, err = fmt.Fprintf(c, "POST /hooks/%s HTTP/1.1\r\nHost: broker\r\nX-Forwarded-For: %s\r\nContent-Length: 200000\r\nExpect: 100-continue\r\n\r\n", slug, xff)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(callTimeout)))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 100 Continue\r\n", line, "the request is taken in")
	blank, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "\r\n", blank)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	go func() {
		// A held request is never answered while the test runs.
		if resp, err := http.ReadResponse(br, nil); err == nil {
			t.Errorf("held request answered %d", resp.StatusCode)
		}
	}()
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		chunk := "{" + strings.Repeat(" ", 1023)
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, chunk); err != nil {
					return
				}
				chunk = strings.Repeat(" ", 1024)
			}
		}
	}()
}

func TestUnauthenticatedBoundPerForwardedClient(t *testing.T) {
	t.Parallel()
	const bound = 5
	p := mustStartSvc(t, procOpts{env: []string{"SVC_MAX_UNAUTHENTICATED_CONNS=" + fmt.Sprint(bound), "SVC_TRUSTED_PROXIES=127.0.0.1"}})
	require.Contains(t, p.stderr.String(), "trusted_proxies=127.0.0.1/32")
	h := newHookPolicyEnv(t, p)
	admin := p.adminToken(t)
	h.endpoint(t, "slow", obj{}, "admin")

	const clientA, clientB = "198.51.100.1", "198.51.100.2"
	for range bound {
		holdUnauthenticated(t, p, "slow", "203.0.113.50, "+clientA)
	}
	code, hdr, body := proxyReq(t, p, "", http.MethodGet, "/healthz", clientA, "")
	require.Equal(t, http.StatusTooManyRequests, code, "client A past its bound is refused: %s", body)
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Contains(t, body, `"rate_limited"`)

	// Client B behind the same proxy is not locked out; nor is the proxy
	// itself, nor client A's authenticated requests.
	code, _, body = proxyReq(t, p, "", http.MethodGet, "/healthz", clientB, "")
	require.Equal(t, http.StatusOK, code, body)
	code, _, body = proxyReq(t, p, "", http.MethodGet, "/healthz", "", "")
	require.Equal(t, http.StatusOK, code, body)
	code, _, body = proxyReq(t, p, "", http.MethodGet, "/briefing", clientA, "", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)

	// An untrusted peer's X-Forwarded-For is ignored: it is its own client.
	code, _, body = proxyReq(t, p, untrustedLocal, http.MethodGet, "/healthz", clientA, "")
	require.Equal(t, http.StatusOK, code, body)
}

func TestEnrollmentMintLimitPerForwardedClient(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{env: []string{"SVC_TRUSTED_PROXIES=127.0.0.1"}})
	admin := bearer(p.adminToken(t))
	mint := func(local, xff string) int {
		code, _, body := proxyReq(t, p, local, http.MethodPost, "/enroll", xff, `{"labelHint":"x"}`)
		require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, code, body)
		return code
	}
	sources := func() map[string]int {
		out := map[string]int{}
		for _, e := range listOf(t, mustCall(t, restDriver{p}, admin, "ListPendingEnrollments", nil), "pending") {
			out[e["sourceIp"].(string)]++
		}
		return out
	}

	// Through the proxy: 10 mints per forwarded client per hour.
	for i := range 10 {
		require.Equal(t, http.StatusOK, mint("", "198.51.100.7"), "mint %d", i)
	}
	require.Equal(t, http.StatusTooManyRequests, mint("", "198.51.100.7"))
	require.Equal(t, http.StatusOK, mint("", "10.1.1.1, 198.51.100.8"), "another client behind the proxy")
	require.Equal(t, map[string]int{"198.51.100.7": 10, "198.51.100.8": 1}, sources(), "approvers see the forwarded client")

	// A native gRPC call through the proxy names its client the same way.
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "198.51.100.9"), callTimeout)
	defer cancel()
	_, err := apiv1.NewEnrollmentClient(p.grpcConn(t)).StartEnrollment(ctx, &apiv1.StartEnrollmentRequest{})
	require.NoError(t, err)
	require.Equal(t, 1, sources()["198.51.100.9"])

	// From an untrusted peer the header counts for nothing: a fresh
	// X-Forwarded-For on every mint does not get past the limit.
	for i := range 10 {
		require.Equal(t, http.StatusOK, mint(untrustedLocal, fmt.Sprintf("203.0.113.%d", i)), "mint %d", i)
	}
	require.Equal(t, http.StatusTooManyRequests, mint(untrustedLocal, "203.0.113.99"))
	got := sources()
	require.Equal(t, 10, got[untrustedLocal])
	for k := range got {
		require.NotContains(t, k, "203.0.113.", "an untrusted peer's header is never shown")
	}
}

// A proxy's connections are charged to no client address, but they count
// toward the bound on all unauthenticated connections (16 x the per-address
// bound): a proxy cannot be used to exhaust the broker.
func TestProxyConnectionsBoundedInAll(t *testing.T) {
	t.Parallel()
	const (
		bound = 2 // per address
		all   = 16 * bound
	)
	p := mustStartSvc(t, procOpts{env: []string{"SVC_MAX_UNAUTHENTICATED_CONNS=" + fmt.Sprint(bound), "SVC_TRUSTED_PROXIES=127.0.0.1"}})
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", p.addr, callTimeout)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var held []net.Conn // connections the test keeps open, sending nothing
	idle := func(n int) {
		for range n {
			held = append(held, dial())
		}
	}
	served := func() bool {
		c := dial()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: broker\r\nConnection: close\r\n\r\n"); err != nil {
			return false
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		// Wait for the broker to close its end (the request said
		// Connection: close): the guard gives the place back as the
		// broker closes the connection, and a place given back only after
		// the connections below arrived would leave the bound one short.
		_, _ = io.Copy(io.Discard, br)
		return resp.StatusCode == http.StatusOK
	}
	// closedAtAccept says whether the broker closed c without a word (a
	// connection it admitted waits for its request until the deadline).
	closedAtAccept := func(c net.Conn, wait time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(wait)) // also run off the test's goroutine: no require
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}

	idle(3 * bound)
	require.Eventually(t, served, 5*time.Second, 50*time.Millisecond,
		"the proxy holds more idle connections than one address may, and is still served")

	// Past the bound on all connections, the proxy's next ones are closed
	// at accept. Each probe the broker admits is kept open, so it takes a
	// place too: the kernel may hand the broker connections in a slightly
	// different order than they were dialled (a probe ahead of the last
	// idle ones), and a probe that went back would free a place for good.
	idle(all)
	refused := false
	for range all {
		c := dial()
		if closedAtAccept(c, 250*time.Millisecond) {
			refused = true
			break
		}
		held = append(held, c)
	}
	require.True(t, refused, "past the bound on all connections, the proxy's next one is closed at accept")

	// And the broker holds no more than the bound: every connection the
	// test still has open either waits for its request (admitted) or was
	// closed at accept.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for _, c := range held {
		wg.Go(func() {
			if !closedAtAccept(c, 2*time.Second) {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, admitted, all, "the broker holds at most %d unauthenticated connections", all)
}
