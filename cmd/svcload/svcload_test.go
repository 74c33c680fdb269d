package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // past the reader's 16 KiB buffer
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{
			name: "ready then message",
			in:   "event: ready\ndata: {\"member\":\"bob\"}\n\nid: 0000000000000042\nevent: message\ndata: {\"id\":\"0000000000000042\"}\n\n",
			want: []sseEvent{
				{event: "ready", data: []byte(`{"member":"bob"}`)},
				{id: "0000000000000042", event: "message", data: []byte(`{"id":"0000000000000042"}`)},
			},
		},
		{
			name: "comments and unknown fields are skipped",
			in:   ": ping\n\nretry: 10\nevent: message\n: inside\ndata: a\n\n",
			want: []sseEvent{{event: "message", data: []byte("a")}},
		},
		{
			name: "data lines join with newline, CRLF endings, no space after colon",
			in:   "data:one\r\ndata:  two\r\n\r\n",
			want: []sseEvent{{event: "message", data: []byte("one\n two")}},
		},
		{
			name: "id persists to later events",
			in:   "id: 7\ndata: a\n\ndata: b\n\n",
			want: []sseEvent{{id: "7", event: "message", data: []byte("a")}, {id: "7", event: "message", data: []byte("b")}},
		},
		{
			name: "event without data is not dispatched",
			in:   "event: ready\n\ndata: x\n\n",
			want: []sseEvent{{event: "message", data: []byte("x")}},
		},
		{
			name: "line longer than the buffer",
			in:   "data: " + long + "\n\n",
			want: []sseEvent{{event: "message", data: []byte(long)}},
		},
		{
			name: "event cut by end of stream is dropped",
			in:   "data: a\n\ndata: b\n",
			want: []sseEvent{{event: "message", data: []byte("a")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tc.in))
			var got []sseEvent
			for {
				ev, err := r.next()
				if err != nil {
					require.ErrorIs(t, err, io.EOF)
					break
				}
				got = append(got, ev)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDataSeq(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
		ok   bool
	}{
		{name: "compact", in: `{"id":"1","data":{"lg":123},"createdAt":5}`, want: 123, ok: true},
		{name: "spaces", in: `{"data": {"lg" :  7}}`, want: 7, ok: true},
		{name: "exponent", in: `{"data":{"lg":1e+06}}`, want: 1000000, ok: true},
		{name: "zero", in: `{"data":{"lg":0}}`, want: 0, ok: true},
		{name: "absent", in: `{"data":{}}`},
		{name: "fraction", in: `{"data":{"lg":1.5}}`},
		{name: "negative", in: `{"data":{"lg":-1}}`},
		{name: "string", in: `{"data":{"lg":"1"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := dataSeq([]byte(tc.in))
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{name: "empty", sorted: nil, p: 50, want: 0},
		{name: "single", sorted: []time.Duration{5}, p: 99, want: 5},
		{name: "p50 of 100", sorted: hundred, p: 50, want: 50},
		{name: "p99 of 100", sorted: hundred, p: 99, want: 99},
		{name: "p100 of 100", sorted: hundred, p: 100, want: 100},
		{name: "p99 of 3 is the max", sorted: []time.Duration{1, 2, 3}, p: 99, want: 3},
		{name: "p50 of 2 is the lower", sorted: []time.Duration{1, 2}, p: 50, want: 1},
		{name: "tiny p is the min", sorted: hundred, p: 0.001, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, percentile(tc.sorted, tc.p))
		})
	}
}
