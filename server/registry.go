package server

import (
	"context"
	"fmt"

	"svc/server/auth"
	"svc/server/registry"
	"svc/store"
)

// memberNames are the names of the team's members, sorted.
func (c *core) memberNames() []string {
	ms := c.team.Members()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// newRegistryKit is the registry kit over c: its changes commit on the
// message committer.
func newRegistryKit(c *core) *registry.Kit {
	return registry.New(registry.Deps{
		Commit: func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)) error {
			return c.msgs.change(ctx, apply, nil, nil).err
		},
		Members: c.memberNames, Holders: c.holders, KEK: c.kek,
	})
}

// seal encrypts a write-only value for purpose; errNoKEK without a KEK.
func (c *core) seal(plaintext []byte, purpose string) ([]byte, error) {
	return registry.Seal(c.kek, plaintext, purpose)
}

// open decrypts a value seal made for purpose; errNoKEK without a KEK.
func (c *core) open(sealed []byte, purpose string) ([]byte, error) {
	return registry.Open(c.kek, sealed, purpose)
}

// registryThreadReadable admits the history of a registry thread (its
// prefix tool, secret or hook) to the holders of its registry's manage
// leaf and to the members any of its messages was addressed to; History
// then shows each only the messages addressed to them. Anyone else is
// refused (403).
func (c *core) registryThreadReadable(ctx context.Context, p *auth.Principal, prefix, thread string) error {
	if k, ok := registry.KindOfThread(prefix); ok && p.Has(k.Manage) {
		return nil
	}
	return c.receivedOn(ctx, p, thread)
}

// receivedOn admits a member that received a message on thread (since it
// became this member) and refuses anyone else: a thread you may not read
// is refused, never shown empty.
func (c *core) receivedOn(ctx context.Context, p *auth.Principal, thread string) error {
	since, err := c.memberSince(ctx, p.Member)
	if err != nil {
		return err
	}
	got, err := c.store.ListMessages(ctx, store.MessageFilter{Thread: thread, Viewer: p.Member, AfterSeq: since, Limit: 1})
	if err != nil {
		return err
	}
	if len(got) == 0 {
		return fmt.Errorf("%w: you are not in the thread %s", auth.ErrForbidden, thread)
	}
	return nil
}
