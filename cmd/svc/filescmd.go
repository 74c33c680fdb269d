package main

// `svc files sweep`: deleting, on purpose, the blobs a boot refused to
// delete unasked (docs/DECISIONS.md, "What a boot may assume").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"svc/server/vfs"
)

const filesUsage = `usage: svc files sweep --config-path P --db-path D [--yes]
  delete the files under the files root that no file entry of the
  database references; the broker must be stopped
`

func filesCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "sweep" {
		return filesSweep(ctx, args[1:], stdin, stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, filesUsage)
		return nil
	}
	fmt.Fprint(stderr, filesUsage)
	return &exitError{code: 2, err: errors.New("files: want the sweep command")}
}

func filesSweep(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("files sweep", flag.ContinueOnError)
	fset.SetOutput(stderr)
	configPath, dbPath, dbURL := maintenanceFlags(fset)
	yes := fset.Bool("yes", false, "do not ask for confirmation")
	if done, err := parseFlags(fset, args); done {
		return err
	}
	cfg, err := maintenanceConfig(*configPath, *dbPath, dbURL, false)
	if err != nil {
		return err
	}
	file, st, p, err := openStopped(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	// The files are judged by this database only if it is the team's: a
	// pair that never started with team ids is refused here too.
	if p.configID == "" || p.db.teamID != p.configID {
		return fmt.Errorf("the database %s and the team config %s name no common team: start svc serve on them once first", cfg.dbName(), cfg.ConfigPath)
	}
	root := configFilesRoot(cfg, file)
	if root == "" {
		return fmt.Errorf("the team config %s has no files block", cfg.ConfigPath)
	}
	blobs, err := vfs.Open(root)
	if err != nil {
		return err
	}
	// A sweep bounded at zero deletes temp files only and counts the rest.
	_, err = blobs.Sweep(ctx, st.BlobReferenced, 0)
	var ue *vfs.UnreferencedError
	if err == nil {
		fmt.Fprintf(stdout, "nothing to sweep: every file under %s is referenced by %s\n", root, cfg.dbName())
		return nil
	}
	if !errors.As(err, &ue) {
		return err
	}
	fmt.Fprintf(stdout, "%d files (%d bytes) under %s are referenced by no file entry of %s (team %s, %s).\n",
		ue.Count, ue.Bytes, root, cfg.dbName(), p.db.teamID, p.db.describe())
	if err := askYes(stdin, stdout, *yes, "Delete them for good?"); err != nil {
		return err
	}
	n, err := blobs.Sweep(ctx, st.BlobReferenced, -1)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted %d files\n", n)
	return nil
}
