package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// topInUse keeps the records with bytes in use, largest first, with
// their frames, and drops the rest and the MemStats trailer.
func TestTopInUse(t *testing.T) {
	t.Parallel()
	const profile = "heap profile: 3: 3146240 [9: 9437184] @ heap/1048576\n" +
		"0: 0 [7: 672] @ 0x1 0x2\n" +
		"#\t0x1\tpkg.idle+0x4d\t\t/src/idle.go:3\n" +
		"\n" +
		"1: 1024 [1: 1024] @ 0x3\n" +
		"#\t0x3\tpkg.small+0x1\t/src/small.go:7\n" +
		"\n" +
		"2: 2097152 [2: 2097152] @ 0x4 0x5\n" +
		"#\t0x4\tgoogle.golang.org/grpc/mem.(*tieredBufferPool).Get+0x2a\t\t/src/pool.go:90\n" +
		"#\t0x5\tpkg.send+0x10\t/src/send.go:12\n" +
		"\n" +
		"# runtime.MemStats\n" +
		"# Alloc = 1\n"
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"all", 10, "heap profile: 3: 3146240 [9: 9437184] @ heap/1048576\n" +
			"2 objects, 2.0 MB in use (2 objects, 2.0 MB allocated)\n" +
			"\tgoogle.golang.org/grpc/mem.(*tieredBufferPool).Get+0x2a /src/pool.go:90\n" +
			"\tpkg.send+0x10 /src/send.go:12\n" +
			"1 objects, 0.0 MB in use (1 objects, 0.0 MB allocated)\n" +
			"\tpkg.small+0x1 /src/small.go:7\n"},
		{"top one", 1, "heap profile: 3: 3146240 [9: 9437184] @ heap/1048576\n" +
			"2 objects, 2.0 MB in use (2 objects, 2.0 MB allocated)\n" +
			"\tgoogle.golang.org/grpc/mem.(*tieredBufferPool).Get+0x2a /src/pool.go:90\n" +
			"\tpkg.send+0x10 /src/send.go:12\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := topInUse(profile, tc.n)
			require.Equal(t, tc.want, got)
			require.False(t, strings.Contains(got, "idle"), "records with nothing in use are left out")
		})
	}
}

// countGoroutinesIn counts each record's goroutines once when a frame
// names the function.
func TestCountGoroutinesIn(t *testing.T) {
	t.Parallel()
	const profile = "goroutine profile: total 6\n" +
		"3 @ 0x1 0x2\n" +
		"#\t0x1\tgoogle.golang.org/grpc/internal/transport.(*loopyWriter).run+0x2\t/src/controlbuf.go:1\n" +
		"#\t0x2\tgoogle.golang.org/grpc/internal/transport.(*loopyWriter).run+0x9\t/src/controlbuf.go:2\n" +
		"\n" +
		"2 @ 0x3\n" +
		"#\t0x3\tnet/http.(*conn).serve+0x1\t/src/server.go:1\n" +
		"\n" +
		"1 @ 0x4\n" +
		"#\t0x4\tgoogle.golang.org/grpc/internal/transport.(*loopyWriter).run+0x2\t/src/controlbuf.go:1\n"
	for _, tc := range []struct {
		fn   string
		want int
	}{
		{"transport.(*loopyWriter).run", 4},
		{"net/http.(*conn).serve", 2},
		{"absent", 0},
	} {
		require.Equal(t, tc.want, countGoroutinesIn(profile, tc.fn), tc.fn)
	}
}
