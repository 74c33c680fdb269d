package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidSlug(t *testing.T) {
	tests := []struct {
		slug string
		ok   bool
	}{
		{"a", true}, {"dev", true}, {"team-1", true}, {"a-b-c", true}, {"0", true},
		{strings.Repeat("a", 32), true}, {strings.Repeat("a", 33), false},
		{"", false}, {"-a", false}, {"a-", false}, {"a--b", false}, {"Dev", false},
		{"a_b", false}, {"a b", false}, {"é", false}, {"a\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.slug, func(t *testing.T) { require.Equal(t, tc.ok, ValidSlug(tc.slug)) })
	}
}
