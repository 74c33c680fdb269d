package server

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
)

// perStreamFrame is an event's SSE frame as every stream rendered it
// before frames were shared (gateway/sse.go's deliver, written out), from
// the feed's wire id.
func perStreamFrame(id, name string, json []byte) string {
	return "id: " + id + "\nevent: " + name + "\ndata: " + string(json) + "\n\n"
}

// TestFeedFrameEqualsPerStreamEncoding: for each kind of feed the gateway
// serves (messages, activity, team), the shared frame of an event is the
// per-stream encoding byte for byte, with the wire id the feed used
// before (formatMessageID, formatActivityID, formatTeamID), and a second
// kind of feed reading the same event gets its own.
func TestFeedFrameEqualsPerStreamEncoding(t *testing.T) {
	data, err := structpb.NewStruct(map[string]any{"tool": "Bash", "note": "a\nb"})
	require.NoError(t, err)
	oid := "o1"
	values := []proto.Message{
		&apiv1.Message{Id: formatMessageID(12), From: "alice", Body: "hi \"there\"\n<b>ü</b>", Title: "t1"},
		&apiv1.Message{},
		&apiv1.ActivityRow{Id: 12, Member: "bob", Kind: "tool_action", Ts: 1.5e12, ObjectiveId: &oid, Data: data},
		&apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Presence{Presence: &apiv1.TeamMember{Name: "bob"}}},
	}
	kinds := []struct {
		name string
		ids  *hub.IDs
		old  func(int64) string
	}{
		{"message", messageIDs, formatMessageID},
		{"activity", activityIDs, formatActivityID},
		{"team", teamIDs, formatTeamID},
	}
	for _, seq := range []int64{0, 1, 12, 1 << 40, 9_999_999_999_999_999} {
		for i, v := range values {
			for _, k := range kinds {
				t.Run(k.name+"/"+strconv.Itoa(i)+"/"+strconv.FormatInt(seq, 10), func(t *testing.T) {
					ev := hub.NewEvent(seq, v)
					f := newFeed(nil, 0, false, nil, k.ids)
					require.Equal(t, k.old(seq), f.ID(ev))
					want := perStreamFrame(k.old(seq), k.name, ev.JSON())
					require.Equal(t, want, string(f.Frame(ev, k.name)))
					require.Equal(t, want, string(f.Frame(ev, k.name)), "shared, unchanged")
					for _, o := range kinds {
						g := newFeed(nil, 0, false, nil, o.ids)
						require.Equal(t, perStreamFrame(o.old(seq), o.name, ev.JSON()), string(g.Frame(ev, o.name)))
					}
				})
			}
		}
	}
}

// TestAttachedFeedFrames: the frames of a real message feed, replayed from
// the store and live from the hub, equal the per-stream encoding.
func TestAttachedFeedFrames(t *testing.T) {
	st := mustMemStore(t)
	b := &core{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	send := func(body string) {
		msg, pm := dm("alice", "bob", body)
		_, _, err := m.send(context.Background(), msg, pm)
		require.NoError(t, err)
	}
	send("stored \"one\"")
	send("stored two")
	f, err := b.attach(context.Background(), bobPrincipal, 0, true)
	require.NoError(t, err)
	defer f.Close()
	send("live\none")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 {
		ev, err := f.Next(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, perStreamFrame(formatMessageID(ev.Seq), "message", ev.JSON()), string(f.Frame(ev, "message")))
	}
}
