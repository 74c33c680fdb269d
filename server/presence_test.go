package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func TestPresenceActivityLapsesToIdle(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	pr := newPresence(func() time.Time { return now })
	role := func(string) (*apiv1.Role, bool) { return nil, true }
	conn := func(string) int { return 2 }
	read := func() *apiv1.Presence {
		l := pr.list(conn, role)
		require.Len(t, l, 1)
		return l[0]
	}
	tests := []struct {
		name       string
		state      string
		after      time.Duration
		wantState  string // "" absent
		wantBusy   *bool
		wantListed bool
	}{
		{name: "working shows busy", state: stateWorking, wantState: stateWorking, wantBusy: ptr(true)},
		{name: "blocked is not busy", state: stateBlocked, wantState: stateBlocked, wantBusy: ptr(false)},
		{name: "idle omits both", state: stateIdle},
		{name: "still working at 29 s", state: stateWorking, after: 29 * time.Second, wantState: stateWorking, wantBusy: ptr(true)},
		{name: "lapsed at 30 s", state: stateWorking, after: activityTTL},
		{name: "blocked lapses too", state: stateBlocked, after: time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr.setActivity("alice", tc.state)
			now = now.Add(tc.after)
			p := read()
			require.Equal(t, int32(2), p.GetConnected())
			if tc.wantState == "" {
				require.Nil(t, p.Activity)
				require.Nil(t, p.Busy)
				return
			}
			require.Equal(t, tc.wantState, p.GetActivity())
			require.Equal(t, *tc.wantBusy, p.GetBusy())
		})
	}
	// Only members seen are listed; deleted members are not.
	pr.touchIfSeen("ghost")
	require.Len(t, pr.list(conn, role), 1)
	require.Empty(t, pr.list(conn, func(string) (*apiv1.Role, bool) { return nil, false }))
}
