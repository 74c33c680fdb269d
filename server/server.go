package server

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/egress"
	"svc/server/hub"
	"svc/server/kek"
	"svc/store"
)

// Deps are the required dependencies of a Server.
type Deps struct {
	Store    store.Store
	Activity store.ActivityStore
	Team     *Team
	// KEK seals write-only secrets; nil means none is active and such writes
	// answer 503.
	KEK     *kek.KEK
	Version string
}

// Option sets an optional setting.
type Option func(*Server)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithNow sets the clock.
func WithNow(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithWebPush sets how browser push is sent: the VAPID subject and whether
// plain-http push endpoints are accepted (for a local relay or tests).
func WithWebPush(subject string, allowHTTP bool) Option {
	return func(s *Server) { s.pushSubject, s.pushAllowHTTP = subject, allowHTTP }
}

// WithEgress sets which non-public addresses the broker's outgoing requests
// may reach (web push endpoints and, later, tool upstreams); the default is
// public addresses only.
func WithEgress(p egress.Policy) Option { return func(s *Server) { s.egress = p } }

// Server owns the gRPC server and the services registered on it.
type Server struct {
	grpc       *grpc.Server
	authn      *auth.Authenticator
	broker     *Broker
	objectives *Objectives
	fs         *Fs
	files      fsConfig
	log        *slog.Logger
	now        func() time.Time

	pushSubject   string
	pushAllowHTTP bool
	egress        egress.Policy
}

// New builds the gRPC server with the interceptor chain, every service and
// reflection.
func New(d Deps, opts ...Option) *Server {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	s.authn = auth.NewAuthenticator(d.Store, d.Store, d.Team, s.now, s.log)
	c := &chain{authn: s.authn, log: s.log}
	s.grpc = grpc.NewServer(
		grpc.ChainUnaryInterceptor(c.unary),
		grpc.ChainStreamInterceptor(c.stream),
	)
	s.broker = &Broker{
		store: d.Store, team: d.Team, kek: d.KEK, version: d.Version,
		limiter: auth.NewFailureLimiter(s.now), now: s.now, log: s.log,
		lastStep: map[string]int64{},
		presence: newPresence(s.now),
	}
	s.broker.hub = hub.New(hub.WithOnChange(s.broker.presence.touch))
	s.broker.msgs = newMessenger(d.Store, s.broker.hub, s.now, s.log)
	s.broker.push = newPushNotifier(d.Store, d.Team, d.KEK, s.pushSubject, s.pushAllowHTTP, s.egress, s.log)
	s.broker.msgs.afterPublish = s.broker.push.notify
	apiv1.RegisterBrokerServer(s.grpc, s.broker)
	s.objectives = &Objectives{b: s.broker}
	if d.Activity != nil {
		s.objectives.markers = newMarkers(d.Activity, s.log)
	}
	apiv1.RegisterObjectivesServer(s.grpc, s.objectives)
	s.fs = newFs(d, s.files, s.log)
	apiv1.RegisterFsServer(s.grpc, s.fs)
	if s.fs.Enabled() {
		s.broker.purgeBlobs = s.fs.purge
	}
	s.fs.commit = func(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
		return s.broker.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
			return nil, fn(ctx, tx)
		}, nil, nil).err
	}
	apiv1.RegisterNotificationsServer(s.grpc, &Notifications{})
	apiv1.RegisterEnrollmentServer(s.grpc, &Enrollment{})
	reflection.Register(s.grpc)
	return s
}

// Run runs the message committer, the activity marker writer and the
// browser push workers until ctx ends. Pushes wait for it: start it before
// serving, and stop it only once the listeners have drained.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.broker.msgs.run(ctx) }()
	go func() { defer wg.Done(); s.broker.push.run(ctx) }()
	if m := s.objectives.markers; m != nil {
		wg.Add(1)
		go func() { defer wg.Done(); m.run(ctx) }()
	}
	wg.Wait()
	return nil
}

// CloseStreams ends every live stream (SSE and gRPC) and refuses new ones,
// so a shutdown never waits on a subscriber.
func (s *Server) CloseStreams() { s.broker.hub.Close() }

// Broker returns the Broker service, for the hand-written HTTP handlers.
func (s *Server) Broker() *Broker { return s.broker }

// GRPC returns the gRPC server.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Authenticator returns the authenticator the interceptors use, for the
// hand-written HTTP handlers.
func (s *Server) Authenticator() *auth.Authenticator { return s.authn }

// Notifications implements apiv1.NotificationsServer; its methods arrive
// with the hooks issue.
type Notifications struct {
	apiv1.UnimplementedNotificationsServer
}

// Enrollment implements apiv1.EnrollmentServer; its methods arrive with the
// enrollment issue.
type Enrollment struct {
	apiv1.UnimplementedEnrollmentServer
}

var (
	_ apiv1.NotificationsServer = (*Notifications)(nil)
	_ apiv1.EnrollmentServer    = (*Enrollment)(nil)
)
