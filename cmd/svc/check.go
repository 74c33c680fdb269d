package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"svc/server/teamconfig"
	"svc/server/vfs"
	"svc/store"
	"svc/store/postgres"
	"svc/store/sqlite"
)

const checkUsage = `usage: svc check [--db-path P] [--activity-db-path P] [--db-url U] [--config-path P] [--files=false]

Checks the broker's storage in full: PRAGMA integrity_check of the main and
activity stores (every page, every index), then every stored file against
its SHA-256, on disk and kept in the database. It only reads, so it runs beside a broker or without one; it
reads everything, so it takes as long as reading the disk. With --db-url
(PostgreSQL), the server checks its own pages: svc check reports whether
it checksums them and verifies the stored files.

Exit status: 0 when everything is sound, 1 when damage is found or a store
cannot be read, 2 on a usage error. See docs/OPERATIONS.md.

flags:
`

// check runs svc check.
func check(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("check", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() { fmt.Fprint(fset.Output(), checkUsage); fset.PrintDefaults() }
	dbPath := fset.String("db-path", os.Getenv("SVC_DB_PATH"), "main store file (env SVC_DB_PATH)")
	actPath := fset.String("activity-db-path", os.Getenv("SVC_ACTIVITY_DB_PATH"), "activity store file; default <db-path>-activity.db (env SVC_ACTIVITY_DB_PATH)")
	cfgPath := fset.String("config-path", envOr("SVC_CONFIG_PATH", defaultConfigPath), "team config file, whose files block names the files root (env SVC_CONFIG_PATH)")
	files := fset.Bool("files", true, "verify every stored file against its SHA-256")
	urls := addDBURLFlags(fset, false)
	if done, err := parseFlags(fset, args); done {
		return err
	}
	if *urls.main != "" {
		var c Config
		if err := urls.apply(&c, *dbPath, ""); err != nil {
			return err
		}
		if !checkPostgres(ctx, stdout, c, *cfgPath, *files) {
			return &exitError{code: 1, err: errors.New("damage found (or the store could not be read): see above and docs/OPERATIONS.md")}
		}
		fmt.Fprintln(stdout, "everything checked is sound")
		return nil
	}
	mainPath, act := *dbPath, *actPath
	if isMemory(mainPath) {
		mainPath = ""
	}
	if act == "" && mainPath != "" {
		act = mainPath + "-activity.db"
	}
	if isMemory(act) {
		act = ""
	}
	if mainPath == "" && act == "" {
		return &exitError{code: 2, err: errors.New("nothing to check: set --db-path (env SVC_DB_PATH); an in-memory store has no file")}
	}

	bad := 0
	for _, db := range []struct{ name, path string }{{"main store", mainPath}, {"activity store", act}} {
		if db.path != "" && !checkStore(ctx, stdout, db.name, db.path) {
			bad++
		}
	}
	if *files && mainPath != "" && !checkFiles(ctx, stdout, mainPath, *cfgPath) {
		bad++
	}
	if bad > 0 {
		return &exitError{code: 1, err: errors.New("damage found (or a store could not be read): see above and docs/OPERATIONS.md")}
	}
	fmt.Fprintln(stdout, "everything checked is sound")
	return nil
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// checkStore runs the full integrity check of one database file and
// reports whether it is sound.
func checkStore(ctx context.Context, out io.Writer, name, path string) bool {
	in, err := sqlite.Inspect(ctx, path)
	var de *sqlite.DamagedError
	switch {
	case errors.As(err, &de):
		fmt.Fprintf(out, "DAMAGED %s %s: not an SQLite database: %s\n", name, path, joinFindings(de.Findings))
		return false
	case err != nil:
		fmt.Fprintf(out, "FAILED  %s %s: cannot open: %v\n", name, path, err)
		return false
	}
	defer in.Close()
	findings, err := in.IntegrityCheck(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(out, "FAILED  %s %s: integrity_check: %v\n", name, path, err)
		return false
	case len(findings) > 0:
		fmt.Fprintf(out, "DAMAGED %s %s:\n", name, in.Path())
		for _, f := range findings {
			fmt.Fprintf(out, "  %s\n", f)
		}
		return false
	}
	fmt.Fprintf(out, "ok      %s %s\n", name, in.Path())
	return true
}

// checkPostgres checks a main store on PostgreSQL: that it opens, what
// protects its pages, and the stored files. It reports whether all is
// sound.
func checkPostgres(ctx context.Context, out io.Writer, c Config, cfgPath string, files bool) bool {
	db, err := postgres.Open(ctx, c.DBURL)
	if err != nil {
		fmt.Fprintf(out, "FAILED  main store %s: cannot open: %v\n", c.dbName(), err)
		return false
	}
	defer db.Close()
	desc, err := db.Describe(ctx)
	if err != nil {
		fmt.Fprintf(out, "FAILED  main store %s: %v\n", c.dbName(), err)
		return false
	}
	fmt.Fprintf(out, "ok      main store %s (%s; its pages are the server's to check: amcheck, pg_checksums)\n", c.dbName(), desc)
	if !files {
		return true
	}
	root, ok := filesRoot(out, cfgPath)
	if !ok || root == "" {
		return ok
	}
	return verifyBlobs(ctx, out, root, db)
}

// checkFiles verifies every blob the main store's file entries reference
// against its name and size, and reports whether all are sound. Without a
// team config, or with no files block, there are no files to check.
func checkFiles(ctx context.Context, out io.Writer, dbPath, cfgPath string) bool {
	root, ok := filesRoot(out, cfgPath)
	if !ok || root == "" {
		return ok
	}
	in, err := sqlite.Inspect(ctx, dbPath)
	if err != nil {
		fmt.Fprintf(out, "FAILED  files: %v\n", err)
		return false
	}
	defer in.Close()
	return verifyBlobs(ctx, out, root, in)
}

// filesRoot reads the files root from the team config: "" (and ok) when
// there are no files to check, said on out.
func filesRoot(out io.Writer, cfgPath string) (root string, ok bool) {
	cfg, err := teamconfig.Load(cfgPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(out, "skipped files: no team config at %s (set --config-path)\n", cfgPath)
		return "", true
	case err != nil:
		fmt.Fprintf(out, "FAILED  files: %v\n", err)
		return "", false
	case cfg.Files == nil || cfg.Files.Root == "":
		fmt.Fprintln(out, "skipped files: the team config has no files block")
		return "", true
	}
	root = cfg.Files.Root
	if !filepath.IsAbs(root) {
		abs, err := filepath.Abs(cfgPath)
		if err != nil {
			fmt.Fprintf(out, "FAILED  files: %v\n", err)
			return "", false
		}
		root = filepath.Join(filepath.Dir(abs), root)
	}
	return root, true
}

// blobLister lists what file entries reference (store/sqlite's Inspector,
// store/postgres's DB).
type blobLister interface {
	FileBlobs(ctx context.Context) ([]store.FileBlob, error)
	BlobReferenced(ctx context.Context, sha string) (bool, error)
	InlineContents(ctx context.Context, fn func(b store.FileBlob, data []byte) error) error
}

// verifyBlobs checks every content in reports under root.
func verifyBlobs(ctx context.Context, out io.Writer, root string, in blobLister) bool {
	blobs, err := in.FileBlobs(ctx)
	if err != nil {
		fmt.Fprintf(out, "FAILED  files: %v\n", err)
		return false
	}
	damaged := 0
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(out, "FAILED  files: %v\n", err)
			return false
		}
		err := vfs.Verify(root, b.SHA, b.Size)
		if err == nil {
			continue
		}
		var de *vfs.DamageError
		if errors.As(err, &de) && de.Kind == vfs.DamageMissing {
			// A broker running beside the check may have removed the last
			// entry of this content since it was listed.
			if ref, rerr := in.BlobReferenced(ctx, b.SHA); rerr == nil && !ref {
				continue
			}
		}
		damaged++
		fmt.Fprintf(out, "DAMAGED file %s (sha %s): %v\n", b.Path, b.SHA, err)
	}
	inDamaged, inline, ok := verifyInline(ctx, out, root, in)
	if !ok {
		return false
	}
	if damaged > 0 {
		fmt.Fprintf(out, "DAMAGED files under %s: %d of %d stored contents\n", root, damaged, len(blobs))
	}
	if inDamaged > 0 {
		fmt.Fprintf(out, "DAMAGED files kept in the database: %d of %d stored contents\n", inDamaged, inline)
	}
	if damaged > 0 || inDamaged > 0 {
		return false
	}
	fmt.Fprintf(out, "ok      files under %s: %d stored contents\n", root, len(blobs))
	fmt.Fprintf(out, "ok      files kept in the database: %d stored contents\n", inline)
	return true
}

// verifyInline hashes every content kept in the database (files of at most
// 64 KiB, docs/DECISIONS.md "Small files are kept in the database") and
// reports the damaged ones like damaged blobs. A damaged one whose bytes
// were put back under root as a blob file (the runbook in
// docs/OPERATIONS.md) is repaired: the broker reads that file instead, so
// it is said but is not damage. ok is false when the store could not be
// read.
func verifyInline(ctx context.Context, out io.Writer, root string, in blobLister) (damaged, total int, ok bool) {
	err := in.InlineContents(ctx, func(b store.FileBlob, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		total++
		r, err := vfs.ReadInline(b.SHA, b.Size, data)
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err == nil {
			return nil
		}
		if vfs.Verify(root, b.SHA, b.Size) == nil {
			fmt.Fprintf(out, "REPAIRED file %s (sha %s): its copy in the database is damaged (%v); the broker reads the sound copy under %s\n", b.Path, b.SHA, err, root)
			return nil
		}
		damaged++
		fmt.Fprintf(out, "DAMAGED file %s (sha %s, kept in the database): %v\n", b.Path, b.SHA, err)
		return nil
	})
	if err != nil {
		fmt.Fprintf(out, "FAILED  files kept in the database: %v\n", err)
		return damaged, total, false
	}
	return damaged, total, true
}
