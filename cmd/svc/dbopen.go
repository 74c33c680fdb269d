package main

// Which store the broker and the maintenance commands open: SQLite files
// (--db-path, the default) or PostgreSQL (--db-url), and how a store is
// named in what svc prints, which never shows a database password.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"svc/store"
	"svc/store/postgres"
	"svc/store/sqlite"
)

// parseDBURL checks a --db-url value: a postgres:// or postgresql:// URL.
// libpq's key=value form is refused: its password cannot be told apart to
// keep it out of messages, and one form is simpler to document. The
// value itself is never repeated in the error, since it may hold a
// password.
func parseDBURL(flagName, v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", &exitError{code: 2, err: fmt.Errorf("%s: must be a postgres://user@host/database URL", flagName)}
	}
	if !credentialsReadable(v, u) {
		return "", &exitError{code: 2, err: fmt.Errorf("%s: %s", flagName, misreadCredentials)}
	}
	return v, nil
}

// misreadCredentials explains credentialsReadable's refusal.
const misreadCredentials = "the user or password part is not where a URL parser finds it (percent-encode '/', '?', '#' and '@' in a password, e.g. %2F) or the URL has a #fragment"

// credentialsReadable reports whether url.Parse found the URL's
// credentials where they are: a password holding an unescaped '/', '?' or
// '#' ends the host early, so the parser sees no user part at all and a
// redaction would print the password as part of the host or path. Such a
// URL, or one with a fragment, is refused rather than printed.
func credentialsReadable(raw string, u *url.URL) bool {
	if strings.Contains(raw, "#") {
		return false
	}
	return u.User != nil || !strings.Contains(raw, "@")
}

// redactDBURL is a database URL as svc prints it: scheme, user, host,
// path and the query, with the password and any query value whose key
// names a password or secret masked. What does not parse, or could be
// misread (credentialsReadable), is not shown at all.
func redactDBURL(v string) string {
	u, err := url.Parse(v)
	if err != nil || !credentialsReadable(v, u) {
		return "(a PostgreSQL database)"
	}
	out := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil {
		out.User = url.User(u.User.Username())
		if _, ok := u.User.Password(); ok {
			out.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if q := u.Query(); len(q) > 0 {
		for k := range q {
			if lk := strings.ToLower(k); strings.Contains(lk, "pass") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") {
				q.Set(k, "xxxxx")
			}
		}
		out.RawQuery = q.Encode()
	}
	return out.String()
}

// dbName names the main store in messages: its file, (in-memory) or its
// URL without a password.
func (c Config) dbName() string {
	if c.DBURL != "" {
		return redactDBURL(c.DBURL)
	}
	return orMemory(c.DBPath)
}

// activityDBName names the activity store in messages.
func (c Config) activityDBName() string {
	switch {
	case c.ActivityDBURL != "":
		return redactDBURL(c.ActivityDBURL)
	case c.DBURL != "":
		return redactDBURL(c.DBURL)
	}
	return orMemory(c.ActivityDBPath)
}

// dbFlag is how to name this kind of store on the command line, for the
// advice in refusals.
func (c Config) dbFlag() string {
	if c.DBURL != "" {
		return "--db-url (SVC_DB_URL)"
	}
	return "--db-path (SVC_DB_PATH)"
}

// dbArgs are the flags that name the main store, for commands printed as
// advice.
func (c Config) dbArgs() string {
	if c.DBURL != "" {
		return "--db-url " + redactDBURL(c.DBURL)
	}
	if c.DBPath == "" {
		return "--db-path :memory:"
	}
	return "--db-path " + c.DBPath
}

// durable reports whether the main store outlives the process.
func (c Config) durable() bool { return c.DBURL != "" || c.DBPath != "" }

// openMain opens the main store. existed reports whether it held the
// store's schema (for a file: whether the file was there) before: a
// refused first start removes only what it created. A broker (exclusive
// false) shares the PostgreSQL database's use lock with other brokers; a
// maintenance command takes it alone (on SQLite both take the file's
// lock alone).
func openMain(ctx context.Context, cfg Config, log *slog.Logger, observe func(time.Duration), exclusive bool) (st store.Store, existed bool, err error) {
	if cfg.DBURL != "" {
		// The use lock is taken before the migrations, so a broker never
		// changes the schema under another that runs alone.
		db, err := postgres.Open(ctx, cfg.DBURL, append(pgOptions(log, observe), postgres.WithUseLock(exclusive))...)
		if err != nil {
			return nil, false, fmt.Errorf("open main store %s: %w", cfg.dbName(), err)
		}
		// The schema is created by Open; a database is never dropped.
		return db, true, nil
	}
	existed = dbFileExists(cfg.DBPath)
	db, err := sqlite.Open(ctx, cfg.DBPath, sqliteOptions(cfg, log, observe)...)
	if err != nil {
		return nil, existed, storeOpenError("main store", err)
	}
	return db, existed, nil
}

// pgOptions are a PostgreSQL store's options: the broker's logger and
// commit observer when it has them (a maintenance command has neither).
func pgOptions(log *slog.Logger, observe func(time.Duration)) []postgres.Option {
	var opts []postgres.Option
	if log != nil {
		opts = append(opts, postgres.WithLogger(log))
	}
	if observe != nil {
		opts = append(opts, postgres.WithCommitObserver(observe))
	}
	return opts
}

// sqliteOptions are an SQLite store's options, as pgOptions, with the
// startup check the broker runs.
func sqliteOptions(cfg Config, log *slog.Logger, observe func(time.Duration)) []sqlite.Option {
	var opts []sqlite.Option
	if log != nil {
		opts = append(opts, sqlite.WithLogger(log), sqlite.WithStartupCheck(cfg.StartupCheck))
	}
	if observe != nil {
		opts = append(opts, sqlite.WithCommitObserver(observe))
	}
	return opts
}

// openActivity opens the activity store: in the main store's PostgreSQL
// database unless --activity-db-url names another, else the SQLite file
// beside the main one. A broker (broker true) holds the use lock of an
// activity database of its own shared, as it holds the main one's, so
// svc migrate cannot fill that database under it; svc prune, which runs
// beside brokers, takes none.
func openActivity(ctx context.Context, cfg Config, log *slog.Logger, observe func(time.Duration), broker bool) (store.ActivityStore, error) {
	if cfg.DBURL != "" {
		u := cfg.ActivityDBURL
		if u == "" {
			u = cfg.DBURL
		}
		act, err := postgres.OpenActivity(ctx, u, pgOptions(log, observe)...)
		if err != nil {
			return nil, fmt.Errorf("open activity store %s: %w", redactDBURL(u), err)
		}
		if broker && u != cfg.DBURL {
			if err := act.Use(ctx, false); err != nil {
				return nil, errors.Join(fmt.Errorf("activity store %s: %w", redactDBURL(u), err), act.Close())
			}
		}
		return act, nil
	}
	act, err := sqlite.OpenActivity(ctx, cfg.ActivityDBPath, sqliteOptions(cfg, log, observe)...)
	if err != nil {
		return nil, storeOpenError("activity store", err)
	}
	return act, nil
}

// dbURLFlags adds --db-url and --activity-db-url to a command's flags,
// read as svc serve reads them.
type dbURLFlags struct{ main, activity *string }

func addDBURLFlags(fs interface {
	String(name, value, usage string) *string
}, withActivity bool) dbURLFlags {
	var f dbURLFlags
	f.main = fs.String("db-url", os.Getenv("SVC_DB_URL"), "main store on PostgreSQL, a postgres://user@host/database URL, instead of --db-path (env SVC_DB_URL)")
	if withActivity {
		f.activity = fs.String("activity-db-url", os.Getenv("SVC_ACTIVITY_DB_URL"), "activity store on PostgreSQL; default the --db-url database (env SVC_ACTIVITY_DB_URL)")
	}
	return f
}

// apply checks the URLs and sets them on c, refusing a store named twice.
func (f dbURLFlags) apply(c *Config, dbPath, activityPath string) error {
	if *f.main != "" {
		u, err := parseDBURL("--db-url/SVC_DB_URL", *f.main)
		if err != nil {
			return err
		}
		if dbPath != "" {
			return &exitError{code: 2, err: errors.New("--db-url (SVC_DB_URL) and --db-path (SVC_DB_PATH) both name the main store: give one")}
		}
		c.DBURL = u
	}
	if f.activity == nil || *f.activity == "" {
		return nil
	}
	if c.DBURL == "" {
		return &exitError{code: 2, err: errors.New("--activity-db-url (SVC_ACTIVITY_DB_URL) needs --db-url: the activity store is on PostgreSQL only beside a main store there")}
	}
	if activityPath != "" {
		return &exitError{code: 2, err: errors.New("--activity-db-url and --activity-db-path both name the activity store: give one")}
	}
	u, err := parseDBURL("--activity-db-url/SVC_ACTIVITY_DB_URL", *f.activity)
	if err != nil {
		return err
	}
	c.ActivityDBURL = u
	return nil
}

// secretFlags are the flags whose URL may carry a password, and the
// environment variable that carries it unseen.
var secretFlags = map[string]string{
	"db-url":          "SVC_DB_URL",
	"activity-db-url": "SVC_ACTIVITY_DB_URL",
	"nats-url":        "SVC_NATS_URL",
	"to":              "SVC_DB_URL",
	"to-activity":     "SVC_ACTIVITY_DB_URL",
}

// warnSecretFlags prints one warning to fs's output when a URL given on
// the command line (not by its environment variable) holds a password or
// a token: every user of the machine reads a process's arguments (ps,
// /proc/PID/cmdline). It names the flags, never the value. The command
// still runs: refusing would break the scripts that work today.
func warnSecretFlags(fs *flag.FlagSet) {
	var named, envs []string
	fs.Visit(func(f *flag.Flag) {
		if env, ok := secretFlags[f.Name]; ok && urlHoldsSecret(f.Value.String()) {
			named = append(named, "--"+f.Name)
			envs = append(envs, env)
		}
	})
	if len(named) == 0 {
		return
	}
	verb := "holds a password"
	if len(named) > 1 {
		verb = "hold passwords"
	}
	slices.Sort(envs)
	fmt.Fprintf(fs.Output(), "svc: warning: %s %s, which every user of this machine can read in the process list (ps); give the URL in %s instead, or keep a PostgreSQL password in a PGPASSFILE (~/.pgpass)\n",
		strings.Join(named, " and "), verb, strings.Join(slices.Compact(envs), " and "))
}

// keywordPassword finds a password setting in libpq's key=value form:
// password=, sslpassword= and the like, any case, spaces allowed around
// the '='.
var keywordPassword = regexp.MustCompile(`(?i)(^|[\s'"])[a-z_]*password\s*=`)

// urlHoldsSecret reports whether a database or NATS URL (several,
// comma-separated, for NATS) carries a secret: a password, a NATS token
// (a user part alone) or a query parameter naming a password or a secret.
// What does not parse is refused later, and is counted as holding one; so
// is a value with no scheme that holds a password= setting (libpq's
// key=value form, refused later too, which a URL parser reads as a path).
func urlHoldsSecret(v string) bool {
	if !strings.Contains(v, "://") && keywordPassword.MatchString(v) {
		return true
	}
	for part := range strings.SplitSeq(v, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil {
			return true
		}
		if u.User != nil {
			if _, ok := u.User.Password(); ok || u.Scheme == "nats" || u.Scheme == "tls" {
				return true
			}
		}
		for k := range u.Query() {
			if lk := strings.ToLower(k); strings.Contains(lk, "pass") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") {
				return true
			}
		}
	}
	return false
}
