package server

import (
	"context"
	"crypto/sha256"
	"svc/server/apierr"
	"sync"
	"time"

	"google.golang.org/grpc/tap"

	"svc/server/auth"
)

// maxRecvMessage bounds one gRPC request on the network server: a 16 MiB
// inference upload or OTLP export with room for its envelope. gRPC reads a
// request before any interceptor runs, so preauth keeps callers without a
// credential from making the server hold that much.
const maxRecvMessage = 16<<20 + 64<<10

// Known-good credentials are remembered this long, at most this many: the
// interceptors authenticate every call in full regardless, so the cache
// only spares the store a second lookup per call.
const (
	preauthTTL = 10 * time.Second
	preauthMax = 4096
)

// preauth is the network gRPC server's tap: before gRPC reads a request
// (up to maxRecvMessage) for a method that is not public, the call must
// carry a credential that authenticates, or it is refused unread. It runs
// on the connection's reader, so it answers from a small cache of
// credentials seen good when it can.
type preauth struct {
	authn *auth.Authenticator
	now   func() time.Time
	mu    sync.Mutex
	good  map[[sha256.Size]byte]time.Time // credential hash → known good until
}

func newPreauth(authn *auth.Authenticator, now func() time.Time) *preauth {
	return &preauth{authn: authn, now: now, good: map[[sha256.Size]byte]time.Time{}}
}

// handle implements tap.ServerInHandle.
func (a *preauth) handle(ctx context.Context, info *tap.Info) (context.Context, error) {
	if err := checkProtocol(info.Header); err != nil {
		return ctx, apierr.ToStatus(err).Err()
	}
	rule, known := auth.RuleFor(info.FullMethodName)
	if !known || rule.Public {
		return ctx, nil // unknown methods are refused unread by gRPC; public ones are small
	}
	creds := auth.CredentialsFromMetadata(info.Header)
	key := sha256.Sum256([]byte(creds.Bearer + "\x00" + creds.Session))
	now := a.now()
	a.mu.Lock()
	until, ok := a.good[key]
	a.mu.Unlock()
	if ok && now.Before(until) {
		return ctx, nil
	}
	if _, err := a.authn.Verify(ctx, creds); err != nil {
		return ctx, apierr.ToStatus(err).Err()
	}
	a.mu.Lock()
	if len(a.good) >= preauthMax {
		for k, t := range a.good {
			if !now.Before(t) || len(a.good) >= preauthMax {
				delete(a.good, k)
			}
		}
	}
	a.good[key] = now.Add(preauthTTL)
	a.mu.Unlock()
	return ctx, nil
}
