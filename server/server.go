package server

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	// OTLP exporters compress with gzip, which every OTLP server must take.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	apiv1 "svc/gen/svc/v1"
	"svc/server/activity"
	"svc/server/auth"
	"svc/server/connguard"
	"svc/server/egress"
	"svc/server/federation"
	"svc/server/hub"
	"svc/server/kek"
	"svc/server/notify"
	"svc/server/pricing"
	"svc/server/secrets"
	"svc/server/toolcall"
	"svc/server/toolsources"
	"svc/server/vfs"
	"svc/store"
)

// gRPC connection bounds.
const (
	// maxConcurrentStreams bounds the calls one connection carries at
	// once: one client cannot open unbounded streams over one connection
	// (a member's live streams are bounded separately).
	maxConcurrentStreams = 1024
	// grpcIdleTimeout closes a gRPC connection that has carried no call
	// for this long; clients reconnect on their next call.
	grpcIdleTimeout = 5 * time.Minute
	// grpcPingAfter and grpcPingTimeout: a connection silent this long is
	// pinged, and closed when the ping is not answered in time, so a peer
	// that vanished (its host gone, a network cut) is noticed and its
	// streams end, rather than when TCP gives up hours later.
	grpcPingAfter   = 30 * time.Second
	grpcPingTimeout = 10 * time.Second
	// grpcMinClientPing is how often a client may ping to keep its
	// connection alive (through NAT), streams or not; more often is a
	// misbehaving client, and its connection is closed.
	grpcMinClientPing = 10 * time.Second
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
type Option func(*options)

type options struct {
	log *slog.Logger
	now func() time.Time
	// storeCommits, when set, are the store COMMIT timers /metrics shows.
	storeCommits  *StoreCommits
	pushSubject   string
	pushAllowHTTP bool
	egress        egress.Policy
	blobs         *vfs.Blobs
	maxFileSize   int64
	quotaBytes    int64
	guard         *connguard.Guard
	maxStreams    int
	otlpFlush     time.Duration
	publicURL     string
	jwt           *federation.Config
	jwtOverlay    string
	// jwtMaxLifetime is federation.Options.MaxLifetime.
	jwtMaxLifetime time.Duration
	prices         *pricing.Table
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithNow sets the clock.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithWebPush sets how browser push is sent: the VAPID subject and whether
// plain-http push endpoints are accepted (for a local relay or tests).
func WithWebPush(subject string, allowHTTP bool) Option {
	return func(o *options) { o.pushSubject, o.pushAllowHTTP = subject, allowHTTP }
}

// WithEgress sets which non-public addresses the broker's outgoing requests
// may reach (web push endpoints and, later, tool upstreams); the default is
// public addresses only.
func WithEgress(p egress.Policy) Option { return func(o *options) { o.egress = p } }

// WithConnGuard counts connections out of g once a call on them
// authenticates (g bounds the unauthenticated ones per client address).
func WithConnGuard(g *connguard.Guard) Option { return func(o *options) { o.guard = g } }

// WithMaxStreamsPerMember bounds the live streams (SSE and gRPC together)
// one member may hold; n <= 0 is unbounded.
func WithMaxStreamsPerMember(n int) Option { return func(o *options) { o.maxStreams = n } }

// WithOTLPFlushAfter sets how long a telemetry record waits for its partner
// before it is stored alone; the default is activity.DefaultOTLPFlushAfter.
func WithOTLPFlushAfter(d time.Duration) Option { return func(o *options) { o.otlpFlush = d } }

// WithPublicURL sets the broker's public base URL (scheme and host, no
// path), used in enrollment verification URIs; without it they name the
// scheme and host the client reached.
func WithPublicURL(u string) Option { return func(o *options) { o.publicURL = u } }

// WithFiles enables the virtual filesystem: content lives in blobs, one
// file holds at most maxFileSize bytes and one member's home at most
// quotaBytes (<= 0: unlimited). Without it every filesystem call answers
// 404.
func WithFiles(blobs *vfs.Blobs, maxFileSize, quotaBytes int64) Option {
	return func(o *options) { o.blobs, o.maxFileSize, o.quotaBytes = blobs, maxFileSize, quotaBytes }
}

// WithFederation sets the jwt block the broker starts with (nil: JWTs are
// refused until a bind) and the overlay file a bind writes (empty: binds
// answer 503).
func WithFederation(jwt *federation.Config, overlayPath string) Option {
	return func(o *options) { o.jwt, o.jwtOverlay = jwt, overlayPath }
}

// WithJWTMaxLifetime caps how far a federation JWT's exp may lie after
// the moment it is presented; zero keeps federation.DefaultMaxLifetime.
func WithJWTMaxLifetime(d time.Duration) Option {
	return func(o *options) { o.jwtMaxLifetime = d }
}

// WithPrices sets the model price table costs are computed with; the
// default is the table shipped in the binary.
func WithPrices(t *pricing.Table) Option { return func(o *options) { o.prices = t } }

// Server owns the gRPC server, the shared core and the services registered
// on it.
type Server struct {
	grpc  *grpc.Server // network clients
	local *localConn   // the gateway's connection
	authn *auth.Authenticator
	guard *connguard.Guard
	core  *core
	fs    *Fs
	fed   *federationState
	// notify is the inbound-hook capability (its admin API, ingress,
	// the delivery policy and its loop).
	notify *notify.Service
	// secrets and tools are the secrets and tool sources capabilities.
	secrets *secrets.Service
	tools   *toolsources.Service
	// act is the activity capability (the Activity service, OTLP ingest,
	// the activity writer).
	act *activity.Service
	// run are the background loops Run starts: the message committer, the
	// activity writer, the web push workers.
	run []func(ctx context.Context)
}

// New builds the core, every service over it and the gRPC server with the
// interceptor chain and reflection. It is the only place services are
// built and registered.
func New(d Deps, opts ...Option) *Server {
	o := options{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	c := &core{
		store: d.Store, activity: d.Activity, team: d.Team, kek: d.KEK, version: d.Version,
		presence: newPresence(o.now), blobs: o.blobs, maxFileSize: o.maxFileSize, quotaBytes: o.quotaBytes,
		now: o.now, log: o.log, ids: newMemberIDs(d.Team),
		live: &teamLive{hub: hub.New(hub.WithMaxPerMember(o.maxStreams))}, agents: newAgentSet(),
	}
	c.presence.onChange = c.presenceChanged
	if d.Store != nil && d.Team != nil {
		if err := c.ids.load(context.Background(), d.Store); err != nil {
			o.log.Error("deleted members not loaded: their rows show as an unknown deleted member's", "err", err)
		}
		c.adoptMemberIDs(context.Background())
		if err := c.agents.load(context.Background(), d.Store, d.Team.Members()); err != nil {
			o.log.Error("agent marks not loaded: members read as agents once their runner connects again", "err", err)
		}
	}
	c.approvals = newPendingApprovals()
	c.approvals.changed = c.presenceChanged
	c.presence.blocked = c.approvals.blocked
	// (A server with no store is built only by tests of the method table.)
	if d.Store != nil {
		if err := c.loadPendingApprovals(context.Background()); err != nil {
			o.log.Error("pending approvals not loaded: they neither expire nor block presence until decided", "err", err)
		}
	}
	// The registry kit the slug registries (notify, secrets, tool sources)
	// change their entries on; the core itself holds none of them.
	kit := newRegistryKit(c)
	hooked := notify.New(notify.Deps{
		Store: d.Store,
		Commit: notify.Committer{
			Commit: c.commit,
			CommitStored: func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error),
				stored func(ctx context.Context, tx store.Tx, msgs []store.Message) error,
			) error {
				return c.msgs.changeStored(ctx, apply, stored).err
			},
		},
		Members: notify.Members{
			Known:  func(name string) bool { _, ok := c.team.Member(name); return ok },
			Online: func(name string) bool { return c.connected(name) > 0 },
			Busy:   func(name string) (bool, time.Time) { return c.presence.busy(name) },
		},
		Registry: kit, KEK: d.KEK,
		Count: func(status string) {
			if c.metrics != nil {
				c.metrics.hooked(status)
			}
		},
		// Several brokers count the ingress limits in the store too.
		Shared:    notify.SharedLimits{On: c.clustered, Count: c.countShared},
		RateLimit: HookRateLimit,
		MessageID: formatMessageID, Now: o.now, Log: o.log,
	})
	c.hooks = hooked
	// A member's reach changes when it attaches or reports what it does:
	// queued or held hook copies may go now.
	c.presence.onActivity = func(string) { hooked.Poke() }
	c.hub = hub.New(hub.WithOnChange(func(m string) { c.presence.touch(m); hooked.Poke(); c.presenceChanged(m) }), hub.WithMaxPerMember(o.maxStreams))
	c.maxStreams = o.maxStreams
	push := newPushNotifier(d.Store, d.Team, d.KEK, o.pushSubject, o.pushAllowHTTP, o.egress, o.log)
	c.msgs = newMessenger(d.Store, c.hub, o.now, o.log, push.notify)
	if d.Team != nil {
		c.msgs.guard = newLoopGuard(d.Team.LoopGuard(), o.now)
	}
	s := &Server{core: c, notify: hooked, run: []func(context.Context){c.msgs.run, push.run}}
	actHub := hub.New(hub.WithMaxPerMember(o.maxStreams))
	c.metrics = newMetrics(c.hub, actHub, o.storeCommits)
	c.metrics.hookStatuses(notify.Statuses)
	c.msgs.met, push.met = c.metrics, c.metrics
	// Secrets before activity: ingest redaction reads the team's values.
	// A secret change tells the redactors through c.act, set below before
	// any request is served.
	s.secrets = secrets.New(secrets.Deps{Store: d.Store, Registry: kit, Changed: c.secretsChanged, Now: o.now, Log: o.log})
	act := activity.New(activity.Deps{
		Store: d.Activity, Hub: actHub, Streams: activityFeeds{c, actHub},
		Members: activityMembers{c}, Secrets: s.secrets.TeamValues, Objective: c.objectiveForTrace,
		Prices: o.prices, FlushAfter: o.otlpFlush,
		Observe: func(n int, start time.Time) { commitTimer(c.metrics.actBatch, c.metrics.actCommit, n, start) },
		Exported: func(stored, rejected int64) {
			c.metrics.otlpStored.Add(float64(stored))
			c.metrics.otlpRejected.Add(float64(rejected))
		},
		Now: o.now, Log: o.log,
	})
	c.act, s.act = act, act
	s.run = append(s.run, act.Run)

	c.secretValues = s.secrets.MemberValues
	engine := toolsources.NewEngine(toolcall.New(egress.NewClient(egress.Options{Policy: o.egress, Timeout: toolcall.DefaultTimeout}), toolcall.Options{}))
	var record func(ctx context.Context, ev store.ActivityEvent) error
	if c.act.Enabled() {
		record = func(ctx context.Context, ev store.ActivityEvent) error {
			_, err := c.act.Write(ctx, store.ActivityBatch{Events: []store.ActivityEvent{ev}})
			return err
		}
	}
	s.tools = toolsources.New(toolsources.Deps{
		Store: d.Store, Registry: kit, Engine: engine, SecretValues: s.secrets.MemberValues, Record: record,
		Now: o.now, Log: o.log,
	})

	fed := &federationState{
		verifier: federation.New(federation.Options{
			Client: egress.NewClient(egress.Options{Policy: o.egress, Timeout: federation.DefaultFetchTimeout}),
			Now:    o.now, Log: o.log, MaxLifetime: o.jwtMaxLifetime,
		}),
		overlay: o.jwtOverlay,
		client:  egress.NewClient(egress.Options{Policy: o.egress, Timeout: lookupTimeout}),
	}
	fed.verifier.SetConfig(o.jwt)
	s.fed = fed
	s.authn = auth.NewAuthenticator(d.Store, d.Store, d.Team, o.now, o.log, auth.WithJWT(fed.verifier))
	s.guard = o.guard
	if o.guard != nil {
		c.proxies = o.guard.Proxies()
		c.metrics.reg.MustRegister(guardMetrics(o.guard)...)
	}
	ch := &chain{authn: s.authn, guard: o.guard, log: o.log}
	// The services are served twice with the same interceptors: by the
	// gRPC server of clients on the network, whose connections are
	// bounded, and by the gateway's local connection, which carries every
	// REST call in the caller's goroutine (local.go).
	s.grpc = grpc.NewServer(
		grpc.ChainUnaryInterceptor(ch.unary), grpc.ChainStreamInterceptor(ch.stream),
		grpc.MaxConcurrentStreams(maxConcurrentStreams),
		grpc.MaxRecvMsgSize(maxRecvMessage),
		grpc.InTapHandle(newPreauth(s.authn, o.now).handle),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: grpcIdleTimeout, Time: grpcPingAfter, Timeout: grpcPingTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcMinClientPing, PermitWithoutStream: true}),
		// Plaintext as before; the credentials only let a stream close its
		// connection when its client stops reading (streamsend.go).
		grpc.Creds(newConnCreds()),
	)
	s.local = newLocalConn(ch.unary)
	broker, objectives := newBroker(c, push), &Objectives{core: c}
	s.fs = &Fs{core: c}
	enroll := newEnrollment(c, o.publicURL)
	s.run = append(s.run, enroll.run)
	s.run = append(s.run, hooked.Run, c.runApprovalExpiry, c.releaseDeparted)
	for _, g := range []grpc.ServiceRegistrar{s.grpc, s.local} {
		apiv1.RegisterBrokerServer(g, broker)
		apiv1.RegisterObjectivesServer(g, objectives)
		apiv1.RegisterFsServer(g, s.fs)
		apiv1.RegisterActivityServer(g, act)
		apiv1.RegisterSecretsServer(g, s.secrets)
		apiv1.RegisterToolSourcesServer(g, s.tools)
		collogspb.RegisterLogsServiceServer(g, act.OTLPLogs())
		colmetricspb.RegisterMetricsServiceServer(g, activity.OTLPMetrics{})
		apiv1.RegisterNotificationsServer(g, hooked.Admin())
		apiv1.RegisterEnrollmentServer(g, enroll)
		apiv1.RegisterPlatformServer(g, &Platform{core: c, fed: fed})
		apiv1.RegisterApprovalsServer(g, &Approvals{core: c})
	}
	reflection.Register(s.grpc)
	return s
}

// BindLegacyToolCredentials binds each tool credential sealed before
// origins were recorded to the origin its source is configured for now
// (toolsources.Service.BindLegacyCredentials). Call it once at start,
// before Run and before serving; it returns how many it bound.
func (s *Server) BindLegacyToolCredentials(ctx context.Context) (int, error) {
	return s.tools.BindLegacyCredentials(ctx)
}

// Run runs the background loops (the message committer, the activity
// marker writer, the browser push workers) until ctx ends. Pushes wait for
// the committer: start it before serving, and stop it only once the
// listeners have drained.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, run := range s.run {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	wg.Wait()
	return nil
}

// CloseStreams ends every live stream (SSE and gRPC) and refuses new ones,
// so a shutdown never waits on a subscriber.
func (s *Server) CloseStreams() {
	s.core.hub.Close()
	s.act.CloseStreams()
	s.core.live.hub.Close()
}

// Attach opens a feed of the caller's messages for a hand-written stream
// (SSE); see Feed.
func (s *Server) Attach(ctx context.Context, p *auth.Principal, after int64, resume bool) (*Feed, error) {
	f, err := s.core.attach(ctx, p, after, resume)
	return s.core.counted(f, err, streamSSE)
}

// RunnerStream marks f, a feed of p's messages that Attach opened, as the
// stream of p's runner: when p's last runner stream closes, its live
// activity is idle at once.
func (s *Server) RunnerStream(f *Feed, p *auth.Principal) {
	_, _ = s.core.runnerFeed(f, nil, true, p.Member)
}

// AttachActivity opens a feed of member's activity for p, after lastID
// when it is set (see StreamActivity), for the SSE route.
func (s *Server) AttachActivity(ctx context.Context, p *auth.Principal, member, lastID string) (*Feed, error) {
	f, err := s.act.Attach(ctx, p, member, lastID)
	if err != nil {
		return nil, err
	}
	return f.(*Feed), nil
}

// ExportLogs takes one OTLP log export of p, for the OTLP/HTTP route: b is
// the body, encoded as encoding (OTLPProtobuf or OTLPJSON) says.
func (s *Server) ExportLogs(ctx context.Context, p *auth.Principal, encoding string, b []byte) (*collogspb.ExportLogsServiceResponse, error) {
	return s.act.ExportLogs(ctx, p, encoding, b)
}

// UploadGenAI stores one inference upload of p into member's records, for
// the raw-bytes route.
func (s *Server) UploadGenAI(ctx context.Context, p *auth.Principal, member string, body []byte) (*apiv1.UploadGenAiResponse, error) {
	return s.act.UploadGenAi(auth.WithPrincipal(ctx, p), &apiv1.UploadGenAiRequest{Name: member, Body: body})
}

// Notify returns the inbound-hook capability, for the gateway's ingress
// route (POST /hooks/{slug}).
func (s *Server) Notify() *notify.Service { return s.notify }

// Fs returns the filesystem service, for the hand-written byte routes.
func (s *Server) Fs() *Fs { return s.fs }

// ConnGuard returns the connection guard, nil when there is none.
func (s *Server) ConnGuard() *connguard.Guard { return s.guard }

// GRPC returns the gRPC server of network clients.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Local returns the gateway's connection to the services: the same
// services and interceptors as GRPC, called in the caller's goroutine,
// without the bounds of network connections. It serves unary methods only.
func (s *Server) Local() grpc.ClientConnInterface { return s.local }

// Authenticator returns the authenticator the interceptors use, for the
// hand-written HTTP handlers.
func (s *Server) Authenticator() *auth.Authenticator { return s.authn }
