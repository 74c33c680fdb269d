package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/egress"
	"svc/server/hub"
	"svc/server/webpush"
	"svc/store"
	"svc/store/sqlite"
	"svc/store/storetest"
)

// gatedStore holds the first AppendMessages until release is closed and
// counts the calls, so a test can see how pushes were grouped.
type gatedStore struct {
	store.Store
	release chan struct{}
	calls   atomic.Int32
	sizes   sync.Map // call number -> batch size
}

// WithTx hands fn a transaction whose AppendMessages is gated.
func (g *gatedStore) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return g.Store.WithTx(ctx, func(tx store.Tx) error { return fn(gatedTx{Tx: tx, g: g}) })
}

type gatedTx struct {
	store.Tx
	g *gatedStore
}

func (t gatedTx) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	n := t.g.calls.Add(1)
	t.g.sizes.Store(n, len(msgs))
	if n == 1 {
		<-t.g.release
	}
	return t.Tx.AppendMessages(ctx, msgs)
}

// send commits msg and publishes it, as Push does without attachments; it
// returns once the message is durable.
func (m *messenger) send(ctx context.Context, msg store.Message, pm *apiv1.Message) (*apiv1.Message, int, error) {
	r := m.change(ctx, nil, &msg, pm)
	if r.err != nil {
		return nil, 0, r.err
	}
	return r.msgs[0], r.live, nil
}

func mustMessenger(t *testing.T, st store.Store, h *hub.Hub) *messenger {
	t.Helper()
	m := newMessenger(st, h, time.Now, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

func mustMemStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func dm(from, to, body string) (store.Message, *apiv1.Message) {
	m := store.Message{From: from, To: to, Thread: dmThread(from, to), Body: body, Level: "info", Recipients: []string{to}}
	return m, &apiv1.Message{From: from, To: &m.To, Body: body, Level: "info"}
}

func TestGroupCommitSharesTransactionsAndPublishesInOrder(t *testing.T) {
	const pushes = 64
	gs := &gatedStore{Store: mustMemStore(t), release: make(chan struct{})}
	h := hub.New(hub.WithBuffer(pushes))
	sub, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	m := mustMessenger(t, gs, h)

	ids := make(chan string, pushes)
	var wg sync.WaitGroup
	push := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, pm := dm("alice", "bob", "m"+string(rune('A'+i%26)))
			out, live, err := m.send(context.Background(), msg, pm)
			require.NoError(t, err)
			require.Equal(t, 1, live)
			ids <- out.GetId()
		}()
	}
	// The first push holds the committer inside its transaction; only then
	// do the others start, so every one of them queues behind it.
	push(0)
	require.Eventually(t, func() bool { return gs.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	for i := 1; i < pushes; i++ {
		push(i)
	}
	require.Eventually(t, func() bool { return m.queue.Len() == pushes-1 }, 5*time.Second, time.Millisecond)
	close(gs.release)
	wg.Wait()
	close(ids)

	require.Equal(t, int32(2), gs.calls.Load(), "every push waiting behind the first batch shares one transaction")
	first, _ := gs.sizes.Load(int32(1))
	require.Equal(t, 1, first)
	second, _ := gs.sizes.Load(int32(2))
	require.Equal(t, pushes-1, second)
	seen := map[string]bool{}
	for id := range ids {
		require.Len(t, id, 16)
		seen[id] = true
	}
	require.Len(t, seen, pushes, "ids are unique")
	var last int64
	for range pushes {
		e := <-sub.C()
		require.Greater(t, e.Seq, last, "the hub sees commit order")
		require.Equal(t, formatMessageID(e.Seq), e.Message.GetId())
		last = e.Seq
	}
}

// A change whose apply fails is rolled back alone: what it wrote and the
// messages it made are gone, and the changes sharing its batch commit.
func TestChangeFailingApplyRollsBackAlone(t *testing.T) {
	gs := &gatedStore{Store: mustMemStore(t), release: make(chan struct{})}
	require.NoError(t, gs.PutMember(context.Background(), store.Member{Name: "alice"}))
	h := hub.New()
	sub, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	m := mustMessenger(t, gs, h)

	// The first push holds the committer, so the three changes below share
	// the next batch.
	held := make(chan error, 1)
	go func() {
		msg, pm := dm("alice", "bob", "first")
		_, _, err := m.send(context.Background(), msg, pm)
		held <- err
	}()
	require.Eventually(t, func() bool { return gs.calls.Load() == 1 }, 5*time.Second, time.Millisecond)

	channel := func(id string) func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		return func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
			if err := tx.CreateChannel(ctx, store.Channel{ID: id, Slug: id, CreatedBy: "alice"}); err != nil {
				return nil, err
			}
			msg, _ := dm("alice", "bob", "made "+id)
			return []store.Message{msg}, nil
		}
	}
	refused := Errorf(CodeConflict, "refused")
	results := make([]committed, 3)
	var wg sync.WaitGroup
	for i, apply := range []func(ctx context.Context, tx store.Tx) ([]store.Message, error){
		channel("kept"),
		func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
			if _, err := channel("dropped")(ctx, tx); err != nil {
				return nil, err
			}
			return nil, refused
		},
		nil, // a plain message
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, pm := dm("alice", "bob", fmt.Sprintf("plain %d", i))
			if apply != nil {
				results[i] = m.change(context.Background(), apply, nil, nil)
			} else {
				results[i] = m.change(context.Background(), nil, &msg, pm)
			}
		}()
	}
	require.Eventually(t, func() bool { return m.queue.Len() == 3 }, 5*time.Second, time.Millisecond)
	close(gs.release)
	wg.Wait()
	require.NoError(t, <-held)

	require.NoError(t, results[0].err)
	require.Equal(t, "made kept", results[0].msgs[0].GetBody())
	require.ErrorIs(t, results[1].err, refused)
	require.Empty(t, results[1].msgs)
	require.NoError(t, results[2].err)
	require.Equal(t, int32(2), gs.calls.Load(), "the three changes shared one transaction")
	size, _ := gs.sizes.Load(int32(2))
	require.Equal(t, 2, size, "the refused change's message is not appended")

	_, err = gs.GetChannel(context.Background(), "kept")
	require.NoError(t, err)
	_, err = gs.GetChannel(context.Background(), "dropped")
	require.ErrorIs(t, err, store.ErrNotFound, "the refused change's write is rolled back")
	var bodies []string
	for range 3 {
		bodies = append(bodies, (<-sub.C()).Message.GetBody())
	}
	require.Equal(t, "first", bodies[0])
	require.ElementsMatch(t, []string{"made kept", "plain 2"}, bodies[1:])
	select {
	case e := <-sub.C():
		t.Fatalf("unexpected message %q", e.Message.GetBody())
	default:
	}
}

func TestFeedReplaysThenGoesLiveWithoutGapsOrRepeats(t *testing.T) {
	st := mustMemStore(t)
	b := &Broker{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	send := func(body string) int64 {
		msg, pm := dm("alice", "bob", body)
		out, _, err := m.send(context.Background(), msg, pm)
		require.NoError(t, err)
		n, err := ParseMessageID(out.GetId())
		require.NoError(t, err)
		return n
	}
	var all []int64
	for i := range replayPage + 20 { // more than one replay page
		all = append(all, send("before "+string(rune('a'+i%26))))
	}
	// Another member's DM never shows up in bob's feed.
	other, pm := dm("alice", "carol", "not for bob")
	_, _, err := m.send(context.Background(), other, pm)
	require.NoError(t, err)

	resumeAfter := all[9]
	f, err := b.Attach(context.Background(), bobPrincipal, resumeAfter, true)
	require.NoError(t, err)
	defer f.Close()
	// Committed after the subscription but before the replay reaches them:
	// they are both in the store and in the live buffer.
	for range 5 {
		all = append(all, send("during"))
	}
	var got []int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(got) < len(all)-10 {
		e, err := f.Next(ctx, nil)
		require.NoError(t, err)
		got = append(got, e.Seq)
		if len(got) == 100 {
			all = append(all, send("live")) // arrives while replaying
		}
	}
	require.Equal(t, all[10:], got)
	require.Nil(t, f.Buffered(), "nothing repeated after the last message")
}

func TestFeedResumingPastTheNewestIDReplaysTheStore(t *testing.T) {
	st := mustMemStore(t)
	b := &Broker{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	for _, body := range []string{"one", "two"} {
		msg, pm := dm("alice", "bob", body)
		_, _, err := m.send(context.Background(), msg, pm)
		require.NoError(t, err)
	}
	// A client that saw id 500 of a store since reset (an in-memory broker
	// restarted) gets everything this store has, then live messages.
	f, err := b.Attach(context.Background(), bobPrincipal, 500, true)
	require.NoError(t, err)
	defer f.Close()
	msg, pm := dm("alice", "bob", "three")
	_, _, err = m.send(context.Background(), msg, pm)
	require.NoError(t, err)
	var got []string
	for range 3 {
		e, err := f.Next(context.Background(), nil)
		require.NoError(t, err)
		got = append(got, e.Message.GetBody())
	}
	require.Equal(t, []string{"one", "two", "three"}, got)
}

func TestFeedWithoutResumeIsLiveOnly(t *testing.T) {
	st := mustMemStore(t)
	b := &Broker{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	msg, pm := dm("alice", "bob", "old")
	_, _, err := m.send(context.Background(), msg, pm)
	require.NoError(t, err)
	f, err := b.Attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	defer f.Close()
	msg, pm = dm("alice", "bob", "new")
	_, _, err = m.send(context.Background(), msg, pm)
	require.NoError(t, err)
	e, err := f.Next(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, "new", e.Message.GetBody())
}

func TestFeedReportsFallingBehindAndShutdown(t *testing.T) {
	st := mustMemStore(t)
	b := &Broker{store: st, hub: hub.New(hub.WithBuffer(2))}
	f, err := b.Attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	for seq := int64(1); seq <= 3; seq++ {
		b.hub.Publish(hub.NewEvent(seq, &apiv1.Message{}), false, "alice", []string{"bob"})
	}
	for _, want := range []int64{1, 2} {
		e, err := f.Next(context.Background(), nil)
		require.NoError(t, err)
		require.Equal(t, want, e.Seq)
	}
	_, err = f.Next(context.Background(), nil)
	require.ErrorIs(t, err, errFellBehind)

	g, err := b.Attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	tick := make(chan time.Time, 1)
	tick <- time.Now()
	e, err := g.Next(context.Background(), tick)
	require.NoError(t, err)
	require.Nil(t, e, "a tick returns nothing so the caller can ping")
	b.hub.Close()
	_, err = g.Next(context.Background(), nil)
	require.ErrorIs(t, err, errShuttingDown)
	_, err = b.Attach(context.Background(), bobPrincipal, 0, false)
	require.ErrorIs(t, err, errShuttingDown)
}

func TestMessengerRefusesAfterStop(t *testing.T) {
	m := newMessenger(mustMemStore(t), hub.New(), time.Now, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.run(ctx)
	msg, pm := dm("alice", "bob", "late")
	_, _, err := m.send(context.Background(), msg, pm)
	require.ErrorIs(t, err, errShuttingDown)
}

func TestParseMessageID(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "0000000000000042", want: 42},
		{in: "42", want: 42},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", want: math.MaxInt64},
		{in: "9999999999999999999", want: math.MaxInt64},
		{in: "00000000000000000001", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "abc", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMessageID(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				require.Equal(t, CodeBadRequest, classify(err).Code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseMessageID(f *testing.F) {
	for _, s := range []string{"", "0", "0000000000000042", "9223372036854775807", "-1", "\x00", "１２"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseMessageID(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		back, err := ParseMessageID(formatMessageID(n))
		require.NoError(t, err)
		require.Equal(t, n, back, "ids round-trip")
		require.LessOrEqual(t, len(s), 19)
	})
}

func TestValidSlug(t *testing.T) {
	tests := []struct {
		slug string
		ok   bool
	}{
		{"a", true}, {"dev", true}, {"team-1", true}, {"a-b-c", true}, {"0", true},
		{strings.Repeat("a", 32), true}, {strings.Repeat("a", 33), false},
		{"", false}, {"-a", false}, {"a-", false}, {"a--b", false}, {"Dev", false},
		{"a_b", false}, {"a b", false}, {"é", false}, {"a\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.slug, func(t *testing.T) { require.Equal(t, tc.ok, ValidSlug(tc.slug)) })
	}
}

// attachmentBroker is a broker whose store holds bob's /bob/x.txt and /bob/d,
// admin's /admin/secret.txt, and /admin/shared.txt granted to bob.
func attachmentBroker(t testing.TB) *Broker {
	t.Helper()
	b, _ := mustBroker(t)
	ctx := context.Background()
	file := func(owner, path, content string) store.FsEntry {
		sum := sha256.Sum256([]byte(content))
		return store.FsEntry{Path: path, Owner: owner, Kind: store.FsFile, Size: int64(len(content)), MimeType: "text/plain", Blob: hex.EncodeToString(sum[:])}
	}
	for _, e := range []store.FsEntry{
		file("bob", "/bob/x.txt", "x"),
		{Path: "/bob/d", Owner: "bob", Kind: store.FsDir},
		file("admin", "/admin/secret.txt", "secret"),
		file("admin", "/admin/shared.txt", "shared"),
	} {
		_, err := b.store.CreateEntry(ctx, e)
		require.NoError(t, err)
	}
	require.NoError(t, storetest.GrantPaths(ctx, b.store, []string{"/admin/shared.txt"}, []string{"bob"}))
	return b
}

func TestAttachmentsNeedReadAccess(t *testing.T) {
	b := attachmentBroker(t)
	bob := &auth.Principal{Member: "bob"}
	admin := &auth.Principal{Member: "admin", Permissions: []string{auth.MembersManage}}
	tests := []struct {
		name string
		p    *auth.Principal
		path string
		want Code // "" admits
	}{
		{"own file", bob, "/bob/x.txt", ""},
		{"shared with the caller", bob, "/admin/shared.txt", ""},
		{"manager reads any home", admin, "/bob/x.txt", ""},
		{"another member's private file", bob, "/admin/secret.txt", CodeForbidden},
		{"absent in another home is just as forbidden", bob, "/admin/nothing.txt", CodeForbidden},
		{"absent in own home", bob, "/bob/nothing.txt", CodeBadRequest},
		{"directory", bob, "/bob/d", CodeBadRequest},
		{"home itself", bob, "/bob", CodeBadRequest},
		{"relative", bob, "bob/x.txt", CodeBadRequest},
		{"dot dot", bob, "/bob/../admin/secret.txt", CodeBadRequest},
		{"dot", bob, "/bob/./x.txt", CodeBadRequest},
		{"double slash", bob, "/bob//x.txt", CodeBadRequest},
		{"nul", bob, "/bob/x.txt\x00", CodeBadRequest},
		{"too long", bob, "/bob/" + strings.Repeat("a", maxAttachmentPath), CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.attachments(context.Background(), tc.p, []string{tc.path})
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, tc.path, got[0].Path)
				require.Equal(t, path.Base(tc.path), got[0].Name)
				require.Positive(t, got[0].Size)
				require.Equal(t, "text/plain", got[0].MimeType)
				return
			}
			require.Equal(t, tc.want, classify(err).Code, "%v", err)
		})
	}
	t.Run("at most 64", func(t *testing.T) {
		_, err := b.attachments(context.Background(), bob, slices.Repeat([]string{"/bob/x.txt"}, maxAttachments))
		require.NoError(t, err)
		_, err = b.attachments(context.Background(), bob, slices.Repeat([]string{"/bob/x.txt"}, maxAttachments+1))
		require.Equal(t, CodeBadRequest, classify(err).Code)
	})
}

// Whatever bob may attach is his own or shared with him, however the path
// is spelled.
func FuzzAttachments(f *testing.F) {
	for _, s := range []string{"/bob/x.txt", "/bob/../admin/secret.txt", "/bob/%2e%2e/x", "//admin/secret.txt", "/bob/\x00", "/admin/secret.txt", "/admin/shared.txt/", "/admin//shared.txt"} {
		f.Add(s)
	}
	b := attachmentBroker(f)
	bob := &auth.Principal{Member: "bob"}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := b.attachments(context.Background(), bob, []string{p})
		if err != nil {
			return
		}
		require.Contains(t, []string{"/bob/x.txt", "/admin/shared.txt"}, got[0].Path, "from %q", p)
	})
}

func TestPresenceActivityLapsesToIdle(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	pr := newPresence(func() time.Time { return now })
	role := func(string) (*apiv1.Role, bool) { return nil, true }
	conn := func(string) int { return 2 }
	read := func() *apiv1.Presence {
		l := pr.list(conn, role)
		require.Len(t, l, 1)
		return l[0]
	}
	tests := []struct {
		name       string
		state      string
		after      time.Duration
		wantState  string // "" absent
		wantBusy   *bool
		wantListed bool
	}{
		{name: "working shows busy", state: stateWorking, wantState: stateWorking, wantBusy: ptr(true)},
		{name: "blocked is not busy", state: stateBlocked, wantState: stateBlocked, wantBusy: ptr(false)},
		{name: "idle omits both", state: stateIdle},
		{name: "still working at 29 s", state: stateWorking, after: 29 * time.Second, wantState: stateWorking, wantBusy: ptr(true)},
		{name: "lapsed at 30 s", state: stateWorking, after: activityTTL},
		{name: "blocked lapses too", state: stateBlocked, after: time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr.setActivity("alice", tc.state)
			now = now.Add(tc.after)
			p := read()
			require.Equal(t, int32(2), p.GetConnected())
			if tc.wantState == "" {
				require.Nil(t, p.Activity)
				require.Nil(t, p.Busy)
				return
			}
			require.Equal(t, tc.wantState, p.GetActivity())
			require.Equal(t, *tc.wantBusy, p.GetBusy())
		})
	}
	// Only members seen are listed; deleted members are not.
	pr.touchIfSeen("ghost")
	require.Len(t, pr.list(conn, role), 1)
	require.Empty(t, pr.list(conn, func(string) (*apiv1.Role, bool) { return nil, false }))
}

func ptr[T any](v T) *T { return &v }

func TestPushPayloadFitsOneRecord(t *testing.T) {
	tests := []struct {
		name, title, body string
	}{
		{"short", "hi", "hello"},
		{"long ascii body", "t", strings.Repeat("x", 10000)},
		{"long multibyte body", "t", strings.Repeat("é€😀", 3000)},
		{"long title, empty body", strings.Repeat("t", 5000), "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := pushPayload(store.Message{Seq: 9, From: "alice", Title: tc.title, Body: tc.body, Thread: "dm:alice:bob"})
			require.LessOrEqual(t, len(b), webpush.MaxPayload)
			var p map[string]string
			require.NoError(t, json.Unmarshal(b, &p))
			require.Equal(t, "0000000000000009", p["id"])
			require.True(t, utf8.ValidString(p["body"]))
			require.True(t, strings.HasPrefix(tc.body, p["body"]))
			if len(tc.body) < 100 {
				require.Equal(t, tc.body, p["body"], "short bodies are whole")
			}
		})
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

var bobPrincipal = &auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "t1"}

func TestPushSubjectDefaults(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "mailto:svc@localhost"},
		{"ops@example.com", "mailto:ops@example.com"},
		{"mailto:ops@example.com", "mailto:ops@example.com"},
		{"https://example.com/contact", "https://example.com/contact"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, newPushNotifier(nil, nil, nil, tc.in, false, egress.Policy{}, discardLogger()).subject)
		})
	}
}
