package notify

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/registry"
	"svc/store"
	"svc/store/sqlite"
)

// The tests of the capability run it over a real store with the three
// things it is given of the core faked: the committer (one transaction
// per change, messages appended then stored run, as the broker's
// committer does), the team and its reach, and the manage holders.

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// What a member reports doing, and how long a report holds without a
// refresh (as the broker's presence has them).
const (
	stateIdle    = "idle"
	stateWorking = "working"
	stateBlocked = "blocked"
	activityTTL  = 30 * time.Second
)

// fakeTeam is the team and what the broker knows of its members' reach:
// live streams and reported activity.
type fakeTeam struct {
	mu     sync.Mutex
	now    func() time.Time
	perms  map[string][]string
	online map[string]int
	state  map[string]string
	at     map[string]time.Time
}

// newFakeTeam is a team of the members of perms, none online, all idle.
func newFakeTeam(now func() time.Time, perms map[string][]string) *fakeTeam {
	f := &fakeTeam{now: now, perms: map[string][]string{}, online: map[string]int{}, state: map[string]string{}, at: map[string]time.Time{}}
	for k, v := range perms {
		f.perms[k] = v
	}
	return f
}

func (f *fakeTeam) members() Members {
	return Members{
		Known: func(name string) bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			_, ok := f.perms[name]
			return ok
		},
		Online: func(name string) bool { f.mu.Lock(); defer f.mu.Unlock(); return f.online[name] > 0 },
		Busy: func(name string) (bool, time.Time) {
			f.mu.Lock()
			defer f.mu.Unlock()
			until := f.at[name].Add(activityTTL)
			if f.state[name] != stateWorking || !f.now().Before(until) {
				return false, time.Time{}
			}
			return true, until
		},
	}
}

func (f *fakeTeam) holders(leaf string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, ps := range f.perms {
		if slices.Contains(ps, leaf) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// kit is the registry kit on committer c with the team's members and holders.
func (f *fakeTeam) kit(c Committer, k *kek.KEK) *registry.Kit {
	return registry.New(registry.Deps{
		Commit: func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)) error {
			return c.CommitStored(ctx, apply, nil)
		},
		Members: func() []string {
			f.mu.Lock()
			defer f.mu.Unlock()
			return slices.Sorted(maps.Keys(f.perms))
		},
		Holders: f.holders, KEK: k,
	})
}

func (f *fakeTeam) remove(name string) { f.mu.Lock(); delete(f.perms, name); f.mu.Unlock() }

// testCommitter commits each change in a transaction of its own, as the
// broker's committer commits each change of a batch: apply, then its
// messages appended (their Seq and time set), then stored with them.
func testCommitter(st store.Store, now func() time.Time) Committer {
	var mu sync.Mutex
	commitStored := func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error),
		stored func(ctx context.Context, tx store.Tx, msgs []store.Message) error,
	) error {
		mu.Lock()
		defer mu.Unlock()
		return st.WithTx(ctx, func(tx store.Tx) error {
			msgs, err := apply(ctx, tx)
			if err != nil || len(msgs) == 0 {
				return err
			}
			for i := range msgs {
				msgs[i].CreatedAt = now()
			}
			if msgs, err = tx.AppendMessages(ctx, msgs); err != nil {
				return err
			}
			if stored != nil {
				return stored(ctx, tx, msgs)
			}
			return nil
		})
	}
	return Committer{
		Commit: func(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
			return commitStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) { return nil, fn(ctx, tx) }, nil)
		},
		CommitStored: commitStored,
	}
}

// msgID renders a stored message's id as receipts name them.
func msgID(seq int64) string { return fmt.Sprintf("%016d", seq) }

func memStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func testKEK(t testing.TB) *kek.KEK {
	t.Helper()
	key := make([]byte, kek.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	k, err := kek.New(key)
	require.NoError(t, err)
	return k
}

// hookEnv is the capability with members admin (notifications.manage),
// alice, bob, carol and expired, channel ops (bob, carol) and a KEK
// unless noKEK.
type hookEnv struct {
	s      *Service
	n      *Admin
	st     store.Store
	team   *fakeTeam
	clock  *fakeClock
	perms  map[string][]string
	chanID string
}

func newHookEnv(t *testing.T, noKEK bool) *hookEnv {
	t.Helper()
	return newHookEnvOn(t, memStore(t), noKEK)
}

// newHookEnvOn is newHookEnv over st.
func newHookEnvOn(t *testing.T, st store.Store, noKEK bool) *hookEnv {
	t.Helper()
	perms := map[string][]string{"admin": {auth.NotificationsManage}, "alice": {}, "bob": {}, "carol": {}, "expired": {}}
	clock := &fakeClock{now: time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)}
	team := newFakeTeam(clock.Now, perms)
	var k *kek.KEK
	if !noKEK {
		k = testKEK(t)
	}
	e := &hookEnv{st: st, team: team, clock: clock, perms: perms, chanID: "c-ops"}
	e.s = e.service(k)
	e.n = e.s.Admin()
	ctx := context.Background()
	for name, ps := range perms {
		require.NoError(t, st.PutMember(ctx, store.Member{Name: name, ID: "id-" + name, Permissions: ps, CreatedAt: clock.Now(), UpdatedAt: clock.Now()}))
	}
	require.NoError(t, st.CreateChannel(ctx, store.Channel{ID: "c-ops", Slug: "ops", CreatedBy: "bob"}))
	require.NoError(t, st.PutChannelMember(ctx, store.ChannelMember{Channel: "c-ops", Member: "carol", Role: "member"}))
	return e
}

// service is a Service over the env's store, team and clock (a second
// one is the broker restarted).
func (e *hookEnv) service(k *kek.KEK) *Service {
	c := testCommitter(e.st, e.clock.Now)
	return New(Deps{
		Store: e.st, Commit: c, Members: e.team.members(), Registry: e.team.kit(c, k),
		KEK: k, MessageID: msgID, Now: e.clock.Now,
	})
}

func (e *hookEnv) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

// online gives member a live stream until the test ends.
func (e *hookEnv) online(t *testing.T, member string) {
	t.Helper()
	e.team.mu.Lock()
	e.team.online[member]++
	e.team.mu.Unlock()
	t.Cleanup(func() { e.team.mu.Lock(); e.team.online[member]--; e.team.mu.Unlock() })
}

// activity is member reporting state now.
func (e *hookEnv) activity(member, state string) {
	e.team.mu.Lock()
	e.team.state[member], e.team.at[member] = state, e.clock.Now()
	e.team.mu.Unlock()
}

func targets(t *testing.T, ts ...map[string]any) *structpb.ListValue {
	t.Helper()
	var vals []any
	for _, x := range ts {
		vals = append(vals, x)
	}
	l, err := structpb.NewList(vals)
	require.NoError(t, err)
	return l
}

// create makes endpoint slug targeting alice and channel ops, with
// header-secret auth and secret s3cret.
func (e *hookEnv) create(t *testing.T, slug string, mod func(*apiv1.CreateNotificationEndpointRequest)) {
	t.Helper()
	req := &apiv1.CreateNotificationEndpointRequest{
		Slug: slug, DisplayName: ptr("Hook " + slug),
		Targets: targets(t, map[string]any{"member": "alice"}, map[string]any{"channel": "ops"}),
		Auth:    &apiv1.NotificationAuth{Kind: "header-secret"},
	}
	if mod != nil {
		mod(req)
	}
	_, err := e.n.CreateNotificationEndpoint(e.as("admin"), req)
	require.NoError(t, err)
	_, err = e.n.SetNotificationEndpointSecret(e.as("admin"), &apiv1.SetNotificationEndpointSecretRequest{Slug: slug, Secret: "s3cret"})
	require.NoError(t, err)
}

func signed(extra ...string) http.Header {
	h := http.Header{"X-Hook-Secret": {"s3cret"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

func (e *hookEnv) receipts(t *testing.T, slug string) []store.HookDelivery {
	t.Helper()
	list, err := e.st.ListHookDeliveries(context.Background(), store.HookDeliveryFilter{Endpoint: slug, Limit: 500})
	require.NoError(t, err)
	return list
}

func ptr[T any](v T) *T { return &v }

// requireCode asserts that err is answered with code.
func requireCode(t *testing.T, err error, code apierr.Code, msg ...any) {
	t.Helper()
	require.Error(t, err, msg...)
	require.Equal(t, code, apierr.Render(err).Body.Error, "%v %v", err, msg)
}
