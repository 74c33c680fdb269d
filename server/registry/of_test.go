package registry

import (
	"context"
	"crypto/rand"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/kek"
	"svc/store"
)

// entry is a registry entry of the tests.
type entry struct {
	Slug   string
	All    bool
	Bound  []string
	Sealed []byte
}

// fakeRegistry is a registry over a map: its committer applies a change
// to a copy and keeps it only when apply succeeds, as a transaction would,
// and records the messages it commits.
type fakeRegistry struct {
	entries map[string]entry
	// working is the copy the change in progress writes.
	working  map[string]entry
	commits  int
	messages []store.Message
	changed  int
}

func newFake(t *testing.T, kind Kind, noKEK bool, entries ...entry) (*fakeRegistry, Of[entry]) {
	t.Helper()
	f := &fakeRegistry{entries: map[string]entry{}}
	for _, e := range entries {
		f.entries[e.Slug] = e
	}
	var k *kek.KEK
	if !noKEK {
		key := make([]byte, kek.KeySize)
		_, err := rand.Read(key)
		require.NoError(t, err)
		k, err = kek.New(key)
		require.NoError(t, err)
	}
	kit := New(Deps{
		Commit: func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)) error {
			f.commits++
			f.working = maps.Clone(f.entries)
			ms, err := apply(ctx, nil)
			if err != nil {
				return err
			}
			f.entries = f.working
			f.messages = append(f.messages, ms...)
			return nil
		},
		Members: func() []string { return []string{"admin", "alice", "bob"} },
		Holders: func(leaf string) []string {
			if leaf == kind.Manage {
				return []string{"admin"}
			}
			return nil
		},
		KEK: k,
	})
	r := Of[entry]{
		Kit: kit, Kind: kind,
		Get: func(_ context.Context, _ store.Tx, slug string) (entry, error) {
			e, ok := f.working[slug]
			if !ok {
				return entry{}, store.ErrNotFound
			}
			e.Bound = slices.Clone(e.Bound)
			return e, nil
		},
		Audience: func(e entry) (bool, []string) { return e.All, e.Bound },
		Bind: func(_ context.Context, _ store.Tx, slug, m string) error {
			e := f.working[slug]
			e.Bound = append(slices.Clone(e.Bound), m)
			f.working[slug] = e
			return nil
		},
		Unbind: func(_ context.Context, _ store.Tx, slug, m string) error {
			e := f.working[slug]
			if !slices.Contains(e.Bound, m) {
				return store.ErrNotFound
			}
			e.Bound = slices.DeleteFunc(slices.Clone(e.Bound), func(b string) bool { return b == m })
			f.working[slug] = e
			return nil
		},
		Changed: func() { f.changed++ },
	}
	return f, r
}

func as(member string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: member})
}

// requireCode asserts err is the domain error code with message.
func requireCode(t *testing.T, err error, code apierr.Code, message string) {
	t.Helper()
	var e *apierr.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, code, e.Code)
	require.Equal(t, message, e.Message)
}

// events are the (event, recipients) of the committed messages.
func (f *fakeRegistry) events() [][2]any {
	var out [][2]any
	for _, m := range f.messages {
		out = append(out, [2]any{m.Title + " " + m.Body, m.Recipients})
	}
	return out
}

func TestCreate(t *testing.T) {
	errDisk := errors.New("disk full")
	tests := []struct {
		name    string
		slug    string
		x       entry
		insert  error // what insert answers
		code    apierr.Code
		message string
		events  [][2]any
		commits int
	}{
		{name: "bound to nobody: the managers are told", slug: "gh", x: entry{Slug: "gh"},
			events: [][2]any{{"tool source gh admin created tool source gh", []string{"admin"}}}, commits: 1},
		{name: "all members: everyone is told", slug: "gh", x: entry{Slug: "gh", All: true},
			events: [][2]any{{"tool source gh admin created tool source gh", []string{"admin", "alice", "bob"}}}, commits: 1},
		{name: "a store conflict is a taken slug", slug: "gh", x: entry{Slug: "gh"}, insert: store.ErrConflict,
			code: apierr.CodeConflict, message: `slug "gh" is taken`, commits: 1},
		{name: "insert's own refusal stands", slug: "gh", x: entry{Slug: "gh"}, insert: apierr.Invalid("authProfile", "no notification profile %q", "p"),
			code: apierr.CodeBadRequest, message: `authProfile: no notification profile "p"`, commits: 1},
		{name: "a bad slug never reaches the committer", slug: "Bad_Slug", x: entry{Slug: "Bad_Slug"},
			code: apierr.CodeBadRequest, message: "slug: must be 1 to 32 lowercase letters, digits and single dashes, starting and ending with a letter or digit"},
		{name: "a reserved slug", slug: "resolve", x: entry{Slug: "resolve"},
			code: apierr.CodeBadRequest, message: `slug: "resolve" is reserved`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, r := newFake(t, ToolSources, false)
			err := r.Create(as("admin"), tc.slug, tc.x, func(context.Context, store.Tx) error {
				if tc.insert != nil {
					return tc.insert
				}
				f.working[tc.x.Slug] = tc.x
				return nil
			})
			if tc.code != "" {
				requireCode(t, err, tc.code, tc.message)
				require.Empty(t, f.entries)
			} else {
				require.NoError(t, err)
				require.Contains(t, f.entries, tc.slug)
			}
			require.Equal(t, tc.events, f.events())
			require.Equal(t, tc.commits, f.commits)
		})
	}
	t.Run("another error passes through", func(t *testing.T) {
		_, r := newFake(t, ToolSources, false)
		err := r.Create(as("admin"), "gh", entry{Slug: "gh"}, func(context.Context, store.Tx) error { return errDisk })
		require.ErrorIs(t, err, errDisk)
	})
}

func TestSetSecret(t *testing.T) {
	errRefused := apierr.Errorf(apierr.CodeConflict, "refused")
	tests := []struct {
		name    string
		kind    Kind
		noKEK   bool
		slug    string
		refuse  bool
		code    apierr.Code
		message string
		events  [][2]any
	}{
		{name: "a secret's value", kind: Secrets, slug: "db",
			events: [][2]any{{"secret db admin set the value of secret db", []string{"admin", "bob"}}}},
		{name: "a tool source's credential", kind: ToolSources, slug: "db",
			events: [][2]any{{"tool source db admin set the credential of tool source db", []string{"admin", "bob"}}}},
		{name: "an endpoint's secret", kind: NotificationEndpoints, slug: "db",
			events: [][2]any{{"notification endpoint db admin set the secret of notification endpoint db", []string{"admin", "bob"}}}},
		{name: "no KEK: 503 and nothing committed", kind: Secrets, slug: "db", noKEK: true,
			code: apierr.CodeUnavailable, message: "no key-encryption key is active: write-only secrets cannot be stored or read"},
		{name: "an unknown entry", kind: ToolSources, slug: "nope", code: apierr.CodeNotFound, message: `no tool source "nope"`},
		{name: "put refuses: no event", kind: ToolSources, slug: "db", refuse: true, code: apierr.CodeConflict, message: "refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, r := newFake(t, tc.kind, tc.noKEK, entry{Slug: "db", Bound: []string{"bob"}})
			got, err := r.SetSecret(as("admin"), tc.slug, []byte("s3cr3t"), func(_ context.Context, _ store.Tx, x *entry, sealed []byte) error {
				if tc.refuse {
					return errRefused
				}
				x.Sealed = sealed
				f.working[x.Slug] = *x
				return nil
			})
			require.Equal(t, tc.events, f.events())
			if tc.code != "" {
				requireCode(t, err, tc.code, tc.message)
				require.Empty(t, f.entries["db"].Sealed)
				if tc.noKEK {
					require.Zero(t, f.commits)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, f.entries["db"], got, "answers the entry as stored")
			require.NotContains(t, string(got.Sealed), "s3cr3t")
			plain, err := r.Kit.Open(got.Sealed, tc.kind.PurposeOf("db"))
			require.NoError(t, err)
			require.Equal(t, "s3cr3t", string(plain))
			for _, other := range Kinds {
				if other != tc.kind {
					_, err := r.Kit.Open(got.Sealed, other.PurposeOf("db"))
					require.Error(t, err, "sealed for %s only", tc.kind.Name)
				}
			}
			_, err = r.Kit.Open(got.Sealed, tc.kind.PurposeOf("other"))
			require.Error(t, err, "sealed for its own entry only")
		})
	}
}

func TestClearSecret(t *testing.T) {
	tests := []struct {
		name    string
		kind    Kind
		sealed  []byte
		code    apierr.Code
		message string
		events  [][2]any
	}{
		{name: "a secret's value", kind: Secrets, sealed: []byte("x"),
			events: [][2]any{{"secret db admin removed the value of secret db", []string{"admin", "alice", "bob"}}}},
		{name: "a credential", kind: ToolSources, sealed: []byte("x"),
			events: [][2]any{{"tool source db admin removed the credential of tool source db", []string{"admin", "alice", "bob"}}}},
		{name: "no value", kind: Secrets, code: apierr.CodeNotFound, message: `secret "db" has no value`},
		{name: "no credential", kind: ToolSources, code: apierr.CodeNotFound, message: `tool source "db" has no credential`},
		{name: "no endpoint secret", kind: NotificationEndpoints, code: apierr.CodeNotFound, message: `notification endpoint "db" has no secret`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, r := newFake(t, tc.kind, false, entry{Slug: "db", All: true, Sealed: tc.sealed})
			err := r.ClearSecret(as("admin"), "db", func(x entry) bool { return len(x.Sealed) > 0 }, func(_ context.Context, _ store.Tx, x *entry) error {
				x.Sealed = nil
				f.working[x.Slug] = *x
				return nil
			})
			require.Equal(t, tc.events, f.events())
			require.Equal(t, 1, f.changed, "Changed runs after the change")
			if tc.code != "" {
				requireCode(t, err, tc.code, tc.message)
				return
			}
			require.NoError(t, err)
			require.Empty(t, f.entries["db"].Sealed)
		})
	}
}

func TestDelete(t *testing.T) {
	f, r := newFake(t, Secrets, false, entry{Slug: "db", Bound: []string{"bob"}})
	del := func(_ context.Context, _ store.Tx, slug string) error { delete(f.working, slug); return nil }
	require.NoError(t, r.Delete(as("admin"), "db", del))
	require.NotContains(t, f.entries, "db")
	// Who could use it before is told; there is no after.
	require.Equal(t, [][2]any{{"secret db admin deleted secret db", []string{"admin", "bob"}}}, f.events())
	requireCode(t, r.Delete(as("admin"), "db", del), apierr.CodeNotFound, `no secret "db"`)
}

func TestChangeWithoutChange(t *testing.T) {
	f, r := newFake(t, Secrets, false, entry{Slug: "db"})
	got, err := r.Change(as("admin"), "db", func(context.Context, store.Tx, *entry, *Change) (bool, error) { return false, nil })
	require.NoError(t, err)
	require.Equal(t, entry{Slug: "db"}, got)
	require.Empty(t, f.messages, "no change, no event")
}

func TestBindings(t *testing.T) {
	f, r := newFake(t, Secrets, false, entry{Slug: "db", Bound: []string{"alice"}})
	ctx := as("admin")

	for _, tc := range []struct {
		member, message string
	}{
		{"", "member: is required"},
		{"no such", "member: must be a member name"},
		{"carol", `member: no member "carol"`},
	} {
		_, err := r.AddBinding(ctx, "db", tc.member)
		requireCode(t, err, apierr.CodeBadRequest, tc.message)
	}
	require.Zero(t, f.commits, "an unknown member never reaches the committer")

	got, err := r.AddBinding(ctx, "db", "bob")
	require.NoError(t, err)
	require.Equal(t, []string{"alice", "bob"}, got.Bound)
	_, err = r.AddBinding(ctx, "db", "bob")
	require.NoError(t, err, "binding twice is no change")
	require.NoError(t, r.RemoveBinding(ctx, "db", "bob"))
	requireCode(t, r.RemoveBinding(ctx, "db", "bob"), apierr.CodeNotFound, `bob is not bound to secret "db"`)
	requireCode(t, r.RemoveBinding(ctx, "db", "no such"), apierr.CodeBadRequest, "name: must be a member name")
	requireCode(t, r.RemoveBinding(ctx, "nope", "bob"), apierr.CodeNotFound, `no secret "nope"`)

	// The bound member is named to itself and the managers; alice, bound
	// too, is only told the bindings changed.
	require.Equal(t, [][2]any{
		{"secret db admin bound bob to secret db", []string{"admin", "bob"}},
		{"secret db admin changed the bindings of secret db", []string{"alice"}},
		{"secret db admin unbound bob from secret db", []string{"admin", "bob"}},
		{"secret db admin changed the bindings of secret db", []string{"alice"}},
	}, f.events())
}
