package hub

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

// perStream is the frame as each stream rendered it before frames were
// shared (gateway/sse.go's deliver, written out): the reference a shared
// frame must equal byte for byte.
func perStream(id, name string, data []byte) []byte {
	var b []byte
	b = append(b, "id: "...)
	b = append(b, id...)
	b = append(b, "\nevent: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return b
}

var (
	padded = &IDs{Format: func(seq int64) string { return "0000" + strconv.FormatInt(seq, 10) }}
	plain  = &IDs{Format: func(seq int64) string { return strconv.FormatInt(seq, 10) }}
)

// TestEventFrame: a frame equals the per-stream rendering for every kind
// of stream, the first (ids, name) asked is shared, and another kind
// asking the same event gets its own rendering without disturbing it.
func TestEventFrame(t *testing.T) {
	values := []struct {
		name string
		ev   *Event
	}{
		{"message", NewEvent(7, &apiv1.Message{Id: "7", From: "alice", Body: "line one\nline two \"quoted\" ünïcode <b>"})},
		{"empty message", NewEvent(1, &apiv1.Message{})},
		{"team", NewEvent(1<<40, &apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Ready{Ready: &apiv1.Ready{Member: "bob"}}})},
		{"seq 0", NewEvent(0, &apiv1.Message{Body: "x"})},
	}
	kinds := []struct {
		ids  *IDs
		name string
	}{{padded, "message"}, {plain, "activity"}, {plain, "team"}, {padded, "team"}}
	for _, v := range values {
		for _, first := range kinds {
			t.Run(v.name+"/"+first.name, func(t *testing.T) {
				e := NewEvent(v.ev.Seq, v.ev.Value)
				got := e.Frame(first.ids, first.name)
				require.Equal(t, string(perStream(first.ids.Format(e.Seq), first.name, e.JSON())), string(got))
				again := e.Frame(first.ids, first.name)
				require.Same(t, &got[0], &again[0], "the first kind's frame is shared")
				for _, other := range kinds {
					b := e.Frame(other.ids, other.name)
					require.Equal(t, string(perStream(other.ids.Format(e.Seq), other.name, e.JSON())), string(b), "asked as %s after %s", other.name, first.name)
				}
				require.Equal(t, string(perStream(first.ids.Format(e.Seq), first.name, e.JSON())), string(e.Frame(first.ids, first.name)), "another kind did not replace the shared frame")
			})
		}
	}
}

// TestEventFrameConcurrent: streams asking at once all get the same bytes.
func TestEventFrameConcurrent(t *testing.T) {
	e := NewEvent(42, &apiv1.Message{Body: "hi"})
	want := string(perStream(padded.Format(42), "message", e.JSON()))
	var wg sync.WaitGroup
	got := make([]string, 16)
	for i := range got {
		wg.Go(func() {
			ids, name := padded, "message"
			if i%4 == 3 {
				ids, name = plain, "activity"
			}
			got[i] = string(e.Frame(ids, name))
		})
	}
	wg.Wait()
	for i, g := range got {
		if i%4 == 3 {
			require.Equal(t, string(perStream(plain.Format(42), "activity", e.JSON())), g)
			continue
		}
		require.Equal(t, want, g)
	}
}

// FuzzEventFrame: for any body, sequence and event name the shared frame
// equals the per-stream rendering, and holds the JSON on one data line.
func FuzzEventFrame(f *testing.F) {
	f.Add(int64(1), "hello", "message")
	f.Add(int64(-5), "a\nb\r\nc\u2028", "team")
	f.Add(int64(1<<62), "\x00\xff", "activity")
	f.Fuzz(func(t *testing.T, seq int64, body, name string) {
		e := NewEvent(seq, &apiv1.Message{Body: body})
		want := perStream(plain.Format(seq), name, e.JSON())
		require.Equal(t, string(want), string(e.Frame(plain, name)))
		require.Equal(t, string(want), string(e.Frame(plain, name)))
		require.Equal(t, string(perStream(padded.Format(seq), name, e.JSON())), string(e.Frame(padded, name)))
		require.NotContains(t, string(e.JSON()), "\n")
	})
}
