package e2e

// The end-to-end harness. The svc binary is built once per test run (see
// svcPath: cmd/svc with the race detector when this test binary has it, and
// the tag every build uses), or SVC_E2E_BINARY names a prebuilt one. Tests
// start it as children on 127.0.0.1:0, learn the port from the "svc
// listening" log line, and speak REST (HTTP/1.1) and gRPC (cleartext
// HTTP/2) to them. So `go test -race` runs race-instrumented brokers.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	apiv1 "svc/gen/svc/v1"
)

const (
	// binaryEnv names a prebuilt svc binary to test instead of building
	// one. Build it as the tests are (-race with -race); go test caches
	// a passing run by this variable's value, not the file's content, so
	// run with -count=1 when the binary changes.
	binaryEnv = "SVC_E2E_BINARY"
	// nofileArg, first on this test binary's command line, makes it set
	// its soft and hard RLIMIT_NOFILE and exec svc, as `prlimit
	// --nofile=N:N svc serve` would (see nofileEnv).
	nofileArg = "-svc-e2e-nofile"
	// nofileEnv in a child's env (procOpts.env) starts svc through
	// nofileArg with that limit. It is the harness's, never svc's.
	nofileEnv = "SVC_E2E_NOFILE"

	startTimeout = 20 * time.Second
	// stopTimeout bounds an exit on SIGTERM: an 8 s drain, then the stores
	// close (docs/DECISIONS.md, Operations).
	stopTimeout = 10 * time.Second
	// runTimeout bounds a child expected to exit on its own.
	runTimeout = 30 * time.Second
	// callTimeout bounds one HTTP or gRPC call: a hang, not a speed. The
	// 16 MiB bodies take seconds under -race on a busy machine (a CI run
	// beside Chromium tests timed out at 10 s).
	callTimeout = 30 * time.Second
)

// buildDir holds the svc binary built for this run; TestMain removes it.
var buildDir string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == nofileArg {
		execWithNofile(os.Args[2:])
	}
	code := m.Run()
	stopPG()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// execWithNofile is `prlimit --nofile=N:N <svc> <args…>`: args are N, the
// binary and its arguments. The limit outlives the exec, and the pid stays
// the one the test started, so signals reach svc itself.
func execWithNofile(args []string) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "e2e %s: %v\n", nofileArg, err)
		os.Exit(97)
	}
	if len(args) < 2 {
		fail(errors.New("want N, the binary and its arguments"))
	}
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		fail(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		fail(err)
	}
	fail(syscall.Exec(args[1], append([]string{"svc"}, args[2:]...), os.Environ()))
}

var (
	buildOnce sync.Once
	svcBinary string
	buildErr  error
)

// svcPath returns the svc binary the children run, building it on first use
// (a run whose tests start no svc builds none). The build has this test
// binary's flags: -race when it is race-built, and the sqlite tag.
//
// go test caches a passing run by what the test binary is and what it read:
// the svc sources are not in it, so they are stat'ed here (go test keys its
// cache on the size and time of each file a test stats in the module).
func svcPath(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if svcBinary = os.Getenv(binaryEnv); svcBinary != "" {
			if !filepath.IsAbs(svcBinary) {
				buildErr = fmt.Errorf("%s=%q: want an absolute path", binaryEnv, svcBinary)
			}
			return
		}
		svcBinary, buildErr = buildSvc()
	})
	if buildErr != nil {
		t.Fatalf("the svc binary: %v", buildErr)
	}
	return svcBinary
}

const (
	buildTags = "sqlite_omit_load_extension"
	// buildPrefix and the builder's pid name a build directory.
	buildPrefix = "svc-e2e-bin-"
)

// removeOrphanBuilds removes the build directories of test binaries that
// are gone: TestMain removes its own, but not when a panic or a timeout
// ends the run. A live pid's directory is left alone (it may be another
// run's, or a reused pid's: then it is removed later).
func removeOrphanBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*-*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), buildPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

func buildSvc() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	flags := []string{"-tags", buildTags}
	if raceEnabled {
		flags = append(flags, "-race")
	}
	// Every file the binary is built from, one per line.
	list := exec.Command(goTool, append(append([]string{"list", "-deps"}, flags...), "-f",
		`{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"svc/cmd/svc")...)
	list.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		_, _ = os.Stat(f)
	}
	removeOrphanBuilds()
	if buildDir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, os.Getpid())); err != nil {
		return "", err
	}
	bin := filepath.Join(buildDir, "svc")
	build := exec.Command(goTool, append(append([]string{"build"}, flags...), "-o", bin, "svc/cmd/svc")...)
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// childCommand returns an unstarted svc child. Inherited SVC_* variables are
// dropped so only env reaches it; it runs in a fresh directory so a relative
// default path can never touch the package directory. The kernel kills it
// when this test binary dies (Pdeathsig), so a broker never outlives a
// crashed test: the signal follows the thread that started the child, and
// Go ends a thread only when a goroutine locked to it returns (go.dev/issue/27505),
// which nothing here does.
func childCommand(t testing.TB, args, env []string) *exec.Cmd {
	t.Helper()
	bin := svcPath(t)
	cmd := &exec.Cmd{Path: bin, Args: append([]string{"svc"}, args...)}
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A race-instrumented process sleeps 1 s at exit by default; the
	// shipped binary does not, and exit times are asserted.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	for _, kv := range env {
		if n, ok := strings.CutPrefix(kv, nofileEnv+"="); ok {
			exe, err := os.Executable()
			require.NoError(t, err)
			cmd.Path = exe
			cmd.Args = append([]string{exe, nofileArg, n, bin}, args...)
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// runSvc runs svc to completion (bounded) and returns its exit code and
// output. stdin nil gives the child an empty pipe, never a terminal. A child
// that starts serving is stopped at once and fails the test: runSvc is for
// runs that must end on their own.
func runSvc(t testing.TB, args, env []string, stdin io.Reader) (code int, stdout, stderr string) {
	t.Helper()
	cmd := childCommand(t, pgMaintenanceArgs(args), env)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cmd.Stdin = stdin
	serving := make(chan struct{}, 1)
	out := &lineBuffer{}
	errOut := &lineBuffer{onLine: func(line string) {
		if listeningRE.MatchString(line) {
			select {
			case serving <- struct{}{}:
			default:
			}
		}
	}}
	cmd.Stdout, cmd.Stderr = out, errOut
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-serving:
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("svc %v started serving; stderr:\n%s", args, errOut)
	case <-time.After(runTimeout):
		dumpAndKill(cmd, done)
		t.Fatalf("svc %v did not exit within %s; stderr:\n%s", args, runTimeout, errOut)
	}
	require.NotContains(t, errOut.String(), "WARNING: DATA RACE", "data race in svc %v", args)
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// dumpAndKill asks a stuck child for its goroutine dump (SIGQUIT), then
// kills it, and waits until done is closed.
func dumpAndKill(cmd *exec.Cmd, done <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
		return
	case <-time.After(2 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-done
}

// lineBuffer collects a child's output and reports each complete line.
type lineBuffer struct {
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
	onLine  func(string)
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.all.Write(p)
	b.partial = append(b.partial, p...)
	var lines []string
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(b.partial[:i]))
		b.partial = b.partial[i+1:]
	}
	onLine := b.onLine
	b.mu.Unlock()
	if onLine != nil {
		for _, l := range lines {
			onLine(l)
		}
	}
	return len(p), nil
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all.String()
}

// procOpts are the settings of one svc serve child.
type procOpts struct {
	configPath string   // default: svc.json in a fresh temp dir
	dbPath     string   // "" is in-memory (PostgreSQL mode: the database of configPath)
	env        []string // extra KEY=VALUE pairs, e.g. SVC_KEK
	// store overrides the run's store (SVC_E2E_STORE, harness_pg_test.go):
	// "sqlite" for a test about SQLite's own files, "postgres" for one
	// that is about PostgreSQL in either mode.
	store string
}

// proc is a running `svc serve` child.
type proc struct {
	opts   procOpts
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *lineBuffer
	stderr *lineBuffer
	addr   string // 127.0.0.1:port
	base   string // http://127.0.0.1:port
	done   chan struct{}
	client *http.Client

	mu       sync.Mutex
	conn     *grpc.ClientConn
	stopped  bool // stop or kill was called
	killed   bool
	exitCode int // valid once done is closed
}

var listeningRE = regexp.MustCompile(`msg="svc listening" addr=(127\.0\.0\.1:[0-9]+)`)

// mustStartSvc starts `svc serve` and waits until it listens. Cleanup stops it
// with SIGTERM and reports a non-zero exit or a data race.
func mustStartSvc(t testing.TB, opts procOpts) *proc {
	t.Helper()
	if opts.configPath == "" {
		opts.configPath = t.TempDir() + "/svc.json"
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--config-path", opts.configPath}
	args = append(args, storeArgs(t, opts)...)
	p := &proc{
		opts:   opts,
		cmd:    childCommand(t, args, opts.env),
		stdout: &lineBuffer{},
		done:   make(chan struct{}),
		client: &http.Client{Timeout: callTimeout, Transport: &http.Transport{}},
	}
	addrCh := make(chan string, 1)
	p.stderr = &lineBuffer{onLine: func(line string) {
		if m := listeningRE.FindStringSubmatch(line); m != nil {
			select {
			case addrCh <- m[1]:
			default:
			}
		}
	}}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() { p.cleanup(t) })

	select {
	case p.addr = <-addrCh:
	case <-p.done:
		t.Fatalf("svc exited with code %d before listening; stderr:\n%s", p.exitCode, p.stderr)
	case <-time.After(startTimeout):
		dumpAndKill(p.cmd, p.done)
		t.Fatalf("svc did not log \"svc listening\" within %s; stderr:\n%s", startTimeout, p.stderr)
	}
	p.base = "http://" + p.addr
	return p
}

func (p *proc) cleanup(t testing.TB) {
	p.closeClients()
	p.mu.Lock()
	stopped, killed := p.stopped, p.killed
	p.mu.Unlock()
	if !stopped {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			dumpAndKill(p.cmd, p.done)
			t.Errorf("svc did not exit within %s of SIGTERM", stopTimeout)
		}
	}
	if !killed && p.exitCode != 0 {
		t.Errorf("svc exited with code %d; stderr:\n%s", p.exitCode, p.stderr)
	}
	if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("data race in svc; stderr:\n%s", p.stderr)
	}
	if t.Failed() {
		t.Logf("svc stderr (%s):\n%s", p.opts.configPath, p.stderr)
	}
}

func (p *proc) closeClients() {
	p.mu.Lock()
	conn := p.conn
	p.conn = nil
	p.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	p.client.CloseIdleConnections()
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (p *proc) stop(t testing.TB) (int, time.Duration) {
	t.Helper()
	p.closeClients()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		dumpAndKill(p.cmd, p.done)
		t.Fatalf("svc did not exit within %s of SIGTERM; stderr:\n%s", stopTimeout, p.stderr)
	}
	return p.exitCode, time.Since(start)
}

// mustStop stops the process and requires exit code 0.
func (p *proc) mustStop(t testing.TB) {
	t.Helper()
	code, _ := p.stop(t)
	require.Zero(t, code, "svc exit code; stderr:\n%s", p.stderr)
}

// kill ends the process with SIGKILL, leaving no chance to flush.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	p.closeClients()
	p.mu.Lock()
	p.stopped, p.killed = true, true
	p.mu.Unlock()
	require.NoError(t, p.cmd.Process.Kill())
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		t.Fatalf("svc did not exit after SIGKILL")
	}
}

// restart starts a new process with the same options; p must be stopped.
func (p *proc) restart(t testing.TB) *proc {
	t.Helper()
	select {
	case <-p.done:
	default:
		t.Fatalf("restart of a running svc")
	}
	return mustStartSvc(t, p.opts)
}

var adminTokenLineRE = regexp.MustCompile(`^admin token: (svc_[A-Za-z0-9_-]{43})\n$`)

// adminToken waits (bounded) for the first-boot stdout line and returns the
// token it names.
func (p *proc) adminToken(t testing.TB) string {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for {
		out := p.stdout.String()
		if strings.HasSuffix(out, "\n") {
			m := adminTokenLineRE.FindStringSubmatch(out)
			require.NotNil(t, m, "stdout must be exactly one admin token line, got %q", out)
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin token line on stdout within %s; stdout %q", callTimeout, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// grpcConn returns the process's gRPC client connection, created once.
func (p *proc) grpcConn(t testing.TB) *grpc.ClientConn {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		p.conn = conn
	}
	return p.conn
}

func (p *proc) broker(t testing.TB) apiv1.BrokerClient {
	t.Helper()
	return apiv1.NewBrokerClient(p.grpcConn(t))
}

// --- REST ---------------------------------------------------------------

// httpResp is a REST answer.
type httpResp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any // the JSON object, when the body is one
}

type reqOpt func(*http.Request)

func withAuthorization(v string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", v) }
}

func withBearer(tok string) reqOpt { return withAuthorization("Bearer " + tok) }

func withSession(id string) reqOpt {
	return func(r *http.Request) { r.Header.Add("Cookie", "svc_session="+id) }
}

func withHeader(k, v string) reqOpt {
	return func(r *http.Request) { r.Header.Add(k, v) }
}

// do sends one REST request. body nil sends none, []byte is sent as is, an
// io.Reader is streamed without a declared length, any other value is JSON.
func (p *proc) do(t testing.TB, method, path string, body any, opts ...reqOpt) httpResp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		enc, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(enc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := p.client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := httpResp{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(raw) > 0 {
		var obj map[string]any
		if json.Unmarshal(raw, &obj) == nil {
			r.body = obj
		}
	}
	return r
}

// wireStatus is the code-to-status table (docs/API.md, Conventions: Errors).
var wireStatus = map[string]int{
	"bad_request":          http.StatusBadRequest,
	"unsupported_protocol": http.StatusBadRequest,
	"unauthenticated":      http.StatusUnauthorized,
	"forbidden":            http.StatusForbidden,
	"not_found":            http.StatusNotFound,
	"conflict":             http.StatusConflict,
	"gone":                 http.StatusGone,
	"payload_too_large":    http.StatusRequestEntityTooLarge,
	"rate_limited":         http.StatusTooManyRequests,
	"internal":             http.StatusInternalServerError,
	"bad_gateway":          http.StatusBadGateway,
	"unavailable":          http.StatusServiceUnavailable,
	// Beyond the contract's table (docs/DECISIONS.md: Storage).
	"insufficient_storage": http.StatusInsufficientStorage,
	"data_loss":            http.StatusInternalServerError,
}

// wireGRPC is the gRPC code each wire code travels as.
var wireGRPC = map[string]codes.Code{
	"bad_request":          codes.InvalidArgument,
	"unsupported_protocol": codes.InvalidArgument,
	"unauthenticated":      codes.Unauthenticated,
	"forbidden":            codes.PermissionDenied,
	"not_found":            codes.NotFound,
	"conflict":             codes.AlreadyExists,
	"gone":                 codes.FailedPrecondition,
	"rate_limited":         codes.ResourceExhausted,
	"payload_too_large":    codes.ResourceExhausted,
	"unavailable":          codes.Unavailable,
	"bad_gateway":          codes.Unavailable,
	"insufficient_storage": codes.ResourceExhausted,
	"data_loss":            codes.DataLoss,
}

// requireRESTError asserts the JSON error shape {error, message} with the
// status the contract gives code, and the protocol header.
func requireRESTError(t testing.TB, r httpResp, code string) {
	t.Helper()
	want, ok := wireStatus[code]
	require.True(t, ok, "unknown wire code %q", code)
	require.Equal(t, want, r.status, "body: %s", r.raw)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, "1", r.header.Get("X-SVC-Protocol"))
	require.NotNil(t, r.body, "error body must be a JSON object: %q", r.raw)
	require.Equal(t, code, r.body["error"], "body: %s", r.raw)
	msg, ok := r.body["message"].(string)
	require.True(t, ok, "message must be a string: %s", r.raw)
	require.NotEmpty(t, msg)
}

// requireGRPCError asserts a gRPC status with the code wireGRPC gives code
// and an svc ErrorInfo naming it.
func requireGRPCError(t testing.TB, err error, code string) {
	t.Helper()
	require.Error(t, err)
	st := status.Convert(err)
	require.Equal(t, wireGRPC[code], st.Code(), "status: %v", st)
	require.Equal(t, code, errorReason(st), "status: %v", st)
	require.NotEmpty(t, st.Message())
}

func errorReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "svc" {
			return info.GetReason()
		}
	}
	return ""
}

// --- One scenario, two transports -----------------------------------------

// obj is a JSON object.
type obj = map[string]any

// cred is what a call presents: a raw Authorization value, a session cookie
// value, and an X-SVC-Protocol value; empty fields are not sent.
type cred struct {
	authorization string
	session       string
	protocol      string
}

func bearer(tok string) cred              { return cred{authorization: "Bearer " + tok} }
func sessionCred(id string) cred          { return cred{session: id} }
func (c cred) withProtocol(v string) cred { c.protocol = v; return c }

var anonymous = cred{}

// result is a call's outcome in transport-neutral form: the JSON body the
// REST client would see, or the wire error code.
type result struct {
	body       obj
	code       string // "" on success
	setCookie  []string
	retryAfter int // seconds; 0 when absent
}

// driver runs Broker RPCs by name over one transport.
type driver interface {
	call(t testing.TB, c cred, op string, req obj) result
}

// transports drive each scenario over REST and over native gRPC.
var transports = []struct {
	name    string
	connect func(t testing.TB, p *proc) driver
}{
	{"rest", func(_ testing.TB, p *proc) driver { return restDriver{p} }},
	{"grpc", func(t testing.TB, p *proc) driver { return grpcDriver{p.grpcConn(t)} }},
}

// onEachTransport runs scenario once per transport, in parallel, each against
// a fresh broker, with the admin's credential and a driver for the transport.
func onEachTransport(t *testing.T, scenario func(t *testing.T, p *proc, admin cred, d driver)) {
	t.Helper()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			p := mustStartSvc(t, procOpts{})
			scenario(t, p, bearer(p.adminToken(t)), tr.connect(t, p))
		})
	}
}

// rpcSpec is one Broker RPC: its REST binding (proto/svc/v1/broker.proto)
// and its gRPC method.
type rpcSpec struct {
	method, path string
	okStatus     int
	responseBody string // the response field REST returns, "" for all
	invoke       invoker
}

type invoker func(t testing.TB, ctx context.Context, conn grpc.ClientConnInterface, reqJSON []byte, opts ...grpc.CallOption) (proto.Message, error)

// unary adapts a generated Broker client method to an invoker.
func unary[Req, Resp proto.Message](m func(apiv1.BrokerClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) invoker {
	return unaryOn(apiv1.NewBrokerClient, m)
}

// unaryOn adapts a method of any generated client to an invoker. Test files
// of other services add their ops to rpcs in an init func.
func unaryOn[C any, Req, Resp proto.Message](newClient func(grpc.ClientConnInterface) C, m func(C, context.Context, Req, ...grpc.CallOption) (Resp, error)) invoker {
	return func(t testing.TB, ctx context.Context, conn grpc.ClientConnInterface, reqJSON []byte, opts ...grpc.CallOption) (proto.Message, error) {
		t.Helper()
		var zero Req
		in, ok := zero.ProtoReflect().New().Interface().(Req)
		require.True(t, ok)
		require.NoError(t, protojson.Unmarshal(reqJSON, in), "request %s", reqJSON)
		return m(newClient(conn), ctx, in, opts...)
	}
}

var rpcs = map[string]rpcSpec{
	"Health":        {http.MethodGet, "/healthz", http.StatusOK, "", unary(apiv1.BrokerClient.Health)},
	"GetBriefing":   {http.MethodGet, "/briefing", http.StatusOK, "", unary(apiv1.BrokerClient.GetBriefing)},
	"GetRoster":     {http.MethodGet, "/roster", http.StatusOK, "", unary(apiv1.BrokerClient.GetRoster)},
	"ListMembers":   {http.MethodGet, "/members", http.StatusOK, "", unary(apiv1.BrokerClient.ListMembers)},
	"CreateMember":  {http.MethodPost, "/members", http.StatusOK, "", unary(apiv1.BrokerClient.CreateMember)},
	"UpdateMember":  {http.MethodPatch, "/members/{name}", http.StatusOK, "member", unary(apiv1.BrokerClient.UpdateMember)},
	"DeleteMember":  {http.MethodDelete, "/members/{name}", http.StatusNoContent, "", unary(apiv1.BrokerClient.DeleteMember)},
	"RotateToken":   {http.MethodPost, "/members/{name}/rotate-token", http.StatusOK, "", unary(apiv1.BrokerClient.RotateToken)},
	"ListTokens":    {http.MethodGet, "/members/{name}/tokens", http.StatusOK, "", unary(apiv1.BrokerClient.ListTokens)},
	"RevokeToken":   {http.MethodDelete, "/members/{name}/tokens/{id}", http.StatusNoContent, "", unary(apiv1.BrokerClient.RevokeToken)},
	"EnrollTotp":    {http.MethodPost, "/members/{name}/enroll-totp", http.StatusOK, "", unary(apiv1.BrokerClient.EnrollTotp)},
	"CreateSession": {http.MethodPost, "/session/totp", http.StatusOK, "session", unary(apiv1.BrokerClient.CreateSession)},
	"GetSession":    {http.MethodGet, "/session", http.StatusOK, "session", unary(apiv1.BrokerClient.GetSession)},
	"Logout":        {http.MethodPost, "/session/logout", http.StatusNoContent, "", unary(apiv1.BrokerClient.Logout)},
	"ListSessions":  {http.MethodGet, "/members/{name}/sessions", http.StatusOK, "", unary(apiv1.BrokerClient.ListSessions)},
	"RevokeSession": {http.MethodDelete, "/members/{name}/sessions/{id}", http.StatusNoContent, "", unary(apiv1.BrokerClient.RevokeSession)},

	"Push":                   {http.MethodPost, "/push", http.StatusOK, "", unary(apiv1.BrokerClient.Push)},
	"History":                {http.MethodGet, "/history", http.StatusOK, "", unary(apiv1.BrokerClient.History)},
	"ListChannels":           {http.MethodGet, "/channels", http.StatusOK, "", unary(apiv1.BrokerClient.ListChannels)},
	"CreateChannel":          {http.MethodPost, "/channels", http.StatusOK, "channel", unary(apiv1.BrokerClient.CreateChannel)},
	"GetChannel":             {http.MethodGet, "/channels/{channel}", http.StatusOK, "", unary(apiv1.BrokerClient.GetChannel)},
	"RenameChannel":          {http.MethodPatch, "/channels/{channel}", http.StatusOK, "channel", unary(apiv1.BrokerClient.RenameChannel)},
	"ArchiveChannel":         {http.MethodDelete, "/channels/{channel}", http.StatusNoContent, "", unary(apiv1.BrokerClient.ArchiveChannel)},
	"AddChannelMember":       {http.MethodPost, "/channels/{channel}/members", http.StatusNoContent, "", unary(apiv1.BrokerClient.AddChannelMember)},
	"RemoveChannelMember":    {http.MethodDelete, "/channels/{channel}/members/{name}", http.StatusNoContent, "", unary(apiv1.BrokerClient.RemoveChannelMember)},
	"SetActivity":            {http.MethodPost, "/presence/activity", http.StatusNoContent, "", unary(apiv1.BrokerClient.SetActivity)},
	"GetVapidPublicKey":      {http.MethodGet, "/push/vapid-public-key", http.StatusOK, "", unary(apiv1.BrokerClient.GetVapidPublicKey)},
	"CreatePushSubscription": {http.MethodPost, "/push/subscriptions", http.StatusOK, "subscription", unary(apiv1.BrokerClient.CreatePushSubscription)},
	"DeletePushSubscription": {http.MethodDelete, "/push/subscriptions/{id}", http.StatusNoContent, "", unary(apiv1.BrokerClient.DeletePushSubscription)},
}

// queryOps are the GET ops whose remaining request fields travel as the
// query string over REST (grpc-gateway maps unbound fields to the query).
var queryOps = map[string]bool{"History": true}

// queryValue renders one JSON request value as grpc-gateway parses it.
func queryValue(t testing.TB, v any) string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	t.Fatalf("no query rendering for %#v", v)
	return ""
}

var pathParamRE = regexp.MustCompile(`\{([a-z]+)\}`)

type restDriver struct{ p *proc }

// call sends the REST request of op. Path parameters are taken out of req;
// the rest is the JSON body of POST and PATCH.
func (d restDriver) call(t testing.TB, c cred, op string, req obj) result {
	t.Helper()
	spec, ok := rpcs[op]
	require.True(t, ok, "unknown op %s", op)
	fields := obj{}
	for k, v := range req {
		fields[k] = v
	}
	path := pathParamRE.ReplaceAllStringFunc(spec.path, func(m string) string {
		key := m[1 : len(m)-1]
		v, ok := fields[key].(string)
		require.True(t, ok, "%s needs %q", op, key)
		delete(fields, key)
		return url.PathEscape(v)
	})
	var body any
	switch {
	case spec.method == http.MethodPost || spec.method == http.MethodPatch || spec.method == http.MethodPut:
		body = fields
	case queryOps[op]:
		q := url.Values{}
		for k, v := range fields {
			q.Set(k, queryValue(t, v))
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
	default:
		require.Empty(t, fields, "%s takes no body", op)
	}
	var opts []reqOpt
	if c.authorization != "" {
		opts = append(opts, withAuthorization(c.authorization))
	}
	if c.session != "" {
		opts = append(opts, withSession(c.session))
	}
	if c.protocol != "" {
		opts = append(opts, withHeader("X-SVC-Protocol", c.protocol))
	}
	r := d.p.do(t, spec.method, path, body, opts...)
	require.Equal(t, "1", r.header.Get("X-SVC-Protocol"), "%s %s: every response carries the protocol header", spec.method, path)
	res := result{setCookie: r.header.Values("Set-Cookie")}
	if r.status >= 200 && r.status < 300 {
		require.Equal(t, spec.okStatus, r.status, "%s %s: %s", spec.method, path, r.raw)
		if r.status == http.StatusNoContent {
			require.Empty(t, r.raw, "204 has an empty body")
			return res
		}
		require.NotNil(t, r.body, "%s %s: body %q", spec.method, path, r.raw)
		res.body = r.body
		return res
	}
	code, _ := r.body["error"].(string)
	requireRESTError(t, r, code)
	res.code = code
	if ra := r.header.Get("Retry-After"); ra != "" {
		n, err := strconv.Atoi(ra)
		require.NoError(t, err, "Retry-After must be an integer of seconds, got %q", ra)
		res.retryAfter = n
	}
	if code == "rate_limited" {
		require.NotEmpty(t, r.header.Get("Retry-After"), "429 carries Retry-After")
	}
	return res
}

type grpcDriver struct{ conn grpc.ClientConnInterface }

// call invokes op natively. The response is rendered with protojson as the
// gateway renders it, so assertions are shared with REST.
func (d grpcDriver) call(t testing.TB, c cred, op string, req obj) result {
	t.Helper()
	spec, ok := rpcs[op]
	require.True(t, ok, "unknown op %s", op)
	if req == nil {
		req = obj{}
	}
	reqJSON, err := json.Marshal(req)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var kv []string
	if c.authorization != "" {
		kv = append(kv, "authorization", c.authorization)
	}
	if c.session != "" {
		kv = append(kv, "cookie", "svc_session="+c.session)
	}
	if c.protocol != "" {
		kv = append(kv, "x-svc-protocol", c.protocol)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	var hdr metadata.MD
	resp, err := spec.invoke(t, ctx, d.conn, reqJSON, grpc.Header(&hdr))
	res := result{setCookie: hdr.Get("set-cookie")}
	if err != nil {
		st := status.Convert(err)
		require.NotEqual(t, codes.Unknown, st.Code(), "%s: %v", op, st)
		res.code = errorReason(st)
		require.NotEmpty(t, res.code, "%s: status without svc ErrorInfo: %v", op, st)
		requireGRPCError(t, err, res.code)
		for _, det := range st.Details() {
			if ri, ok := det.(*errdetails.RetryInfo); ok {
				res.retryAfter = int(math.Ceil(ri.GetRetryDelay().AsDuration().Seconds()))
			}
		}
		if res.code == "rate_limited" {
			require.Positive(t, res.retryAfter, "rate_limited carries RetryInfo")
		}
		return res
	}
	out, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(resp)
	require.NoError(t, err)
	var body obj
	require.NoError(t, json.Unmarshal(out, &body))
	if spec.responseBody != "" {
		body, _ = body[spec.responseBody].(obj)
		require.NotNil(t, body, "%s: response lacks %s", op, spec.responseBody)
	}
	if spec.okStatus == http.StatusNoContent {
		require.Empty(t, body, "%s answers nothing", op)
		return res
	}
	res.body = body
	return res
}

// mustCall runs op and requires success.
func mustCall(t testing.TB, d driver, c cred, op string, req obj) obj {
	t.Helper()
	r := d.call(t, c, op, req)
	require.Empty(t, r.code, "%s %v failed", op, req)
	return r.body
}

// mustFail runs op and requires the wire error code.
func mustFail(t testing.TB, d driver, c cred, op string, req obj, code string) result {
	t.Helper()
	r := d.call(t, c, op, req)
	require.Equal(t, code, r.code, "%s %v: body %v", op, req, r.body)
	return r
}

// createMember creates a member as the caller and returns its token.
func createMember(t testing.TB, d driver, caller cred, name string, perms ...string) string {
	t.Helper()
	if perms == nil {
		perms = []string{}
	}
	body := mustCall(t, d, caller, "CreateMember", obj{"name": name, "permissions": perms})
	tok, _ := body["token"].(string)
	require.Regexp(t, tokenRE, tok)
	return tok
}

// requireWorks asserts the token authenticates as member.
func requireWorks(t testing.TB, d driver, c cred, member string) {
	t.Helper()
	b := mustCall(t, d, c, "GetBriefing", nil)
	me, _ := b["member"].(obj)
	require.Equal(t, member, me["name"])
}

// requireRejected asserts the credential is refused as unauthenticated.
func requireRejected(t testing.TB, d driver, c cred) {
	t.Helper()
	mustFail(t, d, c, "GetBriefing", nil, "unauthenticated")
}

// memberNames lists the names of ListMembers as caller.
func memberNames(t testing.TB, d driver, caller cred) []string {
	t.Helper()
	var names []string
	for _, m := range listOf(t, mustCall(t, d, caller, "ListMembers", nil), "members") {
		names = append(names, m["name"].(string))
	}
	slices.Sort(names)
	return names
}

// memberByName returns one member of ListMembers as caller.
func memberByName(t testing.TB, d driver, caller cred, name string) obj {
	t.Helper()
	for _, m := range listOf(t, mustCall(t, d, caller, "ListMembers", nil), "members") {
		if m["name"] == name {
			return m
		}
	}
	t.Fatalf("member %q not listed", name)
	return nil
}

// listOf returns body[key] as a list of objects.
func listOf(t testing.TB, body obj, key string) []obj {
	t.Helper()
	raw, ok := body[key].([]any)
	require.True(t, ok, "%s must be a list: %v", key, body)
	out := make([]obj, 0, len(raw))
	for _, v := range raw {
		o, ok := v.(obj)
		require.True(t, ok, "%s items must be objects: %v", key, body)
		out = append(out, o)
	}
	return out
}

// strs converts a JSON list of strings.
func strs(t testing.TB, v any) []string {
	t.Helper()
	raw, ok := v.([]any)
	require.True(t, ok, "want a list, got %#v", v)
	out := make([]string, 0, len(raw))
	for _, x := range raw {
		s, ok := x.(string)
		require.True(t, ok, "want strings, got %#v", v)
		out = append(out, s)
	}
	return out
}

// keys returns the sorted keys of o.
func keys(o obj) []string {
	out := make([]string, 0, len(o))
	for k := range o {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// --- Fixtures -----------------------------------------------------------

var (
	tokenRE = regexp.MustCompile(`^svc_[A-Za-z0-9_-]{43}$`)
	uuidRE  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// allLeaves is every permission leaf of the specification, sorted: the
// admin preset (svc's own metrics.read is in no preset).
var allLeaves = []string{
	"activity.read", "members.manage", "notifications.manage", "objectives.cancel",
	"objectives.create", "objectives.reassign", "objectives.watch", "secrets.manage",
	"team.manage", "tools.manage",
}

var operatorLeaves = []string{"objectives.cancel", "objectives.create", "objectives.watch"}

// randomToken returns a well-formed token no server has minted.
func randomToken(t testing.TB) string {
	t.Helper()
	return "svc_" + randomSecret(t)
}

// randomSecret is base64url of 32 random bytes, the body of tokens and
// session ids.
func randomSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(b)
}

// --- TOTP -----------------------------------------------------------------

const totpPeriod = 30

// totpUser generates login codes for one enrolled member. The server refuses
// a step at or before the last it accepted, so each code is for a later step
// than the previous one: the current step, then the next, which both stay
// valid for at least 30 s (±1 step of skew). A third code within one step
// would not be valid yet, so tests use another member instead.
type totpUser struct {
	name   string
	secret string
	last   int64
}

func (u *totpUser) next(t testing.TB) string {
	t.Helper()
	now := time.Now().Unix() / totpPeriod
	step := max(now, u.last+1)
	require.LessOrEqual(t, step, now+1, "more than two TOTP logins of %s within one step", u.name)
	u.last = step
	code, err := totp.GenerateCode(u.secret, time.Unix(step*totpPeriod, 0))
	require.NoError(t, err)
	return code
}

// wrong returns a 6-digit code that no step near now accepts.
func (u *totpUser) wrong(t testing.TB) string {
	t.Helper()
	now := time.Now()
	valid := map[string]bool{}
	for d := -3; d <= 3; d++ {
		c, err := totp.GenerateCode(u.secret, now.Add(time.Duration(d)*totpPeriod*time.Second))
		require.NoError(t, err)
		valid[c] = true
	}
	for i := 0; ; i++ {
		c := fmt.Sprintf("%06d", i*111111%1000000)
		if !valid[c] {
			return c
		}
	}
}

// enroll binds a fresh TOTP secret to name as the caller.
func enroll(t testing.TB, d driver, caller cred, name string) *totpUser {
	t.Helper()
	b := mustCall(t, d, caller, "EnrollTotp", obj{"name": name})
	secret, _ := b["totpSecret"].(string)
	require.Regexp(t, `^[A-Z2-7]{16,}=*$`, secret)
	uri, _ := b["totpUri"].(string)
	require.True(t, strings.HasPrefix(uri, "otpauth://totp/"), "totpUri %q", uri)
	require.Contains(t, uri, "secret="+secret)
	return &totpUser{name: name, secret: secret}
}

var sessionCookieRE = regexp.MustCompile(`^svc_session=([A-Za-z0-9_-]{43}); Path=/; Max-Age=604800; HttpOnly; SameSite=Strict$`)

// login logs u in by name and returns the session cookie value.
func login(t testing.TB, d driver, u *totpUser) string {
	t.Helper()
	r := d.call(t, anonymous, "CreateSession", obj{"code": u.next(t), "member": u.name})
	require.Empty(t, r.code, "login of %s", u.name)
	require.Equal(t, u.name, r.body["member"])
	return sessionFrom(t, r)
}

// sessionFrom returns the session id of the one Set-Cookie of a login.
func sessionFrom(t testing.TB, r result) string {
	t.Helper()
	require.Len(t, r.setCookie, 1, "one Set-Cookie: %v", r.setCookie)
	m := sessionCookieRE.FindStringSubmatch(r.setCookie[0])
	require.NotNil(t, m, "Set-Cookie %q", r.setCookie[0])
	return m[1]
}
