package runner

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
)

func TestMergeEnvLeavesOutTheToken(t *testing.T) {
	const tok = "svc_MergeEnvToken0123456789abcdefghijklmnopq"
	for _, tc := range []struct {
		name    string
		base    []string
		want    []string
		dropped []string
	}{
		{name: "the runner's own settings", base: []string{"SVC_TOKEN=" + tok, "SVC_RUNNER_SOCKET=/old", "SVC_RUNNER_TICKET=old", "PATH=/bin"}, want: []string{"PATH=/bin"}},
		{name: "SVC_TOKEN of another member", base: []string{"SVC_TOKEN=svc_other", "HOME=/h"}, want: []string{"HOME=/h"}},
		{name: "a variable holding the token", base: []string{"MY_CREDS=user:" + tok + "@host", "TERM=dumb"}, want: []string{"TERM=dumb"}, dropped: []string{"MY_CREDS"}},
		{name: "an OTLP header with the token", base: []string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer " + tok}, dropped: []string{"OTEL_EXPORTER_OTLP_HEADERS"}},
		{name: "the broker's credentials", base: []string{"SVC_DB_URL=postgres://svc:pw@db/team", "SVC_ACTIVITY_DB_URL=postgres://a:pw@db/act", "SVC_NATS_URL=nats://n:pw@nats:4222", "SVC_KEK=a2V5", "PGPASSWORD=pw", "PGPASSFILE=/etc/svc/pgpass", "PGSERVICEFILE=/etc/svc/pg", "LANG=C"}, want: []string{"LANG=C"}},
		{name: "a part of the token is not the token", base: []string{"X=" + tok[:20]}, want: []string{"X=" + tok[:20]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, dropped := mergeEnv(tc.base, map[string]string{"E2E_SECRET": "s3cret"}, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1/x"}, tok)
			require.Equal(t, append(append(tc.want, "E2E_SECRET=s3cret"), "ANTHROPIC_BASE_URL=http://127.0.0.1:1/x"), env)
			require.Equal(t, tc.dropped, dropped)
		})
	}
}

func TestAgentEnvHoldsNoToken(t *testing.T) {
	const tok = "svc_AgentEnvToken0123456789abcdefghijklmnopq"
	otlp, err := relay.StartOTLP(relay.OTLPOptions{Broker: "http://127.0.0.1:1", Token: tok})
	require.NoError(t, err)
	defer otlp.Close()
	env := agentEnv(otlp, "/run/relay.sock", map[string]string{"E2E_SECRET": "s3cret"})
	require.Equal(t, otlp.Endpoint(), env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	require.Equal(t, otlp.Headers(), env["OTEL_EXPORTER_OTLP_HEADERS"])
	require.Equal(t, "s3cret", env["E2E_SECRET"])
	for k, v := range env {
		require.NotContains(t, v, tok, k)
	}
	noCapture := agentEnv(nil, "/run/relay.sock", nil)
	require.Equal(t, map[string]string{relay.Env: "/run/relay.sock"}, noCapture)
}

func TestGateOnToolbox(t *testing.T) {
	srv, err := relay.Listen("", nil)
	require.NoError(t, err)
	defer srv.Close()
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	t.Run("an agent without a toolbox", func(t *testing.T) {
		tk, err := srv.IssueTicket("svc_x")
		require.NoError(t, err)
		var log bytes.Buffer
		require.True(t, closed(gateOnToolbox(NewPlain(), tk, &logger{w: &log})))
		_, err = relay.Redeem(context.Background(), srv.Path(), tk.Value())
		require.ErrorIs(t, err, relay.ErrTicketRefused, "the unused ticket is void")
	})

	t.Run("the toolbox redeems", func(t *testing.T) {
		tk, err := srv.IssueTicket("svc_x")
		require.NoError(t, err)
		var log bytes.Buffer
		ready := gateOnToolbox(NewClaude(), tk, &logger{w: &log})
		time.Sleep(50 * time.Millisecond)
		require.False(t, closed(ready), "no turn before the toolbox has its credential")
		got, err := relay.Redeem(context.Background(), srv.Path(), tk.Value())
		require.NoError(t, err)
		require.Equal(t, "svc_x", got)
		require.Eventually(t, func() bool { return closed(ready) }, 5*time.Second, time.Millisecond)
		require.Empty(t, log.String())
	})

	t.Run("no toolbox comes", func(t *testing.T) {
		toolboxWait = 50 * time.Millisecond
		t.Cleanup(func() { toolboxWait = 30 * time.Second })
		tk, err := srv.IssueTicket("svc_x")
		require.NoError(t, err)
		var log bytes.Buffer
		ready := gateOnToolbox(NewCodex(), tk, &logger{w: &log})
		require.Eventually(t, func() bool { return closed(ready) }, 5*time.Second, time.Millisecond)
		_, err = relay.Redeem(context.Background(), srv.Path(), tk.Value())
		require.ErrorIs(t, err, relay.ErrTicketRefused, "after the wait the ticket is void: the agent's turns come after it")
		require.True(t, strings.Contains(log.String(), "did not ask for its credential"), log.String())
	})
}
