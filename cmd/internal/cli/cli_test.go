package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"svc/cmd/internal/client"
	apiv1 "svc/gen/svc/v1"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    Target
		wantErr string
	}{
		{in: "bob", want: Target{Kind: TargetMember, Name: "bob"}},
		{in: "general", want: Target{Kind: TargetGeneral}},
		{in: "-", want: Target{Kind: TargetGeneral}},
		{in: "#ops", want: Target{Kind: TargetChannel, Name: "ops"}},
		{in: "#", wantErr: "want #<channel>"},
		{in: "##ops", wantErr: "want #<channel>"},
		{in: "", wantErr: "empty"},
		{in: "bo b", wantErr: "space or control"},
		{in: "bob\n", wantErr: "space or control"},
		{in: "bob\x1b[2J", wantErr: "space or control"},
		{in: strings.Repeat("a", maxTargetLen+1), wantErr: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTarget(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"bob", "#ops", "-", "general", "#", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		require.NotContains(t, tg.Name, " ")
		if tg.Kind == TargetChannel {
			require.Equal(t, "#"+tg.Name, s)
		}
	})
}

func TestParseInterleavedFlags(t *testing.T) {
	fs := newSendFlags()
	pos, err := parse(fs.fs, []string{"bob", "--title", "T", "hi there", "--attach", "/a", "--attach=/b"})
	require.NoError(t, err)
	require.Equal(t, []string{"bob", "hi there"}, pos)
	require.Equal(t, "T", *fs.title)
	require.Equal(t, multiFlag{"/a", "/b"}, *fs.attach)

	_, err = parse(newSendFlags().fs, []string{"--nope"})
	var ue *UsageError
	require.ErrorAs(t, err, &ue)
}

type sendFlags struct {
	fs     *flag.FlagSet
	title  *string
	attach *multiFlag
}

func newSendFlags() sendFlags {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	f := sendFlags{fs: fs, title: fs.String("title", "", ""), attach: &multiFlag{}}
	fs.Var(f.attach, "attach", "")
	return f
}

func TestFormatMessage(t *testing.T) {
	to := "bob"
	m := &apiv1.Message{Id: "01", From: "alice", To: &to, Title: "t", Body: "a\nb\x1b[2J", Level: "warning", CreatedAt: 0}
	require.Equal(t, "1970-01-01T00:00:00Z 01 alice -> bob [warning]: t — a·b·[2J", FormatMessage(m))
	data, _ := structpb.NewStruct(map[string]any{"thread": "chan:abc"})
	m = &apiv1.Message{Id: "02", From: "alice", Body: "x", Level: "info", Data: data}
	require.Equal(t, "1970-01-01T00:00:00Z 02 alice -> chan:abc: x", FormatMessage(m))
}

// fakeEnroll is a broker that answers /enroll and /enroll/poll from a script.
type fakeEnroll struct {
	mu    sync.Mutex
	polls []string // error codes to answer, in order; "" is success
	seen  int
	desc  string
}

func (f *fakeEnroll) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/enroll":
		_ = json.NewEncoder(w).Encode(map[string]any{"deviceCode": "dc", "userCode": "BCDF-GHJK",
			"verificationUri": "http://x/enroll", "verificationUriComplete": "http://x/enroll?code=BCDF-GHJK", "expiresIn": 300, "interval": 5})
	case "/enroll/poll":
		f.mu.Lock()
		code := f.polls[min(f.seen, len(f.polls)-1)]
		f.seen++
		f.mu.Unlock()
		if code == "" {
			_ = json.NewEncoder(w).Encode(map[string]any{"token": "svc_secret", "member": "laptop"})
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		body := map[string]any{"error": code, "message": code}
		if code == "access_denied" && f.desc != "" {
			body["errorDescription"] = f.desc
		}
		_ = json.NewEncoder(w).Encode(body)
	default:
		http.NotFound(w, r)
	}
}

func TestLoginFlow(t *testing.T) {
	tests := []struct {
		name       string
		polls      []string
		desc       string
		wantErr    string
		wantSleeps []time.Duration
	}{
		{name: "approved after pending and slow_down", polls: []string{"authorization_pending", "slow_down", "authorization_pending", ""},
			wantSleeps: []time.Duration{5 * time.Second, 10 * time.Second, 10 * time.Second}},
		{name: "rejected with reason", polls: []string{"authorization_pending", "access_denied"}, desc: "not a team laptop",
			wantErr: "login rejected: not a team laptop", wantSleeps: []time.Duration{5 * time.Second}},
		{name: "rejected without reason", polls: []string{"access_denied"}, wantErr: "login rejected: no reason given"},
		{name: "expired", polls: []string{"expired_token"}, wantErr: "code expired"},
		{name: "unknown error", polls: []string{"internal"}, wantErr: "internal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&fakeEnroll{polls: tc.polls, desc: tc.desc})
			defer srv.Close()
			cache := filepath.Join(t.TempDir(), "svc", "auth.json")
			var sleeps []time.Duration
			var out, errOut bytes.Buffer
			env := Env{Stdout: &out, Stderr: &errOut,
				Getenv: func(k string) string {
					return map[string]string{client.EnvAuthConfigPath: cache}[k]
				},
				Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
			}
			err := Login(context.Background(), []string{"--url", srv.URL, "--label", "ci"}, env)
			require.Equal(t, tc.wantSleeps, sleeps)
			require.Contains(t, out.String(), "BCDF-GHJK")
			require.Contains(t, out.String(), "http://x/enroll?code=BCDF-GHJK")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				_, statErr := os.Stat(cache)
				require.True(t, os.IsNotExist(statErr), "no cache written on failure")
				return
			}
			require.NoError(t, err)
			require.NotContains(t, out.String()+errOut.String(), "svc_secret", "the token is never printed")
			c, err := client.LoadCache(cache)
			require.NoError(t, err)
			tok, ok := c.Lookup(srv.URL)
			require.True(t, ok)
			require.Equal(t, "svc_secret", tok)
			fi, err := os.Stat(cache)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		})
	}
}

func TestLoginUsage(t *testing.T) {
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	var ue *UsageError
	require.ErrorAs(t, Login(context.Background(), []string{"extra"}, env), &ue)
	require.ErrorAs(t, Login(context.Background(), []string{"--url", "ftp://x"}, env), &ue)
	require.ErrorAs(t, Send(context.Background(), []string{"bob"}, env), &ue)
	require.ErrorAs(t, Send(context.Background(), []string{"bo b", "x"}, env), &ue)
	require.ErrorAs(t, Whoami(context.Background(), []string{"x"}, env), &ue)
	require.ErrorAs(t, Tail(context.Background(), []string{"x"}, env), &ue)
}

// The cache key is the URL exactly as given: a trailing slash is kept.
func TestLoginCachesExactURL(t *testing.T) {
	srv := httptest.NewServer(&fakeEnroll{polls: []string{""}})
	defer srv.Close()
	cache := filepath.Join(t.TempDir(), "auth.json")
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
		Getenv: func(k string) string {
			return map[string]string{client.EnvAuthConfigPath: cache, client.EnvURL: srv.URL + "/"}[k]
		}}
	require.NoError(t, Login(context.Background(), nil, env))
	c, err := client.LoadCache(cache)
	require.NoError(t, err)
	require.Len(t, c.Entries, 1)
	require.Equal(t, srv.URL+"/", c.Entries[0].URL)
}

func TestApprovalCommandsUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(context.Context, []string, Env) error
		args []string
		want string
	}{
		{"approve needs an id", Approve, nil, "usage: svc approve"},
		{"approve takes one id", Approve, []string{"a", "b"}, "usage: svc approve"},
		{"deny needs an id", Deny, nil, "usage: svc deny"},
		{"an id with a slash", Deny, []string{"../members"}, "not an approval id"},
		{"an id with a newline", Approve, []string{"a\nb"}, "not an approval id"},
		{"list takes no arguments", Approvals, []string{"x"}, "usage: svc approvals"},
		{"list: decided or all", Approvals, []string{"--decided", "--all"}, "usage: svc approvals"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(context.Background(), tc.args, Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
			var ue *UsageError
			require.ErrorAs(t, err, &ue)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSafe(t *testing.T) {
	require.Equal(t, "a b", safe("a\nb", 10))
	require.Equal(t, "ab…", safe("abc", 2))
	require.Equal(t, "é…", safe("éé", 3), "cut on a rune boundary")
}
