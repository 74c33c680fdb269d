package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	startTimeout = 30 * time.Second
	// stopTimeout exceeds the 10 s within which SIGTERM must end svc (an
	// 8 s drain, then the stores close: docs/DECISIONS.md, Operations), so
	// a kill after it is a broker fault.
	stopTimeout = 15 * time.Second
	tailLines   = 40
)

var (
	errBrokerDied = errors.New("broker exited during the run")
	listeningRE   = regexp.MustCompile(`msg="svc listening" addr=(127\.0\.0\.1:[0-9]+)`)
	adminTokenRE  = regexp.MustCompile(`^admin token: (svc_\S+)$`)
)

// broker is a spawned `svc serve` with its state in a temp dir.
type broker struct {
	svcPath string // the svc binary: the runner group runs `svc runner` too
	pid     int
	addr    string // 127.0.0.1:port
	token   string // the admin token printed at first boot
	dir     string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	wait    error         // cmd.Wait's result, valid once done is closed

	stopping atomic.Bool
	mu       sync.Mutex
	tail     []string // last stderr lines
}

// startBroker spawns svc serve on 127.0.0.1:0 with a file store and waits for
// its admin token and address.
func startBroker(ctx context.Context, svcPath string) (*broker, error) {
	dir, err := os.MkdirTemp("", "svcload-")
	if err != nil {
		return nil, err
	}
	b := &broker{svcPath: svcPath, dir: dir, done: make(chan struct{})}
	b.cmd = exec.Command(svcPath, "serve", "--addr", "127.0.0.1:0",
		"--config-path", b.configPath(), "--db-path", filepath.Join(dir, "svc.db"))
	b.cmd.Env = brokerEnv()
	// Its own process group: a terminal ^C reaches only us, and we stop it.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tokenCh, addrCh := make(chan string, 1), make(chan string, 1)
	first := true
	b.cmd.Stdout = &lineWriter{onLine: func(line string) {
		if first {
			first = false
			if m := adminTokenRE.FindStringSubmatch(line); m != nil {
				tokenCh <- m[1]
			}
		}
	}}
	b.cmd.Stderr = &lineWriter{onLine: func(line string) {
		b.mu.Lock()
		b.tail = append(b.tail, line)
		if len(b.tail) > tailLines {
			b.tail = b.tail[1:]
		}
		b.mu.Unlock()
		if m := listeningRE.FindStringSubmatch(line); m != nil {
			select {
			case addrCh <- m[1]:
			default:
			}
		}
	}}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start broker: %w", err)
	}
	b.pid = b.cmd.Process.Pid
	go func() { b.wait = b.cmd.Wait(); close(b.done) }()

	timeout := time.After(startTimeout)
	for b.token == "" || b.addr == "" {
		select {
		case b.token = <-tokenCh:
		case b.addr = <-addrCh:
		case <-b.done:
			return nil, fmt.Errorf("broker exited before listening (%v); log:\n%s", b.wait, b.stderrTail())
		case <-timeout:
			err = fmt.Errorf("broker gave no admin token and address within %s; log:\n%s", startTimeout, b.stderrTail())
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		if err != nil {
			return nil, errors.Join(err, b.stop())
		}
	}
	return b, nil
}

// brokerEnv is our environment without SVC_* variables, so only our flags
// configure the broker; SVC_PPROF_ADDR passes, to profile the broker under
// load. The broker may reach loopback: the tools group's upstreams listen
// there.
func brokerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") || strings.HasPrefix(kv, "SVC_PPROF_ADDR=") {
			env = append(env, kv)
		}
	}
	return append(env, "SVC_EGRESS_ALLOW=127.0.0.1")
}

// stop sends SIGTERM once and waits for the exit; the state dir is removed
// after a clean exit. It reports an early death, a hang and a non-zero exit.
func (b *broker) stop() error {
	if b.stopping.Swap(true) {
		<-b.done
		return nil
	}
	select {
	case <-b.done:
		return fmt.Errorf("broker had already exited: %v", b.wait)
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(stopTimeout):
		_ = b.cmd.Process.Kill()
		<-b.done
		return fmt.Errorf("broker did not exit within %s of SIGTERM; killed", stopTimeout)
	}
	if b.wait != nil {
		return fmt.Errorf("broker exit after SIGTERM: %w", b.wait)
	}
	return os.RemoveAll(b.dir)
}

// configPath is the broker's config file; first boot writes it.
func (b *broker) configPath() string { return filepath.Join(b.dir, "svc.json") }

func (b *broker) stderrTail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.tail, "\n")
}

// vmRSS reads the broker's resident set size in KiB.
func (b *broker) vmRSS() (int64, error) { return rssKiB(b.pid) }

// lineWriter calls onLine for each complete line written to it. exec copies
// each of a child's streams from one goroutine, so it needs no lock.
type lineWriter struct {
	onLine  func(line string)
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		line, rest, ok := bytes.Cut(w.partial, []byte("\n"))
		if !ok {
			return len(p), nil
		}
		w.onLine(string(line))
		w.partial = rest
	}
}
