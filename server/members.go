package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"svc/server/apierr"

	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// Limits of member fields.
const (
	maxRoleField     = 256
	maxInstructions  = 64 << 10
	maxPermissionArg = 64
)

// brokerMembers serves the member registry and bearer tokens.
type brokerMembers struct{ *core }

// ListMembers implements apiv1.BrokerServer.
func (b *brokerMembers) ListMembers(ctx context.Context, _ *apiv1.ListMembersRequest) (*apiv1.ListMembersResponse, error) {
	manage := mustPrincipal(ctx).Has(auth.MembersManage)
	resp := &apiv1.ListMembersResponse{Members: []*apiv1.Member{}}
	for _, m := range b.team.Members() {
		resp.Members = append(resp.Members, memberToProto(m, manage))
	}
	return resp, nil
}

// CreateMember implements apiv1.BrokerServer.
func (b *brokerMembers) CreateMember(ctx context.Context, req *apiv1.CreateMemberRequest) (*apiv1.CreateMemberResponse, error) {
	p := mustPrincipal(ctx)
	plaintext, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	tok := store.Token{ID: newID(), Hash: hash, Label: "initial", Origin: "bootstrap", CreatedAt: b.now(), CreatedBy: p.Member}
	entry, err := b.createMember(ctx, req, tok, true, nil)
	if err != nil {
		return nil, err
	}
	return &apiv1.CreateMemberResponse{Member: teammateToProto(entry), Token: plaintext}, nil
}

// createMember validates and creates a member with its first token tok
// (tok.Member is set here), kept in the config as the member's tokenHash
// when inConfig. extra, when set, runs in the same transaction after the
// token is stored. Every path that creates a member goes through it.
func (c *core) createMember(ctx context.Context, req *apiv1.CreateMemberRequest, tok store.Token, inConfig bool, extra mirrorFunc) (teamconfig.Member, error) {
	if !teamconfig.ValidName(req.GetName()) {
		return teamconfig.Member{}, apierr.Invalid("name", "must be 1 to 64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit")
	}
	if err := validateRole(req.GetRole()); err != nil {
		return teamconfig.Member{}, err
	}
	if len(req.GetInstructions()) > maxInstructions {
		return teamconfig.Member{}, apierr.Invalid("instructions", "at most %d bytes", maxInstructions)
	}
	_, presets := c.team.Info()
	perms, err := resolvePermissions(req.GetPermissions(), presets)
	if err != nil {
		return teamconfig.Member{}, err
	}
	id, err := teamconfig.NewMemberID()
	if err != nil {
		return teamconfig.Member{}, err
	}
	entry := teamconfig.Member{
		ID: id, Name: req.GetName(), Role: roleFromProto(req.GetRole()), Instructions: req.GetInstructions(),
		Permissions: perms, RawPermissions: nonNil(slices.Clone(req.GetPermissions())),
	}
	if inConfig {
		entry.TokenHash = teamconfig.FormatTokenHash(tok.Hash)
	}
	tok.Member = entry.Name
	now := c.now()
	err = c.team.change(ctx, func(f *teamconfig.File) error {
		if f.MemberIndex(entry.Name) >= 0 {
			return apierr.Errorf(apierr.CodeConflict, "member %q already exists", entry.Name)
		}
		f.Store.Members = append(f.Store.Members, entry)
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		// Rows left by an earlier member of this name (say, a crash between
		// a config write and its mirror) must never authenticate the new one.
		if err := tx.DeleteMember(ctx, entry.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.PutMember(ctx, toStoreMember(entry, now)); err != nil {
			return err
		}
		if err := tx.CreateToken(ctx, tok); err != nil {
			return err
		}
		if extra != nil {
			return extra(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return teamconfig.Member{}, err
	}
	c.log.InfoContext(ctx, "member created", "member", entry.Name, "by", tok.CreatedBy)
	c.presenceChanged(entry.Name)
	return entry, nil
}

// UpdateMember implements apiv1.BrokerServer.
func (b *brokerMembers) UpdateMember(ctx context.Context, req *apiv1.UpdateMemberRequest) (*apiv1.UpdateMemberResponse, error) {
	if err := validateRole(req.GetRole()); err != nil {
		return nil, err
	}
	if len(req.GetInstructions()) > maxInstructions {
		return nil, apierr.Invalid("instructions", "at most %d bytes", maxInstructions)
	}
	var perms, raw []string
	if req.Permissions != nil {
		for i, v := range req.GetPermissions().GetValues() {
			s, ok := v.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, apierr.Invalid(fmt.Sprintf("permissions[%d]", i), "must be a string")
			}
			raw = append(raw, s.StringValue)
		}
		_, presets := b.team.Info()
		var err error
		if perms, err = resolvePermissions(raw, presets); err != nil {
			return nil, err
		}
	}
	var updated teamconfig.Member
	rev := b.revocation(req.GetName(), revokeActivity)
	err := b.team.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(req.GetName())
		if i < 0 {
			return apierr.Errorf(apierr.CodeNotFound, "member %q not found", req.GetName())
		}
		m := &f.Store.Members[i]
		if req.Role != nil {
			m.Role = roleFromProto(req.Role)
		}
		if req.Instructions != nil {
			m.Instructions = req.GetInstructions()
		}
		if req.Permissions != nil {
			m.Permissions, m.RawPermissions = perms, nonNil(raw)
		}
		updated = cloneMember(*m)
		return checkAdminRemains(f)
	}, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutMember(ctx, toStoreMember(updated, b.now())); err != nil {
			return err
		}
		if req.Permissions != nil && !slices.Contains(updated.Permissions, auth.ActivityRead) {
			return rev.log(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if req.Permissions != nil && !slices.Contains(updated.Permissions, auth.ActivityRead) {
		// Streams watching other members' activity need activity.read; the
		// member's own reconnect at once.
		rev.apply()
	}
	return &apiv1.UpdateMemberResponse{Member: teammateToProto(updated)}, nil
}

// DeleteMember implements apiv1.BrokerServer. The member's data stays its
// own (docs/DECISIONS.md, "A deleted member's data stays its own"): it is
// recorded as a former member by its id, in the transaction that deletes
// it, and then released: its waiting telemetry stored as its own, its open
// objectives cancelled, its watches and the notification targets naming
// it removed.
func (b *brokerMembers) DeleteMember(ctx context.Context, req *apiv1.DeleteMemberRequest) (*apiv1.DeleteMemberResponse, error) {
	p := mustPrincipal(ctx)
	var (
		purged []string
		gone   store.FormerMember
		rev    = b.revocation(req.GetName(), revokeAll)
	)
	err := b.team.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(req.GetName())
		if i < 0 {
			return apierr.Errorf(apierr.CodeNotFound, "member %q not found", req.GetName())
		}
		gone = store.FormerMember{ID: f.Store.Members[i].ID, Name: req.GetName(), DeletedAt: b.now(), DeletedBy: p.Member}
		// Known as deleted before the config says so: a row written for
		// the name from then on is the deleted member's. While the member
		// is still current, its own id wins (memberIDs).
		b.ids.add(gone)
		f.Store.Members = slices.Delete(f.Store.Members, i, i+1)
		f.DropApprover(req.GetName())
		return checkAdminRemains(f)
	}, func(ctx context.Context, tx store.Tx) error {
		if gone.ID != "" {
			if err := tx.PutFormerMember(ctx, gone); err != nil {
				return err
			}
		}
		// The member's files go with it, so a re-created name inherits
		// none; their content is purged once this commits.
		_, gone, err := tx.DeleteTree(ctx, "/"+req.GetName())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		purged = gone
		// Deleting the mirror row cascades to the member's tokens and
		// sessions, so its credentials stop working with this response.
		if err := tx.DeleteMember(ctx, req.GetName()); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return rev.log(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	b.purge(ctx, purged)
	rev.apply()
	b.presenceChanged(req.GetName())
	if err := b.releaseMember(ctx, gone); err != nil {
		// The member is gone; what is left is retried at the next start
		// (releaseDeparted).
		b.log.ErrorContext(ctx, "deleted member not fully released", "member", gone.Name, "err", err)
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteMemberResponse{}, nil
}

// assigneeDeleted is the reason an objective is cancelled with when its
// assignee is deleted.
func assigneeDeleted(name string) string { return "assignee " + name + " was deleted" }

// releaseMember lets go of what a deleted member held (docs/DECISIONS.md,
// "A deleted member's data stays its own"), as f.DeletedBy: the records
// its telemetry still had waiting are stored as its own; every open
// objective assigned to it is cancelled with the reason "assignee <name>
// was deleted" (audit event, thread message, objective_close marker in its
// stream); it stops watching every objective; every notification endpoint
// that targets it loses that target (registry event), and one left with no
// target is disabled. Each step is idempotent, so a start after a crash
// finishes what a deletion began (releaseDeparted).
func (c *core) releaseMember(ctx context.Context, f store.FormerMember) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	errs = append(errs, c.act.DrainTelemetry(ctx, f.Name, f.ID))
	gone := map[string]store.FormerMember{f.ID: f}
	errs = append(errs, c.releaseObjectives(ctx, gone, map[string]store.FormerMember{f.Name: f}), c.hooks.ReleaseTargets(ctx, f.Name, f.DeletedBy))
	// Its approvals went with its row (docs/APPROVALS.md); the name must
	// not read as blocked by them for a member created again under it.
	if c.approvals != nil {
		c.approvals.forget(f.Name)
	}
	// The hook copies queued or held for it are dropped now, not at the
	// scheduler's next pass, which a member created again under the name
	// could precede.
	errs = append(errs, c.hooks.DropMember(ctx, f.Name, "member deleted"))
	return errors.Join(errs...)
}

// releaseObjectives cancels every open objective assigned to a member of
// gone (by id), and takes every name of unwatch (by name) off the watchers
// of every objective, each change made by whoever deleted that member.
func (c *core) releaseObjectives(ctx context.Context, gone, unwatch map[string]store.FormerMember) error {
	os, err := c.store.ListObjectives(ctx, store.ObjectiveFilter{})
	if err != nil {
		return err
	}
	// assignedTo is the deleted member o is still open for, if any.
	assignedTo := func(o store.Objective) (store.FormerMember, bool) {
		if notTerminal(o) != nil {
			return store.FormerMember{}, false
		}
		if f, ok := gone[o.AssigneeID]; ok && f.Name == o.Assignee {
			return f, true
		}
		if f, ok := unwatch[o.Assignee]; ok && o.AssigneeID == "" {
			// From before ids: the name alone says it.
			return f, true
		}
		return store.FormerMember{}, false
	}
	var errs []error
	for _, o := range os {
		f, assigned := assignedTo(o)
		actor := f.DeletedBy
		for _, w := range o.Watchers {
			if u, ok := unwatch[w]; ok && actor == "" {
				actor = u.DeletedBy
			}
		}
		if actor == "" && !assigned {
			continue
		}
		var cancelled *store.FormerMember
		after, err := c.mutateObjective(ctx, o.ID, actor, func(o *store.Objective) ([]event, error) {
			var evs []event
			if f, ok := assignedTo(*o); ok {
				o.Status, o.BlockReason = store.StatusCancelled, nil
				evs = append(evs, event{kind: evCancelled, payload: map[string]any{"reason": assigneeDeleted(f.Name)}})
				cancelled = &f
			}
			o.Watchers = slices.DeleteFunc(o.Watchers, func(w string) bool {
				if _, ok := unwatch[w]; ok {
					evs = append(evs, event{kind: evWatcherRemoved, payload: map[string]any{"watcher": w}})
					return true
				}
				return false
			})
			return evs, nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cancelled != nil {
			c.markAs(ctx, after, cancelled.Name, cancelled.ID, activityClose, "cancelled", after.UpdatedAt)
		}
	}
	return errors.Join(errs...)
}

// releaseDeparted finishes, at start, the release of members whose
// deletion was interrupted (a crash between the deletion and its release):
// open objectives still assigned to a deleted member, and the watches and
// notification targets of a name no member has now. It runs once, beside
// the committer.
func (c *core) releaseDeparted(ctx context.Context) {
	if c.store == nil || c.team == nil {
		return
	}
	fs, err := c.store.ListFormerMembers(ctx)
	if err != nil || len(fs) == 0 {
		if err != nil {
			c.log.ErrorContext(ctx, "deleted members not read: their release is not checked", "err", err)
		}
		return
	}
	gone, unwatch := map[string]store.FormerMember{}, map[string]store.FormerMember{}
	for _, f := range fs { // by deletion time: a name's last deletion wins
		if c.ids.current(f.Name) == f.ID {
			continue
		}
		gone[f.ID] = f
		if c.ids.current(f.Name) == "" {
			unwatch[f.Name] = f
		}
	}
	errs := []error{c.releaseObjectives(ctx, gone, unwatch)}
	for _, f := range unwatch {
		errs = append(errs, c.hooks.ReleaseTargets(ctx, f.Name, f.DeletedBy))
	}
	if err := errors.Join(errs...); err != nil && ctx.Err() == nil {
		c.log.ErrorContext(ctx, "deleted members not fully released", "err", err)
	}
}

// RotateToken implements apiv1.BrokerServer.
func (b *brokerMembers) RotateToken(ctx context.Context, req *apiv1.RotateTokenRequest) (*apiv1.RotateTokenResponse, error) {
	p := mustPrincipal(ctx)
	if err := b.manageOrSelf(p, req.GetName()); err != nil {
		return nil, err
	}
	plaintext, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	now := b.now()
	rev := b.revocation(req.GetName(), revokeTokens)
	tok := store.Token{ID: newID(), Member: req.GetName(), Hash: hash, Label: "rotated", Origin: "rotate", CreatedAt: now, CreatedBy: p.Member}
	// The config keeps the newest token's hash, so an in-memory store still
	// knows the member's credential after a restart.
	err = b.team.changeMember(ctx, req.GetName(), func(m *teamconfig.Member) error {
		m.TokenHash = teamconfig.FormatTokenHash(hash)
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RevokeMemberTokens(ctx, req.GetName(), now); err != nil {
			return err
		}
		if err := tx.CreateToken(ctx, tok); err != nil {
			return err
		}
		return rev.log(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	// Every token of the member is revoked: so are the streams they opened.
	rev.apply()
	return &apiv1.RotateTokenResponse{Token: plaintext, TokenInfo: tokenToProto(tok)}, nil
}

// ListTokens implements apiv1.BrokerServer.
func (b *brokerMembers) ListTokens(ctx context.Context, req *apiv1.ListTokensRequest) (*apiv1.ListTokensResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	tokens, err := b.store.ListTokens(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	now := b.now()
	resp := &apiv1.ListTokensResponse{Tokens: []*apiv1.TokenInfo{}}
	for _, t := range tokens {
		if t.Active(now) {
			resp.Tokens = append(resp.Tokens, tokenToProto(t))
		}
	}
	return resp, nil
}

// RevokeToken implements apiv1.BrokerServer.
func (b *brokerMembers) RevokeToken(ctx context.Context, req *apiv1.RevokeTokenRequest) (*apiv1.RevokeTokenResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	notFound := apierr.Errorf(apierr.CodeNotFound, "no active token %q for member %q", req.GetId(), req.GetName())
	tokens, err := b.store.ListTokens(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(tokens, func(t store.Token) bool { return t.ID == req.GetId() && t.RevokedAt.IsZero() })
	if i < 0 {
		return nil, notFound
	}
	revoked := teamconfig.FormatTokenHash(tokens[i].Hash)
	rev := b.revocation(req.GetName(), revokeCred+"token:"+req.GetId())
	err = b.team.changeMember(ctx, req.GetName(), func(m *teamconfig.Member) error {
		if m.TokenHash == revoked {
			m.TokenHash = ""
		}
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.RevokeToken(ctx, req.GetName(), req.GetId(), b.now())
		if errors.Is(err, store.ErrNotFound) {
			return notFound
		}
		if err != nil {
			return err
		}
		return rev.log(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	rev.apply()
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RevokeTokenResponse{}, nil
}

func validateRole(r *apiv1.Role) error {
	if r == nil {
		return nil
	}
	if len(r.GetTitle()) > maxRoleField {
		return apierr.Invalid("role.title", "at most %d bytes", maxRoleField)
	}
	if len(r.GetDescription()) > maxInstructions {
		return apierr.Invalid("role.description", "at most %d bytes", maxInstructions)
	}
	return nil
}

func resolvePermissions(entries []string, presets map[string][]string) ([]string, error) {
	if len(entries) > maxPermissionArg {
		return nil, apierr.Invalid("permissions", "at most %d entries", maxPermissionArg)
	}
	perms, err := auth.Resolve(entries, presets)
	var unknown *auth.UnknownPermissionError
	if errors.As(err, &unknown) {
		return nil, apierr.Invalid("permissions", "unknown permission or preset %q", unknown.Name)
	}
	return perms, err
}
