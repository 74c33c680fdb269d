package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc/server/auth"
	"svc/store"
)

// credentialCheckWithin bounds the store reads of credentialLive.
const credentialCheckWithin = 5 * time.Second

// credentialLive re-reads, after a stream subscribed, the credential it
// was opened with. With several brokers a revoke committed on another
// broker ends this broker's streams when its revocation arrives here
// (clusterrevoke.go); a stream that authenticated just before that
// commit and subscribed just after the revocation was handled would
// miss it and live on. Read after the subscription, the store has either
// the revoke (refused here) or not yet (the revocation, when it comes,
// finds the subscription): no window is left. A broker alone does not
// read: its revoke ends streams in the same process right after commit.
func (c *core) credentialLive(p *auth.Principal) error {
	ctx, cancel := context.WithTimeout(context.Background(), credentialCheckWithin)
	defer cancel()
	// MemberPermissions reloads the shared members when they changed
	// (clustermembers.go): a member deleted on another broker is gone.
	if _, ok := c.team.MemberPermissions(p.Member); !ok {
		return fmt.Errorf("%w: member %s no longer exists", auth.ErrUnauthenticated, p.Member)
	}
	switch p.Via {
	case auth.ViaSession:
		s, err := c.store.GetSession(ctx, p.Session)
		if errors.Is(err, store.ErrNotFound) || (err == nil && s.Member != p.Member) {
			return fmt.Errorf("%w: the session was revoked", auth.ErrUnauthenticated)
		}
		return err
	case auth.ViaBearer:
		toks, err := c.store.ListTokens(ctx, p.Member)
		if err != nil {
			return err
		}
		for _, t := range toks {
			if t.ID == p.TokenID {
				if !t.Active(c.now()) {
					break
				}
				return nil
			}
		}
		return fmt.Errorf("%w: the token was revoked", auth.ErrUnauthenticated)
	}
	return nil
}
