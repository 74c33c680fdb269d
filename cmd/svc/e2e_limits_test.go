package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
