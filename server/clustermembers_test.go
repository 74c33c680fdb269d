package server

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// sharedTeamFile writes a config with members names and returns its path
// and the parsed file.
func sharedTeamFile(t *testing.T, names ...string) (string, *teamconfig.File) {
	t.Helper()
	f := &teamconfig.File{Team: teamconfig.Team{Name: "team"}}
	for _, n := range names {
		f.Store.Members = append(f.Store.Members, teamconfig.Member{Name: n, Permissions: []string{auth.MembersManage}})
	}
	require.NoError(t, f.Validate())
	path := filepath.Join(t.TempDir(), "svc.json")
	require.NoError(t, teamconfig.Save(path, f))
	return path, f
}

func addMember(name string) func(f *teamconfig.File) error {
	return func(f *teamconfig.File) error {
		id, err := teamconfig.NewMemberID()
		if err != nil {
			return err
		}
		f.Store.Members = append(f.Store.Members, teamconfig.Member{ID: id, Name: name, Permissions: []string{}})
		return nil
	}
}

func memberNamesOf(t *Team) []string {
	var out []string
	for _, m := range t.Members() {
		out = append(out, m.Name)
	}
	return out
}

// The first broker moves the file's members into the store and rewrites
// the file without them; a later broker reads the store's and ignores any
// the file still holds.
func TestSharedTeamMovesTheFilesMembersOnce(t *testing.T) {
	ctx := context.Background()
	st := mustMemStore(t)
	path, f := sharedTeamFile(t, "admin", "bob")
	a, err := NewSharedTeam(ctx, path, f, st, time.Now)
	require.NoError(t, err)
	require.Equal(t, []string{"admin", "bob"}, memberNamesOf(a))
	onDisk, err := teamconfig.Load(path)
	require.NoError(t, err)
	require.Empty(t, onDisk.Store.Members)
	require.True(t, onDisk.Store.MembersInDatabase)
	stored, err := st.ListMembers(ctx)
	require.NoError(t, err)
	require.Len(t, stored, 2, "the mirror holds them")

	// An older copy of the file, with other members, changes nothing.
	path2, f2 := sharedTeamFile(t, "mallory")
	b, err := NewSharedTeam(ctx, path2, f2, st, time.Now)
	require.NoError(t, err)
	require.Equal(t, []string{"admin", "bob"}, memberNamesOf(b))
	_, ok := b.MemberPermissions("mallory")
	require.False(t, ok)
	in, err := MembersInStore(ctx, st)
	require.NoError(t, err)
	require.True(t, in)
}

// A broker whose copy is stale changes the stored members, not its copy:
// no change made elsewhere is lost, and a permission check on either sees
// every committed change at once.
func TestSharedTeamChangesNeverLoseAnother(t *testing.T) {
	ctx := context.Background()
	st := mustMemStore(t)
	path, f := sharedTeamFile(t, "admin", "bob")
	a, err := NewSharedTeam(ctx, path, f, st, time.Now)
	require.NoError(t, err)
	f2, err := teamconfig.Load(path)
	require.NoError(t, err)
	b, err := NewSharedTeam(ctx, path, f2, st, time.Now)
	require.NoError(t, err)
	var (
		mu       sync.Mutex
		reacted  [][2][]string
		observed = func(old, cur []teamconfig.Member) {
			names := func(ms []teamconfig.Member) []string {
				var out []string
				for _, m := range ms {
					out = append(out, m.Name)
				}
				slices.Sort(out)
				return out
			}
			mu.Lock()
			defer mu.Unlock()
			reacted = append(reacted, [2][]string{names(old), names(cur)})
		}
	)
	a.shared.elsewhere.Store(&observed)

	require.NoError(t, a.change(ctx, addMember("carol"), nil))
	require.NoError(t, b.change(ctx, addMember("dave"), nil), "b's copy is stale")
	require.Equal(t, []string{"admin", "bob", "carol", "dave"}, memberNamesOf(b))
	perms, ok := a.MemberPermissions("dave")
	require.True(t, ok, "a permission check reloads first")
	require.Empty(t, perms)
	require.Equal(t, []string{"admin", "bob", "carol", "dave"}, memberNamesOf(a))

	// Removed on b: refused on a at the next check, and a reacts to it.
	require.NoError(t, b.change(ctx, func(f *teamconfig.File) error {
		f.Store.Members = slices.DeleteFunc(f.Store.Members, func(m teamconfig.Member) bool { return m.Name == "bob" })
		return nil
	}, nil))
	_, ok = a.MemberPermissions("bob")
	require.False(t, ok)
	mu.Lock()
	require.Contains(t, reacted, [2][]string{{"admin", "bob", "carol", "dave"}, {"admin", "carol", "dave"}})
	mu.Unlock()

	// Many at once from both: every one lands.
	var wg sync.WaitGroup
	for i := range 10 {
		for _, tm := range []*Team{a, b} {
			name := string(rune('e'+i)) + map[*Team]string{a: "a", b: "b"}[tm]
			wg.Go(func() { require.NoError(t, tm.change(ctx, addMember(name), nil)) })
		}
	}
	wg.Wait()
	require.NoError(t, a.fresh(ctx))
	require.NoError(t, b.fresh(ctx))
	require.Len(t, a.Members(), 3+20, "admin, carol, dave and twenty more")
	require.Equal(t, memberNamesOf(a), memberNamesOf(b))
	doc, err := readMembersDoc(ctx, st)
	require.NoError(t, err)
	require.Equal(t, int64(1+3+20), doc.Version, "one version per change")
}

// Without a members document nothing is shared: MembersInStore says so,
// and NewTeam (one broker) never writes one.
func TestSharedTeamNotUsedByOneBroker(t *testing.T) {
	ctx := context.Background()
	st := mustMemStore(t)
	path, f := sharedTeamFile(t, "admin")
	tm, err := NewTeam(ctx, path, f, st, time.Now)
	require.NoError(t, err)
	require.NoError(t, tm.change(ctx, addMember("carol"), nil))
	in, err := MembersInStore(ctx, st)
	require.NoError(t, err)
	require.False(t, in)
	_, err = st.GetMeta(ctx, metaMembersDoc)
	require.ErrorIs(t, err, store.ErrNotFound)
	onDisk, err := teamconfig.Load(path)
	require.NoError(t, err)
	require.Len(t, onDisk.Store.Members, 2)
	require.False(t, tm.Shared())
}
