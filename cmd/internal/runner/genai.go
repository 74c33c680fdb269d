package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"svc/cmd/internal/capture"
	"svc/cmd/internal/client"
	apiv1 "svc/gen/svc/v1"
)

// Bounds of the inference uploads (the Codex-style GenAI records).
const (
	// genaiQueueItems and genaiQueueBytes bound what waits for upload: a
	// full context is up to a few MiB, so a few dozen calls is minutes of
	// a busy agent while the broker is away. Past either an inference is
	// dropped with a log line rather than holding memory.
	genaiQueueItems = 64
	genaiQueueBytes = 64 << 20
	// genaiDrainGrace: at stop, what is queued gets this long to go out.
	genaiDrainGrace = 5 * time.Second
	// maxGenAIUpload is the broker's cap on one upload body
	// (server/activity's MaxGenAIUpload); a larger one is dropped here,
	// not sent.
	maxGenAIUpload = 16 << 20
	// genaiAttempts bounds the tries of one upload (about 45 s of
	// backoff): a broker that stays away does not hold the queue forever.
	genaiAttempts = 8
)

// GenAIUploader uploads the inferences an adapter captures as GenAI
// records of the member (Activity.UploadGenAi, the body {ts, request,
// response}), redacted, in order, off the agent's path: Add never blocks,
// Run uploads, retrying what failed for a transient reason.
type GenAIUploader struct {
	act    apiv1.ActivityClient
	me     string
	redact *Redactor
	log    *logger
	// backoff is the first retry delay, doubling up to maxBackoff.
	backoff time.Duration
	// maxBody and maxQueued are maxGenAIUpload and genaiQueueBytes
	// (smaller in tests).
	maxBody, maxQueued int

	mu      sync.Mutex
	queue   []Inference
	bytes   int
	busy    bool          // an upload is in flight
	changed chan struct{} // closed and replaced when the queue settles a step
	wake    chan struct{}
	dropped int64
}

// NewGenAIUploader uploads as member over conn, redacting with r; its log
// lines go to log.
func NewGenAIUploader(conn grpc.ClientConnInterface, member string, r *Redactor, log io.Writer) *GenAIUploader {
	return newGenAIUploader(apiv1.NewActivityClient(conn), member, r, &logger{w: log})
}

func newGenAIUploader(act apiv1.ActivityClient, member string, r *Redactor, log *logger) *GenAIUploader {
	return &GenAIUploader{act: act, me: member, redact: r, log: log, backoff: minBackoff,
		maxBody: maxGenAIUpload, maxQueued: genaiQueueBytes,
		changed: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// CaptureSink adapts f (Setup.Inferences) to the capturing proxy's Sink:
// each exchange becomes an Inference stamped with the end of its response,
// carrying the credentials of its request headers for redaction. Nil for
// a nil f, so a proxy under --no-capture only forwards.
func CaptureSink(f func(Inference)) func(capture.Exchange) {
	if f == nil {
		return nil
	}
	return func(e capture.Exchange) {
		f(Inference{TS: e.End, Request: e.Request, Response: e.Response, Credentials: e.Credentials})
	}
}

// Add queues one inference; it never blocks. Past the queue's bounds the
// inference is dropped with a log line and counted.
func (u *GenAIUploader) Add(in Inference) {
	size := len(in.Request) + len(in.Response)
	u.mu.Lock()
	if len(u.queue) >= genaiQueueItems || u.bytes+size > u.maxQueued {
		u.dropped++
		n := u.dropped
		u.mu.Unlock()
		u.log.logf("svc runner: inference not uploaded: upload queue full (%d dropped so far)", n)
		return
	}
	u.queue = append(u.queue, in)
	u.bytes += size
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many inferences were dropped because the queue was full.
func (u *GenAIUploader) Dropped() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.dropped
}

// Run uploads until ctx ends; what is still queued then is dropped with
// one log line.
func (u *GenAIUploader) Run(ctx context.Context) {
	for ctx.Err() == nil {
		in, ok := u.take()
		if !ok {
			select {
			case <-ctx.Done():
			case <-u.wake:
			}
			continue
		}
		u.send(ctx, in)
		u.mu.Lock()
		u.busy = false
		u.settle()
		u.mu.Unlock()
	}
	u.mu.Lock()
	left := len(u.queue)
	u.queue, u.bytes = nil, 0
	u.settle()
	u.mu.Unlock()
	if left > 0 {
		u.log.logf("svc runner: %d inference(s) not uploaded: the runner stopped first", left)
	}
}

// take pops the oldest inference and marks an upload in flight.
func (u *GenAIUploader) take() (Inference, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.queue) == 0 {
		return Inference{}, false
	}
	in := u.queue[0]
	u.queue[0] = Inference{}
	u.queue = u.queue[1:]
	u.bytes -= len(in.Request) + len(in.Response)
	u.busy = true
	return in, true
}

// settle wakes the Flush waiters; u.mu is held.
func (u *GenAIUploader) settle() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// Flush waits, bounded by ctx, until everything queued was uploaded or
// given up; it reports whether it was.
func (u *GenAIUploader) Flush(ctx context.Context) bool {
	for {
		u.mu.Lock()
		if len(u.queue) == 0 && !u.busy {
			u.mu.Unlock()
			return true
		}
		ch := u.changed
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// send uploads one inference, retrying a transient failure with backoff
// until it goes, is refused, or ctx ends.
func (u *GenAIUploader) send(ctx context.Context, in Inference) {
	body, err := u.body(in)
	if err != nil {
		u.log.logf("svc runner: inference not uploaded: %v", err)
		return
	}
	backoff := u.backoff
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := u.act.UploadGenAi(cctx, &apiv1.UploadGenAiRequest{Name: u.me, Body: body})
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			u.log.logf("svc runner: inference not uploaded: the runner stopped first")
			return
		}
		if !transient(err) {
			u.log.logf("svc runner: inference not uploaded: the broker refused it: %s", describeStatus(err))
			return
		}
		if attempt == genaiAttempts {
			u.log.logf("svc runner: inference not uploaded after %d attempts: %s", attempt, describeStatus(err))
			return
		}
		select {
		case <-ctx.Done():
			u.log.logf("svc runner: inference not uploaded: the runner stopped first")
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// body is the upload {ts, request, response}: ts in epoch ms (the
// broker's genai.DecodeUpload), request and response redacted of the
// member's secrets, the runner's token and the call's own credentials.
func (u *GenAIUploader) body(in Inference) ([]byte, error) {
	if !jsonObject(in.Request) || !jsonObject(in.Response) {
		return nil, errors.New("the request or the response is not a JSON object")
	}
	r := u.redact
	if len(in.Credentials) > 0 {
		r = r.with(in.Credentials...)
	}
	ts := in.TS
	if ts.IsZero() {
		ts = time.Now()
	}
	var b bytes.Buffer
	b.WriteString(`{"ts":`)
	b.WriteString(strconv.FormatInt(ts.UnixMilli(), 10))
	b.WriteString(`,"request":`)
	b.Write(r.JSON(in.Request))
	b.WriteString(`,"response":`)
	b.Write(r.JSON(in.Response))
	b.WriteString(`}`)
	if b.Len() > u.maxBody {
		return nil, fmt.Errorf("%d bytes, over the broker's %d", b.Len(), u.maxBody)
	}
	return b.Bytes(), nil
}

// with is r redacting extra values too.
func (r *Redactor) with(extra ...string) *Redactor {
	return NewRedactor(append(slices.Clone(r.values), extra...)...)
}

// jsonObject says whether b is one valid JSON object.
func jsonObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// transient says whether a failed upload may go through later: the broker
// is away, slow or rate-limiting. ResourceExhausted also carries
// payload_too_large, which no retry cures.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	case codes.ResourceExhausted:
		return client.Code(err) != "payload_too_large"
	}
	return false
}

// describeStatus is a gRPC error for the log, one line: the spec's error
// code when the broker gave one, else the gRPC code, and the message.
func describeStatus(err error) string {
	st, _ := status.FromError(err)
	code := client.Code(err)
	if code == "" {
		code = st.Code().String()
	}
	return oneLine(code+": "+st.Message(), 300)
}
