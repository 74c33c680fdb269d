package otlp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(samplePayload))
	f.Add(encodeOTLPJSON(f, sampleRequest(), true))
	f.Add(encodeOTLPJSON(f, nestedRequest(MaxValueDepth), false))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Add([]byte("\x00"))
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"zz","body":{"stringValue":"é\u00e9\ud83d\ude00"}}]}]}]}`))
	f.Add([]byte(`{"resource_logs":[{"scope_logs":[{"log_records":[{"span_id":"` + spanHex + `","time_unix_nano":1e18}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeJSON(b)
		if err != nil {
			return
		}
		_ = Records(req)
		again, err := DecodeJSON(encodeOTLPJSON(t, req, len(b)%2 == 0))
		if err != nil {
			t.Fatalf("re-decode json: %v", err)
		}
		if !proto.Equal(req, again) {
			t.Fatalf("json round trip changed the request:\n%v\n%v", req, again)
		}
		pb, err := proto.Marshal(req)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err = DecodeProto(pb)
		if err != nil {
			t.Fatalf("re-decode protobuf: %v", err)
		}
		if !proto.Equal(req, again) {
			t.Fatalf("protobuf round trip changed the request")
		}
	})
}

func FuzzDecodeProto(f *testing.F) {
	addProtoSeeds(f)
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeProto(b)
		if err != nil {
			return
		}
		_ = Records(req)
		pb, err := proto.Marshal(req)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := DecodeProto(pb)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !proto.Equal(req, again) {
			t.Fatalf("round trip changed the request")
		}
	})
}

// fuzzBodies are request and response bodies the correlator fuzzer picks
// from: with thinking in every place, truncated, not objects.
var fuzzBodies = []string{
	reqJSON("hello"),
	respJSON,
	reqJSON("cut")[:120],
	`{"system":{"type":"thinking","thinking":"SECRET"},"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"redacted_thinking","data":"SECRET"}]}]}]}`,
	`{"id":"m","content":[{"type":"text","text":"x","nested":{"type":"thinking","thinking":"SECRET"}}],"stop_reason":null,"usage":{"input_tokens":"x"}}`,
	`{"messages":{"type":"thinking"},"tools":[1,{"name":2},{"name":"T"}]}`,
	`[{"type":"thinking","thinking":"SECRET"}]`,
	`null`,
	``,
}

// fuzzProgram turns bytes into Ingest, Due and State/Restore calls.
type fuzzProgram struct {
	b []byte
}

func (p *fuzzProgram) next() int {
	if len(p.b) == 0 {
		return 0
	}
	v := int(p.b[0])
	p.b = p.b[1:]
	return v
}

func (p *fuzzProgram) str() string {
	n := min(p.next(), len(p.b))
	s := string(p.b[:n])
	p.b = p.b[n:]
	return s
}

func (p *fuzzProgram) record() Record {
	models := []string{model, "claude-opus-4-1", ""}
	ids := []string{"req_1", "req_2", "req_3", ""}
	sec := p.next() - 16 // some records without time
	pick := func() string {
		if i := p.next(); i < 200 {
			return fuzzBodies[i%len(fuzzBodies)]
		}
		return p.str()
	}
	var r Record
	switch p.next() % 12 {
	case 0:
		r = body(p.next(), "x", sec, "model", models[p.next()%len(models)], "session.id", fmt.Sprint(p.next()%2), "body", pick())
	case 1:
		r = acct(ids[p.next()%len(ids)], sec, "model", models[p.next()%len(models)], "session.id", fmt.Sprint(p.next()%2))
	case 2:
		r = resp(ids[p.next()%len(ids)], sec, "body", pick())
	case 3:
		r = rec("tool_result", sec, "tool_name", "Bash", "tool_parameters", pick(), "success", "true")
	case 4:
		r = rec("tool_decision", sec, "tool_name", p.str(), "decision", "accept")
	case 5:
		r = rec("user_prompt", sec, "prompt", p.str(), "prompt_length", p.str())
	case 6:
		r = codexRec("sse_event", sec, "event.kind", p.str())
	case 7:
		r = codexRec("tool_result", sec, "tool_name", "shell", "arguments", pick(), "output", p.str())
	case 8:
		r = rec("assistant_response", sec)
	case 9:
		r = rec(p.str(), sec, p.str(), p.str())
	case 10:
		r = body(p.next(), "y", sec, "event.sequence", p.str())
	default:
		r = codexRec(p.str(), sec)
	}
	if p.next()%4 == 0 {
		r.Attrs["user.email"] = "alice@example.com"
	}
	return r
}

// checkOutput fails on thinking or private attributes in events.
func checkOutput(t *testing.T, events []Event) {
	t.Helper()
	for _, e := range events {
		if e.TS.IsZero() {
			t.Fatalf("event without time: %+v", e)
		}
		b, err := json.Marshal(e.Data)
		if err != nil {
			t.Fatalf("data does not encode: %v", err)
		}
		v, err := decodeJSONValue(b)
		if err != nil {
			t.Fatalf("data does not decode: %v", err)
		}
		if hasThinking(v) {
			t.Fatalf("thinking in output: %s", b)
		}
		if attrs, ok := e.Data["attributes"].(map[string]string); ok {
			for _, k := range privateAttrs {
				if _, ok := attrs[k]; ok {
					t.Fatalf("%s in output: %s", k, b)
				}
			}
		}
		if strings.Contains(string(b), "alice@example.com") {
			t.Fatalf("email in output: %s", b)
		}
	}
}

// hasThinking reports whether a thinking block is anywhere in v.
func hasThinking(v any) bool {
	if isThinking(v) {
		return true
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if hasThinking(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasThinking(e) {
				return true
			}
		}
	}
	return false
}

func FuzzCorrelator(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 0, 0, 0, 0, 2, 10, 1, 0, 0, 0, 1, 0, 0, 20, 2, 0, 1, 0})
	f.Add([]byte{10, 0, 0, 3, 200, 5, 'h', 'e', 'l', 'l', 'o', 1, 1, 0, 0})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\xff\xfe"))
	f.Add([]byte(strings.Repeat("\x00\x03\x00\x02\x01", 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxPending = 4
		clock := t0
		opts := Options{MaxPending: maxPending, MaxBytes: 8 << 10, FlushAfter: 30 * time.Second, Now: func() time.Time { return clock }}
		c := NewCorrelator(opts)
		p := &fuzzProgram{b: b}
		var batch []Record
		members := []string{"alice", "bob"}
		for steps := 0; len(p.b) > 0 && steps < 200; steps++ {
			member := members[p.next()%2]
			switch p.next() % 4 {
			case 0, 1:
				batch = append(batch, p.record())
			case 2:
				events, rejected := c.Ingest(member, batch)
				if rejected < 0 || rejected > len(batch) {
					t.Fatalf("rejected %d of %d", rejected, len(batch))
				}
				batch = nil
				checkOutput(t, events)
			default:
				switch p.next() % 3 {
				case 0:
					clock = clock.Add(time.Duration(p.next()) * time.Second)
					for _, events := range c.Due(clock) {
						checkOutput(t, events)
					}
				case 1:
					fresh := NewCorrelator(opts)
					for _, m := range c.Members() {
						state, err := c.State(m)
						if err != nil {
							t.Fatalf("state: %v", err)
						}
						v, err := decodeJSONValue(state)
						if err != nil || hasThinking(v) || strings.Contains(string(state), "alice@example.com") {
							t.Fatalf("bad state %v: %s", err, state)
						}
						if err := fresh.Restore(m, state); err != nil {
							t.Fatalf("restore: %v", err)
						}
					}
					c = fresh
				default:
					_ = c.Members()
				}
			}
			for _, m := range members {
				if n := c.pending(m); n > maxPending {
					t.Fatalf("%s has %d pending", m, n)
				}
			}
		}
	})
}
