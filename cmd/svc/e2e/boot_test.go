package e2e

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"

	"svc/server/kek"
	"svc/server/teamconfig"
)

// requireMode asserts a path's permission bits.
func requireMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, want, info.Mode().Perm(), "mode of %s", path)
}

// readJSON reads a JSON object file.
func readJSON(t *testing.T, path string) obj {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var o obj
	require.NoError(t, json.Unmarshal(data, &o), "%s", data)
	return o
}

// configMembers returns store.members of a config file, by name.
func configMembers(t *testing.T, cfg obj) map[string]obj {
	t.Helper()
	st, ok := cfg["store"].(obj)
	require.True(t, ok, "store block: %v", cfg)
	out := map[string]obj{}
	for _, m := range listOf(t, st, "members") {
		out[m["name"].(string)] = m
	}
	return out
}

func tokenHash(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// requireSealed asserts an encrypted {v: 1, ct, iv} object.
func requireSealed(t *testing.T, v any) {
	t.Helper()
	o, ok := v.(obj)
	require.True(t, ok, "want an encrypted object, got %#v", v)
	require.Equal(t, []string{"ct", "iv", "v"}, keys(o))
	require.InDelta(t, 1, o["v"], 0)
	for _, k := range []string{"ct", "iv"} {
		s, ok := o[k].(string)
		require.True(t, ok)
		_, err := base64.StdEncoding.DecodeString(s)
		require.NoError(t, err, "%s is base64", k)
	}
}

// requireAbsent asserts that no file in paths contains any of secrets.
func requireAbsent(t *testing.T, paths []string, secrets ...string) {
	t.Helper()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, s := range secrets {
			require.False(t, bytes.Contains(data, []byte(s)), "%s contains a secret", p)
		}
	}
}

func TestFirstBoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "etc", "svc", "svc.json")
	dbPath := filepath.Join(dir, "var", "svc", "main.db")
	p := mustStartSvc(t, procOpts{configPath: cfgPath, dbPath: dbPath})
	tok := p.adminToken(t)
	d := restDriver{p}

	b := mustCall(t, d, bearer(tok), "GetBriefing", nil)
	me := b["member"].(obj)
	require.Equal(t, "admin", me["name"])
	require.Equal(t, allLeaves, sortedStrs(t, me["permissions"]))
	team := b["team"].(obj)
	require.Equal(t, "team", team["name"])
	presets := team["permissionPresets"].(obj)
	require.Equal(t, []string{"admin", "member", "operator"}, keys(presets))
	require.Equal(t, allLeaves, sortedStrs(t, presets["admin"]))
	require.Equal(t, operatorLeaves, sortedStrs(t, presets["operator"]))
	require.Empty(t, strs(t, presets["member"]))
	require.Equal(t, []any{}, b["openObjectives"])
	requireWorks(t, grpcDriver{p.grpcConn(t)}, bearer(tok), "admin")

	body := strings.TrimPrefix(tok, "svc_")
	// On PostgreSQL there are no database files: the config's part holds.
	sqliteFiles := storeOf(p.opts) == storeSQLite
	var dbFiles []string
	if sqliteFiles {
		dbFiles = []string{dbPath, dbPath + "-wal", dbPath + "-activity.db", dbPath + "-activity.db-wal"}
		for _, f := range dbFiles[:2] {
			require.FileExists(t, f, "the running store has its file and WAL")
		}
	}
	requireAbsent(t, dbFiles, tok, body)
	require.NotContains(t, p.stderr.String(), body, "the token is never logged")

	p.mustStop(t)
	require.Equal(t, "admin token: "+tok+"\n", p.stdout.String(), "stdout is exactly one line")
	requireAbsent(t, dbFiles, tok, body)

	created, private := []string{filepath.Join(dir, "etc"), filepath.Join(dir, "etc", "svc")}, []string{cfgPath, cfgPath + ".kek"}
	if sqliteFiles {
		created = append(created, filepath.Join(dir, "var"), filepath.Join(dir, "var", "svc"))
		private = append(private, dbPath, dbPath+"-activity.db")
	}
	for _, d := range created {
		requireMode(t, d, 0o700)
	}
	for _, f := range private {
		requireMode(t, f, 0o600)
	}
	kekData, err := os.ReadFile(cfgPath + ".kek")
	require.NoError(t, err)
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(kekData)))
	require.NoError(t, err)
	require.Len(t, key, 32)

	cfgBytes, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.NotContains(t, string(cfgBytes), body, "no plaintext token in the config")
	cfg := readJSON(t, cfgPath)
	members := configMembers(t, cfg)
	require.Len(t, members, 1)
	admin := members["admin"]
	require.Equal(t, tokenHash(tok), admin["tokenHash"])
	require.NotContains(t, admin, "token")
	require.Equal(t, []string{"admin"}, strs(t, admin["rawPermissions"]))
	require.Equal(t, allLeaves, sortedStrs(t, admin["permissions"]))
	require.Equal(t, "team", cfg["team"].(obj)["name"])
	require.Equal(t, filepath.Join(dir, "etc", "svc", "svc-files"), cfg["files"].(obj)["root"])
	wp := cfg["webPush"].(obj)
	pub, err := base64.RawURLEncoding.DecodeString(wp["vapidPublicKey"].(string))
	require.NoError(t, err)
	require.Len(t, pub, 65, "uncompressed P-256 point")
	require.Equal(t, byte(4), pub[0])
	requireSealed(t, wp["vapidPrivateKey"])

	// A second boot with the same config prints nothing, keeps the file
	// and accepts the old token.
	p2 := p.restart(t)
	requireWorks(t, restDriver{p2}, bearer(tok), "admin")
	p2.mustStop(t)
	require.Empty(t, p2.stdout.String())
	after, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.Equal(t, string(cfgBytes), string(after))
	require.NotContains(t, p2.stderr.String(), body)
}

// sortedStrs converts a JSON list of strings and sorts it.
func sortedStrs(t *testing.T, v any) []string {
	t.Helper()
	s := strs(t, v)
	slices.Sort(s)
	return s
}

func TestBootMigratesPlaintextSecrets(t *testing.T) {
	t.Parallel()
	envKey := make([]byte, 32)
	_, err := rand.Read(envKey)
	require.NoError(t, err)
	tests := []struct {
		name string
		env  []string
		key  []byte // nil: the KEK file beside the config
	}{
		{name: "kek file", env: nil},
		{name: "SVC_KEK", env: []string{"SVC_KEK=" + base64.StdEncoding.EncodeToString(envKey)}, key: envKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			adminTok, opsTok := randomToken(t), randomToken(t)
			key, err := totp.Generate(totp.GenerateOpts{Issuer: "e2e", AccountName: "ops"})
			require.NoError(t, err)
			secret := key.Secret()
			vapid, err := ecdh.P256().GenerateKey(rand.Reader)
			require.NoError(t, err)
			vapidPriv := base64.RawURLEncoding.EncodeToString(vapid.Bytes())
			vapidPub := base64.RawURLEncoding.EncodeToString(vapid.PublicKey().Bytes())
			cfgPath := filepath.Join(t.TempDir(), "svc.json")
			writeConfig(t, cfgPath, obj{
				"team": obj{"name": "crew", "directive": "ship it", "context": "e2e", "permissionPresets": obj{
					"admin": allLeaves, "operator": operatorLeaves, "member": []string{},
				}},
				"store": obj{"members": []obj{
					{"name": "admin", "role": nil, "permissions": []string{"admin"}, "token": adminTok},
					{"name": "ops", "role": obj{"title": "Ops", "description": "Runs things"}, "permissions": []string{"operator"}, "token": opsTok, "totpSecret": secret},
				}},
				"webPush": obj{"vapidPublicKey": vapidPub, "vapidPrivateKey": vapidPriv},
			})

			p := mustStartSvc(t, procOpts{configPath: cfgPath, env: tc.env})
			d := restDriver{p}
			requireWorks(t, d, bearer(adminTok), "admin")
			requireWorks(t, d, bearer(opsTok), "ops")
			code, err := totp.GenerateCode(secret, time.Now())
			require.NoError(t, err)
			s := mustCall(t, d, anonymous, "CreateSession", obj{"code": code, "member": "ops"})
			require.Equal(t, "ops", s["member"])
			require.Equal(t, operatorLeaves, sortedStrs(t, s["permissions"]))
			ops := memberByName(t, d, bearer(adminTok), "ops")
			require.Equal(t, operatorLeaves, sortedStrs(t, ops["permissions"]))
			require.Equal(t, obj{"title": "Ops", "description": "Runs things"}, ops["role"])
			p.mustStop(t)
			require.Empty(t, p.stdout.String(), "no token is printed for an existing config")

			requireMode(t, cfgPath, 0o600)
			raw, err := os.ReadFile(cfgPath)
			require.NoError(t, err)
			for _, s := range []string{adminTok, opsTok, secret, vapidPriv} {
				require.NotContains(t, string(raw), s, "plaintext secret left in the config")
			}
			cfg := readJSON(t, cfgPath)
			members := configMembers(t, cfg)
			require.Equal(t, tokenHash(adminTok), members["admin"]["tokenHash"])
			require.Equal(t, tokenHash(opsTok), members["ops"]["tokenHash"])
			require.NotContains(t, members["ops"], "token")
			require.Equal(t, operatorLeaves, sortedStrs(t, members["ops"]["permissions"]))
			require.Equal(t, []string{"operator"}, strs(t, members["ops"]["rawPermissions"]))
			require.Equal(t, allLeaves, sortedStrs(t, members["admin"]["permissions"]))
			require.Equal(t, []string{"admin"}, strs(t, members["admin"]["rawPermissions"]))
			requireSealed(t, members["ops"]["totpSecret"])
			wp := cfg["webPush"].(obj)
			requireSealed(t, wp["vapidPrivateKey"])
			require.Equal(t, vapidPub, wp["vapidPublicKey"])

			// The secrets are sealed under the KEK in use: SVC_KEK when
			// set (and then no KEK file appears), else the file.
			k := tc.key
			if k == nil {
				requireMode(t, cfgPath+".kek", 0o600)
				data, err := os.ReadFile(cfgPath + ".kek")
				require.NoError(t, err)
				k, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
				require.NoError(t, err)
			} else {
				require.NoFileExists(t, cfgPath+".kek")
			}
			kk, err := kek.New(k)
			require.NoError(t, err)
			f, err := teamconfig.Load(cfgPath)
			require.NoError(t, err)
			var opsEntry teamconfig.Member
			for _, m := range f.Store.Members {
				if m.Name == "ops" {
					opsEntry = m
				}
			}
			got, err := teamconfig.OpenTOTP(kk, opsEntry)
			require.NoError(t, err)
			require.Equal(t, secret, got)
		})
	}
}

// TestAnotherSVCKEKRefusesToStart restarts with another SVC_KEK: the TOTP
// secret and the VAPID key sealed under the first would not open, so the
// broker refuses, naming the key's fingerprint and the way to rotate, and
// writes no KEK file; with the first key back it starts and TOTP works.
func TestAnotherSVCKEKRefusesToStart(t *testing.T) {
	t.Parallel()
	keyA, keyB := make([]byte, 32), make([]byte, 32)
	_, err := rand.Read(keyA)
	require.NoError(t, err)
	_, err = rand.Read(keyB)
	require.NoError(t, err)
	cfgPath := filepath.Join(t.TempDir(), "svc.json")
	// SQLite: an in-memory store, so the config alone holds the sealed
	// values the second start must refuse to open.
	p := mustStartSvc(t, procOpts{configPath: cfgPath, store: storeSQLite, env: []string{"SVC_KEK=" + base64.RawURLEncoding.EncodeToString(keyA)}})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	u := enroll(t, d, admin, "admin")
	p.mustStop(t)
	require.NoFileExists(t, cfgPath+".kek")
	before, err := os.ReadFile(cfgPath)
	require.NoError(t, err)

	kb, err := kek.New(keyB)
	require.NoError(t, err)
	code, stdout, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfgPath}, []string{"SVC_KEK=" + base64.StdEncoding.EncodeToString(keyB)}, nil)
	require.Equal(t, 1, code, "stderr:\n%s", stderr)
	require.Empty(t, stdout)
	for _, want := range []string{"refusing to start", "SVC_KEK (fingerprint " + kb.Fingerprint() + ")", `store.members[0] ("admin").totpSecret`, cfgPath, "svc kek rotate", "svc kek reset"} {
		require.Contains(t, stderr, want)
	}
	require.NoFileExists(t, cfgPath+".kek")
	after, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "nothing is sealed under the wrong key")

	p3 := mustStartSvc(t, procOpts{configPath: cfgPath, env: []string{"SVC_KEK=" + base64.StdEncoding.EncodeToString(keyA)}})
	s := mustCall(t, restDriver{p3}, anonymous, "CreateSession", obj{"code": u.next(t), "member": "admin"})
	require.Equal(t, "admin", s["member"])
}

func writeConfig(t *testing.T, path string, cfg obj) {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

func TestBadConfigRefusesToStart(t *testing.T) {
	t.Parallel()
	adminHash := tokenHash(randomToken(t))
	admin := obj{"name": "admin", "permissions": []string{"admin"}, "tokenHash": adminHash}
	tests := []struct {
		name    string
		members []obj
		presets obj
		want    []string // substrings of stderr naming the entry
	}{
		{
			name:    "unknown preset in permissions",
			members: []obj{admin, {"name": "ops", "permissions": []string{"wizard"}}},
			want:    []string{`store.members[1] ("ops")`, `"wizard"`},
		},
		{
			name:    "unknown preset in rawPermissions",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "rawPermissions": []string{"wizard"}}},
			want:    []string{`store.members[1] ("ops")`, `"wizard"`},
		},
		{
			name:    "name starting with a dash",
			members: []obj{admin, {"name": "-bad", "permissions": []string{}}},
			want:    []string{`store.members[1] ("-bad")`, "malformed member name"},
		},
		{
			name:    "name with a colon",
			members: []obj{admin, {"name": "a:b", "permissions": []string{}}},
			want:    []string{`store.members[1] ("a:b")`, "malformed member name"},
		},
		{
			name:    "empty name",
			members: []obj{admin, {"name": "", "permissions": []string{}}},
			want:    []string{`store.members[1] ("")`, "malformed member name"},
		},
		{
			name:    "duplicate member",
			members: []obj{admin, {"name": "ops", "permissions": []string{}}, {"name": "ops", "permissions": []string{}}},
			want:    []string{`store.members[2] ("ops")`, "duplicate member name"},
		},
		{
			name:    "short tokenHash",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "tokenHash": "sha256:abcd"}},
			want:    []string{`store.members[1] ("ops").tokenHash`},
		},
		{
			name:    "tokenHash of another algorithm",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "tokenHash": "md5:" + strings.Repeat("a", 64)}},
			want:    []string{`store.members[1] ("ops").tokenHash`},
		},
		{
			name:    "tokenHash not hex",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "tokenHash": "sha256:" + strings.Repeat("z", 64)}},
			want:    []string{`store.members[1] ("ops").tokenHash`},
		},
		{
			name:    "plaintext token without the prefix",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "token": "tok_" + randomSecret(t)}},
			want:    []string{`store.members[1] ("ops").token`},
		},
		{
			name:    "malformed plaintext token",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "token": "svc_not a token!"}},
			want:    []string{`store.members[1] ("ops").token`},
		},
		{
			name:    "totpSecret not base32",
			members: []obj{admin, {"name": "ops", "permissions": []string{}, "totpSecret": "not base32!"}},
			want:    []string{`store.members[1] ("ops").totpSecret`},
		},
		{
			name:    "preset naming an unknown leaf",
			members: []obj{admin},
			presets: obj{"admin": allLeaves, "crew": []string{"launch.rockets"}},
			want:    []string{`team.permissionPresets["crew"]`, `"launch.rockets"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			presets := tc.presets
			if presets == nil {
				presets = obj{"admin": allLeaves, "operator": operatorLeaves, "member": []string{}}
			}
			cfgPath := filepath.Join(t.TempDir(), "svc.json")
			writeConfig(t, cfgPath, obj{
				"team":  obj{"name": "team", "permissionPresets": presets},
				"store": obj{"members": tc.members},
			})
			before, err := os.ReadFile(cfgPath)
			require.NoError(t, err)

			code, stdout, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfgPath}, nil, nil)
			require.NotZero(t, code, "stderr:\n%s", stderr)
			require.NotContains(t, stderr, "svc listening", "it never starts half-configured")
			require.Empty(t, stdout)
			for _, w := range tc.want {
				require.Contains(t, stderr, w)
			}
			after, err := os.ReadFile(cfgPath)
			require.NoError(t, err)
			require.Equal(t, string(before), string(after), "a refused config is not rewritten")
		})
	}
}

// A malformed setting in the environment refuses to start, naming it.
func TestBadEnvironmentRefusesToStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  string
		code int
		want string
	}{
		{name: "egress allow list of a host name", env: "SVC_EGRESS_ALLOW=localhost", code: 2, want: "SVC_EGRESS_ALLOW"},
		{name: "egress allow list of a bad range", env: "SVC_EGRESS_ALLOW=10.0.0.0/40", code: 2, want: "SVC_EGRESS_ALLOW"},
		{name: "profiler off loopback", env: "SVC_PPROF_ADDR=0.0.0.0:6061", code: 1, want: "SVC_PPROF_ADDR"},
		{name: "startup check budget not a duration", env: "SVC_STARTUP_CHECK_TIMEOUT=soon", code: 2, want: "SVC_STARTUP_CHECK_TIMEOUT"},
		{name: "startup check budget negative", env: "SVC_STARTUP_CHECK_TIMEOUT=-1s", code: 2, want: "SVC_STARTUP_CHECK_TIMEOUT"},
		{name: "free-space floor negative", env: "SVC_MIN_FREE_MIB=-1", code: 2, want: "SVC_MIN_FREE_MIB"},
		{name: "JWT lifetime cap zero", env: "SVC_JWT_MAX_LIFETIME=0s", code: 2, want: "SVC_JWT_MAX_LIFETIME"},
		{name: "JWT lifetime cap negative", env: "SVC_JWT_MAX_LIFETIME=-1h", code: 2, want: "SVC_JWT_MAX_LIFETIME"},
		{name: "JWT lifetime cap past 30 days", env: "SVC_JWT_MAX_LIFETIME=721h", code: 2, want: "SVC_JWT_MAX_LIFETIME"},
		{name: "JWT lifetime cap not a duration", env: "SVC_JWT_MAX_LIFETIME=1d", code: 2, want: "SVC_JWT_MAX_LIFETIME"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfgPath := filepath.Join(t.TempDir(), "svc.json")
			code, _, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfgPath}, []string{tc.env}, nil)
			require.Equal(t, tc.code, code, "stderr:\n%s", stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

func TestSIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fileDB     bool
		openStream bool
	}{
		{name: "in-memory store"},
		{name: "file store", fileDB: true},
		{name: "open gRPC stream", openStream: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := procOpts{configPath: filepath.Join(dir, "svc.json")}
			if tc.fileDB {
				opts.dbPath = filepath.Join(dir, "svc.db")
			}
			p := mustStartSvc(t, opts)
			tok := p.adminToken(t)
			requireWorks(t, restDriver{p}, bearer(tok), "admin")
			requireWorks(t, grpcDriver{p.grpcConn(t)}, bearer(tok), "admin")
			createMember(t, restDriver{p}, bearer(tok), "bob")

			// A client that keeps its connection and a stream open while
			// the broker stops: the stream is cut, the exit stays bounded.
			var streamErr chan error
			if tc.openStream {
				conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				require.NoError(t, err)
				t.Cleanup(func() { conn.Close() })
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				stream, err := grpc_reflection_v1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
				require.NoError(t, err)
				require.NoError(t, stream.Send(&grpc_reflection_v1.ServerReflectionRequest{
					MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{},
				}))
				_, err = stream.Recv()
				require.NoError(t, err)
				streamErr = make(chan error, 1)
				go func() {
					_, err := stream.Recv()
					streamErr <- err
				}()
			}

			code, took := p.stop(t)
			t.Logf("exit %d after %s", code, took)
			require.Zero(t, code, "stderr:\n%s", p.stderr)
			require.Less(t, took, stopTimeout)
			require.Contains(t, p.stderr.String(), `msg="shutting down"`)
			require.Contains(t, p.stderr.String(), "msg=stopped")
			if tc.fileDB {
				// Stores are flushed: the WAL is checkpointed away.
				require.NoFileExists(t, opts.dbPath+"-wal")
			}
			if tc.openStream {
				select {
				case err := <-streamErr:
					require.Error(t, err, "the open stream ends with the process")
				case <-time.After(callTimeout):
					t.Fatal("the open stream outlived the process")
				}
			}
		})
	}
}

func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fileDB bool
	}{
		{name: "in-memory store"},
		{name: "file store", fileDB: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := procOpts{configPath: filepath.Join(dir, "svc.json")}
			if tc.fileDB {
				opts.dbPath = filepath.Join(dir, "svc.db")
			}
			p := mustStartSvc(t, opts)
			admin := bearer(p.adminToken(t))
			bob := createMember(t, restDriver{p}, admin, "bob", "operator")
			p.kill(t)

			p2 := p.restart(t)
			d := restDriver{p2}
			require.Equal(t, []string{"admin", "bob"}, memberNames(t, d, admin))
			requireWorks(t, d, bearer(bob), "bob")
			require.Equal(t, operatorLeaves, sortedStrs(t, memberByName(t, d, admin, "bob")["permissions"]))

			// A rotation acknowledged just before kill -9 holds too.
			rot := mustCall(t, d, admin, "RotateToken", obj{"name": "bob"})
			p2.kill(t)
			p3 := p.restart(t)
			d3 := restDriver{p3}
			requireWorks(t, d3, bearer(rot["token"].(string)), "bob")
			requireRejected(t, d3, bearer(bob))
			require.Empty(t, p3.stdout.String())
		})
	}
}

func TestActivityPruneRefusesWithoutTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "svc.db")
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: dbPath})
	p.mustStop(t)
	if storeOf(p.opts) == storeSQLite {
		require.FileExists(t, dbPath+"-activity.db")
	}

	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	t.Cleanup(func() { devNull.Close() })
	tests := []struct {
		name       string
		args       []string
		stdin      func() *os.File // nil: a pipe holding "y\n"
		wantCode   int
		wantStderr string
		wantStdout string
	}{
		{
			name:       "pipe stdin without --yes",
			args:       []string{"activity", "prune", "--older-than", "1d", "--db-path", dbPath},
			wantCode:   2,
			wantStderr: "--yes",
		},
		{
			name:       "/dev/null stdin without --yes",
			args:       []string{"activity", "prune", "--older-than", "1d", "--db-path", dbPath},
			stdin:      func() *os.File { return devNull },
			wantCode:   2,
			wantStderr: "--yes",
		},
		{
			name:       "bogus duration",
			args:       []string{"activity", "prune", "--older-than", "bogus", "--db-path", dbPath},
			wantCode:   2,
			wantStderr: `--older-than "bogus"`,
		},
		{
			name:       "bogus duration with --yes",
			args:       []string{"activity", "prune", "--older-than", "1w", "--yes", "--db-path", dbPath},
			wantCode:   2,
			wantStderr: `--older-than "1w"`,
		},
		{
			name:       "--yes prunes",
			args:       []string{"activity", "prune", "--older-than", "1D", "--yes", "--db-path", dbPath},
			wantCode:   0,
			wantStdout: "deleted 0 activity rows, 0 inference records, 0 raw uploads, 0 correlation states\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdin io.Reader = strings.NewReader("y\n")
			if tc.stdin != nil {
				stdin = tc.stdin()
			}
			code, stdout, stderr := runSvc(t, tc.args, nil, stdin)
			require.Equal(t, tc.wantCode, code, "stdout %q stderr %q", stdout, stderr)
			require.Contains(t, stderr, tc.wantStderr)
			if tc.wantCode != 0 {
				require.NotContains(t, stdout, "deleted", "nothing is pruned")
			} else {
				require.Equal(t, tc.wantStdout, stdout)
			}
		})
	}
}
