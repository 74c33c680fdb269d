package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"svc/server/apierr"
	"svc/server/wire"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// Channel roles.
const (
	roleAdmin  = "admin"
	roleMember = "member"
)

// slugRE is the channel slug grammar (the Channel message in proto/svc/v1): 1 to 32 characters of
// lowercase letters, digits and dashes, alphanumeric at both ends, no double
// dash.
var slugRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)

// ValidSlug reports whether s is a channel slug.
func ValidSlug(s string) bool { return len(s) <= 32 && slugRE.MatchString(s) }

var (
	errGeneralFixed    = apierr.Errorf(apierr.CodeConflict, "general is fixed: it cannot be renamed, archived or have its membership changed")
	errNotChannelAdmin = fmt.Errorf("%w: requires channel admin or members.manage", auth.ErrForbidden)
)

func errArchived(ch store.Channel) error {
	return apierr.Errorf(apierr.CodeGone, "channel #%s is archived", ch.Slug)
}

func errNotMember(ch store.Channel) error {
	return fmt.Errorf("%w: you are not a member of #%s", auth.ErrForbidden, ch.Slug)
}

func isChannelMember(members []store.ChannelMember, name string) bool {
	return channelRole(members, name) != ""
}

func channelRole(members []store.ChannelMember, name string) string {
	for _, m := range members {
		if m.Member == name {
			return m.Role
		}
	}
	return ""
}

// members returns a channel's members; general's are every member.
func (b *brokerChannels) channelMembers(ctx context.Context, ch store.Channel) ([]store.ChannelMember, error) {
	if ch.ID != generalID {
		return b.store.ListChannelMembers(ctx, ch.ID)
	}
	var out []store.ChannelMember
	for _, m := range b.team.Members() {
		out = append(out, store.ChannelMember{Channel: generalID, Member: m.Name, Role: roleMember})
	}
	return out, nil
}

func channelToProto(c store.Channel) *apiv1.Channel {
	return &apiv1.Channel{Id: c.ID, Slug: c.Slug, CreatedAt: wire.MS(c.CreatedAt), CreatedBy: c.CreatedBy, ArchivedAt: wire.OptMS(c.ArchivedAt)}
}

// brokerChannels serves channels and their membership.
type brokerChannels struct{ *core }

// ListChannels implements apiv1.BrokerServer.
func (b *brokerChannels) ListChannels(ctx context.Context, _ *apiv1.ListChannelsRequest) (*apiv1.ListChannelsResponse, error) {
	p := mustPrincipal(ctx)
	chans, err := b.store.ListChannels(ctx)
	if err != nil {
		return nil, err
	}
	mine, err := b.store.MemberChannels(ctx, p.Member)
	if err != nil {
		return nil, err
	}
	roles := map[string]string{generalID: roleMember}
	for _, m := range mine {
		roles[m.Channel] = m.Role
	}
	// general first, then by slug.
	slices.SortStableFunc(chans, func(a, c store.Channel) int {
		switch {
		case a.ID == generalID:
			return -1
		case c.ID == generalID:
			return 1
		}
		return 0
	})
	resp := &apiv1.ListChannelsResponse{Channels: make([]*apiv1.ChannelSummary, 0, len(chans))}
	for _, c := range chans {
		s := &apiv1.ChannelSummary{Id: c.ID, Slug: c.Slug, CreatedAt: wire.MS(c.CreatedAt), CreatedBy: c.CreatedBy, ArchivedAt: wire.OptMS(c.ArchivedAt)}
		if r, ok := roles[c.ID]; ok {
			s.Joined, s.MyRole = true, &r
		}
		resp.Channels = append(resp.Channels, s)
	}
	return resp, nil
}

// CreateChannel implements apiv1.BrokerServer.
func (b *brokerChannels) CreateChannel(ctx context.Context, req *apiv1.CreateChannelRequest) (*apiv1.CreateChannelResponse, error) {
	p := mustPrincipal(ctx)
	if !ValidSlug(req.GetSlug()) {
		return nil, apierr.Invalid("slug", "1 to 32 lowercase letters, digits and single dashes, starting and ending alphanumeric")
	}
	c := store.Channel{ID: newID(), Slug: req.GetSlug(), CreatedAt: b.now(), CreatedBy: p.Member}
	err := b.store.CreateChannel(ctx, c)
	if errors.Is(err, store.ErrConflict) {
		return nil, apierr.Errorf(apierr.CodeConflict, "channel slug %q is taken", c.Slug)
	}
	if err != nil {
		return nil, err
	}
	b.channelChanged(channelCreated, c, "", "")
	return &apiv1.CreateChannelResponse{Channel: channelToProto(c)}, nil
}

// GetChannel implements apiv1.BrokerServer.
func (b *brokerChannels) GetChannel(ctx context.Context, req *apiv1.GetChannelRequest) (*apiv1.GetChannelResponse, error) {
	ch, err := b.channel(ctx, req.GetChannel())
	if err != nil {
		return nil, err
	}
	members, err := b.channelMembers(ctx, ch)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.GetChannelResponse{Channel: channelToProto(ch), Members: make([]*apiv1.ChannelMember, 0, len(members))}
	for _, m := range members {
		resp.Members = append(resp.Members, &apiv1.ChannelMember{Member: m.Member, Role: m.Role})
	}
	return resp, nil
}

// administrable returns a live, non-general channel the caller administers
// (channel admin or members.manage).
func (b *brokerChannels) administrable(ctx context.Context, p *auth.Principal, idOrSlug string) (store.Channel, []store.ChannelMember, error) {
	ch, members, err := b.changeableChannel(ctx, idOrSlug)
	if err != nil {
		return ch, nil, err
	}
	if channelRole(members, p.Member) != roleAdmin && !p.Has(auth.MembersManage) {
		return ch, nil, errNotChannelAdmin
	}
	return ch, members, nil
}

// changeableChannel returns a live, non-general channel and its members.
func (b *brokerChannels) changeableChannel(ctx context.Context, idOrSlug string) (store.Channel, []store.ChannelMember, error) {
	ch, err := b.channel(ctx, idOrSlug)
	if err != nil {
		return ch, nil, err
	}
	if ch.ID == generalID {
		return ch, nil, errGeneralFixed
	}
	if !ch.ArchivedAt.IsZero() {
		return ch, nil, errArchived(ch)
	}
	members, err := b.store.ListChannelMembers(ctx, ch.ID)
	return ch, members, err
}

// RenameChannel implements apiv1.BrokerServer.
func (b *brokerChannels) RenameChannel(ctx context.Context, req *apiv1.RenameChannelRequest) (*apiv1.RenameChannelResponse, error) {
	p := mustPrincipal(ctx)
	if !ValidSlug(req.GetSlug()) {
		return nil, apierr.Invalid("slug", "1 to 32 lowercase letters, digits and single dashes, starting and ending alphanumeric")
	}
	ch, _, err := b.administrable(ctx, p, req.GetChannel())
	if err != nil {
		return nil, err
	}
	ch, err = b.store.RenameChannel(ctx, ch.ID, req.GetSlug())
	if errors.Is(err, store.ErrConflict) {
		return nil, apierr.Errorf(apierr.CodeConflict, "channel slug %q is taken", req.GetSlug())
	}
	if err != nil {
		return nil, err
	}
	b.channelChanged(channelUpdated, ch, "", "")
	return &apiv1.RenameChannelResponse{Channel: channelToProto(ch)}, nil
}

// ArchiveChannel implements apiv1.BrokerServer.
func (b *brokerChannels) ArchiveChannel(ctx context.Context, req *apiv1.ArchiveChannelRequest) (*apiv1.ArchiveChannelResponse, error) {
	p := mustPrincipal(ctx)
	ch, _, err := b.administrable(ctx, p, req.GetChannel())
	if err != nil {
		return nil, err
	}
	archived, err := b.store.ArchiveChannel(ctx, ch.ID, b.now())
	if err != nil {
		return nil, err
	}
	b.channelChanged(channelArchived, archived, "", "")
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.ArchiveChannelResponse{}, nil
}

// AddChannelMember implements apiv1.BrokerServer.
func (b *brokerChannels) AddChannelMember(ctx context.Context, req *apiv1.AddChannelMemberRequest) (*apiv1.AddChannelMemberResponse, error) {
	p := mustPrincipal(ctx)
	role := roleMember
	if req.Role != nil {
		role = req.GetRole()
	}
	if role != roleAdmin && role != roleMember {
		return nil, apierr.Invalid("role", "must be admin or member")
	}
	ch, members, err := b.changeableChannel(ctx, req.GetChannel())
	if err != nil {
		return nil, err
	}
	admin := channelRole(members, p.Member) == roleAdmin || p.Has(auth.MembersManage)
	// Anyone may join as a plain member; everything else is the admins'.
	selfJoin := req.GetMember() == p.Member && role == roleMember
	if !admin && !selfJoin {
		return nil, errNotChannelAdmin
	}
	if !teamconfig.ValidName(req.GetMember()) {
		return nil, apierr.Invalid("member", "must be a member name")
	}
	if _, ok := b.team.Member(req.GetMember()); !ok {
		return nil, apierr.Invalid("member", "no member %q", req.GetMember())
	}
	err = b.store.PutChannelMember(ctx, store.ChannelMember{Channel: ch.ID, Member: req.GetMember(), Role: role})
	if errors.Is(err, store.ErrPrecondition) {
		return nil, apierr.Invalid("member", "no member %q", req.GetMember())
	}
	if err != nil {
		return nil, err
	}
	b.channelChanged(channelMembers, ch, req.GetMember(), role)
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.AddChannelMemberResponse{}, nil
}

// RemoveChannelMember implements apiv1.BrokerServer.
func (b *brokerChannels) RemoveChannelMember(ctx context.Context, req *apiv1.RemoveChannelMemberRequest) (*apiv1.RemoveChannelMemberResponse, error) {
	p := mustPrincipal(ctx)
	self := req.GetName() == p.Member
	ch, err := b.channel(ctx, req.GetChannel())
	if err != nil {
		return nil, err
	}
	switch {
	case ch.ID == generalID:
		return nil, errGeneralFixed
	case self:
		// Self-leave is always allowed, archived channels included.
	case !ch.ArchivedAt.IsZero():
		return nil, errArchived(ch)
	default:
		members, err := b.store.ListChannelMembers(ctx, ch.ID)
		if err != nil {
			return nil, err
		}
		if channelRole(members, p.Member) != roleAdmin && !p.Has(auth.MembersManage) {
			return nil, errNotChannelAdmin
		}
	}
	err = b.store.DeleteChannelMember(ctx, ch.ID, req.GetName())
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(apierr.CodeNotFound, "%s is not a member of #%s", req.GetName(), ch.Slug)
	}
	if err != nil {
		return nil, err
	}
	b.channelChanged(channelMembers, ch, req.GetName(), "")
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RemoveChannelMemberResponse{}, nil
}
