package registry

import (
	"context"
	"errors"
	"slices"

	"svc/server/apierr"
	"svc/server/teamconfig"
	"svc/store"
)

// Of is one registry of entries T on the kit: how to read an entry and who
// may use it, and how to store its bindings. Its methods are the bodies
// every registry shares: create, change, delete, set and clear the
// write-only value, bind and unbind.
type Of[T any] struct {
	Kit  *Kit
	Kind Kind
	// Get reads an entry in tx; store.ErrNotFound when there is none.
	Get func(ctx context.Context, tx store.Tx, slug string) (T, error)
	// Audience is who may use an entry: every member when allMembers,
	// bound otherwise.
	Audience func(x T) (allMembers bool, bound []string)
	// Bind and Unbind store a binding, for the registries that have them.
	Bind, Unbind func(ctx context.Context, tx store.Tx, slug, member string) error
	// Changed, when set, runs after every Change (committed or not), for
	// the caches that hold what an entry was.
	Changed func()
}

// NotFound maps Get's store.ErrNotFound to a 404 naming the entry.
func (r Of[T]) NotFound(err error, slug string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errorf(apierr.CodeNotFound, "no %s %q", r.Kind.Noun, slug)
	}
	return err
}

// audience is who may use x, everyone being the team.
func (r Of[T]) audience(x T, everyone []string) []string {
	all, bound := r.Audience(x)
	return Audience(all, bound, everyone)
}

// Create stores x, a new entry named slug, with insert on the committer
// and reports it as created to its audience and the managers. A
// store.ErrConflict from insert is a taken slug (409); insert maps its
// other conflicts itself.
func (r Of[T]) Create(ctx context.Context, slug string, x T, insert func(ctx context.Context, tx store.Tx) error) error {
	p := Caller(ctx)
	if err := ValidSlug("slug", slug); err != nil {
		return err
	}
	everyone, managers := r.Kit.Members(), r.Kit.Holders(r.Kind.Manage)
	return r.Kit.Commit(ctx, func(ctx context.Context, tx store.Tx) (*Change, error) {
		if err := insert(ctx, tx); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, apierr.Errorf(apierr.CodeConflict, "slug %q is taken", slug)
			}
			return nil, err
		}
		return &Change{
			Kind: r.Kind, Slug: slug, Event: "created", Actor: p.Member,
			After: r.audience(x, everyone), Managers: managers,
		}, nil
	})
}

// Change loads an entry on the committer, lets fn change it and report
// the change, and answers the entry as it then is. fn returns false when
// nothing changed: no event is sent. The change's before and after
// audiences are taken here, in the transaction that makes it.
func (r Of[T]) Change(ctx context.Context, slug string, fn func(ctx context.Context, tx store.Tx, x *T, ch *Change) (bool, error)) (T, error) {
	p := Caller(ctx)
	var out T
	if err := ValidSlug("slug", slug); err != nil {
		return out, err
	}
	everyone, managers := r.Kit.Members(), r.Kit.Holders(r.Kind.Manage)
	err := r.Kit.Commit(ctx, func(ctx context.Context, tx store.Tx) (*Change, error) {
		x, err := r.Get(ctx, tx, slug)
		if err != nil {
			return nil, r.NotFound(err, slug)
		}
		ch := &Change{Kind: r.Kind, Slug: slug, Actor: p.Member, Managers: managers, Before: r.audience(x, everyone)}
		changed, err := fn(ctx, tx, &x, ch)
		if err != nil || !changed {
			out = x
			return nil, err
		}
		if ch.Event != "deleted" {
			if x, err = r.Get(ctx, tx, slug); err != nil {
				return nil, err
			}
			ch.After = r.audience(x, everyone)
		}
		out = x
		return ch, nil
	})
	if r.Changed != nil {
		r.Changed()
	}
	return out, err
}

// Delete removes an entry with del and reports it as deleted.
func (r Of[T]) Delete(ctx context.Context, slug string, del func(ctx context.Context, tx store.Tx, slug string) error) error {
	_, err := r.Change(ctx, slug, func(ctx context.Context, tx store.Tx, _ *T, ch *Change) (bool, error) {
		ch.Event = "deleted"
		return true, del(ctx, tx, slug)
	})
	return err
}

// SetSecret seals plaintext for the entry (ErrNoKEK without a KEK) and
// stores it with put, reporting <Kind.Secret>_set. put may refuse the
// value for the entry as it is (an error, no event). The caller has
// checked plaintext; it is never answered.
func (r Of[T]) SetSecret(ctx context.Context, slug string, plaintext []byte, put func(ctx context.Context, tx store.Tx, x *T, sealed []byte) error) (T, error) {
	if err := ValidSlug("slug", slug); err != nil {
		var zero T
		return zero, err
	}
	sealed, err := r.Kit.Seal(plaintext, r.Kind.PurposeOf(slug))
	if err != nil {
		var zero T
		return zero, err
	}
	return r.Change(ctx, slug, func(ctx context.Context, tx store.Tx, x *T, ch *Change) (bool, error) {
		if err := put(ctx, tx, x, sealed); err != nil {
			return false, err
		}
		ch.Event = r.Kind.SecretSet()
		return true, nil
	})
}

// ClearSecret removes the entry's write-only value with clear, reporting
// <Kind.Secret>_deleted: 404 when has says it holds none.
func (r Of[T]) ClearSecret(ctx context.Context, slug string, has func(x T) bool, clear func(ctx context.Context, tx store.Tx, x *T) error) error {
	_, err := r.Change(ctx, slug, func(ctx context.Context, tx store.Tx, x *T, ch *Change) (bool, error) {
		if !has(*x) {
			return false, apierr.Errorf(apierr.CodeNotFound, "%s %q has no %s", r.Kind.Noun, slug, r.Kind.Secret)
		}
		ch.Event = r.Kind.SecretDeleted()
		return true, clear(ctx, tx, x)
	})
	return err
}

// AddBinding binds member to an entry; binding twice is no change. An
// unknown member is 400, as an unknown assignee or watcher is.
func (r Of[T]) AddBinding(ctx context.Context, slug, member string) (T, error) {
	if err := r.Kit.KnownMember("member", member); err != nil {
		var zero T
		return zero, err
	}
	return r.Change(ctx, slug, func(ctx context.Context, tx store.Tx, x *T, ch *Change) (bool, error) {
		if _, bound := r.Audience(*x); slices.Contains(bound, member) {
			return false, nil
		}
		if err := r.Bind(ctx, tx, slug, member); err != nil {
			if errors.Is(err, store.ErrPrecondition) {
				return false, apierr.Invalid("member", "no member %q", member)
			}
			return false, err
		}
		ch.Event, ch.Member = "binding_added", member
		return true, nil
	})
}

// RemoveBinding unbinds member from an entry: 404 when not bound. The
// member is told even when every member may still use the entry.
func (r Of[T]) RemoveBinding(ctx context.Context, slug, member string) error {
	if !teamconfig.ValidName(member) {
		return apierr.Invalid("name", "must be a member name")
	}
	_, err := r.Change(ctx, slug, func(ctx context.Context, tx store.Tx, _ *T, ch *Change) (bool, error) {
		if err := r.Unbind(ctx, tx, slug, member); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return false, apierr.Errorf(apierr.CodeNotFound, "%s is not bound to %s %q", member, r.Kind.Noun, slug)
			}
			return false, err
		}
		ch.Event, ch.Member = "binding_removed", member
		ch.Before = append(ch.Before, member)
		return true, nil
	})
	return err
}
