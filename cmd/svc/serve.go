package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"svc/gateway"
	"svc/server"
	"svc/server/connguard"
	"svc/server/federation"
	"svc/server/pricing"
	"svc/server/teamconfig"
	"svc/server/vfs"
	"svc/store"
)

// shutdownTimeout bounds the drain on SIGTERM; the process ends within 10 s
// with time left to close the stores (docs/DECISIONS.md, Operations).
const shutdownTimeout = 8 * time.Second

// readHeaderTimeout bounds slow headers. No Read/WriteTimeout: they would cut
// SSE and streams; bodies have their own pace (gateway.withBodyGuard).
const readHeaderTimeout = 10 * time.Second

// idleTimeout closes a keep-alive connection that carries no request for
// this long; a stream in progress is not idle.
const idleTimeout = 90 * time.Second

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeConfig(args, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)
	raiseFileLimit(log)
	// Bind before anything is created: a first run on a taken port fails
	// before it makes the team and prints an admin token for a broker that
	// never started.
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	defer func() { _ = lis.Close() }() // on a failed start; servers close it too
	// A price override that does not read refuses the start before
	// anything is written: a typo must never price every exchange at $0.
	prices, err := pricing.Load(cfg.PricesPath())
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("refusing to start: model prices: %w", err)}
	}
	log.Info("model prices", "models", prices.Len(), "shipped", prices.Date, "override", prices.Override, "override_models", prices.OverrideModels)

	// The config, the database, the files and the KEK must belong
	// together before anything is written (bootcheck.go).
	commits := server.NewStoreCommits()
	st, b, err := openChecked(ctx, cfg, log, commits.Main)
	if err != nil {
		return err
	}
	defer st.Close()
	file, k := b.file, b.kek
	if b.firstToken != "" {
		// Printed as soon as the config holding its hash is durable, so a
		// later failure cannot lose it (the address was bound first). The
		// only time a token is ever printed (docs/DECISIONS.md, What a boot
		// may assume).
		fmt.Fprintf(stdout, "admin token: %s\n", b.firstToken)
	}
	act, err := openActivity(ctx, cfg, log, commits.Activity, true)
	if err != nil {
		return err
	}
	defer act.Close()

	newTeam := server.NewTeam
	if cfg.NATSURL != "" {
		// Brokers that share the team keep its members in the database.
		newTeam = server.NewSharedTeam
	}
	team, err := newTeam(ctx, cfg.ConfigPath, file, st, time.Now)
	if err != nil {
		return err
	}
	jwt, err := loadJWT(cfg, file, log)
	if err != nil {
		return err
	}
	guard := connguard.New(cfg.MaxUnauthConns, connguard.WithProxies(cfg.TrustedProxies))
	srvOpts := []server.Option{
		server.WithLogger(log), server.WithWebPush(cfg.WebPushSubject, cfg.WebPushAllowHTTP),
		server.WithEgress(cfg.Egress), server.WithConnGuard(guard),
		server.WithMaxStreamsPerMember(cfg.MaxStreamsPerMember),
		server.WithOTLPFlushAfter(cfg.OTLPFlushAfter),
		server.WithPublicURL(cfg.PublicURL),
		server.WithStoreCommits(commits),
		server.WithFederation(jwt, cfg.JWTOverlayPath()),
		server.WithJWTMaxLifetime(cfg.JWTMaxLifetime),
		server.WithPrices(prices),
	}
	if file.Files != nil {
		blobs, maxFileSize, err := openFiles(ctx, cfg, file.Files, st, log)
		if err != nil {
			return err
		}
		srvOpts = append(srvOpts, server.WithFiles(blobs, maxFileSize, file.Files.QuotaBytes))
	}
	warnLowSpace(log, cfg.MinFreeMiB, storageDirs(cfg, file.Files))
	srv := server.New(server.Deps{Store: st, Activity: act, Team: team, KEK: k, Version: version}, srvOpts...)
	// Before anything is served: a tool credential sealed before origins
	// were recorded is bound to the origin configured now (docs/TOOLCALL.md,
	// Credential origin).
	if _, err := srv.BindLegacyToolCredentials(ctx); err != nil {
		return fmt.Errorf("refusing to start: binding tool credentials to their origin: %w", err)
	}
	if cfg.NATSURL != "" {
		// Closed after Run (deferred before it): the fan-out unsubscribes
		// first.
		nc, err := connectNATS(cfg.NATSURL, "svc "+cfg.Addr, log)
		if err != nil {
			return err
		}
		defer nc.Close()
		if err := srv.JoinCluster(ctx, nc); err != nil {
			return fmt.Errorf("refusing to start: joining the other brokers over NATS: %w", err)
		}
		log.Info("serving with other brokers", "nats", redactNATSURL(cfg.NATSURL))
	}
	lg := file.LoopGuardSettings()
	log.Info("loop guard", "max_hops", lg.MaxHops, "agent_pushes_per_minute", lg.AgentPushesPerMinute, "agent_push_burst", lg.AgentPushBurst)
	// The committer runs until the listeners have drained, so in-flight
	// pushes still commit during shutdown.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	ranDone := make(chan struct{})
	go func() { _ = srv.Run(runCtx); close(ranDone) }()
	defer func() { stopRun(); <-ranDone }()

	// The gateway calls the services through their interceptors (auth)
	// in its own goroutine: every REST call is admitted as a native one.
	gw, err := gateway.New(ctx, srv.Local(), srv, gateway.WithLogger(log), gateway.WithMetricsLoopbackOpen(cfg.MetricsLoopbackOpen))
	if err != nil {
		return err
	}

	var pprofLis net.Listener
	if cfg.PprofAddr != "" {
		if pprofLis, err = listenPprof(cfg.PprofAddr); err != nil {
			_ = lis.Close()
			return err
		}
	}
	split := newSplitListener(&guardedListener{Listener: lis, guard: guard, log: log}, log)
	h1 := &http.Server{Handler: gw, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	h1.Protocols = new(http.Protocols)
	h1.Protocols.SetHTTP1(true)

	servers := []*http.Server{h1}
	var tlsSrv *http.Server
	var tlsLis net.Listener
	if file.HTTPS != nil {
		if tlsSrv, tlsLis, err = listenTLS(cfg.Addr, file.HTTPS, srv.GRPC(), gw, guard, log); err != nil {
			_ = lis.Close()
			return err
		}
		servers = append(servers, tlsSrv)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { split.serve(); return nil })
	g.Go(func() error { return ignoreClosed(srv.GRPC().Serve(split.h2)) })
	g.Go(func() error { return ignoreClosed(h1.Serve(split.h1)) })
	if tlsSrv != nil {
		g.Go(func() error { return ignoreClosed(tlsSrv.Serve(tlsLis)) })
	}
	g.Go(func() error { sweepSessions(gctx, st, log); return nil })
	if pprofLis != nil {
		g.Go(func() error { return servePprof(gctx, pprofLis, log) })
	}

	log.Info("svc listening", "addr", lis.Addr().String(), "version", version,
		"max_unauthenticated_conns", cfg.MaxUnauthConns, "max_streams_per_member", cfg.MaxStreamsPerMember,
		"trusted_proxies", cfg.TrustedProxies.String(), "jwt_max_lifetime", cfg.JWTMaxLifetime.String(),
		"config", cfg.ConfigPath, "db", cfg.dbName(), "activity_db", cfg.activityDBName())

	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = lis.Close()
		// Streams first: they never end on their own, and the drain below
		// waits for every open request.
		srv.CloseStreams()
		for _, s := range servers {
			if err := s.Shutdown(sctx); err != nil {
				_ = s.Close()
			}
		}
		stopped := make(chan struct{})
		go func() { srv.GRPC().GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-sctx.Done():
			srv.GRPC().Stop()
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// raiseFileLimit raises the soft limit on open files to the hard limit:
// every connection, stream and store file costs a descriptor, and running
// out stops accepting. (Go raises it at start too; doing it here also says
// what the limit is.)
func raiseFileLimit(log *slog.Logger) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			log.Warn("cannot raise the open-file limit", "err", err)
		}
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	}
	log.Info("open-file limit", "soft", r.Cur, "hard", r.Max)
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// listenTLS serves the https block: the same API over TLS on https.port of
// the configured host. Over TLS, browsers negotiate HTTP/2 too, so gRPC is
// routed by content type through grpc.Server.ServeHTTP.
func listenTLS(addr string, h *teamconfig.HTTPS, g *grpc.Server, gw http.Handler, guard *connguard.Guard, log *slog.Logger) (*http.Server, net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(h.Cert, h.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("https: %w", err)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(h.Port)))
	if err != nil {
		return nil, nil, fmt.Errorf("https listen: %w", err)
	}
	s := &http.Server{
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				serveGRPCHTTP(g, w, r)
				return
			}
			gw.ServeHTTP(w, r)
		}),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	log.Info("svc listening (tls)", "addr", lis.Addr().String())
	return s, tls.NewListener(&guardedListener{Listener: lis, guard: guard, log: log}, s.TLSConfig), nil
}

// serveGRPCHTTP serves a gRPC call over net/http's HTTP/2. A stream
// whose client stops reading can be reset alone: a write deadline in the
// past resets the HTTP/2 stream, and with it a Send blocked on flow
// control (server.WithStreamAbort). The response writer is dead once
// ServeHTTP returns, while the call's handler may still be ending: done
// keeps a late abort off it.
func serveGRPCHTTP(g *grpc.Server, w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	done := false
	abort := func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = rc.SetWriteDeadline(time.Now().Add(-time.Second))
		}
	}
	g.ServeHTTP(w, r.WithContext(server.WithStreamAbort(r.Context(), abort)))
	mu.Lock()
	done = true
	mu.Unlock()
}

// loadJWT returns the federation config the broker starts with: the
// overlay file's jwt block when the file exists (a bind wrote it, and it
// wins), else the team config's, else none. An overlay that does not parse
// refuses to start, naming the file.
func loadJWT(cfg Config, file *teamconfig.File, log *slog.Logger) (*federation.Config, error) {
	overlay, err := teamconfig.LoadJWTOverlay(cfg.JWTOverlayPath())
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("refusing to start: %w", err)}
	}
	switch {
	case overlay != nil:
		c := overlay.Federation()
		log.Info("federation jwt from the overlay file", "path", cfg.JWTOverlayPath(), "issuer", c.Issuer, "audience", c.Audience, "jwks_url", c.JWKSURL)
		return &c, nil
	case file.JWT != nil:
		c := file.JWT.Federation()
		log.Info("federation jwt from the team config", "issuer", c.Issuer, "audience", c.Audience, "jwks_url", c.JWKSURL)
		return &c, nil
	}
	return nil, nil
}

// openFiles opens the blob store of the files block and sweeps it: temp
// files of writes a crash interrupted, and blobs no entry references (a
// crash between placing a blob and committing its entry, or before a
// purge), go; more than sweepLimit of those refuses to start instead (a
// wrong database looks just like that). A relative root is taken relative
// to the config file's directory, so the broker's working directory never
// matters.
func openFiles(ctx context.Context, cfg Config, files *teamconfig.Files, st store.Store, log *slog.Logger) (*vfs.Blobs, int64, error) {
	root := files.Root
	if root == "" {
		return nil, 0, &exitError{code: 1, err: fmt.Errorf("refusing to start: %s: files.root: is required (remove the files block to disable the filesystem)", cfg.ConfigPath)}
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(filepath.Dir(cfg.ConfigPath), root)
	}
	blobs, err := vfs.Open(root)
	if err != nil {
		return nil, 0, fmt.Errorf("files.root %s: %w", root, err)
	}
	n, err := blobs.Sweep(ctx, st.BlobReferenced, sweepLimit)
	var ue *vfs.UnreferencedError
	if errors.As(err, &ue) {
		return nil, 0, sweepRefusal(cfg, root, ue)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("files.root %s: %w", root, err)
	}
	maxFileSize := files.MaxFileSize
	if maxFileSize == 0 {
		maxFileSize = teamconfig.DefaultMaxFileSize
	}
	log.Info("filesystem ready", "root", root, "max_file_size", maxFileSize, "quota_bytes", files.QuotaBytes, "swept", n)
	return blobs, maxFileSize, nil
}

// sessionSweepInterval is how often expired sessions are deleted.
const sessionSweepInterval = time.Hour

// sweepSessions deletes expired sessions until ctx ends.
func sweepSessions(ctx context.Context, st store.SessionStore, log *slog.Logger) {
	t := time.NewTicker(sessionSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n, err := st.DeleteExpiredSessions(ctx, now); err != nil && ctx.Err() == nil {
				log.Warn("session sweep failed", "err", err)
			} else if n > 0 {
				log.Debug("expired sessions deleted", "count", n)
			}
		}
	}
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

func orMemory(p string) string {
	if p == "" {
		return ":memory:"
	}
	return p
}

// listenPprof binds the profiler's address (SVC_PPROF_ADDR): for operators
// measuring the broker, never on by default, and loopback only. A bad
// address refuses to start rather than failing later.
func listenPprof(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("SVC_PPROF_ADDR: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("SVC_PPROF_ADDR must be a loopback address, got %q", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("SVC_PPROF_ADDR: %w", err)
	}
	return lis, nil
}

// servePprof serves the Go profiler on lis until ctx ends.
func servePprof(ctx context.Context, lis net.Listener, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	go func() { <-ctx.Done(); _ = s.Close() }()
	log.Info("pprof listening", "addr", lis.Addr().String())
	return ignoreClosed(s.Serve(lis))
}
