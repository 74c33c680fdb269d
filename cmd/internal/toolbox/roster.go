package toolbox

import (
	"fmt"
	"slices"
	"strings"
)

// rosterAnswer is the part of GET /roster the roster tool shows.
type rosterAnswer struct {
	Teammates []struct {
		Name string `json:"name"`
		Role *struct {
			Title string `json:"title"`
		} `json:"role"`
		Permissions []string `json:"permissions"`
	} `json:"teammates"`
	Connected []struct {
		Name      string `json:"name"`
		Connected int    `json:"connected"`
	} `json:"connected"`
}

// formatRoster renders one line per teammate, in the broker's order:
//
//   - <name>[ (you)] [<role title>][ [admin operator]] connected=N|offline
//
// admin marks members.manage, operator objectives.create; a bracket with
// nothing in it is left out, so a member without a role title shows no
// role bracket. Names and titles are shown with control characters as
// spaces, so one teammate is always one line.
func formatRoster(self string, r rosterAnswer) string {
	conn := map[string]int{}
	for _, p := range r.Connected {
		conn[p.Name] += p.Connected
	}
	var b strings.Builder
	for _, m := range r.Teammates {
		b.WriteString("- ")
		b.WriteString(clip(m.Name, 128))
		if m.Name == self {
			b.WriteString(" (you)")
		}
		if m.Role != nil && strings.TrimSpace(m.Role.Title) != "" {
			fmt.Fprintf(&b, " [%s]", clip(strings.TrimSpace(m.Role.Title), 128))
		}
		var marks []string
		if slices.Contains(m.Permissions, permMembersManage) {
			marks = append(marks, "admin")
		}
		if slices.Contains(m.Permissions, permObjectivesCreate) {
			marks = append(marks, "operator")
		}
		if len(marks) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(marks, " "))
		}
		if n := conn[m.Name]; n > 0 {
			fmt.Fprintf(&b, " connected=%d\n", n)
		} else {
			b.WriteString(" offline\n")
		}
	}
	if b.Len() == 0 {
		return "(no members)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}
