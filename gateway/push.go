package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
)

// pushMethod is Broker.Push, the method behind POST /push.
const pushMethod = "/svc.v1.Broker/Push"

// handlePush serves POST /push, the hottest route, without grpc-gateway's
// generic handler: it does what that handler does for this one method, in
// the same order and through the same pieces (authBeforeBody's check, the
// mux's metadata, its JSON decoder and error handler, the same client on
// the local connection and so the same interceptor chain, forwardResponse),
// and writes the answer with appendPushResponse instead of protojson (a
// fifth of the route's CPU). The generic route stays registered: requests
// whose handling grpc-gateway changes (a method override of a form body,
// a client that accepts trailers) are handed to it before anything is read.
// docs/PERFORMANCE.md, "Issue 30: the push path".
func (g *Gateway) handlePush(gw *runtime.ServeMux, pb *runtime.JSONPb, client apiv1.BrokerClient) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if genericPush(r) {
			gw.ServeHTTP(w, r)
			return
		}
		g.pushesServed.Add(1)
		// authBeforeBody: whoever holds no credential is answered before
		// the body is read.
		if r.ContentLength != 0 {
			p, err := g.authn.Verify(r.Context(), auth.CredentialsFromHeader(r.Header))
			if err != nil {
				refuseUnread(w)
				writeError(w, g.log, r, err)
				return
			}
			g.authenticated(r, p)
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		ctx, err := runtime.AnnotateContext(ctx, gw, r, pushMethod, runtime.WithHTTPPathPattern("/push"))
		if err != nil {
			runtime.HTTPError(r.Context(), gw, pb, w, r, err)
			return
		}
		var (
			req apiv1.PushRequest
			md  runtime.ServerMetadata
		)
		in := pushBufs.Get().(*[]byte)
		defer pushBufs.Put(in)
		head, rerr := readPushHead((*in)[:0], r.Body)
		if cap(head) <= maxPooledPush {
			*in = head[:0]
		}
		if rerr != io.EOF || !decodePush(head, &req) {
			// Anything but a whole plain push within pushHead, and every
			// error, goes through the generic route's decoder over the
			// bytes read, then the rest of the body or the read error
			// that ended it, and the rest is drained after a good
			// decode, as the generated handler does: its answer, byte
			// for byte, and it reads the body as far as that handler
			// would (to the first bad byte, not to the cap).
			req.Reset()
			src := io.Reader(bytes.NewReader(head))
			switch rerr {
			case io.EOF:
			case nil:
				src = io.MultiReader(src, r.Body)
			default:
				src = io.MultiReader(src, errorReader{rerr})
			}
			if err := pb.NewDecoder(src).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
				runtime.HTTPError(runtime.NewServerMetadataContext(ctx, md), gw, pb, w, r, status.Errorf(codes.InvalidArgument, "%v", err))
				return
			}
			if rerr == nil {
				_, _ = io.Copy(io.Discard, r.Body)
			}
		}
		resp, err := client.Push(ctx, &req, grpc.Header(&md.HeaderMD), grpc.Trailer(&md.TrailerMD))
		ctx = runtime.NewServerMetadataContext(ctx, md)
		if err != nil {
			runtime.HTTPError(ctx, gw, pb, w, r, err)
			return
		}
		// runtime.ForwardResponseMessage without trailers (genericPush).
		for k, vs := range md.HeaderMD {
			if h, ok := outgoingHeader(k); ok {
				for _, v := range vs {
					w.Header().Add(h, v)
				}
			}
		}
		w.Header().Set("Content-Type", pb.ContentType(resp))
		if err := forwardResponse(ctx, w, resp); err != nil {
			runtime.HTTPError(ctx, gw, pb, w, r, err)
			return
		}
		buf := pushBufs.Get().(*[]byte)
		defer pushBufs.Put(buf)
		out, ok := appendPushResponse((*buf)[:0], resp)
		if !ok {
			if out, err = pb.Marshal(resp); err != nil {
				runtime.HTTPError(ctx, gw, pb, w, r, err)
				return
			}
		} else if cap(out) <= maxPooledPush {
			*buf = out
		}
		_, _ = w.Write(out)
	})
}

// genericPush reports whether r is one grpc-gateway's mux treats apart: a
// POST form body with X-HTTP-Method-Override is routed as the method it
// names, and a client that accepts trailers gets the metadata's trailers.
func genericPush(r *http.Request) bool {
	if r.Header.Get("X-HTTP-Method-Override") != "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		return true
	}
	return strings.Contains(strings.ToLower(r.Header.Get("TE")), "trailers")
}

// pushHead bounds what handlePush reads before it decides how to decode.
const pushHead = 8 << 10

// maxPooledPush bounds the answer buffers kept for reuse; a push's answer
// is usually a few hundred bytes, and a large one is not kept.
const maxPooledPush = 16 << 10

var pushBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendPushResponse appends resp as protojson writes it with
// EmitDefaultValues (the gateway's marshaler): every field but unset
// optional and message fields, names in lowerCamelCase, the same values
// (TestPushResponseJSONMatchesProtojson, FuzzPushResponseJSON). It reports
// false, for the caller to use protojson, when a string is not UTF-8
// (protojson refuses it) or a float is not finite.
func appendPushResponse(b []byte, resp *apiv1.PushResponse) ([]byte, bool) {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	if d := resp.GetDelivery(); d != nil {
		field("delivery")
		b = append(b, `{"live":`...)
		b = strconv.AppendInt(b, int64(d.GetLive()), 10)
		b = append(b, `,"targets":`...)
		b = strconv.AppendInt(b, int64(d.GetTargets()), 10)
		b = append(b, '}')
	}
	if m := resp.GetMessage(); m != nil {
		field("message")
		var ok bool
		if b, ok = appendMessage(b, m); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendMessage(b []byte, m *apiv1.Message) ([]byte, bool) {
	ok := true
	str := func(name, s string, comma bool) {
		if comma {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		var good bool
		b, good = appendJSONString(b, s)
		ok = ok && good
	}
	b = append(b, '{')
	str("id", m.GetId(), false)
	str("from", m.GetFrom(), true)
	if m.To != nil {
		str("to", m.GetTo(), true)
	}
	str("title", m.GetTitle(), true)
	str("body", m.GetBody(), true)
	str("level", m.GetLevel(), true)
	for _, s := range []struct {
		name string
		v    *structpb.Struct
	}{{"data", m.GetData()}, {"meta", m.GetMeta()}} {
		if s.v == nil {
			continue
		}
		// Free-form JSON, rare on the hot path: protojson's own.
		j, err := protojson.Marshal(s.v)
		if err != nil {
			return b, false
		}
		b = append(b, `,"`...)
		b = append(b, s.name...)
		b = append(b, `":`...)
		b = append(b, j...)
	}
	b = append(b, `,"attachments":[`...)
	for i, a := range m.GetAttachments() {
		if i > 0 {
			b = append(b, ',')
		}
		var good bool
		b, good = appendJSONString(b, a)
		ok = ok && good
	}
	b = append(b, ']')
	b = append(b, `,"createdAt":`...)
	f := m.GetCreatedAt()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	b = appendJSONFloat(b, f)
	if m.ReplyTo != nil {
		str("replyTo", m.GetReplyTo(), true)
	}
	if m.Hops != nil {
		b = append(b, `,"hops":`...)
		b = strconv.AppendUint(b, uint64(m.GetHops()), 10)
	}
	if m.LoopStopped != nil {
		b = append(b, `,"loopStopped":`...)
		b = strconv.AppendBool(b, m.GetLoopStopped())
	}
	return append(b, '}'), ok
}

// appendJSONFloat formats a finite double as protojson (and encoding/json)
// do: the shortest form, exponent only below 1e-6 or from 1e21.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// "1e-07" → "1e-7", as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s as a JSON string, escaping what JSON requires
// (quote, backslash, control characters); false when s is not UTF-8.
func appendJSONString(b []byte, s string) ([]byte, bool) {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return b, false
			}
			i += n
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

// readPushHead reads r into b while what arrived may still be the start of
// a plain push (decodePush), up to pushHead bytes. It returns io.EOF when
// the body ended within them, nil when it stopped early (the bytes cannot
// be a plain push, or pushHead is reached), or the read error that ended
// the body. It stops after the read that brought a byte decodePush does
// not take, as the generic route's decoder stops at the first bad byte:
// garbage, even a slow trickle of it, is answered as soon as it arrives,
// never read on to the cap (docs/PERFORMANCE.md, "Issue 30: the push
// path").
func readPushHead(b []byte, r io.Reader) ([]byte, error) {
	for len(b) < pushHead {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), pushHead)])
		b = b[:len(b)+n]
		if err != nil {
			return b, err
		}
		if n > 0 && !plainPushPrefix(b) {
			return b, nil
		}
	}
	return b, nil
}

// errorReader returns its error: the body's read error, after its bytes.
type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) { return 0, e.err }

// decodePush decodes the plain shape of a push straight into req and
// reports whether it did: one JSON object, nothing but whitespace after
// it, whose members are to, title, body and level as strings (to may be
// null) and attachments as a list of strings, each once, every string
// UTF-8 without escapes or control characters. Everything else (data, an
// unknown member, an escape, a duplicate, anything malformed) is left to
// protojson, which decodes what this decodes to the same message
// (FuzzDecodePush).
func decodePush(b []byte, req *apiv1.PushRequest) bool {
	d := pushDecoder{b: b}
	return d.push(req)
}

// plainPushPrefix reports whether b may still become a push decodePush
// takes: it takes b, or only ran out of bytes.
func plainPushPrefix(b []byte) bool {
	var req apiv1.PushRequest
	d := pushDecoder{b: b, scan: true}
	return d.push(&req) || d.short
}

func (d *pushDecoder) push(req *apiv1.PushRequest) bool {
	d.ws()
	if !d.byte('{') {
		return false
	}
	var seen [5]bool
	d.ws()
	if d.byte('}') {
		return d.end()
	}
	for {
		d.ws()
		key, ok := d.raw()
		if !ok {
			return false
		}
		d.ws()
		if !d.byte(':') {
			return false
		}
		d.ws()
		i := -1
		switch string(key) {
		case "to":
			i = 0
			if d.null() {
				break
			}
			v, ok := d.str()
			if !ok {
				return false
			}
			req.To = &v
		case "title":
			i = 1
			if req.Title, ok = d.str(); !ok {
				return false
			}
		case "body":
			i = 2
			if req.Body, ok = d.str(); !ok {
				return false
			}
		case "level":
			i = 3
			if req.Level, ok = d.str(); !ok {
				return false
			}
		case "attachments":
			i = 4
			if req.Attachments, ok = d.strs(); !ok {
				return false
			}
		default:
			return false
		}
		if seen[i] {
			return false
		}
		seen[i] = true
		d.ws()
		if d.byte('}') {
			return d.end()
		}
		if !d.byte(',') {
			return false
		}
	}
}

type pushDecoder struct {
	b []byte
	i int
	// short records that a step failed for want of bytes: more of the
	// body could still make it a plain push.
	short bool
	// scan checks the shape without making strings (plainPushPrefix).
	scan bool
}

// more reports whether the bytes are used up, and records it.
func (d *pushDecoder) more() bool {
	if d.i == len(d.b) {
		d.short = true
		return true
	}
	return false
}

func (d *pushDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *pushDecoder) byte(c byte) bool {
	if d.more() {
		return false
	}
	if d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *pushDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	if rest := d.b[d.i:]; len(rest) < 4 && bytes.HasPrefix([]byte("null"), rest) {
		d.short = true
	}
	return false
}

// end reports whether only whitespace is left.
func (d *pushDecoder) end() bool {
	d.ws()
	return d.i == len(d.b)
}

// str reads a string without escapes or control characters, UTF-8.
func (d *pushDecoder) str() (string, bool) {
	s, ok := d.raw()
	if !ok || d.scan {
		return "", ok
	}
	return string(s), true
}

// raw reads such a string and returns its bytes, without copying them.
func (d *pushDecoder) raw() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		d.i++
	}
	d.short = true
	return nil, false
}

// strs reads a list of such strings; [] is an empty list.
func (d *pushDecoder) strs() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	var out []string
	d.ws()
	if d.byte(']') {
		return out, true
	}
	for {
		d.ws()
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		d.ws()
		if d.byte(']') {
			return out, true
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}
