package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"
)

func TestParseCodexOverride(t *testing.T) {
	cases := []struct {
		arg     string
		path    []string
		value   any
		wantErr string
	}{
		{arg: `model="o3"`, path: []string{"model"}, value: "o3"},
		{arg: `model=o3`, path: []string{"model"}, value: "o3"}, // not TOML: the raw string
		{arg: `a.b.c=3`, path: []string{"a", "b", "c"}, value: int64(3)},
		{arg: `x=true`, path: []string{"x"}, value: true},
		{arg: `l=["a","b"]`, path: []string{"l"}, value: []any{"a", "b"}},
		{arg: `t={k="v"}`, path: []string{"t"}, value: map[string]any{"k": "v"}},
		{arg: ` model = "sp" `, path: []string{"model"}, value: "sp"},
		{arg: `novalue`, wantErr: "not key=value"},
		{arg: `=x`, wantErr: "not key=value"},
		{arg: `"quoted".k=1`, wantErr: "dotted path"},
		{arg: `a..b=1`, wantErr: "dotted path"},
		{arg: "k=" + strings.Repeat("x", codexMaxOverride), wantErr: "over"},
	}
	for _, tc := range cases {
		t.Run(tc.arg[:min(len(tc.arg), 20)], func(t *testing.T) {
			o, err := parseCodexOverride(tc.arg)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.path, o.Path)
			require.Equal(t, tc.value, o.Value)
		})
	}
}

func FuzzParseCodexOverride(f *testing.F) {
	for _, s := range []string{`model="o3"`, `a.b=[1,2]`, `x={y={z=1}}`, `k=`, `=`, `a.b.c="\u0000"`, "k=\"\n\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		o, err := parseCodexOverride(arg)
		if err != nil {
			return
		}
		require.NotEmpty(t, o.Path)
		for _, p := range o.Path {
			require.Regexp(t, `^[A-Za-z0-9_-]+$`, p)
		}
		// Whatever parsed renders back as one inline TOML value Codex can
		// read, or is refused.
		if v, err := tomlValue(o.Value); err == nil {
			require.NotContains(t, v, "\n")
			var doc map[string]any
			_, err := toml.Decode("v = "+v, &doc)
			require.NoError(t, err, "rendered %q", v)
		}
		cfg := map[string]any{}
		setPath(cfg, o.Path, o.Value)
		got, ok := getPath(cfg, o.Path...)
		require.True(t, ok)
		require.Equal(t, o.Value, got)
	})
}

func TestResolveCodexProvider(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	custom := `model_provider = "corp"
[model_providers.corp]
name = "Corp"
base_url = "https://llm.corp.example/v1"
env_key = "CORP_KEY"
wire_api = "responses"
query_params = { api-version = "2025-01-01" }
env_http_headers = { X-Org = "CORP_ORG" }
`
	cases := []struct {
		name      string
		config    string
		auth      string
		overrides []string
		env       map[string]string
		id, base  string
		fields    map[string]any
		wantErr   string
	}{
		{name: "no config: openai", id: "openai", base: "https://api.openai.com/v1",
			fields: map[string]any{"requires_openai_auth": true, "wire_api": "responses"}},
		{name: "chatgpt login", auth: `{"auth_mode":"chatgpt","tokens":{"id_token":"x"}}`, id: "openai", base: "https://chatgpt.com/backend-api/codex"},
		{name: "api key login", auth: `{"OPENAI_API_KEY":"sk-x"}`, id: "openai", base: "https://api.openai.com/v1"},
		{name: "custom from config", config: custom, id: "corp", base: "https://llm.corp.example/v1",
			fields: map[string]any{"env_key": "CORP_KEY", "name": "Corp", "query_params": map[string]any{"api-version": "2025-01-01"}}},
		{name: "-c selects another", config: custom, overrides: []string{`model_provider="openai"`}, id: "openai", base: "https://api.openai.com/v1"},
		{name: "-c edits the table", config: custom, overrides: []string{`model_providers.corp.base_url="http://10.0.0.1:8080/v1"`}, id: "corp", base: "http://10.0.0.1:8080/v1"},
		{name: "-c defines one", overrides: []string{`model_provider="s"`, `model_providers.s.base_url="http://127.0.0.1:9/v1"`, `model_providers.s.wire_api="responses"`}, id: "s", base: "http://127.0.0.1:9/v1",
			fields: map[string]any{"name": "s"}},
		{name: "openai_base_url", config: `openai_base_url = "https://gw.corp.example/openai/v1/"`, id: "openai", base: "https://gw.corp.example/openai/v1"},
		{name: "OPENAI_BASE_URL ignored as by Codex", env: map[string]string{"OPENAI_BASE_URL": "http://elsewhere/v1"}, id: "openai", base: "https://api.openai.com/v1"},
		{name: "lmstudio port", overrides: []string{`model_provider="lmstudio"`}, env: map[string]string{"CODEX_OSS_PORT": "4321"}, id: "lmstudio", base: "http://localhost:4321/v1"},
		{name: "oss base url", overrides: []string{`model_provider="ollama"`}, env: map[string]string{"CODEX_OSS_BASE_URL": "http://gpu:11434/v1"}, id: "ollama", base: "http://gpu:11434/v1"},
		{name: "unknown", overrides: []string{`model_provider="nope"`}, wantErr: "not built in"},
		{name: "no base url", overrides: []string{`model_provider="x"`, `model_providers.x.name="x"`}, wantErr: "no base_url"},
		{name: "bad base url", overrides: []string{`model_provider="x"`, `model_providers.x.base_url="file:///etc"`}, wantErr: "not an http(s) URL"},
		{name: "ours", overrides: []string{`model_provider="svc_capture"`}, wantErr: "runner's own"},
		{name: "not a table", overrides: []string{`model_provider="x"`, `model_providers.x=3`}, wantErr: "not a table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.config != "" {
				require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte(tc.config), 0o600))
			}
			if tc.auth != "" {
				require.NoError(t, os.WriteFile(filepath.Join(home, "auth.json"), []byte(tc.auth), 0o600))
			}
			e := map[string]string{"CODEX_HOME": home}
			for k, v := range tc.env {
				e[k] = v
			}
			getenv := env(e)
			cfg, err := loadCodexConfig(getenv)
			require.NoError(t, err)
			var ovs []codexOverride
			for _, a := range tc.overrides {
				o, err := parseCodexOverride(a)
				require.NoError(t, err)
				ovs = append(ovs, o)
			}
			p, err := resolveCodexProvider(cfg, ovs, getenv)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.id, p.ID)
			require.Equal(t, tc.base, p.BaseURL())
			for k, v := range tc.fields {
				require.Equal(t, v, p.Fields[k], k)
			}
		})
	}
}

func TestLoadCodexConfigErrors(t *testing.T) {
	home := t.TempDir()
	getenv := func(k string) string { return map[string]string{"CODEX_HOME": home}[k] }
	require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte("model = "), 0o600))
	_, err := loadCodexConfig(getenv)
	require.ErrorContains(t, err, "config.toml")
	require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), make([]byte, codexMaxConfig+1), 0o600))
	_, err = loadCodexConfig(getenv)
	require.ErrorContains(t, err, "over")
}

func TestCaptureOverrides(t *testing.T) {
	cases := []struct {
		name    string
		fields  map[string]any
		want    []string
		wantErr string
	}{
		{name: "copied, base_url replaced, unknown keys dropped",
			fields: map[string]any{"name": "Corp", "base_url": "https://corp/v1", "env_key": "K", "wire_api": "responses",
				"requires_openai_auth": true, "query_params": map[string]any{"api-version": "1"}, "stream_max_retries": int64(3), "bogus": 1},
			want: []string{
				`-c`, `model_providers.svc_capture.env_http_headers={"X-Svc-Capture-Key" = "SVC_CAPTURE_KEY"}`,
				`-c`, `model_providers.svc_capture.env_key="K"`,
				`-c`, `model_providers.svc_capture.name="Corp"`,
				`-c`, `model_providers.svc_capture.query_params={"api-version" = "1"}`,
				`-c`, `model_providers.svc_capture.requires_openai_auth=true`,
				`-c`, `model_providers.svc_capture.stream_max_retries=3`,
				`-c`, `model_providers.svc_capture.wire_api="responses"`,
				`-c`, `model_providers.svc_capture.base_url="http://127.0.0.1:5/v1"`,
				`-c`, `model_provider="svc_capture"`,
			}},
		{name: "the proxy key joins the user's env headers", fields: map[string]any{"base_url": "https://x/v1", "env_http_headers": map[string]any{"X-Org": "CORP_ORG"}},
			want: []string{`-c`, `model_providers.svc_capture.env_http_headers={"X-Org" = "CORP_ORG", "X-Svc-Capture-Key" = "SVC_CAPTURE_KEY"}`, `-c`, `model_providers.svc_capture.base_url="http://127.0.0.1:5/v1"`, `-c`, `model_provider="svc_capture"`}},
		{name: "bearer token refused", fields: map[string]any{"base_url": "https://x/v1", "experimental_bearer_token": "sk"}, wantErr: "env_key instead"},
		{name: "credential header refused", fields: map[string]any{"base_url": "https://x/v1", "http_headers": map[string]any{"Authorization": "Bearer sk"}}, wantErr: "env_http_headers instead"},
		{name: "plain header kept", fields: map[string]any{"base_url": "https://x/v1", "http_headers": map[string]any{"X-Team": "a"}},
			want: []string{`-c`, `model_providers.svc_capture.env_http_headers={"X-Svc-Capture-Key" = "SVC_CAPTURE_KEY"}`, `-c`, `model_providers.svc_capture.http_headers={"X-Team" = "a"}`, `-c`, `model_providers.svc_capture.base_url="http://127.0.0.1:5/v1"`, `-c`, `model_provider="svc_capture"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := codexProvider{ID: "corp", Fields: tc.fields}.captureOverrides("http://127.0.0.1:5/v1")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			// Every value parses back as Codex parses a -c value.
			for i := 1; i < len(got); i += 2 {
				o, err := parseCodexOverride(got[i])
				require.NoError(t, err)
				_, isStr := o.Value.(string)
				raw := strings.SplitN(got[i], "=", 2)[1]
				if isStr {
					require.True(t, strings.HasPrefix(raw, `"`), "a string is quoted: %s", got[i])
				}
			}
		})
	}
}
