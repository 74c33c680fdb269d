package runner

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRedactWriter(t *testing.T) {
	const secret = "hunter2-redactlog"
	const tok = "svc_RedactLogToken0123456789abcdefghijklmnop"
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{name: "one line", writes: []string{"claude: the value is " + secret + "\n"}, want: "claude: the value is [REDACTED]\n"},
		{name: "a secret split across writes", writes: []string{"echo hun", "ter2-redact", "log done\n"}, want: "echo [REDACTED] done\n"},
		{name: "the token split across writes", writes: []string{"Authorization: Bearer " + tok[:10], tok[10:] + "\n"}, want: "Authorization: Bearer [REDACTED]\n"},
		{name: "lines in one write", writes: []string{"a " + secret + "\nb\nc " + secret + "\n"}, want: "a [REDACTED]\nb\nc [REDACTED]\n"},
		{name: "a last line without its end", writes: []string{"x\n", "tail " + secret}, want: "x\ntail [REDACTED]"},
		{name: "nothing secret", writes: []string{"plain\n"}, want: "plain\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := newRedactWriter(&out, NewRedactor(secret, tok))
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				require.Equal(t, len(s), n)
			}
			w.Flush()
			require.Equal(t, tc.want, out.String())
		})
	}
}

func TestRedactWriterHoldsUntilTheLineEnds(t *testing.T) {
	var out bytes.Buffer
	w := newRedactWriter(&out, NewRedactor("hunter2-redactlog"))
	_, _ = w.Write([]byte("partial hunter2-"))
	require.Empty(t, out.String(), "half a secret is never written")
	_, _ = w.Write([]byte("redactlog\n"))
	require.Equal(t, "partial [REDACTED]\n", out.String())
}

func TestRedactWriterLongLine(t *testing.T) {
	var out bytes.Buffer
	w := newRedactWriter(&out, NewRedactor("hunter2-redactlog"))
	long := strings.Repeat("x", maxLogLine+10) + " hunter2-redactlog\n"
	_, _ = w.Write([]byte(long))
	require.Equal(t, strings.Repeat("x", maxLogLine+10)+" [REDACTED]\n", out.String())
	require.Nil(t, w.buf, "nothing held once the line is out")
}

func TestRedactWriterSetRedactor(t *testing.T) {
	var out bytes.Buffer
	w := newRedactWriter(&out, NewRedactor("svc_tok"))
	_, _ = w.Write([]byte("before s3cret-value svc_tok\n"))
	w.setRedactor(NewRedactor("svc_tok", "s3cret-value"))
	_, _ = w.Write([]byte("after s3cret-value svc_tok\n"))
	require.Equal(t, "before s3cret-value [REDACTED]\nafter [REDACTED] [REDACTED]\n", out.String())
}

func TestRedactWriterConcurrentLines(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := newRedactWriter(lockedWriter{&mu, &out}, NewRedactor("hunter2-redactlog"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = w.Write([]byte("line hunter2-redactlog\n"))
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, strings.Repeat("line [REDACTED]\n", 800), out.String())
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// FuzzRedactWriter: however the output is cut into writes, what comes out
// is each line redacted whole, as if written at once.
func FuzzRedactWriter(f *testing.F) {
	const secret = "hunter2-fuzz"
	f.Add("echo hunter2-fuzz\nok\n", []byte{3, 7})
	f.Add("hunter2-fuzzhunter2-fuzz", []byte{1, 1, 1})
	f.Add("\n\nhunter2-\nfuzz\n", []byte{0, 2})
	f.Fuzz(func(t *testing.T, text string, cuts []byte) {
		r := NewRedactor(secret)
		var out bytes.Buffer
		w := newRedactWriter(&out, r)
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			_, _ = w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		_, _ = w.Write([]byte(rest))
		w.Flush()
		var want strings.Builder
		for _, line := range strings.SplitAfter(text, "\n") {
			want.WriteString(r.String(line))
		}
		require.Equal(t, want.String(), out.String())
	})
}

// TestAdaptersRedactBeforeCutting: the adapters cut the agent's text to a
// log line's length; a secret astride the cut must not leave its first
// part in the log, so they redact before they cut.
func TestAdaptersRedactBeforeCutting(t *testing.T) {
	const secret = "hunter2-astride-the-cut"
	for _, tc := range []struct {
		name string
		pad  int
		line func(text string) string
	}{
		{name: "claude", pad: claudeLogText - 8, line: func(text string) string {
			b, _ := json.Marshal(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}})
			return string(b)
		}},
		{name: "codex", pad: codexLogText - 8, line: func(text string) string {
			b, _ := json.Marshal(map[string]any{"method": "item/completed", "params": map[string]any{"item": map[string]any{"type": "agentMessage", "id": "m1", "text": text}}})
			return string(b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuf
			log := newRedactWriter(&out, NewRedactor(secret))
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			go func() { _, _ = io.Copy(io.Discard, inR) }()
			var agent Agent = NewClaude()
			if tc.name == "codex" {
				agent = &codex{threadParams: map[string]any{}}
			}
			events := make(chan Event, 64)
			agent.Attach(inW, outR, events, log)
			go func() {
				for range events {
				}
			}()
			_, err := io.WriteString(outW, tc.line(strings.Repeat("x", tc.pad)+secret+" and more")+"\n")
			require.NoError(t, err)
			outW.Close()
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "xxx") }, 5*time.Second, 5*time.Millisecond)
			require.NotContains(t, out.String(), "hunter2", "%s", out.String())
			inW.Close()
		})
	}
}
