package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"svc/server/clientaddr"
	"svc/server/egress"
	"svc/server/federation"
	"svc/server/pricing"
	"svc/server/teamconfig"
)

// Defaults of `svc serve`.
const (
	defaultConfigPath = "./svc.json"
	// defaultAddr is loopback: exposing the broker is an explicit choice.
	defaultAddr = "127.0.0.1:7433"
)

// defaultMaxUnauthConns bounds the connections one client address may hold
// before presenting a valid credential: far above what a browser (6), a
// runner (a few) or our load tools (100 opening at once) need, far below
// what exhausts descriptors.
const defaultMaxUnauthConns = 256

// defaultMaxStreamsPerMember bounds one member's live streams (SSE and
// gRPC together): a browser with a few tabs and a runner need a handful;
// 64 leaves room and stops one token from opening thousands.
const defaultMaxStreamsPerMember = 64

// Config is the process configuration of `svc serve`: flags over SVC_*
// environment over defaults. The team config file it names holds the rest.
type Config struct {
	ConfigPath     string
	Addr           string
	DBPath         string // "" means in-memory
	ActivityDBPath string // "" means in-memory
	// DBURL puts the main store on PostgreSQL (--db-url, SVC_DB_URL)
	// instead of SQLite; DBPath and ActivityDBPath are then "".
	DBURL string
	// ActivityDBURL puts the activity store in another PostgreSQL
	// database than DBURL's (SVC_ACTIVITY_DB_URL).
	ActivityDBURL string
	KEK           string // base64 from SVC_KEK; "" means the KEK file
	LogLevel      string
	// WebPushSubject is the VAPID contact (SVC_WEBPUSH_SUBJECT); empty means
	// mailto:svc@localhost.
	WebPushSubject string
	// WebPushAllowHTTP accepts http push endpoints (SVC_WEBPUSH_ALLOW_HTTP=1),
	// for a local push relay or tests.
	WebPushAllowHTTP bool
	// Egress lists the non-public address ranges the broker's outgoing
	// requests may reach (SVC_EGRESS_ALLOW, comma-separated CIDRs); empty
	// means public addresses only.
	Egress egress.Policy
	// MaxUnauthConns bounds, per client address, the connections that have
	// not yet presented a valid credential (SVC_MAX_UNAUTHENTICATED_CONNS;
	// 0 is unbounded).
	MaxUnauthConns int
	// MaxStreamsPerMember bounds one member's live streams
	// (SVC_MAX_STREAMS_PER_MEMBER; 0 is unbounded).
	MaxStreamsPerMember int
	// OTLPFlushAfter is how long a telemetry record waits for its partner
	// before it is stored alone (SVC_OTLP_FLUSH_AFTER, a Go duration;
	// default 120s).
	OTLPFlushAfter time.Duration
	// PprofAddr serves the Go profiler on this loopback address
	// (SVC_PPROF_ADDR); empty means off.
	PprofAddr string
	// PublicURL is the broker's public base URL (SVC_PUBLIC_URL, scheme and
	// host with no path), used in enrollment verification URIs; empty means
	// the scheme and host each client reached.
	PublicURL string
	// MetricsLoopbackOpen lets a loopback peer read GET /metrics without a
	// credential (metricsLoopbackOpen; SVC_METRICS_LOOPBACK_OPEN=0 turns it
	// off, e.g. behind a reverse proxy on the same host).
	MetricsLoopbackOpen bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (--trusted-proxies, SVC_TRUSTED_PROXIES: comma-separated
	// addresses and CIDR ranges; empty trusts none).
	TrustedProxies *clientaddr.Proxies
	// StartupCheck bounds the integrity check of each store file at start
	// (SVC_STARTUP_CHECK_TIMEOUT, a Go duration; 0 skips it; storage.go).
	StartupCheck time.Duration
	// MinFreeMiB is the free space under a store below which start warns
	// (SVC_MIN_FREE_MIB; 0 never warns; storage.go).
	MinFreeMiB int
	// JWTMaxLifetime is the furthest a federation JWT's exp may lie after
	// the moment it is presented (--jwt-max-lifetime, SVC_JWT_MAX_LIFETIME,
	// a Go duration from 1m to 720h; default 24h; docs/FEDERATION.md,
	// Token lifetime).
	JWTMaxLifetime time.Duration
	// NATSURL makes this broker one of several serving the team
	// (--nats-url, SVC_NATS_URL): they share the DBURL database and fan
	// their live traffic out over this NATS (docs/DECISIONS.md, "Several
	// brokers: fan-out on NATS"). Needs DBURL.
	NATSURL string
}

// The bounds of --jwt-max-lifetime: under a minute no platform could
// refresh in time; past 30 days a stolen token outlives any incident
// response.
const (
	minJWTMaxLifetime = time.Minute
	maxJWTMaxLifetime = 30 * 24 * time.Hour
)

// KEKPath is the KEK file beside the config, <config>.kek
// (docs/DECISIONS.md, The KEK a store was sealed under).
func (c Config) KEKPath() string { return c.ConfigPath + ".kek" }

// JWTOverlayPath is the overlay file platform connect writes beside the
// config: svc.json.jwt.json.
func (c Config) JWTOverlayPath() string { return c.ConfigPath + teamconfig.JWTOverlaySuffix }

// PricesPath is the model price override: prices.json beside the config
// (docs/TELEMETRY.md, Costs).
func (c Config) PricesPath() string {
	return filepath.Join(filepath.Dir(c.ConfigPath), pricing.OverrideName)
}

// FilesRoot is the first-boot files root: svc-files beside the config.
func (c Config) FilesRoot() string {
	return filepath.Join(filepath.Dir(c.ConfigPath), "svc-files")
}

// parseServeConfig reads flags and environment.
func parseServeConfig(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(key, def string) string {
		if v, ok := os.LookupEnv(key); ok {
			return v
		}
		return def
	}
	var c Config
	fs.StringVar(&c.ConfigPath, "config-path", env("SVC_CONFIG_PATH", defaultConfigPath), "team config file (env SVC_CONFIG_PATH)")
	fs.StringVar(&c.Addr, "addr", env("SVC_ADDR", defaultAddr), "listen address for REST, SSE and gRPC (env SVC_ADDR)")
	fs.StringVar(&c.DBPath, "db-path", env("SVC_DB_PATH", ""), "main store file; empty means in-memory (env SVC_DB_PATH)")
	activity := fs.String("activity-db-path", env("SVC_ACTIVITY_DB_PATH", ""), "activity store file; default <db-path>-activity.db (env SVC_ACTIVITY_DB_PATH)")
	urls := addDBURLFlags(fs, true)
	natsURL := fs.String("nats-url", env("SVC_NATS_URL", ""), "join the other brokers of the team over this NATS, a nats://[user:pass@]host:port URL (several, comma-separated); needs --db-url (env SVC_NATS_URL)")
	fs.StringVar(&c.LogLevel, "log-level", env("SVC_LOG_LEVEL", "info"), "debug, info, warn or error (env SVC_LOG_LEVEL)")
	proxies := fs.String("trusted-proxies", env("SVC_TRUSTED_PROXIES", ""), "reverse proxies whose X-Forwarded-For names the client: comma-separated addresses and CIDR ranges (env SVC_TRUSTED_PROXIES)")
	jwtLifetimeDefault := os.Getenv("SVC_JWT_MAX_LIFETIME")
	if jwtLifetimeDefault == "" {
		jwtLifetimeDefault = federation.DefaultMaxLifetime.String()
	}
	jwtLifetime := fs.String("jwt-max-lifetime", jwtLifetimeDefault, "the furthest a federation JWT's exp may lie ahead, a Go duration from 1m to 720h (env SVC_JWT_MAX_LIFETIME)")
	if err := fs.Parse(args); err != nil {
		return c, &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return c, &exitError{code: 2, err: fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	warnSecretFlags(fs)
	c.KEK = os.Getenv("SVC_KEK")
	c.WebPushSubject = os.Getenv("SVC_WEBPUSH_SUBJECT")
	c.WebPushAllowHTTP = os.Getenv("SVC_WEBPUSH_ALLOW_HTTP") == "1"
	c.PprofAddr = os.Getenv("SVC_PPROF_ADDR")
	switch v := os.Getenv("SVC_METRICS_LOOPBACK_OPEN"); v {
	case "", "1", "true":
		c.MetricsLoopbackOpen = true
	case "0", "false":
	default:
		return c, &exitError{code: 2, err: fmt.Errorf("SVC_METRICS_LOOPBACK_OPEN: must be 1 or 0, got %q", v)}
	}
	c.PublicURL = strings.TrimRight(os.Getenv("SVC_PUBLIC_URL"), "/")
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return c, &exitError{code: 2, err: fmt.Errorf("SVC_PUBLIC_URL: must be http(s)://host[:port] with no path, got %q", c.PublicURL)}
		}
	}
	var err error
	if c.TrustedProxies, err = clientaddr.Parse(*proxies); err != nil {
		return c, &exitError{code: 2, err: fmt.Errorf("--trusted-proxies/SVC_TRUSTED_PROXIES: %w", err)}
	}
	if c.Egress, err = egress.ParsePolicy(os.Getenv("SVC_EGRESS_ALLOW")); err != nil {
		return c, &exitError{code: 2, err: fmt.Errorf("SVC_EGRESS_ALLOW: %w", err)}
	}
	if c.MaxUnauthConns, err = envInt("SVC_MAX_UNAUTHENTICATED_CONNS", defaultMaxUnauthConns); err != nil {
		return c, err
	}
	if c.MaxStreamsPerMember, err = envInt("SVC_MAX_STREAMS_PER_MEMBER", defaultMaxStreamsPerMember); err != nil {
		return c, err
	}
	if v := os.Getenv("SVC_OTLP_FLUSH_AFTER"); v != "" {
		if c.OTLPFlushAfter, err = time.ParseDuration(v); err != nil || c.OTLPFlushAfter < 100*time.Millisecond || c.OTLPFlushAfter > 24*time.Hour {
			return c, &exitError{code: 2, err: fmt.Errorf("SVC_OTLP_FLUSH_AFTER: must be a duration from 100ms to 24h, got %q", v)}
		}
	}
	if c.JWTMaxLifetime, err = time.ParseDuration(*jwtLifetime); err != nil || c.JWTMaxLifetime < minJWTMaxLifetime || c.JWTMaxLifetime > maxJWTMaxLifetime {
		return c, &exitError{code: 2, err: fmt.Errorf("--jwt-max-lifetime/SVC_JWT_MAX_LIFETIME: must be a duration from 1m to 720h (30 days), got %q", *jwtLifetime)}
	}
	if err := parseStorageEnv(&c); err != nil {
		return c, err
	}
	if c.ConfigPath == "" {
		return c, &exitError{code: 2, err: errors.New("--config-path must not be empty")}
	}
	abs, err := filepath.Abs(c.ConfigPath)
	if err != nil {
		return c, err
	}
	c.ConfigPath = abs
	if err := urls.apply(&c, c.DBPath, *activity); err != nil {
		return c, err
	}
	if c.NATSURL, err = parseNATSURL(*natsURL, c.DBURL != ""); err != nil {
		return c, err
	}
	if c.DBURL != "" {
		return c, nil
	}
	if isMemory(c.DBPath) {
		c.DBPath = ""
	}
	c.ActivityDBPath = *activity
	if c.ActivityDBPath == "" && c.DBPath != "" {
		c.ActivityDBPath = c.DBPath + "-activity.db"
	}
	if isMemory(c.ActivityDBPath) {
		c.ActivityDBPath = ""
	}
	return c, nil
}

// envInt reads a whole number >= 0 from the environment; def when unset.
func envInt(key string, def int) (int, error) {
	v, ok := os.LookupEnv(key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &exitError{code: 2, err: fmt.Errorf("%s: must be a whole number of at least 0, got %q", key, v)}
	}
	return n, nil
}

func isMemory(p string) bool { return p == "" || p == ":memory:" }
