package main

// What the maintenance commands (`svc kek`, `svc files sweep`) share: the
// paths as `svc serve` takes them, and opening the team's config and
// database with the broker stopped.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"svc/server/teamconfig"
	"svc/store"
)

// maintenanceFlags adds --config-path, --db-path and --db-url to fs, read
// as `svc serve` reads them (flag, else SVC_CONFIG_PATH / SVC_DB_PATH /
// SVC_DB_URL).
func maintenanceFlags(fs *flag.FlagSet) (configPath, dbPath *string, urls dbURLFlags) {
	configPath = fs.String("config-path", envOr("SVC_CONFIG_PATH", defaultConfigPath), "team config file (env SVC_CONFIG_PATH)")
	dbPath = fs.String("db-path", os.Getenv("SVC_DB_PATH"), "main store file, required unless --db-url; :memory: for a broker run without one (env SVC_DB_PATH)")
	return configPath, dbPath, addDBURLFlags(fs, false)
}

// maintenanceConfig checks the paths of a maintenance command: the
// database must be named (":memory:" only where allowMemory), since a
// forgotten --db-path would act on nothing.
func maintenanceConfig(configPath, dbPath string, urls dbURLFlags, allowMemory bool) (Config, error) {
	c := Config{KEK: os.Getenv("SVC_KEK")}
	if configPath == "" {
		return c, &exitError{code: 2, err: errors.New("--config-path must not be empty")}
	}
	abs, err := filepath.Abs(configPath)
	if err != nil {
		return c, err
	}
	c.ConfigPath = abs
	if err := urls.apply(&c, dbPath, ""); err != nil {
		return c, err
	}
	switch {
	case c.DBURL != "":
	case dbPath == "":
		return c, &exitError{code: 2, err: errors.New("--db-path (SVC_DB_PATH) or --db-url (SVC_DB_URL) is required")}
	case dbPath == ":memory:" && !allowMemory:
		return c, &exitError{code: 2, err: errors.New("--db-path: an in-memory database holds nothing to work on")}
	case dbPath != ":memory:":
		if c.DBPath, err = filepath.Abs(dbPath); err != nil {
			return c, err
		}
	}
	return c, nil
}

// openStopped loads the team config (it must exist) and opens the database
// (it must exist unless in-memory), taking its lock alone, so the broker
// must be stopped; both must belong to one team (decide). The caller
// closes the store.
func openStopped(ctx context.Context, cfg Config) (*teamconfig.File, store.Store, pairing, error) {
	file, err := readConfig(cfg)
	if err != nil {
		return nil, nil, pairing{}, err
	}
	if file == nil {
		return nil, nil, pairing{}, fmt.Errorf("the team config %s does not exist", cfg.ConfigPath)
	}
	if cfg.DBPath != "" {
		if _, err := os.Stat(cfg.DBPath); err != nil {
			return nil, nil, pairing{}, fmt.Errorf("the database: %w", err)
		}
	}
	st, _, err := openMain(ctx, cfg, nil, nil, true)
	if err != nil {
		if file.Store.MembersInDatabase {
			// Brokers sharing the team over NATS each hold the lock.
			return nil, nil, pairing{}, fmt.Errorf("%w (stop every broker of the team first)", err)
		}
		return nil, nil, pairing{}, fmt.Errorf("%w (stop the broker first)", err)
	}
	p, err := readPairing(ctx, cfg, file, st)
	p.dbExisted = true
	if err == nil {
		_, err = decide(p)
	}
	if err != nil {
		return nil, nil, pairing{}, errors.Join(err, st.Close())
	}
	return file, st, p, nil
}

// askYes asks a yes/no question on a terminal; without one, yes must
// have been given (as `svc activity prune` does).
func askYes(stdin io.Reader, stdout io.Writer, yes bool, question string) error {
	if yes {
		return nil
	}
	if !isTerminal(stdin) {
		return &exitError{code: 2, err: errors.New("refusing without --yes when not on a terminal")}
	}
	fmt.Fprintf(stdout, "%s [y/N] ", question)
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return &exitError{code: 1, err: errors.New("aborted")}
	}
	return nil
}

// usageError turns a flag parse error into exit 2, and -h into exit 0.
// parseFlags parses the flags of a command that takes no arguments. done
// says the command is over: --help was asked (err is nil) or its command
// line is wrong (err exits 2).
func parseFlags(fset *flag.FlagSet, args []string) (done bool, err error) {
	if err := fset.Parse(args); err != nil {
		return true, usageError(err)
	}
	if fset.NArg() > 0 {
		return true, &exitError{code: 2, err: fmt.Errorf("unexpected arguments: %s", strings.Join(fset.Args(), " "))}
	}
	warnSecretFlags(fset)
	return false, nil
}

func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return &exitError{code: 2, err: err}
}
