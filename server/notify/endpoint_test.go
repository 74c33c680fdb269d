package notify

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/hooks"
	"svc/store"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		rec     store.HookEndpoint
		want    Endpoint
		wantErr string
	}{
		{
			name: "every column",
			rec: store.HookEndpoint{
				Slug: "gh", Targets: []byte(`[{"member":"alice"},{"channel":"c-1"}]`),
				Filters: []byte(`[{"path":"action","op":"eq","value":"opened"}]`),
				Policy:  []byte(`{"ifOffline":"queue","ifBusy":"wait","debounceMs":0,"debounceMax":5,"queueTtlMs":1000,"maxWaitMs":2000,"level":"error"}`),
			},
			want: Endpoint{
				Targets: []Target{{Member: "alice"}, {Channel: "c-1"}},
				Filters: []hooks.Filter{{Path: "action", Op: "eq", Value: []byte(`"opened"`)}},
				Policy:  Policy{IfOffline: "queue", IfBusy: "wait", DebounceMax: 5, QueueTTLMs: 1000, MaxWaitMs: 2000, Level: "error"},
			},
		},
		{
			name: "empty columns are empty, with the default policy",
			rec:  store.HookEndpoint{Slug: "gh"},
			want: Endpoint{Policy: DefaultPolicy()},
		},
		{
			name: "a policy missing keys keeps their defaults",
			rec:  store.HookEndpoint{Slug: "gh", Targets: []byte(`[]`), Filters: []byte(`[]`), Policy: []byte(`{"ifOffline":"queue"}`)},
			want: Endpoint{Targets: []Target{}, Filters: []hooks.Filter{}, Policy: func() Policy {
				p := DefaultPolicy()
				p.IfOffline = "queue"
				return p
			}()},
		},
		{name: "corrupt targets", rec: store.HookEndpoint{Slug: "gh", Targets: []byte(`[{`)}, wantErr: `notification endpoint "gh": stored targets`},
		{name: "corrupt filters", rec: store.HookEndpoint{Slug: "gh", Filters: []byte(`{}`)}, wantErr: `notification endpoint "gh": stored filters`},
		{name: "corrupt policy", rec: store.HookEndpoint{Slug: "gh", Policy: []byte(`[]`)}, wantErr: `notification endpoint "gh": stored policy`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.rec)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want.Targets, got.Targets)
			require.Equal(t, tc.want.Policy, got.Policy)
			require.Len(t, got.Filters, len(tc.want.Filters))
			for i, f := range tc.want.Filters {
				require.Equal(t, f.Path, got.Filters[i].Path)
				require.Equal(t, f.Op, got.Filters[i].Op)
				require.JSONEq(t, string(f.Value), string(got.Filters[i].Value))
			}

			// Record encodes what Decode read; decoding it again is the same.
			rec, err := got.Record()
			require.NoError(t, err)
			again, err := Decode(rec)
			require.NoError(t, err)
			require.Equal(t, got.Policy, again.Policy)
			require.Equal(t, len(got.Targets), len(again.Targets))
			require.NotNil(t, rec.Targets)
			require.NotNil(t, rec.Filters)
		})
	}
}

func TestMemberTargets(t *testing.T) {
	e := Endpoint{Targets: []Target{{Member: "alice"}, {Channel: "c-1"}, {Member: "bob"}}}
	require.Equal(t, []string{"alice", "bob"}, e.MemberTargets())
	require.Nil(t, Endpoint{}.MemberTargets())
}
