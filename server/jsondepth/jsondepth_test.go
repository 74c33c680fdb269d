package jsondepth

import (
	"strings"
	"testing"
)

func TestExceeds(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		max  int
		want bool
	}{
		{"flat", `{"a":1}`, 1, false},
		{"at the bound", `{"a":[1]}`, 2, false},
		{"past the bound", `{"a":[{}]}`, 2, true},
		{"brackets in strings do not count", `{"a":"[[[{{{"}`, 1, false},
		{"an escaped quote keeps the string open", `{"a":"\"[[["}`, 1, false},
		{"an escaped backslash closes it", `{"a":"\\"}`, 1, false},
		{"siblings do not add up", `[[],[],[]]`, 2, false},
		{"deep", strings.Repeat("[", 1000) + strings.Repeat("]", 1000), 999, true},
		{"not JSON at all", `}}}]]]`, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Exceeds([]byte(tc.doc), tc.max); got != tc.want {
				t.Errorf("Exceeds(%q, %d) = %v, want %v", tc.doc, tc.max, got, tc.want)
			}
		})
	}
}

func FuzzExceeds(f *testing.F) {
	for _, s := range []string{`{"a":[1]}`, `"[["`, `[[[`, `{"\"":[]}`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		if max < 0 || max > 64 {
			return
		}
		if !Exceeds(b, max) && Exceeds(b, max+1) {
			t.Fatalf("within %d but past %d", max, max+1)
		}
	})
}
