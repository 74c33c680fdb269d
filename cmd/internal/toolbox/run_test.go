package toolbox

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
)

func TestResolveTokenUnderTheRunner(t *testing.T) {
	const member = "svc_RunnerMemberToken0123456789abc"
	srv, err := relay.Listen("", nil)
	require.NoError(t, err)
	defer srv.Close()
	calls := 0
	noDump = func() error { calls++; return nil }
	t.Cleanup(func() { noDump = relay.NoDump })
	const u = "http://127.0.0.1:1"
	emptyCache := filepath.Join(t.TempDir(), "config")

	tk, err := srv.IssueTicket(member)
	require.NoError(t, err)
	spent, err := srv.IssueTicket(member)
	require.NoError(t, err)
	_, err = relay.Redeem(context.Background(), srv.Path(), spent.Value())
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		flag    string
		env     map[string]string
		want    string
		wantErr string
		dumps   int // NoDump calls
	}{
		{name: "flag first", flag: "svc_FlagToken", env: map[string]string{relay.TicketEnv: tk.Value(), relay.Env: srv.Path()}, want: "svc_FlagToken"},
		{name: "SVC_TOKEN before a ticket", env: map[string]string{client.EnvToken: "svc_EnvToken", relay.TicketEnv: tk.Value(), relay.Env: srv.Path()}, want: "svc_EnvToken"},
		{name: "a ticket without a socket is the client's order", env: map[string]string{relay.TicketEnv: tk.Value()}, wantErr: "no token"},
		{name: "spent ticket", env: map[string]string{relay.TicketEnv: spent.Value(), relay.Env: srv.Path()}, wantErr: "refused this toolbox's ticket", dumps: 1},
		{name: "runner gone", env: map[string]string{relay.TicketEnv: tk.Value(), relay.Env: filepath.Join(t.TempDir(), "gone.sock")}, wantErr: "no credential from the runner", dumps: 1},
		{name: "the ticket redeemed", env: map[string]string{relay.TicketEnv: tk.Value(), relay.Env: srv.Path()}, want: member, dumps: 1},
		{name: "the same ticket again", env: map[string]string{relay.TicketEnv: tk.Value(), relay.Env: srv.Path()}, wantErr: "refused this toolbox's ticket", dumps: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls = 0
			env := map[string]string{"XDG_CONFIG_HOME": emptyCache, "HOME": emptyCache}
			for k, v := range tc.env {
				env[k] = v
			}
			got, err := resolveToken(context.Background(), tc.flag, func(k string) string { return env[k] }, u)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), member)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
			require.Equal(t, tc.dumps, calls, "undumpable before the credential arrives")
		})
	}
}
