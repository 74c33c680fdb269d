package natstest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// readyWithin bounds how long a starting server may take to accept
// clients; it is far above what one takes on a loaded 2-core machine.
const readyWithin = 10 * time.Second

// Server is one embedded nats-server. Restart keeps its address, so
// clients reconnect to it as they would to a restarted NATS.
type Server struct {
	mu   sync.Mutex
	srv  *natsserver.Server
	port int
	opts Options
}

// Options tune the embedded server; the zero value is a plain server.
type Options struct {
	// MaxPayload, when > 0, is the server's max_payload in bytes.
	MaxPayload int32
}

// Start runs a server for tb and stops it in tb's cleanup.
func Start(tb testing.TB, opts ...Options) *Server {
	tb.Helper()
	s := &Server{}
	if len(opts) > 0 {
		s.opts = opts[0]
	}
	if err := s.start(-1); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// start runs a server on port (-1: a free one) and records its port.
func (s *Server) start(port int) error {
	o := &natsserver.Options{
		Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		MaxPayload: s.opts.MaxPayload,
		// No HTTP monitor, no cluster, no JetStream: core NATS only.
	}
	srv, err := natsserver.NewServer(o)
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyWithin) {
		srv.Shutdown()
		return fmt.Errorf("nats-server not ready within %v", readyWithin)
	}
	addr, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		return fmt.Errorf("nats-server address %v is not TCP", srv.Addr())
	}
	s.mu.Lock()
	s.srv, s.port = srv, addr.Port
	s.mu.Unlock()
	return nil
}

// URL is the nats:// URL clients connect to; it stays the same across
// Restart.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("nats://127.0.0.1:%d", s.port)
}

// Stop shuts the server down and waits until it has; clients see their
// connection drop and start reconnecting. Safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server and starts a new one on the same port: what
// was in flight is lost, as with a NATS that died and came back.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.Resume(tb)
}

// Resume starts the server again on its port after Stop.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	port := s.port
	s.mu.Unlock()
	// The port was ours a moment ago; another process may take it in
	// between only on a machine far busier than a test's.
	var err error
	for range 50 {
		if err = s.start(port); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("natstest: restart on port %d: %v", port, err)
}
