package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"svc/server/teamconfig"
	"svc/store/sqlite"
)

// defaultMinFreeMiB is the free space under a store below which svc serve
// warns at start (SVC_MIN_FREE_MIB): a broker writes its WAL, its
// activity and its files there, and a full disk refuses every write
// (507). A gigabyte is days of a busy team's activity, time to act.
const defaultMinFreeMiB = 1024

// parseStorageEnv reads the storage settings of svc serve from the
// environment: SVC_STARTUP_CHECK_TIMEOUT and SVC_MIN_FREE_MIB.
func parseStorageEnv(c *Config) error {
	c.StartupCheck = sqlite.DefaultStartupCheck
	if v := os.Getenv("SVC_STARTUP_CHECK_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return &exitError{code: 2, err: fmt.Errorf("SVC_STARTUP_CHECK_TIMEOUT: must be a duration of at least 0 (0 skips the check), got %q", v)}
		}
		c.StartupCheck = d
	}
	var err error
	c.MinFreeMiB, err = envInt("SVC_MIN_FREE_MIB", defaultMinFreeMiB)
	return err
}

// storeOpenError is the answer to a store that did not open: a damaged
// file refuses to start (a refusal, as the boot checks answer) with what
// to do (docs/OPERATIONS.md: Checks at start).
func storeOpenError(which string, err error) error {
	var de *sqlite.DamagedError
	if !errors.As(err, &de) {
		return fmt.Errorf("open %s: %w", which, err)
	}
	found := fmt.Sprintf("the %s %s is damaged: %s", which, de.Path, joinFindings(de.Findings))
	if de.NotADatabase {
		found = fmt.Sprintf("the %s %s is not an SQLite database (%s)", which, de.Path, joinFindings(de.Findings))
	}
	return refusal(found,
		"keep a copy of the file and its -wal before anything else",
		fmt.Sprintf("restore it from a backup, or salvage what is readable with: sqlite3 %s .recover | sqlite3 <new file>; then start on the new file", de.Path),
		"svc check runs the full check; see docs/OPERATIONS.md",
	)
}

func joinFindings(f []string) string {
	const shown = 5
	out := ""
	for i, s := range f {
		if i == shown {
			return out + fmt.Sprintf("; and %d more", len(f)-shown)
		}
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// storageDirs names the directories svc serve writes to: the stores'
// directories and the files root, resolved as openFiles resolves it.
func storageDirs(cfg Config, files *teamconfig.Files) map[string]string {
	dirs := map[string]string{}
	if cfg.DBPath != "" {
		dirs["main store"] = filepath.Dir(cfg.DBPath)
	}
	if cfg.ActivityDBPath != "" {
		dirs["activity store"] = filepath.Dir(cfg.ActivityDBPath)
	}
	if files != nil && files.Root != "" {
		root := files.Root
		if !filepath.IsAbs(root) {
			root = filepath.Join(filepath.Dir(cfg.ConfigPath), root)
		}
		dirs["files"] = root
	}
	return dirs
}

// warnLowSpace logs a warning for each directory of dirs with less than
// minMiB free for svc: the broker starts (refusing would take the whole
// team down for a disk that may be freed soon), and the operator knows
// before writes are refused.
func warnLowSpace(log *slog.Logger, minMiB int, dirs map[string]string) {
	if minMiB <= 0 {
		return
	}
	for name, dir := range dirs {
		free, err := freeBytes(dir)
		if err != nil {
			log.Warn("cannot read the free space of a store's disk", "store", name, "dir", dir, "err", err)
			continue
		}
		if free < uint64(minMiB)<<20 {
			log.Warn("low disk space: writes are refused (507) once the disk is full; free space or set SVC_MIN_FREE_MIB",
				"store", name, "dir", dir, "free_mib", free>>20, "min_free_mib", minMiB)
		}
	}
}

// freeBytes is the space an unprivileged writer may use on the file
// system holding dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil //nolint:gosec // Bsize is positive
}
