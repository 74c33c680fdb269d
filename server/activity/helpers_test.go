package activity

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/hub"
	"svc/store"
	"svc/store/sqlite"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func ptr[T any](v T) *T { return &v }

func memActivity(t testing.TB) *sqlite.ActivityDB {
	t.Helper()
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	return act
}

// fakeMembers are members by name with their ids; none was ever deleted.
type fakeMembers map[string]string

func (m fakeMembers) Current(name string) (string, bool) {
	id, ok := m[name]
	return id, ok
}
func (m fakeMembers) WasMember(string) bool { return false }
func (m fakeMembers) Owner(name string) string {
	if id, ok := m[name]; ok {
		return id
	}
	return "deleted-before-ids"
}
func (m fakeMembers) Label(name, id string) (bool, time.Time) {
	return id != "" && id != m[name], time.Time{}
}

// fakeSecrets are the team's secret values, counting their reads.
type fakeSecrets struct {
	mu     sync.Mutex
	values []string
	reads  atomic.Int32
}

func (f *fakeSecrets) Values(context.Context) ([]string, error) {
	f.reads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.values...), nil
}

// set replaces the values, as a change to a secret not yet committed.
func (f *fakeSecrets) set(values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values = values
}

// startService runs a Service over act (nil: none) whose members are
// alice, bob and claude1 and whose team holds secrets, until the test
// ends.
func startService(t testing.TB, act store.ActivityStore, secrets ...string) (*Service, *fakeSecrets) {
	t.Helper()
	sec := &fakeSecrets{values: secrets}
	s := New(Deps{
		Store: act, Hub: hub.New(), Secrets: sec.Values,
		Members: fakeMembers{"alice": "alice-1", "bob": "bob-1", "claude1": "claude1-1"},
		Log:     discardLogger(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, sec
}

// bearerCtx is member over the bearer plane, as exporters and runners are.
func bearerCtx(member string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: member, Via: auth.ViaBearer})
}

// nextEvent waits up to wait for the next event of sub and returns it,
// failing the test when none comes or the subscription ends.
func nextEvent(t testing.TB, sub *hub.Subscription, wait time.Duration) *hub.Event {
	t.Helper()
	deadline := time.After(wait)
	for {
		ev, open := sub.Next()
		switch {
		case ev != nil:
			return ev
		case !open:
			t.Fatal("the subscription ended")
		}
		select {
		case <-sub.Ready():
		case <-deadline:
			t.Fatalf("no event within %s", wait)
		}
	}
}
