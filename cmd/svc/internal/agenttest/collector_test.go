package agenttest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// collector is a tiny OTLP logs receiver: HTTP (POST /v1/logs as JSON or
// protobuf, optionally gzipped) or gRPC (LogsService/Export).
type collector struct {
	t        testing.TB
	endpoint string // what to give as OTEL_EXPORTER_OTLP_ENDPOINT

	mu      sync.Mutex
	exports []export
	others  []string // requests to paths other than /v1/logs
}

// export is one export request received.
type export struct {
	Protocol      string // http/json, http/protobuf, grpc
	Path          string
	ContentType   string
	Authorization string
	Raw           []byte // the body exactly as received (http)
	Req           *collogspb.ExportLogsServiceRequest
}

// event is one log record, flattened.
type event struct {
	Name      string            // event.name attribute
	Body      string            // the record's body string
	Attrs     map[string]string // record attributes, every value as text
	Resource  map[string]string
	Scope     string
	TimeNanos uint64
	Export    int // index of the export that carried it
}

func newHTTPCollector(t testing.TB) *collector {
	c := &collector{t: t}
	srv := httptest.NewServer(http.HandlerFunc(c.serveHTTP))
	t.Cleanup(srv.Close)
	c.endpoint = srv.URL
	return c
}

func (c *collector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/logs" {
		c.mu.Lock()
		c.others = append(c.others, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	body := raw
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err == nil {
			body, err = io.ReadAll(zr)
		}
		if err != nil {
			http.Error(w, "bad gzip: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	ct := r.Header.Get("Content-Type")
	req := &collogspb.ExportLogsServiceRequest{}
	e := export{Path: r.URL.Path, ContentType: ct, Authorization: r.Header.Get("Authorization"), Raw: raw, Req: req}
	switch {
	case strings.HasPrefix(ct, "application/json"):
		e.Protocol = ProtocolHTTPJSON
		err = protojson.Unmarshal(body, req)
	case strings.HasPrefix(ct, "application/x-protobuf"):
		e.Protocol = ProtocolHTTPProtobuf
		err = proto.Unmarshal(body, req)
	default:
		err = fmt.Errorf("unexpected content type %q", ct)
	}
	if err != nil {
		c.t.Errorf("collector: undecodable export (%s): %v", ct, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.exports = append(c.exports, e)
	c.mu.Unlock()
	if e.Protocol == ProtocolHTTPJSON {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	b, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

type grpcLogs struct {
	collogspb.UnimplementedLogsServiceServer
	c *collector
}

func (g grpcLogs) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	e := export{Protocol: ProtocolGRPC, Path: "/opentelemetry.proto.collector.logs.v1.LogsService/Export", Req: req}
	if v := md.Get("authorization"); len(v) > 0 {
		e.Authorization = v[0]
	}
	if v := md.Get("content-type"); len(v) > 0 {
		e.ContentType = v[0]
	}
	g.c.mu.Lock()
	g.c.exports = append(g.c.exports, e)
	g.c.mu.Unlock()
	return &collogspb.ExportLogsServiceResponse{}, nil
}

func newGRPCCollector(t testing.TB) *collector {
	c := &collector{t: t}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collogspb.RegisterLogsServiceServer(srv, grpcLogs{c: c})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	c.endpoint = "http://" + lis.Addr().String()
	return c
}

func (c *collector) Exports() []export {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]export(nil), c.exports...)
}

func (c *collector) Others() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.others...)
}

// Events flattens every log record received, in the agent's own order
// (event.sequence; records without one keep their arrival order, last).
// Claude Code can send two exports at once, and over gRPC the later one
// sometimes arrives first: arrival order is not event order.
func (c *collector) Events() []event {
	var out []event
	for i, e := range c.Exports() {
		for _, rl := range e.Req.GetResourceLogs() {
			res := attrMap(rl.GetResource().GetAttributes())
			for _, sl := range rl.GetScopeLogs() {
				for _, lr := range sl.GetLogRecords() {
					attrs := attrMap(lr.GetAttributes())
					out = append(out, event{
						Name:      attrs["event.name"],
						Body:      anyText(lr.GetBody()),
						Attrs:     attrs,
						Resource:  res,
						Scope:     sl.GetScope().GetName() + "@" + sl.GetScope().GetVersion(),
						TimeNanos: lr.GetTimeUnixNano(),
						Export:    i,
					})
				}
			}
		}
	}
	sequence := func(e event) int {
		n, err := strconv.Atoi(e.Attrs["event.sequence"])
		if err != nil {
			return int(^uint(0) >> 1)
		}
		return n
	}
	sort.SliceStable(out, func(i, j int) bool { return sequence(out[i]) < sequence(out[j]) })
	return out
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyText(kv.GetValue())
	}
	return m
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case nil:
		return ""
	default:
		b, _ := protojson.Marshal(v)
		return string(b)
	}
}

// describe is a compact listing of events for logs and failure messages.
func describe(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		keys := make([]string, 0, len(e.Attrs))
		for k, v := range e.Attrs {
			if len(v) > 60 {
				v = v[:60] + "…"
			}
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "  [export %d] %s body=%q %s\n", e.Export, e.Name, e.Body, strings.Join(keys, " "))
	}
	return b.String()
}
