package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
)

// Push echoes the request into its answer the way the real service shapes
// one, so every field of the answer is exercised; bodies "fail", "cookie"
// and "chain" ask for a service error, a Set-Cookie header and the
// reply-chain fields.
func (b *fakeBroker) Push(ctx context.Context, req *apiv1.PushRequest) (*apiv1.PushResponse, error) {
	b.record(ctx)
	switch req.GetBody() {
	case "fail":
		return nil, apierr.ToStatus(apierr.Invalid("level", "must be one of debug, info")).Err()
	case "cookie":
		_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.ClearSessionCookie(), "x-internal", "secret"))
	}
	m := &apiv1.Message{Id: "00000000000000a1", From: "bob", To: req.To, Title: req.GetTitle(), Body: req.GetBody(), Level: req.GetLevel(),
		Data: req.GetData(), Attachments: req.GetAttachments(), CreatedAt: 1764416500123}
	if req.GetBody() == "chain" {
		m.ReplyTo, m.Hops, m.LoopStopped = proto.String("00000000000000a0"), proto.Uint32(3), proto.Bool(false)
	}
	return &apiv1.PushResponse{Delivery: &apiv1.Delivery{Live: 2, Targets: 5}, Message: m}, nil
}

// newPushGateways returns two gateways over the same fake broker: one with
// handlePush, one that leaves POST /push to grpc-gateway's generic route.
func newPushGateways(t *testing.T) (hand, generic *Gateway, fb *fakeBroker) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	fb = &fakeBroker{}
	apiv1.RegisterBrokerServer(srv, fb)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, conn.Close())
		srv.Stop()
		<-done
	})
	hand, err = New(context.Background(), conn, nil)
	require.NoError(t, err)
	generic, err = New(context.Background(), conn, nil, func(g *Gateway) { g.genericPush = true })
	require.NoError(t, err)
	creds := newTestCreds(t)
	hand.authn, generic.authn = creds.authn, creds.authn
	testBearer = creds.bobBearer
	return hand, generic, fb
}

// Every request to POST /push, the hostile ones first, is answered by
// handlePush exactly as by the generic route: status, headers, the same
// error body byte for byte, the same answer (as JSON: protojson varies its
// spacing), and the service sees the same request metadata.
func TestPushHandlerMatchesGenericRoute(t *testing.T) {
	hand, generic, fb := newPushGateways(t)
	deep := strings.Repeat(`{"a":`, maxDecodeDepth+1) + "1" + strings.Repeat("}", maxDecodeDepth+1)
	tests := []struct {
		name      string
		body      string
		chunked   bool
		trickle   bool // chunked, a byte a read: a slow client
		header    map[string]string
		anonymous bool
		status    int
	}{
		{name: "a plain push", body: `{"body":"hi"}`, status: 200},
		{name: "every field", body: `{"to":"ann","title":"t \"q\" <b>&","body":"line\nnext\ttab \u0001 é 😀","level":"warning","data":{"thread":"x","n":1.5,"big":1e300,"small":1e-9,"l":[true,null,{"k":"v"}]},"attachments":["/bob/a.txt","/bob/b c"]}`, status: 200},
		{name: "snake_case names", body: `{"body":"hi","attachments":[]}`, status: 200},
		{name: "reply chain fields", body: `{"body":"chain"}`, status: 200},
		{name: "the service's header", body: `{"body":"cookie"}`, status: 200},
		{name: "the service's error", body: `{"body":"fail"}`, status: 400},
		{name: "unknown fields are ignored", body: `{"nope":{"x":[1,2]},"body":"hi"}`, status: 200},
		{name: "trailing bytes after the object are ignored", body: `{"body":"hi"} trailing`, status: 200},
		{name: "no body", body: ``, status: 200},
		{name: "null", body: `null`, status: 400},
		{name: "bad JSON", body: `{"body":`, status: 400},
		{name: "not JSON", body: `body=hi`, status: 400},
		{name: "an array", body: `[1]`, status: 400},
		{name: "a wrong type", body: `{"body":5}`, status: 400},
		{name: "a wrong type in a list", body: `{"attachments":[1]}`, status: 400},
		{name: "data not an object", body: `{"data":[1]}`, status: 400},
		{name: "a duplicate field", body: `{"body":"a","body":"b"}`, status: 400},
		{name: "not UTF-8", body: "{\"body\":\"\xff\"}", status: 400},
		{name: "too deep", body: `{"data":` + deep + `}`, status: 400},
		{name: "too large, declared", body: `{"body":"` + strings.Repeat("x", DefaultMaxBody) + `"}`, status: 413},
		{name: "too large, chunked", body: `{"body":"` + strings.Repeat("x", DefaultMaxBody) + `"}`, chunked: true, status: 413},
		{name: "no credential", body: `{"body":"hi"}`, anonymous: true, status: 401},
		{name: "a bad credential", body: `{"body":"hi"}`, header: map[string]string{"Authorization": "Bearer svc_nope"}, status: 401},
		{name: "forwarded headers", body: `{"body":"hi"}`, header: map[string]string{"User-Agent": "ua/1", "X-SVC-Protocol": "1", "Cookie": "a=b", "X-Forwarded-Host": "h.example", "Grpc-Metadata-X-Forwarded-For": "6.6.6.6"}, status: 200},
		{name: "a bad grpc-timeout", body: `{"body":"hi"}`, header: map[string]string{"Grpc-Timeout": "soon"}, status: 400},
		{name: "trailers accepted (the generic route serves it)", body: `{"body":"cookie"}`, header: map[string]string{"TE": "trailers"}, status: 200},
		{name: "to null", body: `{"to":null,"body":"hi"}`, status: 200},
		{name: "attachments null", body: `{"attachments":null,"body":"hi"}`, status: 200},
		{name: "escapes", body: `{"body":"a\nb \"q\" \u00e9 \ud83d\ude00"}`, status: 200},
		{name: "a lone surrogate", body: `{"body":"\ud800"}`, status: 400},
		{name: "a trailing comma", body: `{"body":"hi",}`, status: 400},
		{name: "a control character", body: "{\"body\":\"a\x01b\"}", status: 400},
		{name: "a read error after the object", body: `{"body":"hi"}` + strings.Repeat(" ", DefaultMaxBody), chunked: true, status: 200},
		// The generic route decodes as the body arrives and stops at the
		// first bad byte: handlePush must not read on to the cap (413)
		// or wait for the rest of a slow body.
		{name: "not JSON, chunked, over the cap", body: "x" + strings.Repeat("x", DefaultMaxBody), chunked: true, status: 400},
		{name: "bad JSON past the first read, chunked, over the cap", body: `{"body":"` + strings.Repeat("y", 2*pushHead) + `"x` + strings.Repeat("x", DefaultMaxBody), chunked: true, status: 400},
		{name: "a plain push larger than the first read", body: `{"body":"` + strings.Repeat("y", 3*pushHead) + `"}`, status: 200},
		{name: "a plain push larger than the first read, chunked", body: `{"to":"ann","body":"` + strings.Repeat("y", 3*pushHead) + `"}`, chunked: true, status: 200},
		{name: "data larger than the first read, chunked", body: `{"data":{"k":"` + strings.Repeat("y", 3*pushHead) + `"},"body":"hi"}`, chunked: true, status: 200},
		{name: "a plain push, trickled", body: `{"to":null,"body":"hi","attachments":["/a"]}`, trickle: true, status: 200},
		{name: "not JSON, trickled", body: "x" + strings.Repeat("x", 4*pushHead), trickle: true, status: 400},
		{name: "bad JSON mid-way, trickled", body: `{"body":"hi",x` + strings.Repeat("x", 4*pushHead), trickle: true, status: 400},
		{name: "an escape then bad JSON, trickled", body: `{"body":"a\nb","title":x` + strings.Repeat("x", 4*pushHead), trickle: true, status: 400},
		{name: "bad JSON past the first read, trickled", body: `{"body":"` + strings.Repeat("y", pushHead+1) + `"x` + strings.Repeat("x", 4*pushHead), trickle: true, status: 400},
		{name: "trailing bytes, trickled", body: `{"body":"hi"}x` + strings.Repeat("x", 2*pushHead), trickle: true, status: 200},
		{name: "a method override of a form", body: `body=hi`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-HTTP-Method-Override": "GET"}, status: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			do := func(g *Gateway) (*httptest.ResponseRecorder, metadata.MD, int) {
				fb.mu.Lock()
				fb.seen = nil
				fb.mu.Unlock()
				var r *http.Request
				tb := &trickleBody{s: tc.body}
				if tc.trickle {
					r = httptest.NewRequest(http.MethodPost, "/push", tb)
					r.ContentLength = -1
				} else if tc.chunked {
					r = httptest.NewRequest(http.MethodPost, "/push", struct{ *strings.Reader }{strings.NewReader(tc.body)})
					r.ContentLength = -1
				} else {
					r = httptest.NewRequest(http.MethodPost, "/push", strings.NewReader(tc.body))
				}
				if !tc.anonymous {
					r.Header.Set("Authorization", testBearer)
				}
				for k, v := range tc.header {
					r.Header.Set(k, v)
				}
				w := httptest.NewRecorder()
				g.ServeHTTP(w, r)
				return w, fb.lastMD(), tb.read
			}
			old, oldMD, oldRead := do(generic)
			served := hand.pushesServed.Load()
			got, gotMD, gotRead := do(hand)
			// Read a byte at a time, both routes stop at the same byte.
			require.Equal(t, oldRead, gotRead, "bytes read of a trickled body")
			require.Zero(t, generic.pushesServed.Load())
			// A declared oversize body is refused before any handler.
			viaGeneric := tc.header["TE"] != "" || tc.header["X-HTTP-Method-Override"] != "" || tc.name == "too large, declared"
			require.Equal(t, !viaGeneric, hand.pushesServed.Load() == served+1, "served by handlePush")
			require.Equal(t, tc.status, old.Code, old.Body.String())
			require.Equal(t, old.Code, got.Code, got.Body.String())
			require.Equal(t, old.Header(), got.Header())
			require.Equal(t, oldMD, gotMD)
			if old.Code != http.StatusOK || tc.header["TE"] != "" {
				require.Equal(t, old.Body.String(), got.Body.String(), "errors byte for byte")
				return
			}
			var want, have any
			require.NoError(t, json.Unmarshal(old.Body.Bytes(), &want))
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &have), got.Body.String())
			require.Equal(t, want, have)
		})
	}
}

// trickleBody is a body that arrives a byte at a time, as from a slow
// client, and counts what was read of it.
type trickleBody struct {
	s    string
	read int
}

func (b *trickleBody) Read(p []byte) (int, error) {
	if b.read == len(b.s) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = b.s[b.read]
	b.read++
	return 1, nil
}

// pushResponses are answers appendPushResponse must write as protojson
// does.
func pushResponses(t testing.TB) []*apiv1.PushResponse {
	data, err := structpb.NewStruct(map[string]any{"thread": "x", "n": -0.0, "e": 1e21, "l": []any{nil, true, "é\u2028<>&"}, "o": map[string]any{}})
	require.NoError(t, err)
	return []*apiv1.PushResponse{
		{},
		{Delivery: &apiv1.Delivery{}},
		{Message: &apiv1.Message{}},
		{Delivery: &apiv1.Delivery{Live: -1, Targets: math.MaxInt32}, Message: &apiv1.Message{Id: "1", From: "bob", To: proto.String(""), Title: "\x00\x1f\x7f\"\\/", Body: "b\u2028\u2029\ufeff😀", Level: "info",
			Data: data, Meta: &structpb.Struct{}, Attachments: []string{"", "/a\tb"}, CreatedAt: 0.1, ReplyTo: proto.String("x"), Hops: proto.Uint32(math.MaxUint32), LoopStopped: proto.Bool(true)}},
		{Message: &apiv1.Message{CreatedAt: 1e-7}},
		{Message: &apiv1.Message{CreatedAt: -1e21, Hops: proto.Uint32(0), LoopStopped: proto.Bool(false)}},
		{Message: &apiv1.Message{CreatedAt: 1764416500123.5}},
	}
}

// checkPushResponse holds appendPushResponse to protojson for resp: the
// same JSON value, or a refusal where protojson has no answer.
func checkPushResponse(t testing.TB, resp *apiv1.PushResponse) {
	want, werr := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(resp)
	got, ok := appendPushResponse(nil, resp)
	if !ok {
		// Only what protojson refuses, or a float it would quote.
		f := resp.GetMessage().GetCreatedAt()
		require.True(t, werr != nil || math.IsNaN(f) || math.IsInf(f, 0), "appendPushResponse refused %v", resp)
		return
	}
	require.NoError(t, werr)
	require.True(t, json.Valid(got), "%s", got)
	var w, g any
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	require.Equal(t, w, g, "protojson %s\nours      %s", want, got)
	// The numbers as written, not only as parsed: a client may read them
	// with more precision than float64.
	require.Equal(t, numbers(t, want), numbers(t, got))
}

// numbers returns every number of a JSON document as written.
func numbers(t testing.TB, b []byte) []string {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var out []string
	for {
		tok, err := d.Token()
		if err != nil {
			return out
		}
		if n, ok := tok.(json.Number); ok {
			out = append(out, n.String())
		}
	}
}

func TestPushResponseJSONMatchesProtojson(t *testing.T) {
	for _, resp := range pushResponses(t) {
		checkPushResponse(t, resp)
	}
	// A string that is not UTF-8 is left to protojson (which refuses it).
	_, ok := appendPushResponse(nil, &apiv1.PushResponse{Message: &apiv1.Message{Body: "\xff"}})
	require.False(t, ok)
}

func FuzzPushResponseJSON(f *testing.F) {
	f.Add("bob", "title", "body", "info", "/a", 1764416500123.0, uint32(1), true, int32(2))
	f.Add("", "\x00", "\"\\\u2028", "", "", 1e-7, uint32(0), false, int32(-1))
	f.Add("é", "\xff", "x", "y", "z", 1e21, uint32(math.MaxUint32), true, int32(0))
	f.Fuzz(func(t *testing.T, from, title, body, level, att string, created float64, hops uint32, stopped bool, live int32) {
		m := &apiv1.Message{Id: from + title, From: from, To: proto.String(level), Title: title, Body: body, Level: level,
			Attachments: []string{att, body}, CreatedAt: created, Hops: proto.Uint32(hops), LoopStopped: proto.Bool(stopped)}
		if utf8.ValidString(att) {
			m.ReplyTo = proto.String(att)
			m.Data = &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue(att)}}
		}
		checkPushResponse(t, &apiv1.PushResponse{Delivery: &apiv1.Delivery{Live: live, Targets: live / 2}, Message: m})
	})
}

// FuzzDecodePush holds decodePush to the generic route's decoder: whatever
// it decodes, the JSONPb decoder decodes too, to the same message.
func FuzzDecodePush(f *testing.F) {
	for _, s := range []string{
		`{"body":"hi"}`, ` { "to" : null , "title":"t","body":"b","level":"info","attachments":["/a","/b"] } `,
		`{"to":"ann","attachments":[]}`, `{}`, `{"body":"é😀"}`, `{"body":"a\nb"}`, `{"body":"a","body":"b"}`,
		`{"attachments":null}`, `{"data":{}}`, `{"body":5}`, `{"body":"x"} x`, `{"Body":"x"}`, "{\"body\":\"\xff\"}",
		`{"title":null}`, `[]`, `null`, ``, `{"body":"x",}`, `{,}`, `{"to":nul}`,
	} {
		f.Add([]byte(s))
	}
	pb := &runtime.JSONPb{UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: maxDecodeDepth}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got apiv1.PushRequest
		if !decodePush(b, &got) {
			return
		}
		// Every start of a plain push may still become one, so a push
		// that arrives in pieces is read to its end by readPushHead.
		for k := 0; k <= len(b); k++ {
			require.True(t, plainPushPrefix(b[:k]), "%q of %q", b[:k], b)
		}
		var want apiv1.PushRequest
		require.NoError(t, pb.NewDecoder(bytes.NewReader(b)).Decode(&want), "%q", b)
		require.True(t, proto.Equal(&want, &got), "%q: generic %v, decodePush %v", b, &want, &got)
	})
}

// The plain shape is decoded by decodePush, the rest is not: the table of
// TestPushHandlerMatchesGenericRoute covers both routes' answers; this
// shows which decoder they went through.
func TestDecodePushTakesOnlyThePlainShape(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"body":"hi"}`, true},
		{`{"to":"ann","title":"t","body":"é 😀 <b>","level":"info","attachments":["/a"]}`, true},
		{` {"to":null} `, true},
		{`{}`, true},
		{`{"body":"a\nb"}`, false},
		{`{"data":{"thread":"x"}}`, false},
		{`{"nope":1}`, false},
		{`{"body":"a","body":"b"}`, false},
		{`{"body":"x"} trailing`, false},
		{`{"body":5}`, false},
		{``, false},
	} {
		var req apiv1.PushRequest
		require.Equal(t, tc.fast, decodePush([]byte(tc.body), &req), tc.body)
	}
}

// readPushHead reads on while the body may still be a plain push, and
// stops at the first byte that cannot be one.
func TestPlainPushPrefix(t *testing.T) {
	for _, tc := range []struct {
		body string
		more bool
	}{
		{``, true},
		{` {`, true},
		{`{"bo`, true},
		{`{"body":"h`, true},
		{`{"to":nu`, true},
		{`{"to":null`, true},
		{`{"attachments":["/a",`, true},
		{`{"body":"hi"}`, true},
		{`{"body":"hi"} `, true},
		{`x`, false},
		{`[`, false},
		{`{"to":nx`, false},
		{`{"body":"hi",x`, false},
		{`{"body":"a\`, false},
		{`{"body":5`, false},
		{`{"data":`, false},
		{`{"body":"hi"} x`, false},
		{"{\"body\":\"a\x01", false},
	} {
		require.Equal(t, tc.more, plainPushPrefix([]byte(tc.body)), "%q", tc.body)
	}
}

// TestPushResponseCoversEveryField fills every field of the answer, as the
// proto declares them today and whatever is added later, and holds
// appendPushResponse to protojson: a field the hand-written encoder does
// not know fails here instead of going missing from every push's answer.
func TestPushResponseCoversEveryField(t *testing.T) {
	resp := &apiv1.PushResponse{}
	fillEvery(t, resp.ProtoReflect(), 0)
	require.NotNil(t, resp.GetMessage().GetData(), "filled")
	checkPushResponse(t, resp)
}

// fillEvery sets every field of m to a value that is not its default.
func fillEvery(t *testing.T, m protoreflect.Message, depth int) {
	t.Helper()
	require.Less(t, depth, 4, "the answer nests this deep only through a Struct")
	if m.Descriptor().FullName() == "google.protobuf.Struct" {
		s := m.Interface().(*structpb.Struct)
		s.Fields = map[string]*structpb.Value{"k": structpb.NewStringValue("v"), "n": structpb.NewNumberValue(1.5)}
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && m.WhichOneof(o) != nil {
			continue // one member of a oneof only
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				e := l.NewElement()
				fillEvery(t, e.Message(), depth+1)
				l.Append(e)
			} else {
				l.Append(scalarOf(t, fd))
			}
		case fd.IsMap():
			t.Fatalf("%s: a map field; teach fillEvery", fd.FullName())
		case fd.Kind() == protoreflect.MessageKind:
			fillEvery(t, m.Mutable(fd).Message(), depth+1)
		default:
			m.Set(fd, scalarOf(t, fd))
		}
	}
}

func scalarOf(t *testing.T, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()) + " é\"")
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(-7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-1 << 40)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1 << 40)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1764416500123.25)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(2.5)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("bytes"))
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	}
	t.Fatalf("%s: kind %s; teach scalarOf", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}
