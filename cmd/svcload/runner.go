package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The runner group: how long a teammate's message takes to become a turn on
// the agent's stdin under `svc runner`, and what an idle runner costs.
// svcload starts `svc runner --agent plain` for a fresh member with itself
// as the agent (stubAgentEnv switches it into stubAgent): the stub stamps
// each turn line the moment it reads it, reports the turn's start and end to
// the runner as hook events (as a real agent's hooks would, so the runner
// sees it go idle again), then tells svcload the message id and the stamp
// over a unix socket. The pushes go one at a time, each after the previous
// turn has ended, so every figure is that of an idle agent being woken.
const (
	agentMember   = "agent"
	agentTeammate = "teammate"
	// stubAgentEnv names svcload's receipt socket; set, svcload is the
	// stub agent instead of the load generator.
	stubAgentEnv = "SVCLOAD_STUB_AGENT"
	runnerWarmup = 10
	// idleWindow is how long the idle runner is watched for its CPU use.
	idleWindow = 10 * time.Second
)

func (p plan) runnerMessages() int {
	if p.name == "quick" {
		return 50
	}
	return 200
}

// receipt is one turn the stub agent read.
type receipt struct {
	id string
	at int64 // unix ns when the stub read the line
}

func (lg *loadgen) runner(ctx context.Context) error {
	for _, m := range []string{agentMember, agentTeammate} {
		if err := lg.createMember(ctx, m); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "svcload-runner-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "receipts.sock"))
	if err != nil {
		return err
	}
	defer ln.Close()
	receipts := make(chan receipt, 16)
	go acceptReceipts(ln, receipts)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(lg.b.svcPath, "runner", "--url", lg.base, "--token", lg.tokens[agentMember],
		"--agent", "plain", "--state-dir", filepath.Join(dir, "state"), "--", self)
	cmd.Env = append(brokerEnv(), stubAgentEnv+"="+ln.Addr().String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logMu sync.Mutex
	var tail []string
	logLine := func(line string) {
		logMu.Lock()
		defer logMu.Unlock()
		tail = append(tail, line)
		if len(tail) > tailLines {
			tail = tail[1:]
		}
	}
	cmd.Stdout, cmd.Stderr = &lineWriter{onLine: logLine}, &lineWriter{onLine: logLine}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start runner: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	fail := func(err error) error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		logMu.Lock()
		defer logMu.Unlock()
		return fmt.Errorf("runner group: %w; runner log:\n%s", err, strings.Join(tail, "\n"))
	}
	if err := lg.awaitConnected(ctx, agentMember, done); err != nil {
		return fail(err)
	}

	n := lg.runnerMessages()
	lats := make([]time.Duration, 0, n)
	cpu := lg.startCPU()
	runnerCPU0, t0 := cpuTime(cmd.Process.Pid), time.Now()
	for i := range runnerWarmup + n {
		lat, err := lg.wake(ctx, i, receipts, done)
		if err != nil {
			return fail(err)
		}
		if i >= runnerWarmup {
			lats = append(lats, lat)
		}
	}
	busy := (cpuTime(cmd.Process.Pid) - runnerCPU0).Seconds() / time.Since(t0).Seconds()
	cpuUse := cpu()
	slices.Sort(lats)
	lg.rows = append(lg.rows, row{
		name:   fmt.Sprintf("runner: teammate push → agent stdin, %d messages, one at a time", n),
		result: pctls(lats) + fmt.Sprintf("; runner busy %.2f cores", busy),
		cpu:    cpuUse,
	})

	// Idle: nothing to deliver, the stream open, activity idle.
	if err := sleep(ctx, 2*time.Second); err != nil {
		return fail(err)
	}
	window := idleWindow
	if lg.name == "quick" {
		window = 3 * time.Second
	}
	c0, w0 := cpuTime(cmd.Process.Pid), time.Now()
	if err := sleep(ctx, window); err != nil {
		return fail(err)
	}
	idle := (cpuTime(cmd.Process.Pid) - c0).Seconds() / time.Since(w0).Seconds()
	rss, err := rssKiB(cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	lg.rows = append(lg.rows, row{
		name:   fmt.Sprintf("runner: idle for %s", window),
		result: fmt.Sprintf("CPU %.2f%% of a core, RSS %.1f MiB", idle*100, float64(rss)/1024),
	})

	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("runner exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		return fail(errors.New("runner still running 15 s after SIGTERM"))
	}
	return nil
}

// awaitConnected waits until the roster counts a connection of member.
func (lg *loadgen) awaitConnected(ctx context.Context, member string, done <-chan error) error {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		var roster struct {
			Connected []struct {
				Name      string `json:"name"`
				Connected int    `json:"connected"`
			} `json:"connected"`
		}
		if err := lg.get(ctx, "/roster", lg.tokens["admin"], &roster); err != nil {
			return err
		}
		for _, c := range roster.Connected {
			if c.Name == member && c.Connected > 0 {
				return nil
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("runner exited before attaching: %v", err)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not connected within %s", member, readyTimeout)
}

// wake pushes message i from the teammate to the agent and waits for the
// stub's receipt of it; the latency runs from just before the push to the
// stub reading the turn.
func (lg *loadgen) wake(ctx context.Context, i int, receipts <-chan receipt, done <-chan error) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"to": agentMember, "body": "wake " + strconv.Itoa(i)})
	var out struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	t0 := time.Now().UnixNano()
	if err := lg.do(ctx, "/push", lg.tokens[agentTeammate], body, &out); err != nil {
		return 0, err
	}
	timeout := time.After(callTimeout)
	for {
		select {
		case r := <-receipts:
			if r.id != out.Message.ID {
				return 0, fmt.Errorf("message %d: the agent got turn %q, want %q (out of order or replayed)", i, r.id, out.Message.ID)
			}
			return time.Duration(r.at - t0), nil
		case err := <-done:
			return 0, fmt.Errorf("runner exited: %v", err)
		case <-timeout:
			return 0, fmt.Errorf("message %d (%s) not on the agent's stdin within %s", i, out.Message.ID, callTimeout)
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

func acceptReceipts(ln net.Listener, out chan<- receipt) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				id, at, ok := strings.Cut(sc.Text(), " ")
				ns, err := strconv.ParseInt(at, 10, 64)
				if ok && err == nil {
					out <- receipt{id: id, at: ns}
				}
			}
		}()
	}
}

// rssKiB reads a process's resident set size in KiB.
func rssKiB(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// stubAgent is the agent of the runner group: it reads the plain adapter's
// turn lines on stdin, stamps each as it arrives, reports the turn's start
// and end to the runner over its relay socket (the hooks a real agent
// would run), then sends "<id> <stamp>" to svcload. It returns the exit
// code.
func stubAgent(receiptsPath string) int {
	out, err := net.Dial("unix", receiptsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub agent:", err)
		return 1
	}
	defer out.Close()
	relay := os.Getenv("SVC_RUNNER_SOCKET")
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		at := time.Now().UnixNano()
		var turn struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &turn) != nil {
			fmt.Fprintf(os.Stderr, "stub agent: not a turn line: %.200q\n", sc.Text())
			continue
		}
		for _, ev := range []string{"UserPromptSubmit", "Stop"} {
			if err := hook(relay, ev); err != nil {
				fmt.Fprintln(os.Stderr, "stub agent: hook:", err)
				return 1
			}
		}
		if turn.ID == "" {
			continue // the runner's own re-brief: not a message of ours
		}
		if _, err := fmt.Fprintf(out, "%s %d\n", turn.ID, at); err != nil {
			return 1
		}
	}
	return 0
}

// hook reports one Claude Code shaped hook event to the runner's relay
// socket and waits for it to be applied (see cmd/internal/relay).
func hook(socket, event string) error {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, `{"role":"hook","payload":{"hook_event_name":%q}}`+"\n", event); err != nil {
		return err
	}
	ack, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.Contains(ack, `"ok":true`) {
		return fmt.Errorf("runner answered %q", ack)
	}
	return nil
}
