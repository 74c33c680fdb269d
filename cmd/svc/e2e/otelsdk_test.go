package e2e

// The OpenTelemetry Go SDK's own log exporters as real OTLP clients of the
// broker: OTLP/HTTP (protobuf, the only encoding it offers; plain and gzip)
// and OTLP/gRPC (insecure, plain and gzip), driven through a LoggerProvider
// whose batch processor the test flushes explicitly, emitting records
// shaped like Claude Code's (server/otlp/testdata).
//
// The broker is the svc binary the harness builds, which does not link
// this test's otlploggrpc (that registers gRPC's gzip codec in every
// process that links it), so the grpc-gzip case holds for the shipped
// binary; TestOTLPGRPCGzipShippedBinary checks that alone.

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// otSDKExporters make an SDK log exporter of a member's token pointed at
// the broker.
var otSDKExporters = []struct {
	name string
	make func(ctx context.Context, p *proc, tok string) (sdklog.Exporter, error)
}{
	{"http", func(ctx context.Context, p *proc, tok string) (sdklog.Exporter, error) {
		return otlploghttp.New(ctx, otHTTPOptions(p, tok, otlploghttp.NoCompression)...)
	}},
	{"http-gzip", func(ctx context.Context, p *proc, tok string) (sdklog.Exporter, error) {
		return otlploghttp.New(ctx, otHTTPOptions(p, tok, otlploghttp.GzipCompression)...)
	}},
	{"grpc", func(ctx context.Context, p *proc, tok string) (sdklog.Exporter, error) {
		return otlploggrpc.New(ctx, otGRPCOptions(p, tok)...)
	}},
	{"grpc-gzip", func(ctx context.Context, p *proc, tok string) (sdklog.Exporter, error) {
		return otlploggrpc.New(ctx, append(otGRPCOptions(p, tok), otlploggrpc.WithCompressor("gzip"))...)
	}},
}

func otHTTPOptions(p *proc, tok string, c otlploghttp.Compression) []otlploghttp.Option {
	return []otlploghttp.Option{
		otlploghttp.WithEndpoint(p.addr), otlploghttp.WithInsecure(), otlploghttp.WithURLPath(otLogsPath),
		otlploghttp.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}),
		otlploghttp.WithCompression(c), otlploghttp.WithTimeout(callTimeout),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}),
	}
}

func otGRPCOptions(p *proc, tok string) []otlploggrpc.Option {
	return []otlploggrpc.Option{
		otlploggrpc.WithEndpoint(p.addr), otlploggrpc.WithInsecure(),
		otlploggrpc.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}),
		otlploggrpc.WithTimeout(callTimeout), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}),
	}
}

// otSDKNamings name a record the two ways an SDK producer can: Claude
// Code's (bare event.name attribute, prefixed body), or the LogRecord's
// own event_name field alone.
var otSDKNamings = []struct {
	name string
	set  func(r *otellog.Record, name string)
}{
	{"claude-code", func(r *otellog.Record, name string) {
		r.SetBody(attribute.StringValue(otAgentClaude + "." + name))
		r.AddAttributes(attribute.String("event.name", name))
	}},
	{"event_name field", func(r *otellog.Record, name string) {
		r.SetEventName(otAgentClaude + "." + name)
	}},
}

// TestOTLPOTelSDKExporters drives each SDK exporter with Claude Code
// shaped records, flushing explicitly, and reads the activity they gave.
func TestOTLPOTelSDKExporters(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	for _, ex := range otSDKExporters {
		for i, n := range otSDKNamings {
			member := "sdk-" + ex.name + "-" + string(rune('a'+i))
			tok := createMember(t, restDriver{p}, admin, member)
			t.Run(ex.name+"/"+n.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 3*callTimeout)
				defer cancel()
				exp, err := ex.make(ctx, p, tok)
				require.NoError(t, err)
				lp := sdklog.NewLoggerProvider(
					sdklog.WithResource(resource.NewSchemaless(
						attribute.String("service.name", "claude-code"), attribute.String("service.version", "2.1.328"),
						attribute.String("os.type", "linux"))),
					// Exports only when flushed.
					sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithExportInterval(time.Hour),
						sdklog.WithExportTimeout(callTimeout))),
				)
				defer func() { require.NoError(t, lp.Shutdown(ctx)) }()
				otSDKScenario(t, ctx, p, tok, member, lp.Logger("com.anthropic.claude_code.events",
					otellog.WithInstrumentationVersion("2.1.328")), lp.ForceFlush, n.set)
			})
		}
	}
}

func otSDKScenario(t *testing.T, ctx context.Context, p *proc, tok, member string, logger otellog.Logger,
	flush func(context.Context) error, name func(*otellog.Record, string),
) {
	const (
		sess  = "2f6e3c1a-sdk"
		model = "claude-opus-5-5"
	)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * 10 * time.Millisecond) }
	emit := func(event string, seq int, attrs ...attribute.KeyValue) {
		var r otellog.Record
		r.SetTimestamp(at(seq))
		r.SetObservedTimestamp(at(seq))
		r.SetSeverity(otellog.SeverityInfo)
		name(&r, event)
		r.AddAttributes(attribute.String("user.id", "1911080d166e5e9d"), attribute.String("session.id", sess),
			attribute.Bool("anthropic.custom_base_url", true), attribute.String("terminal.type", "dumb"),
			attribute.String("event.timestamp", at(seq).Format(time.RFC3339Nano)), attribute.Int("event.sequence", seq),
			attribute.String("prompt.id", "8ccfbb65"), attribute.String("user.email", otEmail))
		r.AddAttributes(attrs...)
		logger.Emit(ctx, r)
	}
	system := []obj{{"type": "text", "text": "You are a Claude agent."}}
	msgs := []obj{{"role": "user", "content": "Read note.txt and tell me what it says."}}
	content := []obj{{"type": "thinking", "thinking": otSecret, "signature": "sig"},
		{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": obj{"file_path": "note.txt"}}}
	u := otUsage{in: 22, out: 29, cacheRead: 747, cacheCreation: 250, cost: 0.0020674, durationMs: 84}
	reqBodyJSON := otAnthropicRequest(t, model, system, msgs, "Read", "Bash")
	respBodyJSON := otAnthropicResponse(t, model, "msg_sdk_1", content, "tool_use", u)

	// First flush: a prompt, a request body, a tool decision and a record
	// of a name svc does not use, which the exporter reports back.
	emit("plugin_loaded", 1, attribute.String("plugin.name", "cc-plugin-agents-md"))
	emit("user_prompt", 4, attribute.String("prompt_length", "39"), attribute.String("prompt", "Read note.txt and tell me what it says."))
	emit("api_request_body", 5, attribute.String("body", reqBodyJSON), attribute.Int("body_length", len(reqBodyJSON)),
		attribute.String("model", model), attribute.String("query_source", "sdk"), attribute.String("request_body_id", "rb-1"))
	emit("tool_decision", 6, attribute.String("decision", "accept"), attribute.String("source", "config"),
		attribute.String("tool_name", "Read"), attribute.String("tool_use_id", "toolu_1"))
	err := flush(ctx)
	require.Error(t, err, "the exporter reports the partial success")
	require.Contains(t, err.Error(), "(1 logs rejected)")
	rows, _ := otRows(t, p, tok, member)
	require.Equal(t, map[string]int{"user_prompt": 1, "tool_action": 1}, otCountKinds(t, rows))

	// Second flush: accounting, response and the tool's result complete
	// the exchange.
	emit("api_request", 7, attribute.String("model", model), attribute.Int("input_tokens", 22), attribute.Int("output_tokens", 29),
		attribute.Int("cache_read_tokens", 747), attribute.Int("cache_creation_tokens", 250), attribute.Float64("cost_usd", 0.0020674),
		attribute.Int("duration_ms", 84), attribute.Int("ttft_ms", 15), attribute.String("request_id", "req_sdk_1"))
	emit("api_response_body", 8, attribute.String("body", respBodyJSON), attribute.Int("body_length", len(respBodyJSON)),
		attribute.String("model", model), attribute.String("request_id", "req_sdk_1"), attribute.String("request_body_id", "rb-1"),
		attribute.String("message.id", "msg_sdk_1"))
	emit("tool_result", 9, attribute.String("tool_name", "Read"), attribute.String("tool_use_id", "toolu_1"),
		attribute.String("success", "true"), attribute.Int("duration_ms", 33), attribute.String("tool_input", `{"file_path":"note.txt"}`))
	require.NoError(t, flush(ctx))
	ex := otExchanges(t, p, tok, member)
	require.Len(t, ex, 1)
	require.Equal(t, otMS(at(7)), ex[0]["ts"])
	otRequireData(t, obj{
		"model": model, "requestId": "req_sdk_1", "responseId": "msg_sdk_1",
		"system": system, "messages": msgs, "tools": []string{"Read", "Bash"},
		"content": content[1:], "stopReason": "tool_use", "usage": otUsageData(u),
		"costUsd": 0.0020674, "durationMs": 84, "truncated": false, "requestOnly": false, "source": "otlp",
	}, ex[0])

	// Third flush: accounting with no body is an exchange at once.
	emit("api_request", 10, attribute.String("model", "claude-haiku-4-5"), attribute.Int("input_tokens", 3),
		attribute.Int("output_tokens", 4), attribute.Float64("cost_usd", 0.0001), attribute.Int("duration_ms", 9),
		attribute.String("request_id", "req_sdk_2"))
	require.NoError(t, flush(ctx))
	ex = otExchanges(t, p, tok, member)
	require.Len(t, ex, 2)
	otRequireData(t, obj{"model": "claude-haiku-4-5", "requestId": "req_sdk_2", "usage": obj{"inputTokens": 3, "outputTokens": 4},
		"costUsd": 0.0001, "durationMs": 9, "truncated": false, "requestOnly": false, "source": "otlp"}, ex[1])

	rows, raw := otRows(t, p, tok, member)
	require.Equal(t, map[string]int{"llm_exchange": 2, "user_prompt": 1, "tool_action": 2}, otCountKinds(t, rows))
	prompts, _ := otRows(t, p, tok, member, "user_prompt")
	otRequireData(t, obj{"prompt": "Read note.txt and tell me what it says.", "promptLength": 39}, prompts[0])
	tools, _ := otRows(t, p, tok, member, "tool_action")
	otRequireDataHas(t, obj{"tool": "Read", "phase": "result", "success": true, "durationMs": 33,
		"input": obj{"file_path": "note.txt"}, "source": "otlp"}, tools[0])
	otRequireDataHas(t, obj{"tool": "Read", "phase": "decision", "decision": "accept", "source": "otlp"}, tools[1])
	require.False(t, strings.Contains(string(raw), otSecret) || strings.Contains(string(raw), otEmail), "nothing private stored: %s", raw)
}

// TestOTLPGRPCGzipShippedBinary runs svc as built (not this test binary,
// which links gRPC's gzip codec through otlploggrpc), with nothing but HOME
// and PATH in its environment, and exports to it over gRPC with gzip
// compression, which OTLP requires every server to accept ("All server
// components MUST support ... gzip"), as OTLP/HTTP here does.
func TestOTLPGRPCGzipShippedBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := svcPath(t)

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--config-path", filepath.Join(dir, "svc.json"))
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	stdout := &lineBuffer{}
	addrCh := make(chan string, 1)
	stderr := &lineBuffer{onLine: func(line string) {
		if m := listeningRE.FindStringSubmatch(line); m != nil {
			select {
			case addrCh <- m[1]:
			default:
			}
		}
	}}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	var addr string
	select {
	case addr = <-addrCh:
	case <-done:
		t.Fatalf("svc exited before listening: %s", stderr)
	case <-time.After(startTimeout):
		t.Fatalf("svc did not listen within %s: %s", startTimeout, stderr)
	}
	var tok string
	require.Eventually(t, func() bool {
		m := adminTokenLineRE.FindStringSubmatch(stdout.String())
		if m != nil {
			tok = m[1]
		}
		return m != nil
	}, callTimeout, 10*time.Millisecond, "admin token line")

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	logs := collogspb.NewLogsServiceClient(conn)
	req := otPromptExport(time.Now(), "compressed")
	_, err = logs.Export(otGRPCCtx(t, "authorization", "Bearer "+tok), req)
	require.NoError(t, err, "uncompressed")
	_, err = logs.Export(otGRPCCtx(t, "authorization", "Bearer "+tok), req, grpc.UseCompressor("gzip"))
	require.NoError(t, err, "OTLP/gRPC with gzip compression")
}
