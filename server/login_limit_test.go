package server

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/peer"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
)

// fromIP is a context of a native gRPC call from ip.
func fromIP(ip string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

// loginTry is one login attempt from an address, naming member (nil: the
// codeless form).
type loginTry struct {
	ip     string
	member *string
}

func named(n string) *string { return &n }

// TestLoginLimitsByMemberAndSource: failures with made-up names or from
// other addresses cannot lock a real member out of a login that names
// them; the member's own counter and the address's counter still do, and
// the codeless form keeps the global counter.
func TestLoginLimitsByMemberAndSource(t *testing.T) {
	// spread gives n failing attempts, each from its own address.
	spread := func(n int, member func(i int) *string) []loginTry {
		var out []loginTry
		for i := range n {
			out = append(out, loginTry{ip: fmt.Sprintf("198.51.100.%d", i+1), member: member(i)})
		}
		return out
	}
	oneSource := func(ip string, n int, member func(i int) *string) []loginTry {
		var out []loginTry
		for i := range n {
			out = append(out, loginTry{ip: ip, member: member(i)})
		}
		return out
	}
	ghosts := func(i int) *string { return named(fmt.Sprintf("ghost%d", i)) }
	codeless := func(int) *string { return nil }
	tests := []struct {
		name     string
		failures []loginTry
		// then the right code for admin, from ip, naming admin or not
		ip       string
		codeless bool
		want     apierr.Code // "" for a session
	}{
		{name: "made-up names past the global limit do not lock admin out", failures: spread(3*auth.TOTPGlobalFailures, ghosts), ip: "203.0.113.7"},
		{name: "codeless failures past the global limit do not lock admin out", failures: spread(3*auth.TOTPGlobalFailures, codeless), ip: "203.0.113.7"},
		{name: "the codeless form keeps the global limit", failures: spread(auth.TOTPGlobalFailures, ghosts), ip: "203.0.113.7", codeless: true, want: apierr.CodeRateLimited},
		{name: "below the global limit the codeless form works", failures: spread(auth.TOTPGlobalFailures-1, ghosts), ip: "203.0.113.7", codeless: true},
		{name: "admin's own failures lock admin", failures: spread(auth.TOTPMemberFailures, func(int) *string { return named("admin") }), ip: "203.0.113.7", want: apierr.CodeRateLimited},
		{name: "admin's own failures lock the codeless form for admin", failures: spread(auth.TOTPMemberFailures, func(int) *string { return named("admin") }), ip: "203.0.113.7", codeless: true, want: apierr.CodeRateLimited},
		{name: "bob's failures do not lock admin", failures: spread(3*auth.TOTPMemberFailures, func(int) *string { return named("bob") }), ip: "203.0.113.7"},
		{name: "an address's failures lock that address", failures: oneSource("203.0.113.7", auth.TOTPSourceFailures, ghosts), ip: "203.0.113.7", want: apierr.CodeRateLimited},
		{name: "an address's failures do not lock another", failures: oneSource("203.0.113.7", auth.TOTPSourceFailures, ghosts), ip: "203.0.113.8"},
		{name: "below the address limit", failures: oneSource("203.0.113.7", auth.TOTPSourceFailures-1, ghosts), ip: "203.0.113.7"},
		{name: "an IPv6 /64 counts as one address", failures: spread6("2001:db8:1:2::", auth.TOTPSourceFailures, ghosts), ip: "2001:db8:1:2::ffff", want: apierr.CodeRateLimited},
		{name: "another /64 is another address", failures: spread6("2001:db8:1:2::", auth.TOTPSourceFailures, ghosts), ip: "2001:db8:1:3::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := mustBroker(t)
			bad := wrongCode(t)
			for i, f := range tt.failures {
				_, err := b.CreateSession(fromIP(f.ip), &apiv1.CreateSessionRequest{Code: bad, Member: f.member})
				// Past a limit that covers them, the failures are refused
				// (and counted no more): either way, no session.
				require.Contains(t, []apierr.Code{apierr.CodeUnauthenticated, apierr.CodeRateLimited}, rendered(err), "failure %d", i+1)
			}
			req := &apiv1.CreateSessionRequest{Code: code(t, time.Now())}
			if !tt.codeless {
				req.Member = named("admin")
			}
			res, err := b.CreateSession(fromIP(tt.ip), req)
			if tt.want == "" {
				require.NoError(t, err)
				require.Equal(t, "admin", res.GetSession().GetMember())
				return
			}
			require.Equal(t, tt.want, rendered(err))
			require.Positive(t, apierr.Render(err).RetryAfter)
			require.LessOrEqual(t, apierr.Render(err).RetryAfter, auth.TOTPWindow)
		})
	}
}

// spread6 gives n failing attempts from distinct addresses in one /64.
func spread6(prefix string, n int, member func(i int) *string) []loginTry {
	var out []loginTry
	for i := range n {
		out = append(out, loginTry{ip: fmt.Sprintf("%s%x", prefix, i+1), member: member(i)})
	}
	return out
}
