package registry

import (
	"encoding/json"
	"fmt"
	"slices"

	"svc/store"
)

// Change is one change of a registry entry, for the messages that report
// it. It never holds a value or a credential.
type Change struct {
	Kind  Kind
	Slug  string
	Event string // created, updated, deleted, <Kind.Secret>_set, binding_added, ...
	Actor string
	// Member is the member a binding change names; Tool the tool a tool
	// definition change names.
	Member, Tool string
	// Before and After are who could use the entry before and after the
	// change (its bound members, or every member with allMembers).
	Before, After []string
	// Managers hold the registry's manage leaf.
	Managers []string
}

// Audience is who may use an entry: every member when allMembers, its
// bound members otherwise. everyone is the team, read before the change
// goes to the committer.
func Audience(allMembers bool, bound, everyone []string) []string {
	if allMembers {
		return slices.Clone(everyone)
	}
	return slices.Clone(bound)
}

// Messages are the thread messages that report ch to everyone who could
// use the entry before or after it, and the manage holders; none when
// nobody is to be told. Who else is bound is the managers' to know
// (boundMembers): a binding change names its member only to the managers
// and that member; the others are told the bindings changed.
func (ch Change) Messages() ([]store.Message, error) {
	var to []string
	for _, set := range [][]string{ch.Before, ch.After, ch.Managers} {
		for _, m := range set {
			if !slices.Contains(to, m) {
				to = append(to, m)
			}
		}
	}
	if len(to) == 0 {
		return nil, nil
	}
	slices.Sort(to)
	if ch.Member == "" {
		m, err := ch.message(to, true)
		return []store.Message{m}, err
	}
	var named, others []string
	for _, m := range to {
		if m == ch.Member || slices.Contains(ch.Managers, m) {
			named = append(named, m)
		} else {
			others = append(others, m)
		}
	}
	var out []store.Message
	for _, group := range []struct {
		to    []string
		named bool
	}{{named, true}, {others, false}} {
		if len(group.to) == 0 {
			continue
		}
		m, err := ch.message(group.to, group.named)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// message reports ch to recipients; named says whether it may name the
// member a binding change is about.
func (ch Change) message(to []string, named bool) (store.Message, error) {
	noun, thread := ch.Kind.Noun, ch.Kind.Thread(ch.Slug)
	var body string
	switch {
	case ch.Event == "binding_added" && named:
		body = fmt.Sprintf("%s bound %s to %s %s", ch.Actor, ch.Member, noun, ch.Slug)
	case ch.Event == "binding_removed" && named:
		body = fmt.Sprintf("%s unbound %s from %s %s", ch.Actor, ch.Member, noun, ch.Slug)
	case ch.Event == "binding_added" || ch.Event == "binding_removed":
		body = fmt.Sprintf("%s changed the bindings of %s %s", ch.Actor, noun, ch.Slug)
	case ch.Event == "tool_defined" || ch.Event == "tool_deleted":
		body = fmt.Sprintf("%s %s %s %s (%s)", ch.Actor, Verb(ch.Event), noun, ch.Slug, ch.Tool)
	default:
		body = fmt.Sprintf("%s %s %s %s", ch.Actor, Verb(ch.Event), noun, ch.Slug)
	}
	data := map[string]any{"thread": thread, "kind": ch.Kind.Name, "event": ch.Event, "slug": ch.Slug}
	if ch.Member != "" && named {
		data["member"] = ch.Member
	}
	if ch.Tool != "" {
		data["tool"] = ch.Tool
	}
	b, err := json.Marshal(data)
	if err != nil {
		return store.Message{}, err
	}
	return store.Message{
		From: ch.Actor, Thread: thread, Title: noun + " " + ch.Slug, Body: body, Level: "info",
		Data: b, Recipients: to,
	}, nil
}

// Verb words a registry event for a message body.
func Verb(event string) string {
	switch event {
	case "created":
		return "created"
	case "deleted":
		return "deleted"
	case "value_set":
		return "set the value of"
	case "value_deleted":
		return "removed the value of"
	case "credential_set":
		return "set the credential of"
	case "credential_deleted":
		return "removed the credential of"
	case "tool_defined":
		return "defined a tool of"
	case "tool_deleted":
		return "deleted a tool of"
	case "refreshed":
		return "refreshed the tools of"
	case "secret_set":
		return "set the secret of"
	case "secret_deleted":
		return "removed the secret of"
	}
	return "updated"
}
