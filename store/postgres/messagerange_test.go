package postgres

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestMessagesBetween: the messages of an id range, oldest first, each
// with its recipients (what another broker's hub needs to address them),
// nothing outside the range.
func TestMessagesBetween(t *testing.T) {
	db := MustOpen(t)
	ctx := t.Context()
	_, err := db.AppendMessages(ctx, []store.Message{
		{From: "a", Thread: "chan:x", Body: "one", Recipients: []string{"c", "b"}},
		{From: "a", Thread: "general", Body: "two", All: true},
		{From: "b", To: "a", Thread: "dm:a:b", Body: "three", Recipients: []string{"a"}},
		{From: "c", Thread: "chan:x", Body: "four", Recipients: []string{"a", "b"}},
	})
	require.NoError(t, err)
	tests := []struct {
		name        string
		after, upTo int64
		want        []string // body:recipients
	}{
		{"all", 0, 4, []string{"one:[b c]", "two:[]", "three:[a]", "four:[a b]"}},
		{"inside", 1, 3, []string{"two:[]", "three:[a]"}},
		{"one", 3, 4, []string{"four:[a b]"}},
		{"past the newest", 4, 100, nil},
		{"empty range", 2, 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := db.MessagesBetween(ctx, tc.after, tc.upTo)
			require.NoError(t, err)
			var got []string
			for i, m := range msgs {
				if i > 0 {
					require.Greater(t, m.Seq, msgs[i-1].Seq)
				}
				r := m.Recipients
				if r == nil {
					r = []string{}
				}
				got = append(got, m.Body+":"+fmt.Sprint(r))
			}
			require.Equal(t, tc.want, got)
		})
	}
	msgs, err := db.MessagesBetween(ctx, 2, 3)
	require.NoError(t, err)
	require.Equal(t, "b", msgs[0].From)
	require.Equal(t, "a", msgs[0].To)
	require.Equal(t, "dm:a:b", msgs[0].Thread)
}
