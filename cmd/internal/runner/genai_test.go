package runner

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"svc/cmd/internal/capture"
	apiv1 "svc/gen/svc/v1"
	"svc/server/genai"
)

// fakeActivity is an Activity server whose UploadGenAi the test scripts;
// it records every body it was sent.
type fakeActivity struct {
	apiv1.UnimplementedActivityServer
	upload func(n int, req *apiv1.UploadGenAiRequest) error

	mu     sync.Mutex
	calls  int
	bodies [][]byte
}

func (f *fakeActivity) UploadGenAi(ctx context.Context, req *apiv1.UploadGenAiRequest) (*apiv1.UploadGenAiResponse, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.upload != nil {
		if err := f.upload(n, req); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, req.GetBody())
	f.mu.Unlock()
	return &apiv1.UploadGenAiResponse{}, nil
}

func (f *fakeActivity) stored() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// mustGenAIUploader starts f on bufconn and an uploader for "ann" against
// it, redacting the given values; its log is returned too.
func mustGenAIUploader(t *testing.T, f *fakeActivity, redact ...string) (*GenAIUploader, *syncLog) {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	apiv1.RegisterActivityServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	log := &syncLog{}
	u := NewGenAIUploader(conn, "ann", NewRedactor(redact...), log)
	u.backoff = time.Millisecond
	return u, log
}

// run starts u.Run until the test ends.
func run(t *testing.T, u *GenAIUploader) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); u.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

func flushed(t *testing.T, u *GenAIUploader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.True(t, u.Flush(ctx), "the queue did not drain")
}

const (
	genaiReq  = `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"use s3cr3t-value please"}]}]}`
	genaiResp = `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":7,"output_tokens":2}}`
)

func TestGenAIUploadBody(t *testing.T) {
	at := time.UnixMilli(1_790_000_000_123)
	tests := []struct {
		name     string
		in       Inference
		redact   []string
		absent   []string // must not appear in the body
		present  []string // must appear in the body
		wantErr  string
		wantTS   time.Time
		wantResp string // a response member that must survive
	}{
		{
			name: "secrets, token and the call's key redacted, ts in epoch ms",
			in: Inference{TS: at, Request: []byte(strings.Replace(genaiReq, "please", "key sk-proj-abcdefgh0123 token svc_tok_12345", 1)),
				Response: []byte(genaiResp), Credentials: []string{"sk-proj-abcdefgh0123"}},
			redact:  []string{"s3cr3t-value", "svc_tok_12345"},
			absent:  []string{"s3cr3t-value", "svc_tok_12345", "sk-proj-abcdefgh0123"},
			present: []string{`use [REDACTED] key [REDACTED] token [REDACTED]`},
			wantTS:  at,
		},
		{
			name: "a secret behind JSON escapes is found",
			in: Inference{TS: at, Request: []byte(`{"model":"m","input":"\u0073\u0033cr3t-value"}`),
				Response: []byte(strings.Replace(genaiResp, `"ok"`, `"s3cr3t\u002dvalue"`, 1))},
			redact: []string{"s3cr3t-value"}, absent: []string{"s3cr3t", "u0073"}, wantTS: at,
		},
		{
			name:   "secret in an object key",
			in:     Inference{TS: at, Request: []byte(`{"model":"m","input":"x","metadata":{"s3cr3t-value":"1"}}`), Response: []byte(genaiResp)},
			redact: []string{"s3cr3t-value"}, absent: []string{"s3cr3t-value"}, wantTS: at,
		},
		{
			name: "no ts is now", in: Inference{Request: []byte(genaiReq), Response: []byte(genaiResp)},
		},
		{name: "request not an object", in: Inference{Request: []byte(`[1]`), Response: []byte(genaiResp)}, wantErr: "not a JSON object"},
		{name: "response not JSON", in: Inference{Request: []byte(genaiReq), Response: []byte(`{"id":`)}, wantErr: "not a JSON object"},
		{
			name:    "over the broker's cap",
			in:      Inference{Request: []byte(`{"model":"m","input":"` + strings.Repeat("x", 1<<10) + `"}`), Response: []byte(genaiResp)},
			wantErr: "over the broker's",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newGenAIUploader(nil, "ann", NewRedactor(tc.redact...), &logger{w: &syncLog{}})
			u.maxBody = 1 << 10
			before := time.Now().Truncate(time.Millisecond)
			body, err := u.body(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			for _, s := range tc.absent {
				require.NotContains(t, string(body), s)
			}
			for _, s := range tc.present {
				require.Contains(t, string(body), s)
			}
			// The broker takes it: the upload decodes and parses.
			up, err := genai.DecodeUpload(body)
			require.NoError(t, err)
			if tc.wantTS.IsZero() {
				require.False(t, up.TS.Before(before), "ts defaults to now")
			} else {
				require.True(t, up.TS.Equal(tc.wantTS), "ts %s, want %s", up.TS, tc.wantTS)
			}
			rec, err := genai.Parse(up)
			require.NoError(t, err)
			require.Equal(t, "resp_1", rec.ResponseID)
		})
	}
}

func TestGenAIUploaderUploadsInOrder(t *testing.T) {
	f := &fakeActivity{}
	u, log := mustGenAIUploader(t, f, "s3cr3t-value")
	run(t, u)
	for i := range 5 {
		u.Add(Inference{TS: time.UnixMilli(int64(1000 + i)), Request: []byte(genaiReq), Response: []byte(genaiResp)})
	}
	flushed(t, u)
	bodies := f.stored()
	require.Len(t, bodies, 5)
	for i, b := range bodies {
		up, err := genai.DecodeUpload(b)
		require.NoError(t, err)
		require.Equal(t, int64(1000+i), up.TS.UnixMilli(), "in the order captured")
		require.NotContains(t, string(b), "s3cr3t-value")
	}
	require.Empty(t, log.String())
	require.Zero(t, u.Dropped())
}

func TestGenAIUploaderRetries(t *testing.T) {
	tests := []struct {
		name     string
		failures []error // the first calls fail so, in order
		calls    int
		stored   int
		log      string
	}{
		{name: "unavailable retried", failures: []error{status.Error(codes.Unavailable, "down"), status.Error(codes.Unavailable, "down")}, calls: 3, stored: 1},
		{name: "deadline and exhaustion retried", failures: []error{status.Error(codes.DeadlineExceeded, "slow"), status.Error(codes.ResourceExhausted, "busy")}, calls: 3, stored: 1},
		{name: "invalid dropped at once", failures: []error{status.Error(codes.InvalidArgument, "inference upload: bad")}, calls: 1, stored: 0,
			log: "svc runner: inference not uploaded: the broker refused it: InvalidArgument: inference upload: bad\n"},
		{name: "too large dropped at once", failures: []error{tooLarge()}, calls: 1, stored: 0,
			log: "svc runner: inference not uploaded: the broker refused it: payload_too_large: inference upload over 16777216 bytes\n"},
		{name: "gives up after its attempts", failures: slices.Repeat([]error{status.Error(codes.Unavailable, "down")}, genaiAttempts), calls: genaiAttempts, stored: 0,
			log: "svc runner: inference not uploaded after 8 attempts: Unavailable: down\n"},
		{name: "forbidden dropped at once", failures: []error{status.Error(codes.PermissionDenied, "not yours")}, calls: 1, stored: 0,
			log: "svc runner: inference not uploaded: the broker refused it: forbidden: not yours\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeActivity{upload: func(n int, _ *apiv1.UploadGenAiRequest) error {
				if n <= len(tc.failures) {
					return tc.failures[n-1]
				}
				return nil
			}}
			u, log := mustGenAIUploader(t, f)
			run(t, u)
			u.Add(Inference{Request: []byte(genaiReq), Response: []byte(genaiResp)})
			flushed(t, u)
			f.mu.Lock()
			require.Equal(t, tc.calls, f.calls)
			f.mu.Unlock()
			require.Len(t, f.stored(), tc.stored)
			require.Equal(t, tc.log, log.String())
		})
	}
}

// tooLarge is the broker's refusal of an oversized upload: ResourceExhausted
// with the payload_too_large reason.
func tooLarge() error {
	st, err := status.New(codes.ResourceExhausted, "inference upload over 16777216 bytes").
		WithDetails(&errdetails.ErrorInfo{Reason: "payload_too_large", Domain: "svc"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestGenAIUploaderQueueFull(t *testing.T) {
	release := make(chan struct{})
	f := &fakeActivity{upload: func(int, *apiv1.UploadGenAiRequest) error { <-release; return nil }}
	u, log := mustGenAIUploader(t, f)
	run(t, u)
	in := Inference{Request: []byte(genaiReq), Response: []byte(genaiResp)}
	// One goes in flight, genaiQueueItems wait, the rest is dropped, and
	// Add never blocks meanwhile.
	u.Add(in)
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.calls == 1 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	for range genaiQueueItems + 3 {
		u.Add(in)
	}
	require.Less(t, time.Since(start), time.Second, "Add must not block")
	require.Equal(t, int64(3), u.Dropped())
	require.Equal(t, 3, strings.Count(log.String(), "upload queue full"))
	close(release)
	flushed(t, u)
	require.Len(t, f.stored(), genaiQueueItems+1)

	// The byte bound holds too: one inference past it is dropped.
	u2 := newGenAIUploader(nil, "ann", NewRedactor(), &logger{w: &syncLog{}})
	u2.maxQueued = 1 << 10
	u2.Add(Inference{Request: []byte(`{"input":"` + strings.Repeat("x", 1<<9) + `"}`), Response: []byte(genaiResp)})
	require.Zero(t, u2.Dropped())
	u2.Add(Inference{Request: []byte(`{"input":"` + strings.Repeat("x", 1<<9) + `"}`), Response: []byte(genaiResp)})
	require.Equal(t, int64(1), u2.Dropped())
}

func TestGenAIUploaderStop(t *testing.T) {
	f := &fakeActivity{upload: func(int, *apiv1.UploadGenAiRequest) error { return status.Error(codes.Unavailable, "down") }}
	u, log := mustGenAIUploader(t, f)
	u.backoff = 50 * time.Millisecond
	cancel := run(t, u)
	for range 3 {
		u.Add(Inference{Request: []byte(genaiReq), Response: []byte(genaiResp)})
	}
	// The broker stays away: the drain gives up at its grace...
	ctx, gcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer gcancel()
	require.False(t, u.Flush(ctx))
	// ...and stopping the runner drops what is left with log lines.
	cancel()
	require.Eventually(t, func() bool {
		return strings.Contains(log.String(), "2 inference(s) not uploaded: the runner stopped first")
	}, 5*time.Second, 5*time.Millisecond)
	require.Contains(t, log.String(), "svc runner: inference not uploaded: the runner stopped first")
	require.True(t, u.Flush(context.Background()), "nothing is left queued")
}

func TestGenAIUploaderSkipsBadInference(t *testing.T) {
	f := &fakeActivity{}
	u, log := mustGenAIUploader(t, f)
	run(t, u)
	u.Add(Inference{Request: []byte(`not json`), Response: []byte(genaiResp)})
	u.Add(Inference{Request: []byte(genaiReq), Response: []byte(genaiResp)})
	flushed(t, u)
	require.Len(t, f.stored(), 1, "the next one still goes")
	require.Equal(t, "svc runner: inference not uploaded: the request or the response is not a JSON object\n", log.String())
}

func TestCaptureSink(t *testing.T) {
	require.Nil(t, CaptureSink(nil), "--no-capture: the proxy only forwards")
	var got []Inference
	sink := CaptureSink(func(in Inference) { got = append(got, in) })
	end := time.Now()
	sink(capture.Exchange{Start: end.Add(-time.Second), End: end, Path: "/responses", API: capture.APIResponses,
		Request: []byte(genaiReq), Response: []byte(genaiResp), Credentials: []string{"sk-proj-abcdefgh0123"}})
	require.Equal(t, []Inference{{TS: end, Request: []byte(genaiReq), Response: []byte(genaiResp), Credentials: []string{"sk-proj-abcdefgh0123"}}}, got)
}

// The upload body is what the broker's contract names: exactly ts,
// request and response.
func TestGenAIUploadBodyKeys(t *testing.T) {
	u := newGenAIUploader(nil, "ann", NewRedactor(), &logger{w: &syncLog{}})
	body, err := u.body(Inference{TS: time.UnixMilli(5), Request: []byte(genaiReq), Response: []byte(genaiResp)})
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	require.Len(t, m, 3)
	require.Equal(t, "5", string(m["ts"]))
	require.JSONEq(t, genaiReq, string(m["request"]))
	require.JSONEq(t, genaiResp, string(m["response"]))
}
