package server

import (
	"svc/server/wire"

	apiv1 "svc/gen/svc/v1"
	"svc/server/teamconfig"
	"svc/store"
)

func roleToProto(r *teamconfig.Role) *apiv1.Role {
	if r == nil {
		return nil
	}
	return &apiv1.Role{Title: r.Title, Description: r.Description}
}

func roleFromProto(r *apiv1.Role) *teamconfig.Role {
	if r == nil {
		return nil
	}
	return &teamconfig.Role{Title: r.GetTitle(), Description: r.GetDescription()}
}

func teammateToProto(m teamconfig.Member) *apiv1.Teammate {
	return &apiv1.Teammate{Name: m.Name, Role: roleToProto(m.Role), Permissions: nonNil(m.Permissions)}
}

// memberToProto renders a member; private instructions only when withPrivate.
func memberToProto(m teamconfig.Member, withPrivate bool) *apiv1.Member {
	pm := &apiv1.Member{Name: m.Name, Role: roleToProto(m.Role), Permissions: nonNil(m.Permissions)}
	if withPrivate {
		pm.Instructions = &m.Instructions
	}
	return pm
}

func tokenToProto(t store.Token) *apiv1.TokenInfo {
	return &apiv1.TokenInfo{
		Id: t.ID, Label: t.Label, Origin: t.Origin, CreatedAt: wire.MS(t.CreatedAt),
		LastUsedAt: wire.OptMS(t.LastUsedAt), ExpiresAt: wire.OptMS(t.ExpiresAt), CreatedBy: t.CreatedBy,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
