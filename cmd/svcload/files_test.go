package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEscapePath(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "/filer/a.bin", want: "/filer/a.bin"},
		{name: "space and hash", in: "/filer/a b#1.bin", want: "/filer/a%20b%231.bin"},
		{name: "question mark and percent", in: "/filer/x?y%z", want: "/filer/x%3Fy%25z"},
		{name: "unicode", in: "/filer/é", want: "/filer/%C3%A9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, escapePath(tc.in))
		})
	}
}

func TestFilesRoot(t *testing.T) {
	tests := []struct {
		name    string
		config  string // "" writes no file
		want    string // relative to the config dir unless absolute
		wantErr bool
	}{
		{name: "files block", config: `{"team":"t","files":{"root":"/srv/files","maxFileSize":1}}`, want: "/srv/files"},
		{name: "no files block is the first-boot default", config: `{"team":"t"}`, want: "svc-files"},
		{name: "empty root is the default", config: `{"files":{}}`, want: "svc-files"},
		{name: "no config", wantErr: true},
		{name: "not JSON", config: `{`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "svc.json")
			if tc.config != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o600))
			}
			got, err := filesRoot(path)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			if !filepath.IsAbs(tc.want) {
				tc.want = filepath.Join(dir, tc.want)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestExistingParent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "exists", in: dir, want: dir},
		{name: "missing child", in: filepath.Join(dir, "a", "b"), want: dir},
		{name: "a file", in: file, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := existingParent(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRandomFilesDistinct(t *testing.T) {
	a, err := randomFiles(8, 4<<10)
	require.NoError(t, err)
	b, err := randomFiles(8, 4<<10)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range append(a, b...) {
		require.Len(t, f, 4<<10)
		require.False(t, seen[string(f)], "a file repeats")
		seen[string(f)] = true
	}
}

func TestSizeName(t *testing.T) {
	tests := []struct {
		name string
		in   int
		want string
	}{
		{name: "MiB", in: 1 << 20, want: "1 MiB"},
		{name: "KiB", in: 64 << 10, want: "64 KiB"},
		{name: "bytes", in: 1000, want: "1000 B"},
		{name: "not whole MiB", in: 1<<20 + 1<<10, want: "1025 KiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sizeName(tc.in))
		})
	}
}

func TestClosedLoop(t *testing.T) {
	t.Run("every op once, failures counted", func(t *testing.T) {
		var runs [100]atomic.Int32
		s := closedLoop(context.Background(), 100, 4, time.Minute, func(_ context.Context, i int) error {
			runs[i].Add(1)
			if i%10 == 0 {
				return errors.New("boom")
			}
			return nil
		})
		for i := range runs {
			require.Equal(t, int32(1), runs[i].Load(), "op %d", i)
		}
		require.Equal(t, 100, s.n)
		require.Len(t, s.lats, 90)
		require.Equal(t, 10, s.fails)
		require.Zero(t, s.skipped)
		require.ErrorContains(t, s.firstErr, "boom")
	})
	t.Run("ended run starts nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s := closedLoop(ctx, 10, 2, time.Minute, func(context.Context, int) error {
			t.Error("op ran after the run ended")
			return nil
		})
		require.Equal(t, 10, s.skipped)
		require.Empty(t, s.lats)
	})
}

// fakeBroker serves the REST calls the files and objectives groups make,
// from memory, with the contract's status codes and answers.
type fakeBroker struct {
	mu      sync.Mutex
	files   map[string][]byte
	objs    map[string]string // id → status
	corrupt func(path string, b []byte) []byte
	rename  bool
}

func (f *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	member, ok := strings.CutPrefix(tok, "svc_")
	if !ok {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/members":
		var in struct{ Name string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]any{"token": "svc_" + in.Name})
	case r.Method == http.MethodPost && r.URL.Path == "/fs/write":
		path := r.URL.Query().Get("path")
		if !strings.HasPrefix(path, "/"+member+"/") || r.URL.Query().Get("collide") != "overwrite" ||
			r.Header.Get("Content-Type") != "application/octet-stream" {
			http.Error(w, "bad write", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.files[path] = body
		if f.rename {
			path += "-1"
		}
		writeJSON(w, map[string]any{"entry": map[string]any{"path": path, "size": len(body)}, "renamed": f.rename})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/fs/read/"):
		path := strings.TrimPrefix(r.URL.Path, "/fs/read")
		b, ok := f.files[path]
		if !ok || !strings.HasPrefix(path, "/"+member+"/") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if f.corrupt != nil {
			b = f.corrupt(path, b)
		}
		_, _ = w.Write(b)
	case r.Method == http.MethodPost && r.URL.Path == "/objectives":
		var in struct{ Title, Outcome, Assignee string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || member != "admin" || in.Title == "" || in.Outcome == "" {
			http.Error(w, "bad create", http.StatusBadRequest)
			return
		}
		id := strconv.Itoa(len(f.objs) + 1)
		f.objs[id] = "active"
		writeJSON(w, map[string]any{"id": id, "status": "active", "assignee": in.Assignee})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/objectives/") && strings.HasSuffix(r.URL.Path, "/complete"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/objectives/"), "/complete")
		switch {
		case member != assignee:
			http.Error(w, "not the assignee", http.StatusForbidden)
		case f.objs[id] != "active":
			http.Error(w, "conflict", http.StatusConflict)
		default:
			f.objs[id] = "done"
			writeJSON(w, map[string]any{"id": id, "status": "done", "assignee": assignee})
		}
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// mustFakeLoadgen serves f on 127.0.0.1 and returns a loadgen pointed at it,
// with a config whose files root does not exist yet.
func mustFakeLoadgen(t *testing.T, f *fakeBroker) *loadgen {
	t.Helper()
	f.files, f.objs = map[string][]byte{}, map[string]string{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	b := &broker{pid: os.Getpid(), addr: strings.TrimPrefix(srv.URL, "http://"), token: "svc_admin", dir: t.TempDir()}
	cfg := `{"files":{"root":"` + filepath.Join(b.dir, "svc-files") + `"}}`
	require.NoError(t, os.WriteFile(b.configPath(), []byte(cfg), 0o600))
	p := quickPlan
	p.fileCases, p.objCount = []fileCase{{1 << 10, 8}, {4 << 10, 4}}, 20
	lg := newLoadgen(p, b)
	t.Cleanup(lg.close)
	return lg
}

func TestFilesGroup(t *testing.T) {
	tests := []struct {
		name       string
		corrupt    func(path string, b []byte) []byte
		rename     bool
		wantMet    bool
		wantBroken string
	}{
		{name: "faithful broker", wantMet: true},
		{
			name: "a flipped byte is a mismatch",
			corrupt: func(path string, b []byte) []byte {
				if !strings.HasSuffix(path, "-0003.bin") {
					return b
				}
				c := append([]byte(nil), b...)
				c[len(c)/2] ^= 1
				return c
			},
			wantBroken: "read back different bytes",
		},
		{
			name:       "a short read is a mismatch",
			corrupt:    func(_ string, b []byte) []byte { return b[:len(b)-1] },
			wantBroken: "read back different bytes",
		},
		{name: "a renamed write fails", rename: true, wantBroken: "renamed true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBroker{corrupt: tc.corrupt, rename: tc.rename}
			lg := mustFakeLoadgen(t, f)
			require.NoError(t, lg.files(context.Background()))
			// Per case and writer count: a write row, a read row, a verify row.
			require.Len(t, lg.rows, 2*len(fileWriters)*3)
			for i := 0; i < len(lg.rows); i += 3 {
				require.Contains(t, lg.rows[i].result, "API/raw")
				require.Contains(t, lg.rows[i+1].result, "page cache")
				require.Equal(t, tc.wantMet, *lg.rows[i+2].met, lg.rows[i+2].result)
			}
			if tc.wantBroken == "" {
				require.NoError(t, lg.brokenErr())
				require.Len(t, f.files, 8*2+4*2)
			} else {
				require.ErrorContains(t, lg.brokenErr(), tc.wantBroken)
			}
			// The raw dirs are gone; the root was not there to hold them.
			entries, err := os.ReadDir(lg.b.dir)
			require.NoError(t, err)
			require.Len(t, entries, 1) // svc.json
		})
	}
}

func TestObjectivesGroup(t *testing.T) {
	f := &fakeBroker{}
	lg := mustFakeLoadgen(t, f)
	require.NoError(t, lg.objectives(context.Background()))
	require.NoError(t, lg.brokenErr())
	require.Len(t, lg.rows, 2*len(objectiveClients))
	for _, r := range lg.rows {
		require.Contains(t, r.result, "ops/s")
	}
	require.Len(t, f.objs, 2*20)
	for id, status := range f.objs {
		require.Equal(t, "done", status, id)
	}
}
