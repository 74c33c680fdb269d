package sqlite

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// AppendMessages writes a batch of any size in statements of several rows
// (insertChunks): every message is stored as given, its seq is the one
// returned, seqs grow in input order across statements, and recipients
// go to their own message.
func TestAppendMessagesChunks(t *testing.T) {
	db := MustOpen(t, filepath.Join(t.TempDir(), "svc.db"))
	base := time.UnixMilli(1764416500123).UTC()
	var prev int64
	for _, n := range []int{1, 2, 3, 4, 5, 15, 16, 17, 21, 63, 64, 65, 85, 150} {
		t.Run("n="+strconv.Itoa(n), func(t *testing.T) {
			thread := "obj:" + strconv.Itoa(n)
			in := make([]store.Message, n)
			for i := range in {
				m := store.Message{From: "m" + strconv.Itoa(i%7), Thread: thread, Body: fmt.Sprintf("body %d of %d", i, n),
					Level: "info", CreatedAt: base.Add(time.Duration(i) * time.Millisecond)}
				switch i % 4 {
				case 0:
					m.All = true
				case 1:
					to := fmt.Sprintf("r%d-%d", n, i)
					m.To, m.Recipients = to, []string{to, "x"}
					m.Title, m.Data, m.Meta = "t", []byte(`{"i":`+strconv.Itoa(i)+`}`), []byte(`{"m":true}`)
				case 2:
					m.Attachments = []string{"/a/" + strconv.Itoa(i)}
					m.ReplyTo, m.Hops, m.Chain, m.LoopStopped = 1, i%9, 1, i%8 == 2
				}
				in[i] = m
			}
			got, err := db.AppendMessages(t.Context(), in)
			require.NoError(t, err)
			require.Len(t, got, n)
			for i, m := range got {
				require.Greater(t, m.Seq, prev, "message %d", i)
				prev = m.Seq
				want := in[i]
				want.Seq = m.Seq
				if want.Attachments == nil {
					want.Attachments = []string{}
				}
				if m.Attachments == nil {
					m.Attachments = []string{}
				}
				require.Equal(t, want, m, "returned, message %d", i)
			}
			list, err := db.ListMessages(t.Context(), store.MessageFilter{Thread: thread, Limit: 1000})
			require.NoError(t, err)
			require.Len(t, list, n)
			for i, m := range list {
				w := got[n-1-i] // newest first
				require.Equal(t, w.Seq, m.Seq)
				require.Equal(t, w.Body, m.Body, "seq %d", m.Seq)
				require.Equal(t, w.To, m.To)
				require.Equal(t, string(w.Data), string(m.Data))
				require.Equal(t, w.Hops, m.Hops)
				require.True(t, w.CreatedAt.Equal(m.CreatedAt))
			}
			for i, m := range got {
				if len(m.Recipients) == 0 {
					continue
				}
				to, err := db.MessagesFor(t.Context(), m.To, m.Seq-1, 1)
				require.NoError(t, err)
				require.Len(t, to, 1, "message %d", i)
				require.Equal(t, m.Seq, to[0].Seq)
			}
		})
	}
}
