package e2e

// No credential within the agent's reach (docs/RUNNER.md): a stand-in agent
// runs under a real `svc runner` in place of claude or codex (this test
// binary, through a symlink of that name, so the runner picks the adapter
// by name as it would for the real one). It does what a prompt-injected
// agent's shell can do: it dumps its environment and every file named on
// its command line, reads the /proc files of the runner and of the toolbox
// it starts, presents the toolbox's ticket itself, and starts the toolbox
// from the MCP config the way the real agent does (which must work).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
)

// standinDirEnv names where the stand-in agent writes its report; the
// stand-in runs when this binary is started as "claude" or "codex" with it
// set.
const standinDirEnv = "E2E_STANDIN_DIR"

func init() {
	// Runs before TestMain: the runner starts this binary as its agent.
	kind := filepath.Base(os.Args[0])
	if dir := os.Getenv(standinDirEnv); dir != "" && (kind == "claude" || kind == "codex") {
		os.Exit(runStandin(kind, dir))
	}
}

// standinReport is what the stand-in agent found.
type standinReport struct {
	Env   []string          `json:"env"`
	Argv  []string          `json:"argv"`
	Files map[string]string `json:"files"` // every file named on the command line
	// Proc holds /proc/<pid>/{environ,cmdline,mem} of the runner and of
	// the toolbox: what was read, or the error.
	Proc map[string]string `json:"proc"`
	// Toolbox is the answer of the toolbox's send tool (or the error).
	Toolbox string `json:"toolbox"`
	// OwnRedeem is what presenting the toolbox's ticket itself gave.
	OwnRedeem string `json:"ownRedeem"`
	// Dir is the runner's private directory (the relay socket's).
	Dir string `json:"dir"`
}

func runStandin(kind, dir string) int {
	rep := standinReport{Env: os.Environ(), Argv: os.Args, Files: map[string]string{}, Proc: map[string]string{}}
	rep.Dir = filepath.Dir(os.Getenv(relay.Env))
	if kind == "codex" {
		go standinCodexServer()
	}
	// Every file the command line names (as an argument or a --flag=value),
	// the agent's own binary aside.
	for _, a := range os.Args[1:] {
		for _, cand := range []string{a, a[strings.IndexByte(a, '=')+1:]} {
			if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() {
				b, err := os.ReadFile(cand)
				if err != nil {
					rep.Files[cand] = "error: " + err.Error()
				} else {
					rep.Files[cand] = string(b)
				}
			}
		}
	}
	command, args, env, ticket, err := standinToolbox(kind)
	if err != nil {
		rep.Toolbox = "error: " + err.Error()
	} else {
		rep.Toolbox = standinUseToolbox(command, args, env, &rep)
	}
	readProc("runner", os.Getppid(), &rep)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if tok, err := relay.Redeem(ctx, os.Getenv(relay.Env), ticket); err != nil {
		rep.OwnRedeem = "error: " + err.Error()
	} else {
		rep.OwnRedeem = "got " + tok
	}
	b, _ := json.Marshal(rep)
	_ = os.WriteFile(filepath.Join(dir, "report.tmp"), b, 0o600)
	_ = os.Rename(filepath.Join(dir, "report.tmp"), filepath.Join(dir, "report.json"))
	if kind == "claude" {
		// The runner's turns come on stdin; the stand-in leaves them be.
		_, _ = bufio.NewReader(os.Stdin).WriteTo(discard{})
		return 0
	}
	select {} // codex: the JSON-RPC goroutine exits at the end of stdin
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// standinToolbox reads the toolbox's command from what the runner gave
// the agent, as the real agent does: Claude Code's MCP config file, or
// Codex's -c mcp_servers.svc.* flags and the variables they name.
func standinToolbox(kind string) (command string, args, env []string, ticket string, err error) {
	if kind == "claude" {
		path := ""
		for i, a := range os.Args {
			if a == "--mcp-config" && i+1 < len(os.Args) {
				path = os.Args[i+1]
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", nil, nil, "", err
		}
		var cfg struct {
			MCPServers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return "", nil, nil, "", err
		}
		s := cfg.MCPServers["svc"]
		env = os.Environ()
		for k, v := range s.Env {
			env = append(env, k+"="+v)
		}
		return s.Command, s.Args, env, s.Env[relay.TicketEnv], nil
	}
	var cfg struct {
		Command string   `toml:"command"`
		Args    []string `toml:"args"`
		EnvVars []string `toml:"env_vars"`
	}
	for i, a := range os.Args {
		if a != "-c" || i+1 >= len(os.Args) {
			continue
		}
		k, v, _ := strings.Cut(os.Args[i+1], "=")
		key, ok := strings.CutPrefix(k, "mcp_servers.svc.")
		if !ok {
			continue
		}
		if _, err := toml.Decode(key+" = "+v, &cfg); err != nil {
			return "", nil, nil, "", err
		}
	}
	// Codex gives an MCP server a short list of its own variables and
	// those env_vars names.
	for _, k := range append([]string{"PATH", "HOME", "TMPDIR", "GORACE"}, cfg.EnvVars...) {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return cfg.Command, cfg.Args, env, os.Getenv(relay.TicketEnv), nil
}

// standinUseToolbox starts the toolbox, reads its /proc files while it
// runs, and sends alice a message through it.
func standinUseToolbox(command string, args, env []string, rep *standinReport) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(command, args...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "standin", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "send", Arguments: map[string]any{"to": "alice", "body": "STANDIN " + filepath.Base(os.Args[0])}})
	readProc("toolbox", cmd.Process.Pid, rep)
	if err != nil {
		return "error: " + err.Error()
	}
	var out strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			out.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "error: " + out.String()
	}
	return out.String()
}

// readProc reads another process's /proc files as the agent can.
func readProc(who string, pid int, rep *standinReport) {
	for _, f := range []string{"environ", "cmdline", "mem"} {
		key := fmt.Sprintf("%s/%s", who, f)
		fh, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			rep.Proc[key] = "error: " + err.Error()
			continue
		}
		b := make([]byte, 1<<20)
		n, err := fh.Read(b)
		fh.Close()
		if err != nil && n == 0 {
			rep.Proc[key] = "error: " + err.Error()
			continue
		}
		rep.Proc[key] = string(b[:n])
	}
}

// standinCodexServer answers the runner's app-server calls enough for it
// to go on: every request gets a result with a thread.
func standinCodexServer() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     *int64 `json:"id"`
			Method string `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		b, _ := json.Marshal(map[string]any{"id": *m.ID, "result": map[string]any{"thread": map[string]any{"id": "standin"}}})
		fmt.Println(string(b))
	}
	os.Exit(0)
}

// nobody is the ordinary user a root test runs the runner as.
const nobody = 65534

// ordinaryUser returns a directory an ordinary user can use, holding hard
// links of the svc binary (svc, the runner) and of this test binary
// (svc.test, the stand-in agent) (their build directories are root's
// alone), and a function that hands everything under it to that user
// (nobody when the test runs as root; nothing to do otherwise).
func ordinaryUser(t *testing.T) (string, func()) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	base, err := os.MkdirTemp("", "svc-e2e-user-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	binaries := map[string]string{"svc": svcPath(t), "svc.test": exe}
	for name, src := range binaries {
		if err := os.Link(src, filepath.Join(base, name)); err != nil {
			b, rerr := os.ReadFile(src)
			require.NoError(t, rerr)
			require.NoError(t, os.WriteFile(filepath.Join(base, name), b, 0o755))
		}
	}
	return base, func() {
		if os.Geteuid() != 0 {
			return
		}
		require.NoError(t, filepath.WalkDir(base, func(path string, de os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if _, binary := binaries[de.Name()]; binary && filepath.Dir(path) == base {
				return nil
			}
			return os.Lchown(path, nobody, nobody)
		}))
	}
}

func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(d, 0o700))
	return d
}

// tokenShape is a bearer svc mints: svc_ and 43 base64url characters.
var tokenShape = regexp.MustCompile(`svc_[A-Za-z0-9_-]{43}`)

func TestRunnerAgentFindsNoToken(t *testing.T) {
	for _, kind := range []string{"claude", "codex"} {
		t.Run(kind, func(t *testing.T) {
			p := mustStartSvc(t, procOpts{})
			d := restDriver{p}
			admin := p.adminToken(t)
			agentTok := createMember(t, d, bearer(admin), "agent")
			aliceTok := createMember(t, d, bearer(admin), "alice")
			mustCall(t, d, bearer(admin), "CreateSecret", obj{"slug": "db", "envName": "E2E_SECRET"})
			mustCall(t, d, bearer(admin), "SetSecretValue", obj{"slug": "db", "value": "hunter2-standin"})
			mustCall(t, d, bearer(admin), "AddSecretBinding", obj{"slug": "db", "member": "agent"})

			// The runner runs as an ordinary user (root reads every
			// process's memory and /proc files, whatever the process
			// does): when the test runs as root, as nobody.
			base, chown := ordinaryUser(t)
			bin := filepath.Join(base, kind)
			require.NoError(t, os.Symlink(filepath.Join(base, "svc.test"), bin))
			dir, tmp, home := mkdir(t, base, "report"), mkdir(t, base, "tmp"), mkdir(t, base, "home")
			cfg := filepath.Join(home, ".config")
			env := []string{standinDirEnv + "=" + dir, "TMPDIR=" + tmp, "CODEX_HOME=" + mkdir(t, home, "codex"), "HOME=" + home, "XDG_CONFIG_HOME=" + cfg}
			if kind == "claude" {
				// The token in the user's token cache, where `svc login`
				// puts it (not a file on the agent's command line).
				cache, err := client.CachePath(func(k string) string { return map[string]string{"XDG_CONFIG_HOME": cfg, "HOME": home}[k] })
				require.NoError(t, err)
				require.NoError(t, client.SaveToken(cache, p.base, agentTok, time.Now()))
			} else {
				// The token in the runner's environment, and in a
				// variable of the user's the agent would inherit.
				env = append(env, "SVC_TOKEN="+agentTok, "MY_SVC_CREDS=token="+agentTok)
			}
			chown()
			cmd := childCommand(t, []string{"runner", "--url", p.base, "--", bin}, env)
			cmd.Path, cmd.Dir = filepath.Join(base, "svc"), home
			if os.Geteuid() == 0 {
				cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
			}
			r := &clientChild{cmd: cmd, stdout: &lineBuffer{}, stderr: &lineBuffer{}, done: make(chan struct{})}
			cmd.Stdout, cmd.Stderr, cmd.Stdin = r.stdout, r.stderr, strings.NewReader("")
			require.NoError(t, cmd.Start())
			go func() { _ = cmd.Wait(); close(r.done) }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-r.done
			})
			waitFor(t, r, r.stderr, regexp.MustCompile(`attached to the stream of agent`))

			var raw []byte
			require.Eventually(t, func() bool {
				var err error
				raw, err = os.ReadFile(filepath.Join(dir, "report.json"))
				return err == nil
			}, runTimeout, 20*time.Millisecond, "no report from the stand-in; runner log:\n%s", r.stderr)
			var rep standinReport
			require.NoError(t, json.Unmarshal(raw, &rep))

			// The toolbox works: its credential came from the runner.
			require.NotContains(t, rep.Toolbox, "error", "the toolbox under the runner: %s\nrunner log:\n%s", rep.Toolbox, r.stderr)
			hist := p.do(t, http.MethodGet, "/history?with=agent&limit=5", nil, withBearer(aliceTok))
			require.Equal(t, http.StatusOK, hist.status, "%s", hist.raw)
			require.Contains(t, string(hist.raw), "STANDIN "+kind, "the toolbox's message reached alice")

			// Nothing the agent can read holds the token.
			require.NotContains(t, string(raw), agentTok)
			require.Empty(t, tokenShape.FindAllString(string(raw), -1))
			require.Contains(t, strings.Join(rep.Env, "\n"), "E2E_SECRET=hunter2-standin", "the member's secrets are the agent's")
			if kind == "codex" {
				waitFor(t, r, r.stderr, regexp.MustCompile(`left out of the agent's environment, they hold the runner's token: MY_SVC_CREDS`))
			}
			if kind == "claude" {
				require.NotEmpty(t, rep.Files, "the MCP config and settings are named on the command line: %v", rep.Argv)
			}
			// The runner and the toolbox hold the bearer and are
			// undumpable: their environment and memory are closed to
			// the agent, a process of the same user.
			for _, f := range []string{"runner/environ", "runner/mem", "toolbox/environ", "toolbox/mem"} {
				require.Contains(t, rep.Proc[f], "permission denied", "%s readable by the agent: %.300q", f, rep.Proc[f])
			}
			// The ticket works once, and the toolbox used it.
			require.Contains(t, rep.OwnRedeem, "refused", rep.OwnRedeem)
			waitFor(t, r, r.stderr, regexp.MustCompile(`refused a toolbox ticket on the relay socket`))

			// kill -9 of the runner (its agent dies with it): what is
			// left on disk holds no token.
			require.NoError(t, r.cmd.Process.Kill())
			<-r.done
			require.NotEmpty(t, rep.Dir)
			files := 0
			require.NoError(t, filepath.WalkDir(tmp, func(path string, de os.DirEntry, err error) error {
				if err != nil || !de.Type().IsRegular() {
					return err
				}
				files++
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NotContains(t, string(b), agentTok, "%s", path)
				require.Empty(t, tokenShape.FindAllString(string(b), -1), "%s", path)
				return nil
			}))
			if kind == "claude" {
				require.NotZero(t, files, "the runner's private files are in TMPDIR")
			}
			require.NotContains(t, r.stderr.String(), agentTok)
		})
	}
}
