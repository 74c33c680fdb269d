package gateway

import (
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
		if err := pb.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			runtime.HTTPError(runtime.NewServerMetadataContext(ctx, md), gw, pb, w, r, status.Errorf(codes.InvalidArgument, "%v", err))
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
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
