package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"svc/cmd/internal/client"
)

// maxStateFile bounds the state file the runner reads back.
const maxStateFile = 64 << 10

// StateDir is where the runner keeps its last message ids: flag, else
// $XDG_STATE_HOME/svc/runner, else ~/.local/state/svc/runner.
func StateDir(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "svc", "runner"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: set --state-dir, XDG_STATE_HOME or HOME")
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", "svc", "runner"), nil
}

// StatePath is the state file of one member on one broker: the name hashes
// both, so a URL never becomes a path.
func StatePath(dir, brokerURL, member string) string {
	h := sha256.Sum256([]byte(brokerURL + "\x00" + member))
	return filepath.Join(dir, hex.EncodeToString(h[:12])+".json")
}

// stateFile is what a state file holds; url and member say whose it is.
type stateFile struct {
	URL    string `json:"url"`
	Member string `json:"member"`
	LastID string `json:"lastId"`
}

// LoadLastID reads the last message id of a state file; "" when there is
// none yet.
func LoadLastID(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	var st stateFile
	dec := json.NewDecoder(&limitedReader{f: f, n: maxStateFile})
	if err := dec.Decode(&st); err != nil {
		return "", fmt.Errorf("state file %s: %w", path, err)
	}
	if len(st.LastID) > 128 {
		return "", fmt.Errorf("state file %s: lastId too long", path)
	}
	return st.LastID, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("state file too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

// SaveLastID writes the state file atomically (a private temp file in the
// same 0700 directory, synced, renamed over the old one), mode 0600.
func SaveLastID(path, brokerURL, member, lastID string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(stateFile{URL: brokerURL, Member: member, LastID: lastID})
	if err != nil {
		return err
	}
	return client.WriteFileAtomic(path, append(data, '\n'))
}
