package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"svc/server/activity"
	"svc/server/apierr"
	"svc/server/auth"
)

// MaxOTLPBody caps an OTLP/HTTP request body, as sent and once
// decompressed: Claude Code truncates each raw body near 60 KB, so this
// holds hundreds of records however they are batched.
const MaxOTLPBody = 16 << 20

// OTLP/HTTP content types (OTLP specification: protocol).
const (
	otlpJSON     = "application/json"
	otlpProtobuf = "application/x-protobuf"
)

// otlpBody reads an OTLP/HTTP request body: its content type (JSON or
// protobuf), decompressed when Content-Encoding is gzip, at most
// MaxOTLPBody bytes either way.
func otlpBody(w http.ResponseWriter, r *http.Request) (string, []byte, error) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (ct != otlpJSON && ct != otlpProtobuf) {
		return "", nil, apierr.Errorf(apierr.CodeBadRequest, "Content-Type: must be %s or %s", otlpJSON, otlpProtobuf)
	}
	if r.ContentLength > MaxOTLPBody {
		return "", nil, apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", MaxOTLPBody)
	}
	raw := &readErr{r: http.MaxBytesReader(w, r.Body, MaxOTLPBody)}
	body := io.Reader(raw)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return "", nil, otlpReadErr(raw, err)
		}
		defer zr.Close()
		body = zr
	default:
		return "", nil, apierr.Errorf(apierr.CodeBadRequest, "Content-Encoding: %q is not supported; send gzip or nothing", enc)
	}
	// Sized up front from the declared length: growing a 200 KB body
	// from nothing copies it a dozen times.
	hint := int64(64 << 10)
	if r.ContentLength > 0 {
		hint = r.ContentLength
		if body != io.Reader(raw) {
			hint = min(4*hint, MaxOTLPBody) // gzip: a guess
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(body, MaxOTLPBody+1))
	if err != nil {
		return "", nil, otlpReadErr(raw, err)
	}
	b := buf.Bytes()
	if len(b) > MaxOTLPBody {
		return "", nil, apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes once decompressed", MaxOTLPBody)
	}
	return ct, b, nil
}

// readErr remembers the error of the reader under a decompressor, so a
// failure can be told apart: the body's (over the cap, the client gone) or
// the decompressor's (the bytes are not gzip).
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// otlpReadErr maps a failure to read a body: over the cap is 413, the
// body's own failure (the client went) is returned as it is, anything else
// is the decompressor refusing the bytes: 400.
func otlpReadErr(raw *readErr, err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.As(raw.err, &mbe):
		return apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", MaxOTLPBody)
	case raw.err != nil:
		return raw.err
	}
	return apierr.Errorf(apierr.CodeBadRequest, "body: not a valid gzip stream: %v", err)
}

// handleOTLPLogs serves POST /otlp/v1/logs: an OTLP ExportLogsServiceRequest
// in JSON or protobuf, answered with an ExportLogsServiceResponse in the
// same encoding. The member is the bearer token's.
func (g *Gateway) handleOTLPLogs(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ct, b, err := otlpBody(w, r)
	if err != nil {
		return err
	}
	encoding := activity.OTLPProtobuf
	if ct == otlpJSON {
		encoding = activity.OTLPJSON
	}
	resp, err := g.srv.ExportLogs(r.Context(), p, encoding, b)
	if err != nil {
		return err
	}
	if ct == otlpProtobuf {
		return writeProto(w, resp)
	}
	// OTLP/JSON: the rejected count as a number (proto3 JSON would quote
	// the int64), which OTLP receivers and svc's own clients both read.
	out := map[string]any{}
	if ps := resp.GetPartialSuccess(); ps != nil {
		out["partialSuccess"] = map[string]any{"rejectedLogRecords": ps.GetRejectedLogRecords(), "errorMessage": ps.GetErrorMessage()}
	}
	w.Header().Set("Content-Type", otlpJSON)
	return json.NewEncoder(w).Encode(out)
}

// handleOTLPMetrics serves POST /otlp/v1/metrics: accepted and discarded.
// The body must still be a metrics export in the declared encoding.
func (g *Gateway) handleOTLPMetrics(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
	ct, b, err := otlpBody(w, r)
	if err != nil {
		return err
	}
	if ct == otlpProtobuf {
		if err := proto.Unmarshal(b, &colmetricspb.ExportMetricsServiceRequest{}); err != nil {
			return apierr.Errorf(apierr.CodeBadRequest, "body: not an OTLP metrics export: %v", err)
		}
		return writeProto(w, &colmetricspb.ExportMetricsServiceResponse{})
	}
	if !json.Valid(b) || !bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")) {
		return apierr.Errorf(apierr.CodeBadRequest, "body: not an OTLP metrics export: not a JSON object")
	}
	w.Header().Set("Content-Type", otlpJSON)
	_, err = io.WriteString(w, "{}\n")
	return err
}

// writeProto answers m as application/x-protobuf.
func writeProto(w http.ResponseWriter, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", otlpProtobuf)
	_, err = w.Write(b)
	return err
}

// handleGenAIUpload serves POST /members/{name}/genai: the body, {ts?,
// request, response}, is kept byte for byte (up to activity.MaxGenAIUpload)
// and parsed into an inference record of the caller.
func (g *Gateway) handleGenAIUpload(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if r.ContentLength > activity.MaxGenAIUpload {
		return apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", activity.MaxGenAIUpload)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return apierr.Errorf(apierr.CodeBadRequest, "Content-Type: must be application/json")
		}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, activity.MaxGenAIUpload))
	if err != nil {
		return err
	}
	resp, err := g.srv.UploadGenAI(r.Context(), p, r.PathValue("name"), b)
	if err != nil {
		return err
	}
	out, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode inference record: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(out)
	return err
}
