package notify

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestHookTallyTouch: every receipt is touched once, in the order it was
// first touched, however often the pipeline touches it (by note, by the
// messages it owns, or directly).
func TestHookTallyTouch(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *hookTally)
		want []string
	}{
		{"none", func(*hookTally) {}, nil},
		{"once each", func(t *hookTally) { t.touch("a"); t.touch("b") }, []string{"a", "b"}},
		{"again", func(t *hookTally) { t.touch("b"); t.touch("a"); t.touch("b"); t.touch("a") }, []string{"b", "a"}},
		{"by note and message", func(t *hookTally) {
			t.note("c", "x")
			t.add(store.Message{}, "a", "c")
			t.add(store.Message{}, "b")
			t.touch("a")
			t.note("b", "y")
		}, []string{"c", "a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tally := (&Service{d: Deps{}}).newTally()
			tc.run(tally)
			require.Equal(t, tc.want, tally.touched)
		})
	}
}

// BenchmarkHookTallyTouch is a flush of n queued receipts, each touched
// once by its message and again when finished.
func BenchmarkHookTallyTouch(b *testing.B) {
	for _, n := range []int{256, 4096} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("receipt-%d", i)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				t := (&Service{d: Deps{}}).newTally()
				for _, id := range ids {
					t.add(store.Message{}, id)
				}
				for _, id := range ids {
					t.touch(id)
				}
			}
		})
	}
}
