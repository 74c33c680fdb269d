package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
)

// A broker that runs out of file descriptors keeps its listener: accept
// errors back off and retry, and once the connections that exhausted it
// close, it answers again. Reproduced as `prlimit --nofile=256:256 svc
// serve` with 300 idle connections from one client.
func TestDescriptorExhaustionIsSurvived(t *testing.T) {
	t.Parallel()
	const limit, idle = 256, 300
	p := mustStartSvc(t, procOpts{env: []string{nofileEnv + "=256", "SVC_MAX_UNAUTHENTICATED_CONNS=100000"}})
	require.Contains(t, p.stderr.String(), `msg="open-file limit" soft=256 hard=256`)

	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range idle {
		c, err := net.DialTimeout("tcp", p.addr, callTimeout)
		require.NoError(t, err, "the kernel queues what the broker cannot accept")
		conns = append(conns, c)
	}
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "accept failed; retrying") },
		10*time.Second, 20*time.Millisecond, "the broker runs out of descriptors and says so")

	for _, c := range conns {
		_ = c.Close()
	}
	conns = conns[:0]
	// Answered again once descriptors are free: the listener survived.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/healthz", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "healthz answers once the idle connections closed")
	require.Equal(t, 200, p.do(t, http.MethodGet, "/healthz", nil).status)
}

// slowPost opens a connection and announces a POST /push of size bytes,
// sending only the first byte of it.
func slowPost(t *testing.T, addr, authorization string, size int) (net.Conn, *bufio.Reader) {
	t.Helper()
	return slowRequest(t, addr, "/push", "application/json", authorization, size)
}

// slowRequest opens a connection and announces a POST to path of size
// bytes, sending only the first byte of it.
func slowRequest(t *testing.T, addr, path, contentType, authorization string, size int) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, callTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: broker\r\nContent-Type: " + contentType + "\r\n" +
		"Content-Length: " + strconv.Itoa(size) + "\r\n"
	if authorization != "" {
		head += "Authorization: " + authorization + "\r\n"
	}
	_, err = io.WriteString(c, head+"\r\n{")
	require.NoError(t, err)
	return c, bufio.NewReader(c)
}

// readStatus reads one HTTP response from br within d and returns its
// status and error code.
func readStatus(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration) (int, string) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error
}

// A body announced without a valid credential is refused at once, before a
// byte of it is waited for, and the connection is not kept: a hundred
// clients announcing 1 MB and sending one byte hold nothing.
func TestSlowUnauthenticatedBodiesHoldNothing(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	const clients = 100
	type outcome struct {
		status int
		reason string
		closed bool
	}
	got := make([]outcome, clients)
	var wg sync.WaitGroup
	for i := range clients {
		auth := ""
		if i%2 == 1 {
			auth = "Bearer svc_" + strings.Repeat("A", 43) // a token of nobody
		}
		// Large and small announced bodies alike.
		size := 1 << 20
		if i%4 >= 2 {
			size = 100
		}
		c, br := slowPost(t, p.addr, auth, size)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			var body struct {
				Error string `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			_ = resp.Body.Close()
			// The broker closes the connection rather than wait for the
			// body.
			_, err = br.ReadByte()
			got[i] = outcome{status: resp.StatusCode, reason: body.Error, closed: errors.Is(err, io.EOF)}
		}()
	}
	wg.Wait()
	for i, o := range got {
		require.Equal(t, outcome{status: http.StatusUnauthorized, reason: "unauthenticated", closed: true}, o, "client %d", i)
	}
}

// An authenticated body that falls behind the minimum pace is cut after the
// grace with 400, on a JSON route and on a file write alike.
func TestSlowAuthenticatedBodyIsCut(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	for _, tc := range []struct{ name, path, contentType string }{
		{"push", "/push", "application/json"},
		{"file write", "/fs/write?path=/admin/slow.txt", "text/plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, br := slowRequest(t, p.addr, tc.path, tc.contentType, "Bearer "+admin, 1<<20)
			start := time.Now()
			// One byte every two seconds: far under 1 KiB/s.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(2 * time.Second)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := io.WriteString(c, " "); err != nil {
							return
						}
					}
				}
			}()
			code, reason := readStatus(t, c, br, 30*time.Second)
			require.Equal(t, http.StatusBadRequest, code)
			require.Equal(t, "bad_request", reason)
			took := time.Since(start)
			require.Greater(t, took, 9*time.Second, "the grace is 10 s")
			require.Less(t, took, 20*time.Second)
		})
	}
	t.Cleanup(func() {
		require.NotContains(t, p.stderr.String(), "level=ERROR", "a slow client is not the operator's problem")
	})
}

// Each client address may hold a bounded number of connections that have
// not presented a valid credential; connections that did, do not count.
func TestUnauthenticatedConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	const bound = 5
	p := mustStartSvc(t, procOpts{env: []string{"SVC_MAX_UNAUTHENTICATED_CONNS=" + strconv.Itoa(bound)}})
	admin := p.adminToken(t)
	require.Contains(t, p.stderr.String(), "max_unauthenticated_conns=5")

	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", p.addr, callTimeout)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// served reports whether the broker answers a request on c (false:
	// it closed c at accept).
	served := func(c net.Conn, authorization string) bool {
		req := "GET /healthz HTTP/1.1\r\nHost: broker\r\n"
		if authorization != "" {
			req = "GET /briefing HTTP/1.1\r\nHost: broker\r\nAuthorization: " + authorization + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			return false
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return true
	}

	// A connection that authenticated stays open and counts no more.
	authed := dial()
	require.True(t, served(authed, "Bearer "+admin))

	idle := make([]net.Conn, bound)
	for i := range idle {
		idle[i] = dial()
	}
	// The broker registers connections as it accepts them: wait until a
	// further one is refused.
	require.Eventually(t, func() bool { return !served(dial(), "") }, 5*time.Second, 50*time.Millisecond,
		"a connection past the bound is closed at accept")
	require.True(t, served(authed, "Bearer "+admin), "the authenticated connection still works")

	// Closing one of the idle connections makes room.
	require.NoError(t, idle[0].Close())
	require.Eventually(t, func() bool { return served(dial(), "") }, 5*time.Second, 50*time.Millisecond)
}

// One member holds a bounded number of live streams, SSE and gRPC together;
// past it a stream is refused with 429 / RESOURCE_EXHAUSTED, other members
// are unaffected, and a closed stream frees its place.
func TestLiveStreamsPerMember(t *testing.T) {
	t.Parallel()
	const bound = 3
	p := mustStartSvc(t, procOpts{env: []string{"SVC_MAX_STREAMS_PER_MEMBER=" + strconv.Itoa(bound)}})
	admin := p.adminToken(t)
	d := restDriver{p: p}
	bob := createMember(t, d, bearer(admin), "bob")

	first := p.subscribeSSE(t, admin, "admin", "")
	p.subscribeGRPC(t, admin, "admin", "")
	p.subscribeSSE(t, admin, "admin", "")

	p.sseFail(t, "/subscribe?name=admin", "rate_limited", withBearer(admin))
	_, _, err := p.grpcSubscribe(t, bearer(admin), &apiv1.SubscribeRequest{Name: "admin"})
	requireGRPCError(t, err, "rate_limited")
	require.Equal(t, codes.ResourceExhausted, status.Code(err))

	p.subscribeSSE(t, bob, "bob", "")
	connected := map[string]float64{}
	for _, c := range listOf(t, p.do(t, http.MethodGet, "/roster", nil, withBearer(admin)).body, "connected") {
		connected[c["name"].(string)] = c["connected"].(float64)
	}
	require.Equal(t, map[string]float64{"admin": bound, "bob": 1}, connected)

	first.close()
	require.Eventually(t, func() bool {
		resp, _, cancel := p.sseGet(t, "/subscribe?name=admin", sseOpts{}, withBearer(admin))
		defer cancel()
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond, "a closed stream frees its place")
}

// The default bound is 64 streams a member.
func TestLiveStreamsPerMemberDefault(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	for range 64 {
		p.subscribeGRPC(t, admin, "admin", "")
	}
	_, _, err := p.grpcSubscribe(t, bearer(admin), &apiv1.SubscribeRequest{Name: "admin"})
	requireGRPCError(t, err, "rate_limited")
	r := p.do(t, http.MethodGet, "/subscribe?name=admin", nil, withBearer(admin))
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "5", r.header.Get("Retry-After"))
}
