package activity

import (
	"math"
	"strings"
	"svc/store"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
)

func TestEventFromProto(t *testing.T) {
	now := time.UnixMilli(1_763_900_000_000)
	data := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		require.NoError(t, err)
		return s
	}
	big := data(map[string]any{"pad": strings.Repeat("x", maxEventData)})
	tests := []struct {
		name    string
		in      *apiv1.ActivityEventInput
		wantErr string // a substring of the error; "" is accepted
		wantTS  time.Time
	}{
		{"every field", &apiv1.ActivityEventInput{Kind: store.KindToolAction, Ts: ptr(1.5e12), ObjectiveId: ptr("o1"), Data: data(map[string]any{"tool": "Bash"})}, "", time.UnixMilli(1.5e12)},
		{"absent ts is now", &apiv1.ActivityEventInput{Kind: store.KindUserPrompt, Data: data(nil)}, "", now},
		{"each kind: llm_exchange", &apiv1.ActivityEventInput{Kind: store.KindLLMExchange, Data: data(nil)}, "", now},
		{"each kind: opaque_http", &apiv1.ActivityEventInput{Kind: store.KindOpaqueHTTP, Data: data(nil)}, "", now},
		{"objective_open", &apiv1.ActivityEventInput{Kind: store.KindObjectiveOpen, ObjectiveId: ptr("o1"), Data: data(nil)}, "", now},
		{"objective_close with a reason", &apiv1.ActivityEventInput{Kind: store.KindObjectiveClose, ObjectiveId: ptr("o1"), Data: data(map[string]any{"reason": "runner_shutdown"})}, "", now},
		{"unknown kind", &apiv1.ActivityEventInput{Kind: "llm", Data: data(nil)}, "e.kind: must be one of", now},
		{"empty kind", &apiv1.ActivityEventInput{Data: data(nil)}, "e.kind", now},
		{"no data", &apiv1.ActivityEventInput{Kind: store.KindToolAction}, "e.data: is required", now},
		{"negative ts", &apiv1.ActivityEventInput{Kind: store.KindToolAction, Ts: ptr(-1.0), Data: data(nil)}, "e.ts", now},
		{"NaN ts", &apiv1.ActivityEventInput{Kind: store.KindToolAction, Ts: ptr(math.NaN()), Data: data(nil)}, "e.ts", now},
		{"ts past year 9999", &apiv1.ActivityEventInput{Kind: store.KindToolAction, Ts: ptr(float64(maxTS) + 1), Data: data(nil)}, "e.ts", now},
		{"empty objectiveId", &apiv1.ActivityEventInput{Kind: store.KindToolAction, ObjectiveId: ptr(""), Data: data(nil)}, "e.objectiveId", now},
		{"objectiveId with a control character", &apiv1.ActivityEventInput{Kind: store.KindToolAction, ObjectiveId: ptr("o\n1"), Data: data(nil)}, "e.objectiveId", now},
		{"objectiveId too long", &apiv1.ActivityEventInput{Kind: store.KindToolAction, ObjectiveId: ptr(strings.Repeat("o", maxObjectiveIDLen+1)), Data: data(nil)}, "e.objectiveId", now},
		{"marker without objectiveId", &apiv1.ActivityEventInput{Kind: store.KindObjectiveOpen, Data: data(nil)}, "e.objectiveId: is required", now},
		{"close without a reason", &apiv1.ActivityEventInput{Kind: store.KindObjectiveClose, ObjectiveId: ptr("o1"), Data: data(nil)}, "e.data.reason", now},
		{"close with an unknown reason", &apiv1.ActivityEventInput{Kind: store.KindObjectiveClose, ObjectiveId: ptr("o1"), Data: data(map[string]any{"reason": "bored"})}, "e.data.reason", now},
		{"data over the cap", &apiv1.ActivityEventInput{Kind: store.KindToolAction, Data: big}, "e.data: over", now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := eventFromProto("e", tc.in, now)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.in.GetKind(), ev.Kind)
			require.Equal(t, tc.wantTS.UnixMilli(), ev.TS.UnixMilli())
			require.Equal(t, tc.in.GetObjectiveId(), ev.ObjectiveID)
			got, err := structpb.NewStruct(nil)
			require.NoError(t, err)
			require.NoError(t, got.UnmarshalJSON(ev.Data))
			require.Equal(t, tc.in.GetData().AsMap(), got.AsMap(), "data is stored as given")
		})
	}
}

func TestKindFilter(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr bool
	}{
		{"none", nil, nil, false},
		{"repeated", []string{"tool_action", "user_prompt"}, []string{"tool_action", "user_prompt"}, false},
		{"comma-separated, spaces and empties", []string{"llm_exchange, opaque_http,,"}, []string{"llm_exchange", "opaque_http"}, false},
		{"both, duplicates once", []string{"objective_open,objective_close", "objective_open"}, []string{"objective_open", "objective_close"}, false},
		{"unknown", []string{"tool_action,nope"}, nil, true},
		{"case matters", []string{"Tool_Action"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kindFilter(tc.in)
			if tc.wantErr {
				require.ErrorContains(t, err, "kind")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestListParams(t *testing.T) {
	limits := []struct {
		in      *int32
		want    int
		wantErr bool
	}{
		{nil, maxActivityRows, false},
		{ptr[int32](1), 1, false},
		{ptr[int32](1000), 1000, false},
		{ptr[int32](5000), maxActivityRows, false},
		{ptr[int32](0), 0, true},
		{ptr[int32](-3), 0, true},
	}
	for _, tc := range limits {
		got, err := listLimit(tc.in)
		if tc.wantErr {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}

	ranges := []struct {
		name     string
		from, to *float64
		wantErr  string
	}{
		{"none", nil, nil, ""},
		{"from only", ptr(1000.0), nil, ""},
		{"equal bounds", ptr(1000.0), ptr(1000.0), ""},
		{"to before from", ptr(2000.0), ptr(1000.0), "to: must not be before from"},
		{"negative from", ptr(-1.0), nil, "from"},
		{"infinite to", nil, ptr(math.Inf(1)), "to"},
	}
	for _, tc := range ranges {
		t.Run(tc.name, func(t *testing.T) {
			from, to, err := timeRange(tc.from, tc.to)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.from == nil, from.IsZero())
			require.Equal(t, tc.to == nil, to.IsZero())
		})
	}
}

func FuzzKindFilter(f *testing.F) {
	for _, s := range []string{"", "tool_action", "llm_exchange,opaque_http", " , ,user_prompt", "nope", "objective_open,objective_open"} {
		f.Add(s, "objective_close")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := kindFilter([]string{a, b})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, k := range got {
			require.Contains(t, activityKinds, k, "only known kinds pass")
			require.False(t, seen[k], "each kind once")
			seen[k] = true
		}
		for _, part := range strings.Split(a+","+b, ",") {
			if p := strings.TrimSpace(part); p != "" {
				require.True(t, seen[p], "every kind asked for is kept: %q", p)
			}
		}
	})
}
