package webpushtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxBody is the largest push message body a push service must accept (RFC 8291 §4).
const maxBody = 4096

// Delivery is one request the Service received.
type Delivery struct {
	// Path is the request path, which names the subscriber.
	Path string
	// Plaintext is the decrypted payload; nil when Err is set.
	Plaintext []byte
	// VAPIDKey is the k= parameter of the Authorization header (unpadded base64url).
	VAPIDKey string
	// Subject is the VAPID JWT "sub" claim.
	Subject string
	// TTL is the TTL header in seconds.
	TTL int
	// Err is the first failed check, if any.
	Err error
}

// Service is a fake push service. It answers 201 to a message that passes every check,
// 400 to one that fails, 404 for an unknown path, or the status set with SetStatus.
type Service struct {
	srv *httptest.Server

	mu      sync.Mutex
	subs    map[string]*Subscriber
	status  map[string]int
	got     []Delivery
	changed chan struct{} // closed and replaced on every delivery
}

// NewService starts a Service on a 127.0.0.1 listener that is closed in t.Cleanup.
func NewService(t testing.TB) *Service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("webpushtest: listen: %v", err)
	}
	s := &Service{
		subs:    map[string]*Subscriber{},
		status:  map[string]int{},
		changed: make(chan struct{}),
	}
	s.srv = httptest.NewUnstartedServer(s)
	_ = s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// URL returns the base URL, such as http://127.0.0.1:port, which is also the VAPID audience.
func (s *Service) URL() string { return s.srv.URL }

// NewSubscriber registers a subscriber with fresh keys whose endpoint is URL()+path.
func (s *Service) NewSubscriber(path string) *Subscriber {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	sub := newSubscriber(s.srv.URL + path)
	s.mu.Lock()
	s.subs[path] = sub
	s.mu.Unlock()
	return sub
}

// SetStatus makes path answer code after recording the delivery, such as 410 for an expired
// subscription; code 0 restores normal answers.
func (s *Service) SetStatus(path string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		delete(s.status, path)
		return
	}
	s.status[path] = code
}

// Received returns a copy of the deliveries so far, in arrival order.
func (s *Service) Received() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.got...)
}

// Wait blocks until at least n deliveries have arrived and returns them, or returns ctx's error.
func (s *Service) Wait(ctx context.Context, n int) ([]Delivery, error) {
	for {
		s.mu.Lock()
		if len(s.got) >= n {
			got := append([]Delivery(nil), s.got...)
			s.mu.Unlock()
			return got, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return s.Received(), fmt.Errorf("webpushtest: waiting for %d deliveries: %w", n, ctx.Err())
		case <-ch:
		}
	}
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16*maxBody))
	d := Delivery{Path: r.URL.Path}
	s.mu.Lock()
	sub := s.subs[d.Path]
	fixed := s.status[d.Path]
	s.mu.Unlock()

	code := http.StatusCreated
	switch {
	case err != nil:
		d.Err = fmt.Errorf("read body: %w", err)
		code = http.StatusBadRequest
	case sub == nil:
		d.Err = errors.New("no subscriber at this path")
		code = http.StatusNotFound
	default:
		if d.Err = s.check(r, body, sub, &d); d.Err != nil {
			code = http.StatusBadRequest
		}
	}
	if fixed != 0 {
		code = fixed
	}

	s.mu.Lock()
	s.got = append(s.got, d)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	w.WriteHeader(code)
}

// check applies the push service's checks and fills d from the request.
func (s *Service) check(r *http.Request, body []byte, sub *Subscriber, d *Delivery) error {
	if r.Method != http.MethodPost {
		return fmt.Errorf("method %s, want POST", r.Method)
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return fmt.Errorf("content-encoding %q, want aes128gcm", ce)
	}
	ttl, err := strconv.Atoi(r.Header.Get("TTL"))
	if err != nil || ttl < 0 {
		return fmt.Errorf("ttl header %q is not a non-negative integer", r.Header.Get("TTL"))
	}
	d.TTL = ttl
	d.VAPIDKey, d.Subject, err = verifyVAPID(r.Header.Get("Authorization"), s.srv.URL, time.Now())
	if err != nil {
		return fmt.Errorf("vapid: %w", err)
	}
	if len(body) > maxBody {
		return fmt.Errorf("body is %d bytes, more than %d", len(body), maxBody)
	}
	pt, err := sub.Decrypt(body)
	if err != nil {
		return fmt.Errorf("decrypt: %w", err)
	}
	d.Plaintext = pt
	return nil
}

// randomBytes returns n bytes from crypto/rand, which never fails.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
