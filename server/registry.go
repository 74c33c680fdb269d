package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"svc/server/auth"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
)

// Registry event kinds (spec: Events): the data.kind of the messages that
// report a change of a tool source or a secret.
const (
	registryKindToolSource = "tool_source"
	registryKindSecret     = "secret"
	// registryKindHookEndpoint reports a change of a notification
	// endpoint, on thread hook:<slug>.
	registryKindHookEndpoint = "notification_endpoint"
)

// registryChange is one change of a registry entry, for the message that
// reports it. It never holds a value or a credential.
type registryChange struct {
	kind   string // registryKindToolSource or registryKindSecret
	slug   string
	event  string // created, updated, deleted, value_set, binding_added, ...
	actor  string
	member string // the member a binding change names
	tool   string // the tool a tool definition change names
	// before and after are who could use the entry before and after the
	// change (its bound members, or every member with allMembers).
	before, after []string
	// managers hold the registry's manage leaf.
	managers []string
}

// registryThread is the thread a registry entry's events go to:
// tool:<slug> or secret:<slug>.
func registryThread(kind, slug string) string {
	if kind == registryKindToolSource {
		return "tool:" + slug
	}
	if kind == registryKindHookEndpoint {
		return "hook:" + slug
	}
	return "secret:" + slug
}

// registryAudience is who may use an entry: every member when allMembers,
// its bound members otherwise. everyone is the team, read before the
// change goes to the committer.
func registryAudience(allMembers bool, bound, everyone []string) []string {
	if allMembers {
		return slices.Clone(everyone)
	}
	return slices.Clone(bound)
}

// memberNames are the names of the team's members, sorted.
func (c *core) memberNames() []string {
	ms := c.team.Members()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// messages are the thread messages that report ch to everyone who could
// use the entry before or after it, and the manage holders; none when
// nobody is to be told. Who else is bound is the managers' to know
// (boundMembers): a binding change names its member only to the managers
// and that member; the others are told the bindings changed.
func (ch registryChange) messages() ([]store.Message, error) {
	var to []string
	for _, set := range [][]string{ch.before, ch.after, ch.managers} {
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
	if ch.member == "" {
		m, err := ch.message(to, true)
		return []store.Message{m}, err
	}
	var named, others []string
	for _, m := range to {
		if m == ch.member || slices.Contains(ch.managers, m) {
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
func (ch registryChange) message(to []string, named bool) (store.Message, error) {
	noun := "tool source"
	if ch.kind == registryKindSecret {
		noun = "secret"
	}
	if ch.kind == registryKindHookEndpoint {
		noun = "notification endpoint"
	}
	thread := registryThread(ch.kind, ch.slug)
	var body string
	switch {
	case ch.event == "binding_added" && named:
		body = fmt.Sprintf("%s bound %s to %s %s", ch.actor, ch.member, noun, ch.slug)
	case ch.event == "binding_removed" && named:
		body = fmt.Sprintf("%s unbound %s from %s %s", ch.actor, ch.member, noun, ch.slug)
	case ch.event == "binding_added" || ch.event == "binding_removed":
		body = fmt.Sprintf("%s changed the bindings of %s %s", ch.actor, noun, ch.slug)
	case ch.event == "tool_defined" || ch.event == "tool_deleted":
		body = fmt.Sprintf("%s %s %s %s (%s)", ch.actor, eventVerb(ch.event), noun, ch.slug, ch.tool)
	default:
		body = fmt.Sprintf("%s %s %s %s", ch.actor, eventVerb(ch.event), noun, ch.slug)
	}
	data := map[string]any{"thread": thread, "kind": ch.kind, "event": ch.event, "slug": ch.slug}
	if ch.member != "" && named {
		data["member"] = ch.member
	}
	if ch.tool != "" {
		data["tool"] = ch.tool
	}
	b, err := json.Marshal(data)
	if err != nil {
		return store.Message{}, err
	}
	return store.Message{
		From: ch.actor, Thread: thread, Title: noun + " " + ch.slug, Body: body, Level: "info",
		Data: b, Recipients: to,
	}, nil
}

// eventVerb words a registry event for a message body.
func eventVerb(event string) string {
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

// registryCommit runs apply on the committer and commits the change it
// reports with its event message, in one transaction. apply returns nil
// for a call that changed nothing (no event).
func (c *core) registryCommit(ctx context.Context, apply func(ctx context.Context, tx store.Tx) (*registryChange, error)) error {
	return c.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		ch, err := apply(ctx, tx)
		if err != nil || ch == nil {
			return nil, err
		}
		return ch.messages()
	}, nil, nil).err
}

// registryOf describes one registry (secrets, tool sources) to the
// helpers both share.
type registryOf[T any] struct {
	kind     string // registryKindSecret or registryKindToolSource
	manage   string // the permission leaf of its managers
	get      func(ctx context.Context, tx store.Tx, slug string) (T, error)
	notFound func(err error, slug string) error // maps get's error
	audience func(T) (allMembers bool, bound []string)
	// noun names an entry in messages ("secret", "tool source"); bind and
	// unbind store its bindings, for the registries that have them.
	noun         string
	bind, unbind func(ctx context.Context, tx store.Tx, slug, member string) error
}

// addBinding binds member to an entry of r; binding twice is no change.
// An unknown member is 400, as an unknown assignee or watcher is.
func addBinding[T any](ctx context.Context, c *core, r registryOf[T], slug, member string) (T, error) {
	if err := c.knownMember("member", member); err != nil {
		var zero T
		return zero, err
	}
	return changeEntry(ctx, c, r, slug, func(ctx context.Context, tx store.Tx, x *T, ch *registryChange) (bool, error) {
		if _, bound := r.audience(*x); slices.Contains(bound, member) {
			return false, nil
		}
		if err := r.bind(ctx, tx, slug, member); err != nil {
			if errors.Is(err, store.ErrPrecondition) {
				return false, invalid("member", "no member %q", member)
			}
			return false, err
		}
		ch.event, ch.member = "binding_added", member
		return true, nil
	})
}

// removeBinding unbinds member from an entry of r: 404 when not bound.
// The member is told even when every member may still use the entry.
func removeBinding[T any](ctx context.Context, c *core, r registryOf[T], slug, member string) error {
	if !teamconfig.ValidName(member) {
		return invalid("name", "must be a member name")
	}
	_, err := changeEntry(ctx, c, r, slug, func(ctx context.Context, tx store.Tx, x *T, ch *registryChange) (bool, error) {
		if err := r.unbind(ctx, tx, slug, member); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return false, Errorf(CodeNotFound, "%s is not bound to %s %q", member, r.noun, slug)
			}
			return false, err
		}
		ch.event, ch.member = "binding_removed", member
		ch.before = append(ch.before, member)
		return true, nil
	})
	return err
}

// changeEntry loads an entry of r on the committer, lets fn change it and
// report the change, and answers the entry as it then is. fn returns false
// when nothing changed: no event is sent. The change's before and after
// audiences are taken here, in the transaction that makes it.
func changeEntry[T any](ctx context.Context, c *core, r registryOf[T], slug string, fn func(ctx context.Context, tx store.Tx, x *T, ch *registryChange) (bool, error)) (T, error) {
	p := mustPrincipal(ctx)
	var out T
	if err := validRegistrySlug("slug", slug); err != nil {
		return out, err
	}
	everyone, managers := c.memberNames(), c.holders(r.manage)
	audience := func(x T) []string {
		all, bound := r.audience(x)
		return registryAudience(all, bound, everyone)
	}
	err := c.registryCommit(ctx, func(ctx context.Context, tx store.Tx) (*registryChange, error) {
		x, err := r.get(ctx, tx, slug)
		if err != nil {
			return nil, r.notFound(err, slug)
		}
		ch := &registryChange{kind: r.kind, slug: slug, actor: p.Member, managers: managers, before: audience(x)}
		changed, err := fn(ctx, tx, &x, ch)
		if err != nil || !changed {
			out = x
			return nil, err
		}
		if ch.event != "deleted" {
			if x, err = r.get(ctx, tx, slug); err != nil {
				return nil, err
			}
			ch.after = audience(x)
		}
		out = x
		return ch, nil
	})
	if r.kind == registryKindSecret {
		c.secretsChanged()
	}
	return out, err
}

// errNoKEK answers a call that must seal or open a write-only secret while
// no KEK is active.
var errNoKEK = Errorf(CodeUnavailable, "no key-encryption key is active: write-only secrets cannot be stored or read")

// seal encrypts a write-only value for purpose; errNoKEK without a KEK.
func (c *core) seal(plaintext []byte, purpose string) ([]byte, error) {
	return sealWith(c.kek, plaintext, purpose)
}

// open decrypts a value seal made for purpose; errNoKEK without a KEK.
func (c *core) open(sealed []byte, purpose string) ([]byte, error) {
	return openWith(c.kek, sealed, purpose)
}

// sealWith encrypts plaintext under k as the stores keep it ({v, ct, iv}
// JSON); errNoKEK when k is nil.
func sealWith(k *kek.KEK, plaintext []byte, purpose string) ([]byte, error) {
	if k == nil {
		return nil, errNoKEK
	}
	s, err := k.Seal(plaintext, purpose)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// openWith decrypts what sealWith made; errNoKEK when k is nil.
func openWith(k *kek.KEK, sealed []byte, purpose string) ([]byte, error) {
	if k == nil {
		return nil, errNoKEK
	}
	var s kek.Sealed
	if err := json.Unmarshal(sealed, &s); err != nil {
		return nil, fmt.Errorf("sealed value: %w", err)
	}
	return k.Open(s, purpose)
}

// registrySlugRE is the slug grammar of tool sources and secrets: the
// channel slug grammar (1 to 32 characters of lowercase letters, digits
// and single dashes, alphanumeric at both ends). It has no underscore, so
// a toolbox name <slug>__<tool> splits at its first "__".
var registrySlugRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)

// reservedSlugs are slugs a route path would shadow.
var reservedSlugs = []string{"resolve"}

// validRegistrySlug checks a tool source or secret slug.
func validRegistrySlug(field, s string) error {
	switch {
	case s == "":
		return invalid(field, "is required")
	case len(s) > 32 || !registrySlugRE.MatchString(s):
		return invalid(field, "must be 1 to 32 lowercase letters, digits and single dashes, starting and ending with a letter or digit")
	case slices.Contains(reservedSlugs, s):
		return invalid(field, "%q is reserved", s)
	}
	return nil
}

// registryThreadReadable admits the history of a registry thread (kind
// tool, secret or hook) to the holders of its registry's manage leaf and to the
// members any of its messages was addressed to; History then shows each
// only the messages addressed to them. Anyone else is refused (403).
func (c *core) registryThreadReadable(ctx context.Context, p *auth.Principal, kind, thread string) error {
	leaf := auth.ToolsManage
	if kind == "secret" {
		leaf = auth.SecretsManage
	}
	if kind == "hook" {
		leaf = auth.NotificationsManage
	}
	if p.Has(leaf) {
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
