package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"svc/store"
	"svc/store/sqlite"
)

// prune deletes what the activity store holds older than --older-than
// (docs/TELEMETRY.md, Retention): activity rows and inference records by event time,
// the raw uploads no record references any more, stale correlation state.
func prune(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("activity prune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	olderThan := fs.String("older-than", "", "age cutoff: a number with d, h, m, s or ms")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	dbPath := fs.String("db-path", os.Getenv("SVC_DB_PATH"), "main store file (env SVC_DB_PATH)")
	actPath := fs.String("activity-db-path", os.Getenv("SVC_ACTIVITY_DB_PATH"), "activity store file (env SVC_ACTIVITY_DB_PATH)")
	urls := addDBURLFlags(fs, true)
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2, err: err}
	}
	warnSecretFlags(fs)
	var c Config
	if err := urls.apply(&c, *dbPath, *actPath); err != nil {
		return err
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	path := *actPath
	if path == "" && !isMemory(*dbPath) {
		path = *dbPath + "-activity.db"
	}
	if c.DBURL != "" {
		path = c.activityDBName()
	} else if isMemory(path) {
		return &exitError{code: 2, err: errors.New("no activity store: set --activity-db-path, --db-path or --db-url")}
	}
	cutoff := time.Now().Add(-age)
	if !*yes {
		if !isTerminal(stdin) {
			return &exitError{code: 2, err: errors.New("refusing to prune without --yes when not on a terminal")}
		}
		fmt.Fprintf(stdout, "Delete every activity row and inference record older than %s (before %s) from %s? [y/N] ", *olderThan, cutoff.UTC().Format(time.RFC3339), path)
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return &exitError{code: 1, err: errors.New("aborted")}
		}
	}
	var act store.ActivityStore
	if c.DBURL != "" {
		act, err = openActivity(ctx, c, nil, nil, false)
	} else {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("activity store: %w", err)
		}
		act, err = sqlite.OpenActivity(ctx, path)
	}
	if err != nil {
		return err
	}
	defer act.Close()
	n, err := act.PruneActivity(ctx, cutoff)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted %d activity rows, %d inference records, %d raw uploads, %d correlation states\n",
		n.Activity, n.GenAI, n.Raw, n.States)
	return nil
}

var ageRE = regexp.MustCompile(`^(?i)([0-9]+)(ms|d|h|m|s)$`)

// parseAge reads a duration with suffix d, h, m, s or ms, case-insensitive.
func parseAge(s string) (time.Duration, error) {
	m := ageRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("--older-than %q: want a number with d, h, m, s or ms", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("--older-than %q: %w", s, err)
	}
	unit := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[strings.ToLower(m[2])]
	if n > int64(1<<62)/int64(unit) {
		return 0, fmt.Errorf("--older-than %q: too large", s)
	}
	return time.Duration(n) * unit, nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	if err != nil || info.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	// /dev/null is a character device but no terminal: a cron job or
	// `< /dev/null` run must be refused like a pipe (exit 2, a usage error).
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(info, null) {
		return false
	}
	return true
}
