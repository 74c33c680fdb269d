package runner

// The model provider Codex would use, resolved as Codex resolves it, so the
// runner can put its capturing proxy in front of it (docs/RUNNER-CODEX.md).

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"svc/cmd/internal/capture"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

const (
	// codexCaptureProvider is the provider the runner defines: the user's,
	// with base_url pointed at the capturing proxy.
	codexCaptureProvider = "svc_capture"
	// codexMaxConfig bounds the config.toml the runner reads.
	codexMaxConfig = 4 << 20
	// codexMaxOverride bounds one -c value.
	codexMaxOverride = 64 << 10
)

// codexProviderKeys are the fields of a [model_providers.<id>] table the
// runner copies into its own provider (Codex 0.169's ModelProviderInfo,
// base_url aside, which the runner sets).
var codexProviderKeys = []string{
	"name", "env_key", "env_key_instructions", "wire_api",
	"query_params", "http_headers", "env_http_headers", "request_max_retries",
	"stream_max_retries", "stream_idle_timeout_ms", "requires_openai_auth",
	"supports_websockets", "websocket_connect_timeout_ms", "auth",
}

// codexProvider is the user's provider: its id and its table (base_url
// always set).
type codexProvider struct {
	ID     string
	Fields map[string]any
}

// BaseURL is the provider's base URL.
func (p codexProvider) BaseURL() string { s, _ := p.Fields["base_url"].(string); return s }

// codexOverride is one -c key=value, the value already parsed as Codex
// parses it: TOML when it parses, else the raw string.
type codexOverride struct {
	Path  []string
	Value any
}

var codexKeyPart = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// parseCodexOverride parses one -c argument. Keys are dotted paths of bare
// TOML keys (a quoted part, which Codex accepts too, is refused here: the
// runner cannot tell what it names). A value that is not valid TOML is the
// raw string, as in Codex.
func parseCodexOverride(arg string) (codexOverride, error) {
	if len(arg) > codexMaxOverride {
		return codexOverride{}, fmt.Errorf("codex: a -c value is over %d bytes", codexMaxOverride)
	}
	if !utf8.ValidString(arg) {
		return codexOverride{}, errors.New("codex: a -c value is not UTF-8")
	}
	key, raw, ok := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return codexOverride{}, fmt.Errorf("codex: -c %q is not key=value", short(arg))
	}
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if !codexKeyPart.MatchString(p) {
			return codexOverride{}, fmt.Errorf("codex: -c key %q is not a dotted path of plain keys", short(key))
		}
	}
	return codexOverride{Path: parts, Value: parseTOMLValue(raw)}, nil
}

// parseTOMLValue parses a -c value: TOML when it parses, else the raw
// string (trimmed, as Codex does).
func parseTOMLValue(raw string) any {
	raw = strings.TrimSpace(raw)
	var doc map[string]any
	if _, err := toml.Decode("v = "+raw, &doc); err == nil {
		if v, ok := doc["v"]; ok {
			return v
		}
	}
	return raw
}

// setPath sets m[path...] = v, making tables on the way; a non-table on
// the way is replaced, as a later -c replaces an earlier value.
func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func getPath(m map[string]any, path ...string) (any, bool) {
	var cur any = m
	for _, p := range path {
		t, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = t[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// codexHome is $CODEX_HOME, else ~/.codex.
func codexHome(getenv func(string) string) (string, error) {
	if h := getenv("CODEX_HOME"); h != "" {
		return h, nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(home, ".codex"), nil
}

// loadCodexConfig reads $CODEX_HOME/config.toml (none: an empty config).
func loadCodexConfig(getenv func(string) string) (map[string]any, error) {
	home, err := codexHome(getenv)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(home, "config.toml")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > codexMaxConfig {
		return nil, fmt.Errorf("codex: %s is over %d bytes", path, codexMaxConfig)
	}
	cfg := map[string]any{}
	if _, err := toml.NewDecoder(f).Decode(&cfg); err != nil {
		return nil, fmt.Errorf("codex: %s: %w", path, err)
	}
	return cfg, nil
}

// resolveCodexProvider is the provider Codex would use with cfg (the
// user's config.toml) and the user's -c overrides: model_provider (else
// "openai"), looked up in
// [model_providers], else among Codex's built-in providers.
func resolveCodexProvider(cfg map[string]any, overrides []codexOverride, getenv func(string) string) (codexProvider, error) {
	for _, o := range overrides {
		setPath(cfg, o.Path, o.Value)
	}
	id := "openai"
	if s, ok := cfg["model_provider"].(string); ok && s != "" {
		id = s
	}
	if id == codexCaptureProvider {
		return codexProvider{}, fmt.Errorf("codex: the provider id %q is the runner's own; rename yours", id)
	}
	fields := map[string]any{}
	if t, ok := getPath(cfg, "model_providers", id); ok {
		m, ok := t.(map[string]any)
		if !ok {
			return codexProvider{}, fmt.Errorf("codex: model_providers.%s is not a table", id)
		}
		for k, v := range m {
			fields[k] = v
		}
	} else {
		b, ok := codexBuiltinProvider(id, cfg, getenv)
		if !ok {
			return codexProvider{}, fmt.Errorf("codex: model provider %q is not in model_providers and not built in", id)
		}
		fields = b
	}
	base, _ := fields["base_url"].(string)
	if base == "" {
		if fields["requires_openai_auth"] == true || id == "openai" {
			base = codexOpenAIBase(cfg, getenv)
		} else {
			return codexProvider{}, fmt.Errorf("codex: model provider %q has no base_url", id)
		}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return codexProvider{}, fmt.Errorf("codex: model provider %q: base_url %q is not an http(s) URL", id, short(base))
	}
	fields["base_url"] = base
	if _, ok := fields["name"]; !ok {
		fields["name"] = id
	}
	return codexProvider{ID: id, Fields: fields}, nil
}

// codexBuiltinProvider is one of Codex 0.169's built-in providers.
func codexBuiltinProvider(id string, cfg map[string]any, getenv func(string) string) (map[string]any, bool) {
	switch id {
	case "openai":
		return map[string]any{
			"name": "OpenAI", "wire_api": "responses", "requires_openai_auth": true,
			"base_url": codexOpenAIBase(cfg, getenv),
		}, true
	case "ollama", "lmstudio":
		port := map[string]int{"ollama": 11434, "lmstudio": 1234}[id]
		if p, err := strconv.Atoi(getenv("CODEX_OSS_PORT")); err == nil && p > 0 && p < 65536 {
			port = p
		}
		base := "http://localhost:" + strconv.Itoa(port) + "/v1"
		if b := getenv("CODEX_OSS_BASE_URL"); b != "" {
			base = b
		}
		name := map[string]string{"ollama": "gpt-oss", "lmstudio": "lmstudio"}[id]
		return map[string]any{"name": name, "wire_api": "responses", "base_url": base}, true
	}
	return nil, false
}

// codexOpenAIBase is where the built-in OpenAI provider sends a request:
// the ChatGPT backend for a ChatGPT login, the API otherwise.
func codexOpenAIBase(cfg map[string]any, getenv func(string) string) string {
	if codexChatGPTLogin(getenv) {
		if b, ok := cfg["chatgpt_base_url"].(string); ok && b != "" {
			return strings.TrimRight(b, "/") + "/codex"
		}
		return "https://chatgpt.com/backend-api/codex"
	}
	// openai_base_url is honoured by Codex 0.169 (a gateway or Azure
	// endpoint); OPENAI_BASE_URL is not (real-agents.md).
	if b, ok := cfg["openai_base_url"].(string); ok && b != "" {
		return strings.TrimRight(b, "/")
	}
	return "https://api.openai.com/v1"
}

// codexChatGPTLogin tells whether $CODEX_HOME/auth.json holds a ChatGPT
// login rather than an API key.
func codexChatGPTLogin(getenv func(string) string) bool {
	home, err := codexHome(getenv)
	if err != nil {
		return false
	}
	b, err := readBounded(filepath.Join(home, "auth.json"))
	if err != nil {
		return false
	}
	var a struct {
		Mode   string         `json:"auth_mode"`
		Key    *string        `json:"OPENAI_API_KEY"`
		Tokens map[string]any `json:"tokens"`
	}
	if json.Unmarshal(b, &a) != nil {
		return false
	}
	if a.Mode != "" {
		return strings.Contains(strings.ToLower(a.Mode), "chatgpt")
	}
	return a.Tokens != nil && (a.Key == nil || *a.Key == "")
}

// codexCaptureKeyEnv holds the capturing proxy's key in Codex's
// environment.
const codexCaptureKeyEnv = "SVC_CAPTURE_KEY"

// captureOverrides are the -c arguments that define the runner's provider
// (the user's fields, base_url = proxy) and select it.
//
// The provider also sends the proxy's key (capture.KeyHeader) from the
// environment variable codexCaptureKeyEnv, beside the user's own
// env_http_headers: the key never appears on a command line.
func (p codexProvider) captureOverrides(proxyURL string) ([]string, error) {
	var out []string
	fields := map[string]any{}
	for k, v := range p.Fields {
		fields[k] = v
	}
	hdrs := map[string]any{}
	if h, ok := fields["env_http_headers"].(map[string]any); ok {
		for k, v := range h {
			hdrs[k] = v
		}
	}
	hdrs[capture.KeyHeader] = codexCaptureKeyEnv
	fields["env_http_headers"] = hdrs
	p.Fields = fields
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range p.Fields {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if k == "experimental_bearer_token" {
			return nil, fmt.Errorf("codex: model_providers.%s.experimental_bearer_token: the runner would have to put the key on a command line; use env_key instead", p.ID)
		}
		if k == "http_headers" {
			if h, ok := p.Fields[k].(map[string]any); ok {
				for name := range h {
					if credentialHeader(name) {
						return nil, fmt.Errorf("codex: model_providers.%s.http_headers.%s: the runner would have to put a credential on a command line; use env_http_headers instead", p.ID, short(name))
					}
				}
			}
		}
		if k == "base_url" || !slices.Contains(codexProviderKeys, k) {
			continue
		}
		v, err := tomlValue(p.Fields[k])
		if err != nil {
			return nil, fmt.Errorf("codex: model_providers.%s.%s: %w", p.ID, k, err)
		}
		out = append(out, "-c", "model_providers."+codexCaptureProvider+"."+k+"="+v)
	}
	base, err := tomlValue(proxyURL)
	if err != nil {
		return nil, err
	}
	out = append(out, "-c", "model_providers."+codexCaptureProvider+".base_url="+base,
		"-c", `model_provider="`+codexCaptureProvider+`"`)
	return out, nil
}

// tomlValue renders v as an inline TOML value.
func tomlValue(v any) (string, error) {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(map[string]any{"v": v}); err != nil {
		return "", err
	}
	s := strings.TrimSpace(b.String())
	if val, ok := strings.CutPrefix(s, "v = "); ok && !strings.Contains(val, "\n") {
		return val, nil
	}
	// A table renders as a section: make it inline.
	if m, ok := v.(map[string]any); ok {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		parts := make([]string, 0, len(m))
		for _, k := range keys {
			iv, err := tomlValue(m[k])
			if err != nil {
				return "", err
			}
			kq, err := tomlValue(k)
			if err != nil {
				return "", err
			}
			parts = append(parts, kq+" = "+iv)
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	}
	return "", fmt.Errorf("not an inline TOML value: %T", v)
}

// credentialHeader tells whether a literal header looks like it carries a
// credential, which must not be copied onto Codex's command line.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"authorization", "key", "token", "secret", "cookie", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
