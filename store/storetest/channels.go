package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// channelTests are the subtests of ChannelStore; RunAll runs them.
var channelTests = []suiteTest{
	{"ChannelGeneral", testChannelGeneral},
	{"CreateChannel", testCreateChannel},
	{"CreateChannelConflict", testCreateChannelConflict},
	{"CreateChannelUnknownCreator", testCreateChannelUnknownCreator},
	{"GetChannel", testGetChannel},
	{"RenameChannel", testRenameChannel},
	{"ArchiveChannel", testArchiveChannel},
	{"PutChannelMember", testPutChannelMember},
	{"PutChannelMemberPrecondition", testPutChannelMemberPrecondition},
	{"DeleteChannelMember", testDeleteChannelMember},
	{"ListChannelMembersByName", testListChannelMembersByName},
	{"MemberChannels", testMemberChannels},
	{"ChannelWithTxRollback", testChannelWithTxRollback},
}

// channel is a live channel created by creator.
func channel(id, slug, creator string) store.Channel {
	return store.Channel{ID: id, Slug: slug, CreatedAt: at(time.Minute), CreatedBy: creator}
}

func mustCreateChannels(t *testing.T, s store.ChannelStore, cs ...store.Channel) {
	t.Helper()
	for _, c := range cs {
		require.NoError(t, s.CreateChannel(t.Context(), c))
	}
}

func mustPutChannelMembers(t *testing.T, s store.ChannelStore, ms ...store.ChannelMember) {
	t.Helper()
	for _, m := range ms {
		require.NoError(t, s.PutChannelMember(t.Context(), m))
	}
}

// channelView is a Channel with comparable times.
type channelView struct {
	ID, Slug, CreatedBy   string
	CreatedAt, ArchivedAt int64
}

func viewChannel(c store.Channel) channelView {
	return channelView{c.ID, c.Slug, c.CreatedBy, ms(c.CreatedAt), ms(c.ArchivedAt)}
}

func channelSlugs(cs []store.Channel) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Slug)
	}
	return out
}

func requireChannelMembers(t *testing.T, s store.ChannelStore, channel string, want ...store.ChannelMember) {
	t.Helper()
	got, err := s.ListChannelMembers(t.Context(), channel)
	require.NoError(t, err)
	if want == nil {
		want = []store.ChannelMember{}
	}
	require.Equal(t, want, got)
}

func testChannelGeneral(t *testing.T, s store.Store) {
	ctx := t.Context()
	c, err := s.GetChannel(ctx, "general")
	require.NoError(t, err)
	require.Equal(t, "general", c.ID)
	require.Equal(t, "general", c.Slug)
	require.True(t, c.ArchivedAt.IsZero())
	all, err := s.ListChannels(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"general"}, channelSlugs(all))
	requireChannelMembers(t, s, "general")
}

func testCreateChannel(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	eng := channel("c1", "eng", "alice")
	eng.CreatedAt = at(time.Hour).Add(123 * time.Microsecond).In(time.FixedZone("east", 2*3600))
	alpha := channel("c2", "alpha", "bob")
	mustCreateChannels(t, s, eng, alpha)

	got, err := s.GetChannel(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, viewChannel(eng), viewChannel(got))
	requireChannelMembers(t, s, "c1", store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"})
	requireChannelMembers(t, s, "c2", store.ChannelMember{Channel: "c2", Member: "bob", Role: "admin"})

	all, err := s.ListChannels(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"alpha", "eng", "general"}, channelSlugs(all))
	require.Equal(t, viewChannel(eng), viewChannel(all[1]))

	// Inside a transaction too.
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		return tx.CreateChannel(ctx, channel("c3", "ops", "bob"))
	}))
	requireChannelMembers(t, s, "c3", store.ChannelMember{Channel: "c3", Member: "bob", Role: "admin"})
}

func testCreateChannelConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateChannels(t, s, channel("c1", "eng", "alice"), channel("c2", "old", "alice"))
	_, err := s.ArchiveChannel(ctx, "c2", at(time.Hour))
	require.NoError(t, err)
	before, err := s.ListChannels(ctx)
	require.NoError(t, err)

	tests := []struct {
		name string
		c    store.Channel
	}{
		{"same id", channel("c1", "other", "bob")},
		{"same slug", channel("c9", "eng", "bob")},
		{"slug of an archived channel", channel("c9", "old", "bob")},
		{"general slug", channel("c9", "general", "bob")},
		{"general id", channel("general", "gen2", "bob")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.CreateChannel(t.Context(), tc.c), store.ErrConflict)
		})
	}

	after, err := s.ListChannels(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after)
	// No failed create left its creator a membership.
	mine, err := s.MemberChannels(ctx, "bob")
	require.NoError(t, err)
	require.Empty(t, mine)
}

func testCreateChannelUnknownCreator(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	require.ErrorIs(t, s.CreateChannel(ctx, channel("c1", "eng", "nobody")), store.ErrPrecondition)
	// The channel went with its admin.
	_, err := s.GetChannel(ctx, "c1")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetChannel(ctx, "eng")
	require.ErrorIs(t, err, store.ErrNotFound)
	// The store is writable and the slug free.
	mustCreateChannels(t, s, channel("c1", "eng", "alice"))
}

func testGetChannel(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	eng := channel("c1", "eng", "alice")
	// shadow's id is eng's slug: a lookup by id wins.
	shadow := channel("eng", "shadow", "alice")
	mustCreateChannels(t, s, eng, shadow)

	tests := []struct {
		name string
		key  string
		want store.Channel
	}{
		{"by id", "c1", eng},
		{"by slug", "shadow", shadow},
		{"id before slug", "eng", shadow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.GetChannel(t.Context(), tc.key)
			require.NoError(t, err)
			require.Equal(t, viewChannel(tc.want), viewChannel(got))
		})
	}
	for _, key := range []string{"nope", ""} {
		t.Run("unknown "+key, func(t *testing.T) {
			_, err := s.GetChannel(t.Context(), key)
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}

func testRenameChannel(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	eng := channel("c1", "eng", "alice")
	mustCreateChannels(t, s, eng, channel("c2", "ops", "alice"), channel("c3", "old", "alice"))
	mustPutChannelMembers(t, s, store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"})
	_, err := s.ArchiveChannel(ctx, "c3", at(time.Hour))
	require.NoError(t, err)

	got, err := s.RenameChannel(ctx, "c1", "engineering")
	require.NoError(t, err)
	want := eng
	want.Slug = "engineering"
	require.Equal(t, viewChannel(want), viewChannel(got))
	stored, err := s.GetChannel(ctx, "engineering")
	require.NoError(t, err)
	require.Equal(t, viewChannel(want), viewChannel(stored))
	_, err = s.GetChannel(ctx, "eng")
	require.ErrorIs(t, err, store.ErrNotFound)
	// The id is stable, so memberships stay.
	requireChannelMembers(t, s, "c1",
		store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"},
		store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"})
	// The old slug is free again.
	mustCreateChannels(t, s, channel("c4", "eng", "bob"))

	tests := []struct {
		name    string
		id      string
		slug    string
		wantErr error
	}{
		{"slug of a live channel", "c1", "ops", store.ErrConflict},
		{"slug of an archived channel", "c1", "old", store.ErrConflict},
		{"general slug", "c1", "general", store.ErrConflict},
		{"unknown id", "nope", "fresh", store.ErrNotFound},
		{"slug is not an id", "engineering", "fresh", store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.RenameChannel(t.Context(), tc.id, tc.slug)
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
	all, err := s.ListChannels(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"eng", "engineering", "general", "old", "ops"}, channelSlugs(all))
}

func testArchiveChannel(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	eng := channel("c1", "eng", "alice")
	mustCreateChannels(t, s, eng, channel("c2", "ops", "alice"))

	archivedAt := at(time.Hour).Add(456 * time.Microsecond)
	got, err := s.ArchiveChannel(ctx, "c1", archivedAt)
	require.NoError(t, err)
	want := eng
	want.ArchivedAt = archivedAt
	require.Equal(t, viewChannel(want), viewChannel(got))
	require.False(t, got.ArchivedAt.IsZero())

	// An archived channel stays addressable by id and slug, and listed.
	for _, key := range []string{"c1", "eng"} {
		stored, err := s.GetChannel(ctx, key)
		require.NoError(t, err)
		require.Equal(t, viewChannel(want), viewChannel(stored), key)
	}
	all, err := s.ListChannels(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"eng", "general", "ops"}, channelSlugs(all))
	require.Equal(t, viewChannel(want), viewChannel(all[0]))
	// Others stay live.
	ops, err := s.GetChannel(ctx, "c2")
	require.NoError(t, err)
	require.True(t, ops.ArchivedAt.IsZero())

	_, err = s.ArchiveChannel(ctx, "nope", archivedAt)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testPutChannelMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateChannels(t, s, channel("c1", "eng", "alice"), channel("c2", "ops", "alice"))

	steps := []struct {
		name string
		put  store.ChannelMember
		want []store.ChannelMember
	}{
		{"add", store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"}, []store.ChannelMember{
			{Channel: "c1", Member: "alice", Role: "admin"}, {Channel: "c1", Member: "bob", Role: "member"},
		}},
		{"promote", store.ChannelMember{Channel: "c1", Member: "bob", Role: "admin"}, []store.ChannelMember{
			{Channel: "c1", Member: "alice", Role: "admin"}, {Channel: "c1", Member: "bob", Role: "admin"},
		}},
		{"demote the creator", store.ChannelMember{Channel: "c1", Member: "alice", Role: "member"}, []store.ChannelMember{
			{Channel: "c1", Member: "alice", Role: "member"}, {Channel: "c1", Member: "bob", Role: "admin"},
		}},
		{"again", store.ChannelMember{Channel: "c1", Member: "alice", Role: "member"}, []store.ChannelMember{
			{Channel: "c1", Member: "alice", Role: "member"}, {Channel: "c1", Member: "bob", Role: "admin"},
		}},
	}
	for _, step := range steps {
		require.NoError(t, s.PutChannelMember(ctx, step.put), step.name)
		requireChannelMembers(t, s, "c1", step.want...)
	}
	// The other channel is untouched.
	requireChannelMembers(t, s, "c2", store.ChannelMember{Channel: "c2", Member: "alice", Role: "admin"})
}

func testPutChannelMemberPrecondition(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	mustCreateChannels(t, s, channel("c1", "eng", "alice"))

	tests := []struct {
		name string
		m    store.ChannelMember
	}{
		{"unknown member", store.ChannelMember{Channel: "c1", Member: "nobody", Role: "member"}},
		{"unknown channel", store.ChannelMember{Channel: "nope", Member: "alice", Role: "member"}},
		{"slug is not a channel id", store.ChannelMember{Channel: "eng", Member: "alice", Role: "member"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.PutChannelMember(t.Context(), tc.m), store.ErrPrecondition)
		})
	}
	requireChannelMembers(t, s, "c1", store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"})
	mine, err := s.MemberChannels(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, []store.ChannelMember{{Channel: "c1", Member: "alice", Role: "admin"}}, mine)
}

func testDeleteChannelMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	mustCreateChannels(t, s, channel("c1", "eng", "alice"), channel("c2", "ops", "alice"))
	mustPutChannelMembers(t, s,
		store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"},
		store.ChannelMember{Channel: "c2", Member: "bob", Role: "member"})

	require.NoError(t, s.DeleteChannelMember(ctx, "c1", "bob"))
	requireChannelMembers(t, s, "c1", store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"})
	// bob's other membership stays.
	requireChannelMembers(t, s, "c2",
		store.ChannelMember{Channel: "c2", Member: "alice", Role: "admin"},
		store.ChannelMember{Channel: "c2", Member: "bob", Role: "member"})

	tests := []struct {
		name            string
		channel, member string
	}{
		{"already deleted", "c1", "bob"},
		{"never a member", "c1", "carol"},
		{"unknown member", "c1", "nobody"},
		{"unknown channel", "nope", "alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.DeleteChannelMember(t.Context(), tc.channel, tc.member), store.ErrNotFound)
		})
	}
	// The creator can be removed like anyone else; members and channel stay.
	require.NoError(t, s.DeleteChannelMember(ctx, "c1", "alice"))
	requireChannelMembers(t, s, "c1")
	_, err := s.GetChannel(ctx, "c1")
	require.NoError(t, err)
	_, err = s.GetMember(ctx, "alice")
	require.NoError(t, err)
}

func testListChannelMembersByName(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "dave", "bob", "erin", "carol", "alice")
	mustCreateChannels(t, s, channel("c1", "eng", "carol"), channel("c2", "ops", "erin"))
	mustPutChannelMembers(t, s,
		store.ChannelMember{Channel: "c1", Member: "erin", Role: "member"},
		store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"},
		store.ChannelMember{Channel: "c1", Member: "dave", Role: "member"},
		store.ChannelMember{Channel: "c2", Member: "bob", Role: "member"})

	tests := []struct {
		name    string
		channel string
		want    []store.ChannelMember
	}{
		{"ordered by name", "c1", []store.ChannelMember{
			{Channel: "c1", Member: "alice", Role: "admin"},
			{Channel: "c1", Member: "carol", Role: "admin"},
			{Channel: "c1", Member: "dave", Role: "member"},
			{Channel: "c1", Member: "erin", Role: "member"},
		}},
		{"other channel", "c2", []store.ChannelMember{
			{Channel: "c2", Member: "bob", Role: "member"},
			{Channel: "c2", Member: "erin", Role: "admin"},
		}},
		{"unknown channel", "nope", nil},
		{"general has no rows", "general", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireChannelMembers(t, s, tc.channel, tc.want...)
		})
	}
}

func testMemberChannels(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice", "bob", "carol")
	mustCreateChannels(t, s, channel("c1", "eng", "alice"), channel("c2", "ops", "bob"), channel("c3", "hr", "bob"))
	mustPutChannelMembers(t, s,
		store.ChannelMember{Channel: "c2", Member: "alice", Role: "member"},
		store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"})

	tests := []struct {
		name   string
		member string
		want   []store.ChannelMember
	}{
		{"creator and member", "alice", []store.ChannelMember{
			{Channel: "c1", Member: "alice", Role: "admin"},
			{Channel: "c2", Member: "alice", Role: "member"},
		}},
		{"other member", "bob", []store.ChannelMember{
			{Channel: "c1", Member: "bob", Role: "member"},
			{Channel: "c2", Member: "bob", Role: "admin"},
			{Channel: "c3", Member: "bob", Role: "admin"},
		}},
		{"no memberships", "carol", nil},
		{"unknown member", "nobody", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.MemberChannels(t.Context(), tc.member)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.ElementsMatch(t, tc.want, got)
		})
	}
}

func testChannelWithTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateChannels(t, s, channel("c1", "eng", "alice"))

	err := s.WithTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.CreateChannel(ctx, channel("c2", "ops", "alice")))
		require.NoError(t, tx.PutChannelMember(ctx, store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"}))
		_, err := tx.RenameChannel(ctx, "c1", "engineering")
		require.NoError(t, err)
		_, err = tx.ArchiveChannel(ctx, "c1", at(time.Hour))
		require.NoError(t, err)
		_, err = tx.PutPushSubscription(ctx, pushSub("p1", "bob", "https://push.example/1"))
		require.NoError(t, err)
		// The transaction reads its own writes.
		c, err := tx.GetChannel(ctx, "engineering")
		require.NoError(t, err)
		require.False(t, c.ArchivedAt.IsZero())
		mine, err := tx.MemberChannels(ctx, "bob")
		require.NoError(t, err)
		require.Len(t, mine, 1)
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)

	all, err := s.ListChannels(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"eng", "general"}, channelSlugs(all))
	require.True(t, all[0].ArchivedAt.IsZero())
	requireChannelMembers(t, s, "c1", store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"})
	subs, err := s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Empty(t, subs)
	// The store is writable again.
	mustCreateChannels(t, s, channel("c2", "ops", "bob"))
}
