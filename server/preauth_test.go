package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	apiv1 "svc/gen/svc/v1"
	"svc/server/activity"
)

func TestPreauth(t *testing.T) {
	env := newChainEnv(t)
	var clock time.Time
	p := newPreauth(env.c.authn, func() time.Time { return clock })
	upload := apiv1.Activity_UploadGenAi_FullMethodName
	tests := []struct {
		name   string
		method string
		md     metadata.MD
		want   codes.Code
	}{
		{"a member's token", upload, metadata.Pairs("authorization", "Bearer "+env.alice), codes.OK},
		{"no credential", upload, nil, codes.Unauthenticated},
		{"an unknown token", upload, metadata.Pairs("authorization", "Bearer svc_nottherightone"), codes.Unauthenticated},
		{"a malformed header", upload, metadata.Pairs("authorization", "Basic eA=="), codes.Unauthenticated},
		{"a public method needs nothing", apiv1.Broker_Health_FullMethodName, nil, codes.OK},
		{"an unknown method is left to gRPC", "/svc.v1.Nope/Nope", nil, codes.OK},
		{"another protocol is refused before credentials", upload, metadata.Pairs("x-svc-protocol", "2"), codes.InvalidArgument},
		{"another protocol with a good token", upload, metadata.Pairs("x-svc-protocol", "2", "authorization", "Bearer "+env.alice), codes.InvalidArgument},
		{"our protocol with a good token", upload, metadata.Pairs("x-svc-protocol", "1", "authorization", "Bearer "+env.alice), codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.handle(context.Background(), &tap.Info{FullMethodName: tc.method, Header: tc.md})
			require.Equal(t, tc.want, status.Code(err), "%v", err)
		})
	}

	// A credential seen good is taken from the cache until it expires, so a
	// store failure meanwhile does not refuse it; after that it is checked
	// again.
	good := metadata.Pairs("authorization", "Bearer "+env.alice)
	clock = time.Unix(1_000, 0)
	_, err := p.handle(context.Background(), &tap.Info{FullMethodName: upload, Header: good})
	require.NoError(t, err)
	env.c.authn = nil // any lookup now panics
	p.authn = nil
	clock = clock.Add(preauthTTL - time.Second)
	_, err = p.handle(context.Background(), &tap.Info{FullMethodName: upload, Header: good})
	require.NoError(t, err, "answered from the cache")
	clock = clock.Add(2 * time.Second)
	require.Panics(t, func() { _, _ = p.handle(context.Background(), &tap.Info{FullMethodName: upload, Header: good}) }, "expired: looked up again")
}

// TestPreauthRefusesUnread: a call without a credential is answered before
// the server reads its request, so a caller cannot make the server hold a
// large message it never authenticated for.
func TestPreauthRefusesUnread(t *testing.T) {
	env := newChainEnv(t)
	g := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecvMessage), grpc.InTapHandle(newPreauth(env.c.authn, time.Now).handle))
	apiv1.RegisterActivityServer(g, &activity.Service{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)

	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	body, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	req, err := http.NewRequest(http.MethodPost, "http://"+l.Addr().String()+apiv1.Activity_UploadGenAi_FullMethodName, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	go func() {
		// A message header announcing 10 MiB, then a little of it, and the
		// rest never.
		var hdr [5]byte
		binary.BigEndian.PutUint32(hdr[1:], 10<<20)
		_, _ = w.Write(hdr[:])
		_, _ = w.Write(make([]byte, 1024))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tr.RoundTrip(req.WithContext(ctx))
	require.NoError(t, err, "answered while the request is still open")
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	st := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
	require.Equal(t, "16", st, "UNAUTHENTICATED")
}
