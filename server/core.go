package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"svc/server/apierr"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/clientaddr"
	"svc/server/cluster"
	"svc/server/hub"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/server/vfs"
	"svc/store"
)

// core is what every service shares: the stores, the team, the KEK, the
// messenger that commits messages and the changes they report, the live
// hub of chat, presence, what the core asks of the activity capability,
// the blob store, the clock and the logger. server.New builds one core; every service holds it, and no
// service holds another. Checks more than one service makes (attachments,
// channel lookups, who holds a permission) are core methods.
type core struct {
	store    store.Store
	activity store.ActivityStore // nil without an activity store
	team     *Team
	kek      *kek.KEK // nil when no KEK is active: write-only secrets answer 503
	msgs     *messenger
	hub      *hub.Hub
	presence *presence
	// live publishes the team stream (teamlive.go); agents are the
	// members a runner has connected for.
	live   *teamLive
	agents *agentSet
	// act is the activity capability as the core uses it: the rows the
	// core records, the live activity streams a member change ends
	// (activity.go).
	act activityLog
	// ids tells apart the members that held one name.
	ids   *memberIDs
	blobs *vfs.Blobs // nil when the filesystem is disabled
	// secretValues are the values of the secrets a member may use, for
	// redacting what the member's agent sends (the secrets capability's
	// MemberValues).
	secretValues func(ctx context.Context, member string) ([]string, error)
	// hooks is what the core asks of the inbound-hook capability.
	hooks inboundHooks
	// approvals indexes the pending approvals: presence reads a member
	// with one as blocked, and their expiry timer runs from it.
	approvals *pendingApprovals
	// maxFileSize is the most bytes one file may hold.
	maxFileSize int64
	// quotaBytes is the most bytes one member's home may hold; <= 0 is
	// unlimited.
	quotaBytes int64
	// maxStreams bounds one member's live streams; <= 0 is unbounded.
	maxStreams int
	// proxies are the trusted reverse proxies, whose X-Forwarded-For names
	// the client of a native gRPC call (nil: none).
	proxies *clientaddr.Proxies
	version string
	// metrics are what GET /metrics shows; nil in tests that build a core
	// by hand.
	metrics *metrics
	now     func() time.Time
	log     *slog.Logger
	// revokes fans the revocations log out to the other brokers; nil on a
	// broker that serves the team alone (clusterrevoke.go).
	revokes *cluster.Fanout[store.Revocation]
	// signer signs what this broker publishes on NATS and checks what its
	// peers do, with a key derived from the KEK they share; nil on a
	// broker alone or without a KEK (docs/DECISIONS.md, "Signed NATS
	// messages").
	signer *cluster.Signer
}

// inboundHooks is what the core asks of the inbound-hook capability
// (notify.Service, set by New): the briefing section of a member, and
// the release of a deleted member's targets and of the copies queued or
// held for it.
type inboundHooks interface {
	Briefing(ctx context.Context, member string) (*apiv1.BriefingNotifications, error)
	ReleaseTargets(ctx context.Context, member, by string) error
	DropMember(ctx context.Context, member, why string) error
}

// disconnect ends the live streams member holds on this broker, chat,
// activity and team, whose credential match accepts (every one when match
// is nil). A revoke reaches every broker's streams through a revocation
// (clusterrevoke.go), which calls this.
func (c *core) disconnect(member string, match func(cred string) bool) {
	c.hub.Disconnect(member, match)
	c.act.Disconnect(member, match)
	if c.live != nil {
		c.live.hub.Disconnect(member, match)
	}
}

// commit runs fn in the transaction of the message committer's next batch,
// with no messages: a change whose check and write must not race another
// (filesystem writes) is serialized with every other change, and concurrent
// ones share an fsync. fn must use the ctx it is given, which no client can
// cancel: an interrupted statement would roll back the whole batch.
func (c *core) commit(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return c.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		return nil, fn(ctx, tx)
	}, nil, nil).err
}

// memberSince is the newest message id when the member's current
// incarnation was created: a name deleted and created again must not
// inherit the old member's DMs and thread messages, and ids (the commit
// order) decide that, never a clock that may step back.
func (c *core) memberSince(ctx context.Context, name string) (int64, error) {
	m, err := c.store.GetMember(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return m.SinceSeq, err
}

// channel finds a channel by slug or id.
func (c *core) channel(ctx context.Context, idOrSlug string) (store.Channel, error) {
	ch, err := c.store.GetChannel(ctx, idOrSlug)
	if errors.Is(err, store.ErrNotFound) {
		return ch, apierr.Errorf(apierr.CodeNotFound, "no channel %q", idOrSlug)
	}
	return ch, err
}

// holders are the members who hold a permission leaf now, by name. Read
// them before a change goes to the committer: the team must not be read
// inside apply.
func (c *core) holders(leaf string) []string {
	var out []string
	for _, m := range c.team.Members() {
		if slices.Contains(m.Permissions, leaf) {
			out = append(out, m.Name)
		}
	}
	return out
}

// knownMember checks that name names a member.
func (c *core) knownMember(field, name string) error {
	if name == "" {
		return apierr.Invalid(field, "is required")
	}
	if !teamconfig.ValidName(name) {
		return apierr.Invalid(field, "must be a member name")
	}
	if _, ok := c.team.Member(name); !ok {
		return apierr.Invalid(field, "no member %q", name)
	}
	return nil
}

// openObjectives are the member's active and blocked objectives as
// assignee, for the briefing.
func (c *core) openObjectives(ctx context.Context, member string) ([]*apiv1.Objective, error) {
	os, err := c.store.ListObjectives(ctx, store.ObjectiveFilter{
		Assignee: member, Statuses: []string{store.StatusActive, store.StatusBlocked},
	})
	if err != nil {
		return nil, err
	}
	out := make([]*apiv1.Objective, len(os))
	for i, o := range os {
		out[i] = objectiveToProto(o)
	}
	return out, nil
}

// purge removes blobs whose last reference went, under the vfs lock
// protocol; it runs after the commit and never fails the request (boot's
// sweep removes what a failure leaves).
func (c *core) purge(ctx context.Context, shas []string) {
	if c.blobs == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, sha := range shas {
		if _, err := c.blobs.Purge(ctx, sha, c.store.BlobReferenced); err != nil {
			c.log.WarnContext(ctx, "blob purge failed; the next boot sweeps it", "sha", sha, "err", err)
		}
	}
}

// manageOrSelf admits members.manage holders and the member itself, and
// answers 404 for an unknown member.
func (c *core) manageOrSelf(p *auth.Principal, name string) error {
	if p.Member != name && !p.Has(auth.MembersManage) {
		return fmt.Errorf("%w: requires members.manage or being %s", auth.ErrForbidden, name)
	}
	if _, ok := c.team.Member(name); !ok {
		return apierr.Errorf(apierr.CodeNotFound, "member %q not found", name)
	}
	return nil
}
