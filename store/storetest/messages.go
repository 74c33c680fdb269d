package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// messageTests are the subtests of MessageStore; RunAll runs them.
var messageTests = []suiteTest{
	{"AppendMessagesSeq", testAppendMessagesSeq},
	{"AppendMessagesRoundTrip", testAppendMessagesRoundTrip},
	{"AppendMessagesRecipients", testAppendMessagesRecipients},
	{"AppendMessagesWithTx", testAppendMessagesWithTx},
	{"ListMessages", testListMessages},
	{"ListMessagesDefaultLimit", testListMessagesDefaultLimit},
	{"ListMessagesViewer", testListMessagesViewer},
	{"ListMessagesAfterSeq", testListMessagesAfterSeq},
	{"MessagesFor", testMessagesFor},
	{"MessagesForPaging", testMessagesForPaging},
}

// defaultMessageLimit is MessageFilter.Limit when it is <= 0.
const defaultMessageLimit = 50

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
	ReplyTo, Chain                int64
	Hops                          int
	LoopStopped                   bool
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
		ReplyTo: m.ReplyTo, Chain: m.Chain, Hops: m.Hops, LoopStopped: m.LoopStopped,
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
	// The reply chain fields a read returns as they were stored.
	reply := full
	reply.ReplyTo, reply.Hops, reply.Chain, reply.LoopStopped = 1, 9, 1, true

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
		{"reply chain", reply, full.Attachments},
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

func testListMessagesAfterSeq(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	// Creation times run backwards: the filter goes by Seq alone.
	sent := mustAppend(t, s,
		message("alice", "t", "a", 3*time.Second),
		message("alice", "t", "b", 2*time.Second),
		message("alice", "t", "c", time.Second),
	)
	for _, tc := range []struct {
		after int64
		want  []int64
	}{
		{0, reversed(seqsOf(sent))},
		{sent[0].Seq, []int64{sent[2].Seq, sent[1].Seq}},
		{sent[2].Seq, []int64{}},
	} {
		got, err := s.ListMessages(ctx, store.MessageFilter{Thread: "t", AfterSeq: tc.after})
		require.NoError(t, err)
		require.Equal(t, tc.want, seqsOf(got), "after %d", tc.after)
	}
}
