package auth

import (
	"fmt"
	"slices"
	"sort"
)

// Permission leaves (docs/API.md, Conventions).
const (
	TeamManage          = "team.manage"
	MembersManage       = "members.manage"
	ObjectivesCreate    = "objectives.create"
	ObjectivesCancel    = "objectives.cancel"
	ObjectivesReassign  = "objectives.reassign"
	ObjectivesWatch     = "objectives.watch"
	ActivityRead        = "activity.read"
	ToolsManage         = "tools.manage"
	SecretsManage       = "secrets.manage"
	NotificationsManage = "notifications.manage"
	// MetricsRead reads GET /metrics from a peer that is not exempt
	// (docs/PERFORMANCE.md: Metrics).
	MetricsRead = "metrics.read"
)

// Leaves lists the specification's permission leaves in a stable order:
// the admin preset written at first boot is exactly these (docs/API.md,
// Conventions).
var Leaves = []string{
	TeamManage, MembersManage, ObjectivesCreate, ObjectivesCancel,
	ObjectivesReassign, ObjectivesWatch, ActivityRead, ToolsManage,
	SecretsManage, NotificationsManage,
}

// ExtraLeaves are leaves svc adds beyond the specification. They can be
// granted like any leaf but are in no default preset, so "admin = every
// leaf" stays the specification's list; what they gate, team.manage
// grants as well.
var ExtraLeaves = []string{MetricsRead}

// IsLeaf reports whether p is a permission leaf.
func IsLeaf(p string) bool { return slices.Contains(Leaves, p) || slices.Contains(ExtraLeaves, p) }

// DefaultPresets returns the presets written at first boot (admin,
// operator, member: docs/API.md, Conventions).
func DefaultPresets() map[string][]string {
	return map[string][]string{
		"admin":    slices.Clone(Leaves),
		"operator": {ObjectivesCreate, ObjectivesCancel, ObjectivesWatch},
		"member":   {},
	}
}

// UnknownPermissionError names an entry that is neither a leaf nor a preset.
type UnknownPermissionError struct {
	Name string
}

func (e *UnknownPermissionError) Error() string {
	return fmt.Sprintf("unknown permission or preset %q", e.Name)
}

// Resolve expands preset names to their leaves and returns the sorted,
// de-duplicated leaf list. Presets are resolved once, at create or load time:
// the result is what gets stored.
func Resolve(entries []string, presets map[string][]string) ([]string, error) {
	set := map[string]bool{}
	for _, e := range entries {
		switch {
		case IsLeaf(e):
			set[e] = true
		case presets[e] != nil:
			for _, leaf := range presets[e] {
				set[leaf] = true
			}
		default:
			return nil, &UnknownPermissionError{Name: e}
		}
	}
	out := make([]string, 0, len(set))
	for leaf := range set {
		out = append(out, leaf)
	}
	sort.Strings(out)
	return out, nil
}

// HasPreset reports whether any entry names a preset rather than a leaf.
func HasPreset(entries []string) bool {
	for _, e := range entries {
		if !IsLeaf(e) {
			return true
		}
	}
	return false
}
