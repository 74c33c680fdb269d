package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The client commands (svc login, whoami, send, tail) run as real svc
// subprocesses against a real broker; the test plays the admin over REST.

var userCodeRE = regexp.MustCompile(`enter the code: ([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})`)

// clientChild is a running client command.
type clientChild struct {
	cmd    *exec.Cmd
	stdout *lineBuffer
	stderr *lineBuffer
	done   chan struct{}
}

func startClient(t *testing.T, args, env []string) *clientChild {
	t.Helper()
	c := &clientChild{cmd: childCommand(t, args, env), stdout: &lineBuffer{}, stderr: &lineBuffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	c.cmd.Stdin = strings.NewReader("")
	require.NoError(t, c.cmd.Start())
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// waitFor waits until out matches re and returns the submatches.
func waitFor(t *testing.T, c *clientChild, out *lineBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case <-c.done:
			if m := re.FindStringSubmatch(out.String()); m != nil {
				return m
			}
			t.Fatalf("client exited before %s; stdout:\n%s\nstderr:\n%s", re, c.stdout, c.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no %s within %s; stdout:\n%s\nstderr:\n%s", re, runTimeout, c.stdout, c.stderr)
	return nil
}

// wait waits for the child to exit on its own and returns its exit code.
func (c *clientChild) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(runTimeout):
		t.Fatalf("client did not exit within %s; stdout:\n%s\nstderr:\n%s", runTimeout, c.stdout, c.stderr)
	}
	require.NotContains(t, c.stderr.String(), "WARNING: DATA RACE")
	return c.cmd.ProcessState.ExitCode()
}

// oneLineError asserts stderr is exactly one "svc: ..." line containing want.
func oneLineError(t *testing.T, stderr, want string) {
	t.Helper()
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.True(t, strings.HasPrefix(stderr, "svc: "), "%q", stderr)
	require.Contains(t, stderr, want)
}

// loginViaCLI runs `svc login` against p, approves its user code as admin
// for a new member, and returns the cache path and the member name.
func loginViaCLI(t *testing.T, p *proc, admin, member string) string {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "cfg", "svc", "auth.json")
	c := startClient(t, []string{"login", "--url", p.base, "--label", "e2e laptop"}, []string{"SVC_AUTH_CONFIG_PATH=" + cache})
	code := waitFor(t, c, c.stdout, userCodeRE)[1]
	// The complete URL is the next line: read when it comes (asserted at
	// once, a line the pipe had not yet delivered failed the test once in
	// five PostgreSQL passes at load 15).
	waitFor(t, c, c.stdout, regexp.MustCompile(regexp.QuoteMeta("Or open directly: "+p.base+"/ui/enroll?code="+code)))
	r := p.do(t, http.MethodPost, "/enroll/approve", obj{"userCode": code, "newMember": obj{
		"name": member, "role": obj{"title": "laptop", "description": "e2e"}, "permissions": []string{},
	}}, withBearer(admin))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, 0, c.wait(t), "stdout:\n%s\nstderr:\n%s", c.stdout, c.stderr)
	require.Contains(t, c.stdout.String(), "Logged in to "+p.base+" as "+member)
	return cache
}

func TestClientLoginWhoamiSendTail(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	cache := loginViaCLI(t, p, admin, "laptop")

	// The cache: 0600 in a 0700 dir, one entry for the exact URL.
	fi, err := os.Stat(cache)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(cache))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	raw, err := os.ReadFile(cache)
	require.NoError(t, err)
	var file struct {
		Schema  int `json:"schema"`
		Entries []struct {
			URL     string  `json:"url"`
			Token   string  `json:"token"`
			SavedAt float64 `json:"savedAt"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.Equal(t, 1, file.Schema)
	require.Len(t, file.Entries, 1)
	require.Equal(t, p.base, file.Entries[0].URL)
	require.Regexp(t, tokenRE, file.Entries[0].Token)
	require.InDelta(t, time.Now().UnixMilli(), file.Entries[0].SavedAt, 60_000)
	// The saved token works as the new member.
	r := p.do(t, http.MethodGet, "/briefing", nil, withBearer(file.Entries[0].Token))
	require.Equal(t, http.StatusOK, r.status)

	env := []string{"SVC_AUTH_CONFIG_PATH=" + cache, "SVC_URL=" + p.base}

	// whoami with the cache.
	code, out, errOut := runSvc(t, []string{"whoami"}, env, nil)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "member: laptop\n")
	require.Contains(t, out, "role: laptop\n")

	// The cache entry is for the exact URL: a trailing slash is another broker.
	code, _, errOut = runSvc(t, []string{"whoami", "--url", p.base + "/"}, []string{"SVC_AUTH_CONFIG_PATH=" + cache}, nil)
	require.Equal(t, 1, code)
	oneLineError(t, errOut, "no token")

	// send to a member arrives on their SSE stream.
	bobTok := createMember(t, restDriver{p}, bearer(admin), "bob")
	sse := p.subscribeSSE(t, bobTok, "bob", "")
	code, out, errOut = runSvc(t, []string{"send", "bob", "hello from the cli", "--title", "greeting", "--level", "notice"}, env, nil)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^sent \S+ \(live 1 of 1\)\n$`, out)
	m := sse.nextMessage(t)
	require.Equal(t, "laptop", m["from"])
	require.Equal(t, "bob", m["to"])
	require.Equal(t, "hello from the cli", m["body"])
	require.Equal(t, "greeting", m["title"])
	require.Equal(t, "notice", m["level"])

	// send to #channel resolves the slug; bob is in it and sees it.
	r = p.do(t, http.MethodPost, "/channels", obj{"slug": "ops"}, withBearer(admin))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	for _, who := range []string{"bob", "laptop"} {
		r = p.do(t, http.MethodPost, "/channels/ops/members", obj{"member": who}, withBearer(admin))
		require.Less(t, r.status, 300, "%s", r.raw)
	}
	code, _, errOut = runSvc(t, []string{"send", "#ops", "to the channel"}, env, nil)
	require.Equal(t, 0, code, errOut)
	m = sse.nextMessage(t)
	require.Equal(t, "to the channel", m["body"])
	require.Regexp(t, `^chan:`, m["data"].(obj)["thread"])

	// An unknown channel and a missing attachment are refused before sending.
	code, _, errOut = runSvc(t, []string{"send", "#nope", "x"}, env, nil)
	require.Equal(t, 1, code)
	oneLineError(t, errOut, "no channel #nope")
	lapTok := file.Entries[0].Token
	mustWrite(t, p, lapTok, "/laptop/a.txt", "text/plain", []byte("hello"))
	r = p.do(t, http.MethodPost, "/fs/mkdir", obj{"path": "/laptop/dir"}, withBearer(lapTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--attach", "/laptop/a.txt", "--attach", "/laptop/missing.txt", "--attach", "/laptop/gone.txt"}, "attachment /laptop/missing.txt: no such file"},
		{[]string{"--attach", "/laptop/dir"}, "attachment /laptop/dir: is a directory"},
	} {
		code, _, errOut = runSvc(t, append([]string{"send", "bob", "x"}, tc.args...), env, nil)
		require.Equal(t, 1, code)
		oneLineError(t, errOut, tc.want)
	}
	// The next message bob sees is the good one: the refused sends sent nothing.
	code, _, errOut = runSvc(t, []string{"send", "bob", "see file", "--attach", "/laptop/a.txt"}, env, nil)
	require.Equal(t, 0, code, errOut)
	m = sse.nextMessage(t)
	require.Equal(t, "see file", m["body"])
	require.Equal(t, []any{"/laptop/a.txt"}, m["attachments"])

	// Usage errors exit 2.
	code, _, _ = runSvc(t, []string{"send", "bob"}, env, nil)
	require.Equal(t, 2, code)

	// tail prints a message sent after it starts, then stops on SIGTERM.
	tail := startClient(t, []string{"tail"}, env)
	waitFor(t, tail, tail.stderr, regexp.MustCompile(`following `+regexp.QuoteMeta(p.base)+` as laptop`))
	r = p.do(t, http.MethodPost, "/push", obj{"to": "laptop", "body": "ping\nfrom bob"}, withBearer(bobTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	waitFor(t, tail, tail.stdout, regexp.MustCompile(`(?m)^\S+ \S+ bob -> laptop: ping·from bob$`))
	require.NoError(t, tail.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, tail.wait(t))
	require.Equal(t, 1, strings.Count(tail.stdout.String(), "\n"), "one line per message: %q", tail.stdout)
}

func TestClientLoginRejected(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	cache := filepath.Join(t.TempDir(), "auth.json")
	c := startClient(t, []string{"login", "--url", p.base}, []string{"SVC_AUTH_CONFIG_PATH=" + cache})
	code := waitFor(t, c, c.stdout, userCodeRE)[1]
	r := p.do(t, http.MethodPost, "/enroll/reject", obj{"userCode": code, "reason": "not a team laptop"}, withBearer(admin))
	require.Less(t, r.status, 300, "%s", r.raw)
	require.Equal(t, 1, c.wait(t))
	oneLineError(t, c.stderr.String(), "login rejected: not a team laptop")
	_, err := os.Stat(cache)
	require.True(t, os.IsNotExist(err), "no cache is written")
}

func TestClientRevokedToken(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	tok := createMember(t, restDriver{p}, bearer(admin), "carol")
	env := []string{"SVC_URL=" + p.base, "SVC_TOKEN=" + tok, "SVC_AUTH_CONFIG_PATH=" + filepath.Join(t.TempDir(), "none.json")}
	code, out, _ := runSvc(t, []string{"whoami"}, env, nil)
	require.Equal(t, 0, code)
	require.Contains(t, out, "member: carol\n")

	r := p.do(t, http.MethodGet, "/members/carol/tokens", nil, withBearer(admin))
	require.Equal(t, http.StatusOK, r.status)
	toks, _ := r.body["tokens"].([]any)
	require.Len(t, toks, 1)
	id, _ := toks[0].(obj)["id"].(string)
	r = p.do(t, http.MethodDelete, "/members/carol/tokens/"+id, nil, withBearer(admin))
	require.Less(t, r.status, 300, "%s", r.raw)

	for _, args := range [][]string{{"whoami"}, {"send", "admin", "x"}, {"tail"}} {
		code, _, errOut := runSvc(t, args, env, nil)
		require.Equal(t, 1, code, "%v", args)
		oneLineError(t, errOut, "unauthenticated")
		require.NotContains(t, errOut, tok, "the token is never echoed")
	}
	// --token wins over SVC_TOKEN.
	code, out, errOut := runSvc(t, []string{"whoami", "--token", admin}, env, nil)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "member: admin\n")
}

func TestClientBrokerDownOrWrongURL(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	notSvc := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notSvc.Close)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>hi</html>"))
	}))
	t.Cleanup(html.Close)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "down whoami", args: []string{"whoami", "--url", down}, want: "connection refused"},
		{name: "down send", args: []string{"send", "--url", down, "bob", "x"}, want: "connection refused"},
		{name: "down tail", args: []string{"tail", "--url", down}, want: "connection refused"},
		{name: "down login", args: []string{"login", "--url", down}, want: "connection refused"},
		{name: "404", args: []string{"whoami", "--url", notSvc.URL}, want: "does not look like an svc broker"},
		{name: "html", args: []string{"whoami", "--url", html.URL}, want: "does not look like an svc broker"},
		{name: "html login", args: []string{"login", "--url", html.URL}, want: "does not look like an svc broker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runSvc(t, tc.args, []string{"SVC_TOKEN=svc_x", "SVC_AUTH_CONFIG_PATH=" + filepath.Join(t.TempDir(), "a.json")}, nil)
			require.Equal(t, 1, code)
			oneLineError(t, errOut, tc.want)
		})
	}
}

// dropProxy forwards TCP to a broker; drop cuts every live connection and
// pause refuses new ones, so a client sees its stream fall and the broker
// stay unreachable for a while.
type dropProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	paused bool
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dp := &dropProxy{l: l, target: target}
	go dp.serve()
	t.Cleanup(func() { _ = l.Close(); dp.drop() })
	return dp
}

func (dp *dropProxy) url() string { return "http://" + dp.l.Addr().String() }

func (dp *dropProxy) serve() {
	for {
		c, err := dp.l.Accept()
		if err != nil {
			return
		}
		dp.mu.Lock()
		paused := dp.paused
		dp.mu.Unlock()
		if paused {
			_ = c.Close()
			continue
		}
		b, err := net.Dial("tcp", dp.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		dp.mu.Lock()
		dp.conns = append(dp.conns, c, b)
		dp.mu.Unlock()
		go func() { _, _ = io.Copy(b, c); _ = b.Close() }()
		go func() { _, _ = io.Copy(c, b); _ = c.Close() }()
	}
}

func (dp *dropProxy) drop() {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for _, c := range dp.conns {
		_ = c.Close()
	}
	dp.conns = nil
}

func (dp *dropProxy) setPaused(v bool) {
	dp.mu.Lock()
	dp.paused = v
	dp.mu.Unlock()
}

// tail resumes after a drop from the last id it printed: a message sent
// while the broker was unreachable is printed once after it reconnects.
func TestClientTailResumesAfterDrop(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	bobTok := createMember(t, restDriver{p}, bearer(admin), "bob")
	dp := newDropProxy(t, p.addr)
	env := []string{"SVC_URL=" + dp.url(), "SVC_TOKEN=" + bobTok, "SVC_AUTH_CONFIG_PATH=" + filepath.Join(t.TempDir(), "a.json")}

	tail := startClient(t, []string{"tail"}, env)
	waitFor(t, tail, tail.stderr, regexp.MustCompile(`following .* as bob`))
	push := func(body string) {
		r := p.do(t, http.MethodPost, "/push", obj{"to": "bob", "body": body}, withBearer(admin))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
	push("one")
	waitFor(t, tail, tail.stdout, regexp.MustCompile(`admin -> bob: one\n`))

	dp.setPaused(true)
	dp.drop()
	waitFor(t, tail, tail.stderr, regexp.MustCompile(`(?s)stream dropped.*stream dropped`))
	push("two")
	dp.setPaused(false)
	waitFor(t, tail, tail.stdout, regexp.MustCompile(`admin -> bob: two\n`))
	push("three")
	waitFor(t, tail, tail.stdout, regexp.MustCompile(`admin -> bob: three\n`))

	require.NoError(t, tail.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, tail.wait(t))
	lines := strings.Split(strings.TrimSuffix(tail.stdout.String(), "\n"), "\n")
	require.Len(t, lines, 3, "each message once: %q", lines)
	for i, want := range []string{"one", "two", "three"} {
		require.True(t, strings.HasSuffix(lines[i], "admin -> bob: "+want), lines[i])
	}

	// --from replays every later message, then follows live.
	firstID := strings.Fields(lines[0])[1]
	from := startClient(t, []string{"tail", "--from", firstID, "--url", p.base}, env)
	waitFor(t, from, from.stdout, regexp.MustCompile(`admin -> bob: three\n`))
	push("four")
	waitFor(t, from, from.stdout, regexp.MustCompile(`admin -> bob: four\n`))
	require.NoError(t, from.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, from.wait(t))
	got := strings.Split(strings.TrimSuffix(from.stdout.String(), "\n"), "\n")
	require.Len(t, got, 3, "%q", got)
	require.Equal(t, lines[1:], got[:2], "the replay is the same lines")
}
