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
)

// maxStateFile bounds the state file the runner reads back.
const maxStateFile = 64 << 10

// The state file is where a runner before the broker kept the member's
// delivery position kept its last message id. The broker's position is the
// authority now (docs/RUNNER.md, Delivery contract): a runner reads such a
// file once, to give the broker a position it does not have yet, and
// removes it; it never writes one.

// StateDir is where an earlier runner kept its last message ids: flag,
// else $XDG_STATE_HOME/svc/runner, else ~/.local/state/svc/runner.
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
