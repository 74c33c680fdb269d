package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// defaultMessageLimit is MessageFilter.Limit when it is <= 0.
const defaultMessageLimit = 50

// messagingTests are the subtests of MessageStore, ChannelStore and
// PushSubscriptionStore; RunAll runs them.
var messagingTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"AppendMessagesSeq", testAppendMessagesSeq},
	{"AppendMessagesRoundTrip", testAppendMessagesRoundTrip},
	{"AppendMessagesRecipients", testAppendMessagesRecipients},
	{"AppendMessagesWithTx", testAppendMessagesWithTx},
	{"ListMessages", testListMessages},
	{"ListMessagesDefaultLimit", testListMessagesDefaultLimit},
	{"ListMessagesViewer", testListMessagesViewer},
	{"MessagesFor", testMessagesFor},
	{"MessagesForPaging", testMessagesForPaging},
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
	{"DeleteMemberCascades", testMemberRemovalCascades(func(t *testing.T, s store.Store) {
		require.NoError(t, s.DeleteMember(t.Context(), "bob"))
	})},
	{"DeleteMemberInTxCascades", testMemberRemovalCascades(func(t *testing.T, s store.Store) {
		require.NoError(t, s.WithTx(t.Context(), func(tx store.Tx) error {
			return tx.DeleteMember(t.Context(), "bob")
		}))
	})},
	{"ReplaceMembersCascades", testMemberRemovalCascades(func(t *testing.T, s store.Store) {
		require.NoError(t, s.ReplaceMembers(t.Context(), []store.Member{member("alice")}))
	})},
	{"PutListPushSubscriptions", testPutListPushSubscriptions},
	{"PutPushSubscriptionMoves", testPutPushSubscriptionMoves},
	{"PutPushSubscriptionUnknownMember", testPutPushSubscriptionUnknownMember},
	{"DeletePushSubscription", testDeletePushSubscription},
}

// message is a plain message of from in thread, created d after base.
func message(from, thread, body string, d time.Duration) store.Message {
	return store.Message{From: from, Thread: thread, Body: body, Level: "info", CreatedAt: at(d)}
}

// mustAppend appends msgs and returns them with their Seq set.
func mustAppend(t *testing.T, s store.MessageStore, msgs ...store.Message) []store.Message {
	t.Helper()
	out, err := s.AppendMessages(t.Context(), msgs)
	require.NoError(t, err)
	require.Len(t, out, len(msgs))
	return out
}

// messageView is a Message with comparable times and JSON, without the
// Recipients a read does not return.
type messageView struct {
	Seq                           int64
	From, To, Thread, Title, Body string
	Level                         string
	Data, Meta                    *string // nil when the message has none
	Attachments                   []string
	CreatedAt                     int64
	All                           bool
}

func jsonView(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func viewMessage(m store.Message) messageView {
	return messageView{
		Seq: m.Seq, From: m.From, To: m.To, Thread: m.Thread, Title: m.Title, Body: m.Body, Level: m.Level,
		Data: jsonView(m.Data), Meta: jsonView(m.Meta), Attachments: m.Attachments,
		CreatedAt: ms(m.CreatedAt), All: m.All,
	}
}

func seqsOf(msgs []store.Message) []int64 {
	out := make([]int64, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, m.Seq)
	}
	return out
}

// reversed returns a reversed copy of seqs.
func reversed(seqs []int64) []int64 {
	out := slices.Clone(seqs)
	slices.Reverse(out)
	return out
}

func testAppendMessagesSeq(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.AppendMessages(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	newest, err := s.LastMessageSeq(ctx)
	require.NoError(t, err)
	require.Zero(t, newest, "an empty store has no newest message")

	first := mustAppend(t, s,
		message("alice", "chan:general", "one", time.Minute),
		message("bob", "dm:alice:bob", "two", time.Minute),
		message("alice", "chan:general", "three", 2*time.Minute),
	)
	second := mustAppend(t, s, message("carol", "chan:general", "four", 3*time.Minute))
	all := append(slices.Clone(first), second...)
	newest, err = s.LastMessageSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, second[0].Seq, newest)
	for i, m := range all {
		require.Equal(t, []string{"one", "two", "three", "four"}[i], m.Body, "returned in input order")
		require.Positive(t, m.Seq, i)
		if i > 0 {
			require.Greater(t, m.Seq, all[i-1].Seq, "message %d", i)
		}
	}

	// The stored seqs are the returned ones.
	list, err := s.ListMessages(ctx, store.MessageFilter{Thread: "chan:general"})
	require.NoError(t, err)
	require.Equal(t, []int64{all[3].Seq, all[2].Seq, all[0].Seq}, seqsOf(list))
	list, err = s.ListMessages(ctx, store.MessageFilter{Thread: "dm:alice:bob"})
	require.NoError(t, err)
	require.Equal(t, []int64{all[1].Seq}, seqsOf(list))
}

func testAppendMessagesRoundTrip(t *testing.T, s store.Store) {
	// Sub-millisecond parts and a zone other than UTC.
	zone := time.FixedZone("west", -(3*3600 + 1800))
	full := store.Message{
		From:        "alice",
		To:          "bob",
		Thread:      "dm:alice:bob",
		Title:       "Title",
		Body:        "Body with\nnewline, \"quotes\" and ünïcode 日本",
		Level:       "warn",
		Data:        []byte(`{"n":1,"s":"ü","nested":{"a":[1,2]}}`),
		Meta:        []byte(`{"trace":"abc"}`),
		Attachments: []string{"/files/a.txt", "/files/dir/b c.png"},
		CreatedAt:   at(time.Minute).Add(123 * time.Microsecond).In(zone),
		Recipients:  []string{"bob"},
	}
	noJSON := full
	noJSON.Data, noJSON.Meta = nil, nil
	emptyJSON := full
	emptyJSON.Data, emptyJSON.Meta = []byte(`{}`), []byte(`{}`)
	nilAtts := full
	nilAtts.Attachments = nil
	emptyAtts := full
	emptyAtts.Attachments = []string{}
	broadcast := store.Message{From: "alice", Thread: "chan:general", Body: "hi all", Level: "info", CreatedAt: at(2 * time.Minute), All: true}
	bare := store.Message{From: "carol", Thread: "obj:1", Body: "", Level: "", CreatedAt: at(3 * time.Minute), Recipients: []string{"bob"}}

	tests := []struct {
		name     string
		msg      store.Message
		wantAtts []string
	}{
		{"full", full, full.Attachments},
		{"nil data and meta", noJSON, full.Attachments},
		{"empty data and meta", emptyJSON, full.Attachments},
		{"nil attachments", nilAtts, []string{}},
		{"empty attachments", emptyAtts, []string{}},
		{"all members", broadcast, []string{}},
		{"empty strings", bare, []string{}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			in := tc.msg
			in.Thread = fmt.Sprintf("%s/%d", in.Thread, i) // one thread per case
			got := mustAppend(t, s, in)[0]

			want := viewMessage(in)
			want.Seq = got.Seq
			want.Attachments = tc.wantAtts
			gotView := viewMessage(got)
			gotView.Attachments = nonNil(gotView.Attachments)
			require.Equal(t, want, gotView, "returned by AppendMessages")

			list, err := s.ListMessages(ctx, store.MessageFilter{Thread: in.Thread})
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.NotNil(t, list[0].Attachments)
			require.Equal(t, want, viewMessage(list[0]), "read by ListMessages")

			// MessagesFor reads the same fields.
			after := got.Seq - 1
			delivered, err := s.MessagesFor(ctx, "bob", after, 1)
			require.NoError(t, err)
			require.Len(t, delivered, 1)
			require.NotNil(t, delivered[0].Attachments)
			require.Equal(t, want, viewMessage(delivered[0]), "read by MessagesFor")
		})
	}

	t.Run("zero created at", func(t *testing.T) {
		got := mustAppend(t, s, store.Message{From: "alice", Thread: "chan:zero", Body: "b", Level: "info", All: true})[0]
		require.False(t, got.CreatedAt.IsZero())
		list, err := s.ListMessages(t.Context(), store.MessageFilter{Thread: "chan:zero"})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, ms(got.CreatedAt), ms(list[0].CreatedAt))
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func testAppendMessagesRecipients(t *testing.T, s store.Store) {
	ctx := t.Context()
	m := message("alice", "obj:1", "to bob and carol", 0)
	m.Recipients = []string{"bob", "carol", "bob"} // bob listed twice
	other := message("alice", "obj:1", "to dave", time.Minute)
	other.Recipients = []string{"dave"}
	got := mustAppend(t, s, m, other)

	tests := []struct {
		name   string
		member string
		want   []int64
	}{
		{"first recipient", "bob", []int64{got[0].Seq}},
		{"second recipient", "carol", []int64{got[0].Seq}},
		{"other message's recipient", "dave", []int64{got[1].Seq}},
		{"sender", "alice", []int64{}},
		{"nobody", "erin", []int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			delivered, err := s.MessagesFor(t.Context(), tc.member, 0, 100)
			require.NoError(t, err)
			require.Equal(t, tc.want, seqsOf(delivered))

			viewed, err := s.ListMessages(t.Context(), store.MessageFilter{Thread: "obj:1", Viewer: tc.member})
			require.NoError(t, err)
			want := reversed(tc.want)
			if tc.member == "alice" {
				want = reversed(seqsOf(got)) // the sender sees what it sent
			}
			require.Equal(t, want, seqsOf(viewed))
		})
	}
	list, err := s.ListMessages(ctx, store.MessageFilter{Thread: "obj:1"})
	require.NoError(t, err)
	require.Len(t, list, 2)
}

func testAppendMessagesWithTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	kept := mustAppend(t, s, message("alice", "chan:general", "before", 0))[0]

	msgs := []store.Message{message("alice", "chan:general", "in tx", time.Minute), message("bob", "obj:1", "in tx", time.Minute)}
	msgs[0].All = true
	msgs[1].Recipients = []string{"carol"}
	err := s.WithTx(ctx, func(tx store.Tx) error {
		got, err := tx.AppendMessages(ctx, msgs)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Greater(t, got[0].Seq, kept.Seq)
		// The transaction reads its own writes.
		list, err := tx.ListMessages(ctx, store.MessageFilter{Thread: "chan:general"})
		require.NoError(t, err)
		require.Equal(t, []int64{got[0].Seq, kept.Seq}, seqsOf(list))
		delivered, err := tx.MessagesFor(ctx, "carol", kept.Seq, 10)
		require.NoError(t, err)
		require.Equal(t, seqsOf(got), seqsOf(delivered))
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)

	list, err := s.ListMessages(ctx, store.MessageFilter{Thread: "chan:general"})
	require.NoError(t, err)
	require.Equal(t, []int64{kept.Seq}, seqsOf(list))
	list, err = s.ListMessages(ctx, store.MessageFilter{Thread: "obj:1"})
	require.NoError(t, err)
	require.Empty(t, list)
	delivered, err := s.MessagesFor(ctx, "carol", kept.Seq, 10)
	require.NoError(t, err)
	require.Empty(t, delivered)

	// The store is writable again, and a committed transaction keeps its
	// messages.
	var committed []store.Message
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		var err error
		committed, err = tx.AppendMessages(ctx, msgs)
		return err
	}))
	delivered, err = s.MessagesFor(ctx, "carol", kept.Seq, 10)
	require.NoError(t, err)
	require.Equal(t, seqsOf(committed), seqsOf(delivered))
}

func testListMessages(t *testing.T, s store.Store) {
	ctx := t.Context()
	var a, b []store.Message
	for i := range 5 {
		a = append(a, mustAppend(t, s, message("alice", "chan:a", fmt.Sprint("a", i), time.Duration(i)*time.Minute))...)
		if i%2 == 0 {
			b = append(b, mustAppend(t, s, message("bob", "chan:b", fmt.Sprint("b", i), time.Duration(i)*time.Minute))...)
		}
	}
	aSeqs := seqsOf(a)
	// a[2].CreatedAt is the stored time: the store keeps milliseconds.
	mid := a[2].CreatedAt

	tests := []struct {
		name string
		f    store.MessageFilter
		want []int64
	}{
		{"one thread, newest first", store.MessageFilter{Thread: "chan:a"}, reversed(aSeqs)},
		{"other thread", store.MessageFilter{Thread: "chan:b"}, reversed(seqsOf(b))},
		{"unknown thread", store.MessageFilter{Thread: "chan:none"}, []int64{}},
		{"limit keeps the newest", store.MessageFilter{Thread: "chan:a", Limit: 2}, []int64{aSeqs[4], aSeqs[3]}},
		{"limit above count", store.MessageFilter{Thread: "chan:a", Limit: 100}, reversed(aSeqs)},
		{"before is exclusive", store.MessageFilter{Thread: "chan:a", Before: mid}, []int64{aSeqs[1], aSeqs[0]}},
		{"before between messages", store.MessageFilter{Thread: "chan:a", Before: mid.Add(30 * time.Second)}, []int64{aSeqs[2], aSeqs[1], aSeqs[0]}},
		{"before and limit", store.MessageFilter{Thread: "chan:a", Before: mid, Limit: 1}, []int64{aSeqs[1]}},
		{"before the first", store.MessageFilter{Thread: "chan:a", Before: a[0].CreatedAt}, []int64{}},
		{"before after the last", store.MessageFilter{Thread: "chan:a", Before: at(time.Hour)}, reversed(aSeqs)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListMessages(t.Context(), tc.f)
			require.NoError(t, err)
			require.Equal(t, tc.want, seqsOf(got))
		})
	}
	got, err := s.ListMessages(ctx, store.MessageFilter{Thread: "chan:a", Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	want := viewMessage(a[4])
	want.Attachments = []string{}
	require.Equal(t, want, viewMessage(got[0]))
}

func testListMessagesDefaultLimit(t *testing.T, s store.Store) {
	const n = defaultMessageLimit + 5
	msgs := make([]store.Message, n)
	for i := range msgs {
		msgs[i] = message("alice", "chan:big", fmt.Sprint(i), time.Duration(i)*time.Second)
	}
	all := seqsOf(mustAppend(t, s, msgs...))
	newest := reversed(all)

	tests := []struct {
		name  string
		limit int
		want  []int64
	}{
		{"zero", 0, newest[:defaultMessageLimit]},
		{"negative", -1, newest[:defaultMessageLimit]},
		{"explicit above default", n + 10, newest},
		{"explicit below default", 3, newest[:3]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListMessages(t.Context(), store.MessageFilter{Thread: "chan:big", Limit: tc.limit})
			require.NoError(t, err)
			require.Equal(t, tc.want, seqsOf(got))
		})
	}
}

func testListMessagesViewer(t *testing.T, s store.Store) {
	const thread = "chan:c1"
	mk := func(from string, all bool, d time.Duration, to ...string) store.Message {
		m := message(from, thread, from+" to "+fmt.Sprint(to), d)
		m.All = all
		m.Recipients = to
		return m
	}
	// Another thread's message to bob never shows up.
	elsewhere := mk("alice", false, 5*time.Minute, "bob")
	elsewhere.Thread = "chan:c2"
	msgs := mustAppend(t, s,
		mk("alice", true, 0),                             // 0: everyone
		mk("alice", false, time.Minute, "bob"),           // 1
		mk("bob", false, 2*time.Minute, "alice"),         // 2
		mk("carol", false, 3*time.Minute, "dave"),        // 3
		mk("dave", false, 4*time.Minute, "carol", "bob"), // 4
		elsewhere, // 5
		mk("carol", false, 6*time.Minute, "dave"), // 6
	)
	pick := func(idx ...int) []int64 {
		out := make([]int64, 0, len(idx))
		for _, i := range idx {
			out = append(out, msgs[i].Seq)
		}
		return out
	}

	tests := []struct {
		name string
		f    store.MessageFilter
		want []int64
	}{
		{"no viewer", store.MessageFilter{Thread: thread}, pick(6, 4, 3, 2, 1, 0)},
		{"sent, received and all", store.MessageFilter{Thread: thread, Viewer: "bob"}, pick(4, 2, 1, 0)},
		{"sender of an all message", store.MessageFilter{Thread: thread, Viewer: "alice"}, pick(2, 1, 0)},
		{"sent and received", store.MessageFilter{Thread: thread, Viewer: "dave"}, pick(6, 4, 3, 0)},
		{"outsider sees all messages only", store.MessageFilter{Thread: thread, Viewer: "erin"}, pick(0)},
		// The limit counts visible messages only.
		{"limit after filtering", store.MessageFilter{Thread: thread, Viewer: "erin", Limit: 1}, pick(0)},
		{"viewer and limit", store.MessageFilter{Thread: thread, Viewer: "bob", Limit: 2}, pick(4, 2)},
		{"viewer and before", store.MessageFilter{Thread: thread, Viewer: "bob", Before: msgs[2].CreatedAt}, pick(1, 0)},
		{"other thread", store.MessageFilter{Thread: "chan:c2", Viewer: "bob"}, pick(5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := s.ListMessages(t.Context(), tc.f)
			require.NoError(t, err)
			require.Equal(t, tc.want, seqsOf(list))
		})
	}
}

func testMessagesFor(t *testing.T, s store.Store) {
	mk := func(from string, all bool, to ...string) store.Message {
		m := message(from, "obj:1", from+" to "+fmt.Sprint(to), 0)
		if all {
			m.Thread = "chan:general"
		}
		m.All = all
		m.Recipients = to
		return m
	}
	msgs := mustAppend(t, s,
		mk("alice", true),                  // 0
		mk("bob", true),                    // 1
		mk("alice", false, "bob"),          // 2
		mk("bob", false, "alice"),          // 3
		mk("carol", false, "alice", "bob"), // 4
		mk("alice", false, "alice"),        // 5: to oneself
	)
	pick := func(idx ...int) []int64 {
		out := make([]int64, 0, len(idx))
		for _, i := range idx {
			out = append(out, msgs[i].Seq)
		}
		return out
	}

	tests := []struct {
		name   string
		member string
		after  int64
		limit  int
		want   []int64
	}{
		{"recipient and others' broadcasts", "alice", 0, 100, pick(1, 3, 4, 5)},
		{"other member", "bob", 0, 100, pick(0, 2, 4)},
		{"broadcasts only", "carol", 0, 100, pick(0, 1)},
		{"unknown member gets broadcasts", "erin", 0, 100, pick(0, 1)},
		{"after a seq", "alice", msgs[3].Seq, 100, pick(4, 5)},
		{"after is exclusive", "bob", msgs[2].Seq, 100, pick(4)},
		{"limit keeps the oldest", "alice", 0, 2, pick(1, 3)},
		{"after and limit", "bob", msgs[0].Seq, 1, pick(2)},
		{"after the last", "alice", msgs[5].Seq, 100, []int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.MessagesFor(t.Context(), tc.member, tc.after, tc.limit)
			require.NoError(t, err)
			require.Equal(t, tc.want, seqsOf(got))
		})
	}
}

func testMessagesForPaging(t *testing.T, s store.Store) {
	names := []string{"alice", "bob", "carol", "dave"}
	var msgs []store.Message
	for i := range 37 {
		m := message(names[i%len(names)], fmt.Sprint("obj:", i%3), fmt.Sprint(i), time.Duration(i)*time.Second)
		switch i % 5 {
		case 0:
			m.All = true
		case 1:
			m.Recipients = []string{"bob"}
		case 2:
			m.Recipients = []string{"carol", "bob"}
		case 3:
			m.Recipients = []string{"alice"}
		}
		msgs = append(msgs, m)
	}
	// Several appends, so seqs come from more than one call.
	var stored []store.Message
	for chunk := range slices.Chunk(msgs, 10) {
		stored = append(stored, mustAppend(t, s, chunk...)...)
	}

	for _, name := range append(names, "erin") {
		t.Run(name, func(t *testing.T) {
			var want []int64
			for _, m := range stored {
				if slices.Contains(m.Recipients, name) || (m.All && m.From != name) {
					want = append(want, m.Seq)
				}
			}
			require.NotEmpty(t, want)
			for _, limit := range []int{1, 4, 7, 100} {
				var (
					got   []int64
					after int64
				)
				for range len(stored) + 1 {
					page, err := s.MessagesFor(t.Context(), name, after, limit)
					require.NoError(t, err)
					require.LessOrEqual(t, len(page), limit)
					if len(page) == 0 {
						break
					}
					got = append(got, seqsOf(page)...)
					after = page[len(page)-1].Seq
				}
				require.Equal(t, want, got, "limit %d", limit)
			}
		})
	}
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

// testMemberRemovalCascades returns a subtest checking that removing bob
// with remove takes his channel memberships and push subscriptions with him.
func testMemberRemovalCascades(remove func(t *testing.T, s store.Store)) func(t *testing.T, s store.Store) {
	return func(t *testing.T, s store.Store) {
		ctx := t.Context()
		mustPutMembers(t, s, "alice", "bob")
		mustCreateChannels(t, s, channel("c1", "eng", "alice"), channel("c2", "ops", "bob"))
		mustPutChannelMembers(t, s, store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"})
		a := pushSub("pa", "alice", "https://push.example/a")
		mustPutPushSubs(t, s, a, pushSub("pb", "bob", "https://push.example/b"))
		sent := mustAppend(t, s, message("bob", "chan:c1", "bye", 0))[0]

		remove(t, s)

		requireChannelMembers(t, s, "c1", store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"})
		requireChannelMembers(t, s, "c2")
		mine, err := s.MemberChannels(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, mine)
		subs, err := s.ListPushSubscriptions(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, subs)
		subs, err = s.ListPushSubscriptions(ctx, "")
		require.NoError(t, err)
		require.Equal(t, []pushSubView{viewPushSub(a)}, viewPushSubs(subs))

		// Channels and history outlive the member.
		_, err = s.GetChannel(ctx, "c2")
		require.NoError(t, err)
		list, err := s.ListMessages(ctx, store.MessageFilter{Thread: "chan:c1"})
		require.NoError(t, err)
		require.Equal(t, []int64{sent.Seq}, seqsOf(list))

		// A returning member starts without memberships or subscriptions.
		mustPutMembers(t, s, "bob")
		mine, err = s.MemberChannels(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, mine)
		subs, err = s.ListPushSubscriptions(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, subs)
	}
}

func pushSub(id, memberName, endpoint string) store.PushSubscription {
	return store.PushSubscription{
		ID:        id,
		Member:    memberName,
		Endpoint:  endpoint,
		P256dh:    "p256dh-" + id,
		Auth:      "auth-" + id,
		CreatedAt: at(time.Minute),
	}
}

func mustPutPushSubs(t *testing.T, s store.PushSubscriptionStore, subs ...store.PushSubscription) {
	t.Helper()
	for _, sub := range subs {
		got, err := s.PutPushSubscription(t.Context(), sub)
		require.NoError(t, err)
		require.Equal(t, viewPushSub(sub), viewPushSub(got))
	}
}

// pushSubView is a PushSubscription with a comparable time.
type pushSubView struct {
	ID, Member, Endpoint, P256dh, Auth string
	CreatedAt                          int64
}

func viewPushSub(p store.PushSubscription) pushSubView {
	return pushSubView{p.ID, p.Member, p.Endpoint, p.P256dh, p.Auth, ms(p.CreatedAt)}
}

// viewPushSubs returns views ordered by id: the order of a list is not part
// of the contract.
func viewPushSubs(ps []store.PushSubscription) []pushSubView {
	out := make([]pushSubView, 0, len(ps))
	for _, p := range ps {
		out = append(out, viewPushSub(p))
	}
	slices.SortFunc(out, func(a, b pushSubView) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func testPutListPushSubscriptions(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice", "bob", "carol")
	a1 := pushSub("a1", "alice", "https://push.example/1")
	a1.CreatedAt = at(time.Hour).Add(789 * time.Microsecond).In(time.FixedZone("east", 3600))
	a2 := pushSub("a2", "alice", "https://push.example/2?x=y&z=ü")
	b1 := pushSub("b1", "bob", "https://other.example/3")
	mustPutPushSubs(t, s, a1, b1, a2)

	tests := []struct {
		name   string
		member string
		want   []store.PushSubscription
	}{
		{"member", "alice", []store.PushSubscription{a1, a2}},
		{"other member", "bob", []store.PushSubscription{b1}},
		{"everyone", "", []store.PushSubscription{a1, a2, b1}},
		{"none", "carol", nil},
		{"unknown member", "nobody", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListPushSubscriptions(t.Context(), tc.member)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, viewPushSubs(tc.want), viewPushSubs(got))
		})
	}
}

func testPutPushSubscriptionMoves(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	const endpoint = "https://push.example/shared"
	orig := pushSub("p1", "alice", endpoint)
	other := pushSub("p2", "alice", "https://push.example/other")
	mustPutPushSubs(t, s, orig, other)

	steps := []struct {
		name string
		put  store.PushSubscription
	}{
		{"same member, new keys", store.PushSubscription{ID: "p3", Member: "alice", Endpoint: endpoint, P256dh: "k2", Auth: "a2", CreatedAt: at(time.Hour)}},
		{"other member", store.PushSubscription{ID: "p4", Member: "bob", Endpoint: endpoint, P256dh: "k3", Auth: "a3", CreatedAt: at(2 * time.Hour)}},
		{"back again", store.PushSubscription{ID: "p5", Member: "alice", Endpoint: endpoint, P256dh: "k4", Auth: "a4"}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			want := orig // id and creation time stay
			want.Member, want.P256dh, want.Auth = step.put.Member, step.put.P256dh, step.put.Auth

			got, err := s.PutPushSubscription(t.Context(), step.put)
			require.NoError(t, err)
			require.Equal(t, viewPushSub(want), viewPushSub(got))

			all, err := s.ListPushSubscriptions(t.Context(), "")
			require.NoError(t, err)
			require.Equal(t, viewPushSubs([]store.PushSubscription{want, other}), viewPushSubs(all))
			mine, err := s.ListPushSubscriptions(t.Context(), step.put.Member)
			require.NoError(t, err)
			wantMine := []store.PushSubscription{want}
			if step.put.Member == "alice" {
				wantMine = append(wantMine, other)
			}
			require.Equal(t, viewPushSubs(wantMine), viewPushSubs(mine))
		})
	}
	// The ids the moves offered were not stored.
	for _, id := range []string{"p3", "p4", "p5"} {
		require.ErrorIs(t, s.DeletePushSubscription(ctx, "", id), store.ErrNotFound, id)
	}
}

func testPutPushSubscriptionUnknownMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	orig := pushSub("p1", "alice", "https://push.example/1")
	mustPutPushSubs(t, s, orig)

	tests := []struct {
		name string
		sub  store.PushSubscription
	}{
		{"new endpoint", pushSub("p2", "nobody", "https://push.example/2")},
		{"known endpoint moved to nobody", pushSub("p3", "nobody", orig.Endpoint)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.PutPushSubscription(t.Context(), tc.sub)
			require.ErrorIs(t, err, store.ErrPrecondition)
		})
	}
	all, err := s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []pushSubView{viewPushSub(orig)}, viewPushSubs(all))
}

func testDeletePushSubscription(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	a1, a2 := pushSub("a1", "alice", "https://push.example/a1"), pushSub("a2", "alice", "https://push.example/a2")
	b1, b2 := pushSub("b1", "bob", "https://push.example/b1"), pushSub("b2", "bob", "https://push.example/b2")
	mustPutPushSubs(t, s, a1, a2, b1, b2)

	notFound := []struct {
		name, member, id string
	}{
		{"other member's id", "bob", "a1"},
		{"unknown id", "alice", "nope"},
		{"unknown member", "nobody", "a1"},
		{"unknown id, any member", "", "nope"},
		{"endpoint is not an id", "alice", a1.Endpoint},
	}
	for _, tc := range notFound {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.DeletePushSubscription(t.Context(), tc.member, tc.id), store.ErrNotFound)
		})
	}
	all, err := s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, viewPushSubs([]store.PushSubscription{a1, a2, b1, b2}), viewPushSubs(all))

	require.NoError(t, s.DeletePushSubscription(ctx, "alice", "a1"))
	require.NoError(t, s.DeletePushSubscription(ctx, "", "b2")) // any member's
	all, err = s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, viewPushSubs([]store.PushSubscription{a2, b1}), viewPushSubs(all))

	for _, member := range []string{"alice", ""} {
		require.ErrorIs(t, s.DeletePushSubscription(ctx, member, "a1"), store.ErrNotFound, "already deleted, member %q", member)
	}
	// The endpoint of a deleted subscription can be subscribed again.
	again := pushSub("a3", "bob", a1.Endpoint)
	mustPutPushSubs(t, s, again)
}
