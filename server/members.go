package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

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
		return teamconfig.Member{}, invalid("name", "must be 1 to 64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit")
	}
	if err := validateRole(req.GetRole()); err != nil {
		return teamconfig.Member{}, err
	}
	if len(req.GetInstructions()) > maxInstructions {
		return teamconfig.Member{}, invalid("instructions", "at most %d bytes", maxInstructions)
	}
	_, presets := c.team.Info()
	perms, err := resolvePermissions(req.GetPermissions(), presets)
	if err != nil {
		return teamconfig.Member{}, err
	}
	entry := teamconfig.Member{
		Name: req.GetName(), Role: roleFromProto(req.GetRole()), Instructions: req.GetInstructions(),
		Permissions: perms, RawPermissions: nonNil(slices.Clone(req.GetPermissions())),
	}
	if inConfig {
		entry.TokenHash = teamconfig.FormatTokenHash(tok.Hash)
	}
	tok.Member = entry.Name
	now := c.now()
	err = c.team.change(ctx, func(f *teamconfig.File) error {
		if f.MemberIndex(entry.Name) >= 0 {
			return Errorf(CodeConflict, "member %q already exists", entry.Name)
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
	return entry, nil
}

// UpdateMember implements apiv1.BrokerServer.
func (b *brokerMembers) UpdateMember(ctx context.Context, req *apiv1.UpdateMemberRequest) (*apiv1.UpdateMemberResponse, error) {
	if err := validateRole(req.GetRole()); err != nil {
		return nil, err
	}
	if len(req.GetInstructions()) > maxInstructions {
		return nil, invalid("instructions", "at most %d bytes", maxInstructions)
	}
	var perms, raw []string
	if req.Permissions != nil {
		for i, v := range req.GetPermissions().GetValues() {
			s, ok := v.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, invalid(fmt.Sprintf("permissions[%d]", i), "must be a string")
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
	err := b.team.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(req.GetName())
		if i < 0 {
			return Errorf(CodeNotFound, "member %q not found", req.GetName())
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
		return tx.PutMember(ctx, toStoreMember(updated, b.now()))
	})
	if err != nil {
		return nil, err
	}
	if req.Permissions != nil && !slices.Contains(updated.Permissions, auth.ActivityRead) {
		// Streams watching other members' activity need activity.read; the
		// member's own reconnect at once.
		b.actHub.Disconnect(updated.Name, nil)
	}
	return &apiv1.UpdateMemberResponse{Member: teammateToProto(updated)}, nil
}

// DeleteMember implements apiv1.BrokerServer.
func (b *brokerMembers) DeleteMember(ctx context.Context, req *apiv1.DeleteMemberRequest) (*apiv1.DeleteMemberResponse, error) {
	var purged []string
	err := b.team.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(req.GetName())
		if i < 0 {
			return Errorf(CodeNotFound, "member %q not found", req.GetName())
		}
		f.Store.Members = slices.Delete(f.Store.Members, i, i+1)
		f.DropApprover(req.GetName())
		return checkAdminRemains(f)
	}, func(ctx context.Context, tx store.Tx) error {
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
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.purge(ctx, purged)
	b.disconnect(req.GetName(), nil)
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteMemberResponse{}, nil
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
		return tx.CreateToken(ctx, tok)
	})
	if err != nil {
		return nil, err
	}
	// Every token of the member is revoked: so are the streams they opened.
	b.disconnect(req.GetName(), isTokenCred)
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
	notFound := Errorf(CodeNotFound, "no active token %q for member %q", req.GetId(), req.GetName())
	tokens, err := b.store.ListTokens(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(tokens, func(t store.Token) bool { return t.ID == req.GetId() && t.RevokedAt.IsZero() })
	if i < 0 {
		return nil, notFound
	}
	revoked := teamconfig.FormatTokenHash(tokens[i].Hash)
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
		return err
	})
	if err != nil {
		return nil, err
	}
	revokedCred := "token:" + req.GetId()
	b.disconnect(req.GetName(), func(c string) bool { return c == revokedCred })
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RevokeTokenResponse{}, nil
}

func validateRole(r *apiv1.Role) error {
	if r == nil {
		return nil
	}
	if len(r.GetTitle()) > maxRoleField {
		return invalid("role.title", "at most %d bytes", maxRoleField)
	}
	if len(r.GetDescription()) > maxInstructions {
		return invalid("role.description", "at most %d bytes", maxInstructions)
	}
	return nil
}

func resolvePermissions(entries []string, presets map[string][]string) ([]string, error) {
	if len(entries) > maxPermissionArg {
		return nil, invalid("permissions", "at most %d entries", maxPermissionArg)
	}
	perms, err := auth.Resolve(entries, presets)
	var unknown *auth.UnknownPermissionError
	if errors.As(err, &unknown) {
		return nil, invalid("permissions", "unknown permission or preset %q", unknown.Name)
	}
	return perms, err
}
