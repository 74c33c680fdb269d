package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// filer is the member whose home the files runs write to and read from.
const filer = "filer"

// fileCase is one file size and how many files of it a files run moves.
type fileCase struct{ size, count int }

// The cases are bounded in bytes (16 MiB and 64 MiB a run; a quarter in
// quick mode), so the group ends in seconds even on a slow disk.
var (
	fullFileCases  = []fileCase{{64 << 10, 256}, {1 << 20, 64}}
	quickFileCases = []fileCase{{64 << 10, 64}, {1 << 20, 16}}
	fileWriters    = []int{1, 4} // concurrent writers, and then readers
)

// errMismatch is a read that did not return exactly the bytes written.
var errMismatch = errors.New("read back different bytes")

// files writes and reads fresh random files through the API with each number
// of writers and reports MB/s (10^6 bytes) beside the raw disk speed of the
// same files on the broker's files root, measured in the same run.
func (lg *loadgen) files(ctx context.Context) error {
	if err := lg.createMember(ctx, filer); err != nil {
		return err
	}
	root, err := filesRoot(lg.b.configPath())
	if err != nil {
		return err
	}
	for _, fc := range lg.fileCases {
		for _, w := range fileWriters {
			if err := lg.fileRun(ctx, root, fc, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// filesRoot is files.root from the broker's config, or the first-boot
// default beside the config (docs/DECISIONS.md, Filesystem) when the file
// has no files block.
func filesRoot(configPath string) (string, error) {
	raw, err := os.ReadFile(configPath)
	if err != nil {
		return "", fmt.Errorf("read the broker config for files.root: %w", err)
	}
	var cfg struct {
		Files *struct {
			Root string `json:"root"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("parse %s: %w", configPath, err)
	}
	if cfg.Files == nil || cfg.Files.Root == "" {
		return filepath.Join(filepath.Dir(configPath), "svc-files"), nil
	}
	return cfg.Files.Root, nil
}

// phase is one timed pass (write or read) over a run's files.
type phase struct {
	opStats
	bytes      int64 // moved by the successful operations
	mismatches int64
	cpu        string
	done       []bool // done[i]: file i moved
}

// mbps is the phase's throughput in MB/s (10^6 bytes).
func (p phase) mbps() float64 {
	if p.elapsed <= 0 {
		return 0
	}
	return float64(p.bytes) / 1e6 / p.elapsed.Seconds()
}

// fileRun moves fc.count fresh files of fc.size through the API with writers
// concurrent clients, then the same files through os calls in a temp dir
// under root, and reports both with their ratio.
func (lg *loadgen) fileRun(ctx context.Context, root string, fc fileCase, writers int) error {
	label := fmt.Sprintf("%s × %d", sizeName(fc.size), fc.count)
	progress("files %s, %s", label, countN(writers, "writer"))
	data, err := randomFiles(fc.count, fc.size)
	if err != nil {
		return err
	}
	paths := make([]string, fc.count)
	for i := range paths {
		paths[i] = fmt.Sprintf("/%s/lg-%s-w%d-%04d.bin", filer, strings.ReplaceAll(sizeName(fc.size), " ", ""), writers, i)
	}
	tok := lg.tokens[filer]

	apiW := lg.filePhase(ctx, writers, fc.count, func(ctx context.Context, i int) error {
		return lg.fsWrite(ctx, tok, paths[i], data[i])
	}, data, nil)
	apiR := lg.filePhase(ctx, writers, fc.count, func(ctx context.Context, i int) error {
		return lg.fsRead(ctx, tok, paths[i], data[i])
	}, data, apiW.done)
	if err := context.Cause(ctx); err != nil {
		return err
	}

	// The raw dir goes where the broker's files go; before the broker has
	// made its root, into the nearest existing parent, on the same mount
	// unless the root is a mount point of its own.
	parent, err := existingParent(root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(parent, ".svcload-raw-")
	if err != nil {
		return fmt.Errorf("raw disk dir: %w", err)
	}
	defer os.RemoveAll(dir)
	rawPath := func(i int) string { return filepath.Join(dir, strconv.Itoa(i)) }
	rawW := lg.filePhase(ctx, writers, fc.count, func(_ context.Context, i int) error {
		return writeSynced(rawPath(i), data[i])
	}, data, nil)
	rawR := lg.filePhase(ctx, writers, fc.count, func(_ context.Context, i int) error {
		got, err := os.ReadFile(rawPath(i))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data[i]) {
			return fmt.Errorf("%s: %w (%d bytes, want %d)", rawPath(i), errMismatch, len(got), len(data[i]))
		}
		return nil
	}, data, rawW.done)
	if err := context.Cause(ctx); err != nil {
		return err
	}

	where := ""
	if parent != root {
		where = " (in " + parent + ": root not made yet)"
	}
	lg.rows = append(lg.rows,
		row{
			name:   fmt.Sprintf("files write %s, %s", label, countN(writers, "writer")),
			result: fmt.Sprintf("API %s, raw disk %s%s, API/raw %s", rateOf(apiW), rateOf(rawW), where, ratio(apiW, rawW)),
			cpu:    apiW.cpu,
		},
		row{
			name: fmt.Sprintf("files read %s, %s", label, countN(writers, "reader")),
			result: fmt.Sprintf("API %s, raw %s, API/raw %s; raw reads come from the page cache: a memory figure",
				rateOf(apiR), rateOf(rawR), ratio(apiR, rawR)),
			cpu: apiR.cpu,
		},
		lg.verifyRow(label, writers, apiW, apiR, rawW, rawR),
	)
	return nil
}

// filePhase runs op over the files (all of them, or those done[i] marks) on
// clients workers and sums the bytes of the successes.
func (lg *loadgen) filePhase(ctx context.Context, clients, n int, op func(context.Context, int) error, data [][]byte, only []bool) phase {
	idx := make([]int, 0, n)
	for i := range n {
		if only == nil || only[i] {
			idx = append(idx, i)
		}
	}
	var (
		moved, mismatches atomic.Int64
		done              = make([]bool, n)
	)
	cpu := lg.startCPU()
	if len(idx) == 0 {
		cpu = func() string { return "" } // nothing ran: no figure
	}
	s := closedLoop(ctx, len(idx), clients, phaseCap, func(ctx context.Context, k int) error {
		i := idx[k]
		err := op(ctx, i)
		if errors.Is(err, errMismatch) {
			mismatches.Add(1)
		}
		if err == nil {
			done[i] = true // each i is run once, by one worker
			moved.Add(int64(len(data[i])))
		}
		return err
	})
	return phase{opStats: s, bytes: moved.Load(), mismatches: mismatches.Load(), cpu: cpu(), done: done}
}

// verifyRow reports, for a run, the files that were not written, not read
// back, or read back different; any of them breaks the run.
func (lg *loadgen) verifyRow(label string, writers int, phases ...phase) row {
	var fails, skipped, mismatches int
	names := []string{"API write", "API read", "raw write", "raw read"}
	for k, p := range phases {
		fails, skipped, mismatches = fails+p.fails-int(p.mismatches), skipped+p.skipped, mismatches+int(p.mismatches)
		if p.fails > 0 {
			lg.broken = append(lg.broken, fmt.Errorf("files %s, %s, %s: %d of %d failed, first: %w",
				label, countN(writers, "writer"), names[k], p.fails, p.n, p.firstErr))
		}
	}
	apiR := phases[1]
	return row{
		name: "  verify",
		result: fmt.Sprintf("%d of %d API reads identical; %d failed, %d not started, %d mismatched (API and raw)",
			len(apiR.lats), phases[0].n, fails, skipped, mismatches),
		target: "0 / 0 / 0", met: verdict(fails == 0 && skipped == 0 && mismatches == 0 && len(apiR.lats) == phases[0].n),
	}
}

// fsWrite writes data to path through the API, overwriting, and checks the
// answer names the file at its size.
func (lg *loadgen) fsWrite(ctx context.Context, token, path string, data []byte) error {
	q := url.Values{"path": {path}, "collide": {"overwrite"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lg.base+"/fs/write?"+q.Encode(), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := lg.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	var out struct {
		Entry *struct {
			Path string  `json:"path"`
			Size float64 `json:"size"`
		} `json:"entry"`
		Renamed bool `json:"renamed"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("write %s: decode the answer: %w", path, err)
	}
	switch {
	case out.Entry == nil:
		return fmt.Errorf("write %s: no entry in the answer", path)
	case out.Renamed || out.Entry.Path != path:
		return fmt.Errorf("write %s: answered path %q renamed %v, want the same path, not renamed", path, out.Entry.Path, out.Renamed)
	case int(out.Entry.Size) != len(data):
		return fmt.Errorf("write %s: answered size %v, want %d", path, out.Entry.Size, len(data))
	}
	return nil
}

// fsRead reads path through the API and checks it holds exactly want.
func (lg *loadgen) fsRead(ctx context.Context, token, path string, want []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lg.base+"/fs/read"+escapePath(path), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := lg.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	got, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(want))+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("read %s: %w (%d bytes or more, want %d)", path, errMismatch, len(got), len(want))
	}
	return nil
}

// escapePath URL-encodes each segment of an absolute virtual path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// writeSynced is os.WriteFile followed by an fsync, as a store that promises
// durability must do per file.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// existingParent is dir itself when it exists, else its nearest existing
// ancestor.
func existingParent(dir string) (string, error) {
	for {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && fi.IsDir():
			return dir, nil
		case err == nil:
			return "", fmt.Errorf("files root %s is not a directory", dir)
		case !errors.Is(err, fs.ErrNotExist):
			return "", err
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no existing parent of %s", dir)
		}
		dir = up
	}
}

// randomFiles makes n distinct files of size incompressible bytes, from a
// fresh seed so no two runs (nor a blob store's de-duplication) share one.
func randomFiles(n, size int) ([][]byte, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, err
	}
	src := rand.NewChaCha8(seed)
	files := make([][]byte, n)
	for i := range files {
		files[i] = make([]byte, size)
		_, _ = src.Read(files[i]) // never fails
	}
	return files, nil
}

// rateOf formats a phase's MB/s.
func rateOf(p phase) string {
	return strconv.FormatFloat(p.mbps(), 'f', 1, 64) + " MB/s"
}

// ratio formats api's throughput as a fraction of raw's.
func ratio(api, raw phase) string {
	if raw.mbps() == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(api.mbps()/raw.mbps(), 'f', 2, 64)
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

func countN(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
