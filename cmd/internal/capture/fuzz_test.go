package capture

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzSeeds are the realistic streams of the reassembly tests, cut at a
// few places, plus edge cases.
func fuzzSeeds(f *testing.F, streams ...string) {
	for _, s := range streams {
		f.Add([]byte(s))
		f.Add([]byte(s[:len(s)/2]))
		f.Add(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte("\r\n")))
	}
	for _, s := range []string{"", "\x00", "data: \n\n", "data: null\n\n", "data: []\n\n", "data: \"x\"\n\n",
		"data: {\"output_index\":-1,\"type\":\"response.output_text.delta\"}\n\n",
		"data: {\"type\":\"content_block_delta\",\"index\":9223372036854775807}\n\n",
		"event: response.completed\ndata: {\"response\":{\"output\":{}}}\n\n",
		"data: {\"choices\":[{\"index\":-5,\"delta\":{\"tool_calls\":[{\"index\":3}]}}]}\n\n",
		"data: \xff\xfe\n\n", "data: {\"type\":\"message_start\",\"message\":{\"content\":7}}\n\n"} {
		f.Add([]byte(s))
	}
}

// checkReassembled: no panic; an answer is one JSON object of the api's
// shape, the same every time.
func checkReassembled(t *testing.T, api API, body []byte) {
	out, err := Reassemble(api, body)
	if err != nil {
		require.ErrorIs(t, err, errNoResponse)
		require.Nil(t, out)
		return
	}
	require.True(t, json.Valid(out), "%s", out)
	require.Equal(t, byte('{'), out[0])
	require.Equal(t, api, shapeOf(out), "%s", out)
	again, err := Reassemble(api, body)
	require.NoError(t, err)
	require.Equal(t, out, again, "deterministic")
}

func FuzzReassembleResponses(f *testing.F) {
	fuzzSeeds(f, codexStubStream, openAIToolStream)
	f.Fuzz(func(t *testing.T, body []byte) { checkReassembled(t, APIResponses, body) })
}

func FuzzReassembleChat(f *testing.F) {
	fuzzSeeds(f, sse(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a","tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{"}}]},"finish_reason":null}]}`,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":1}}`)+"data: [DONE]\n\n")
	f.Fuzz(func(t *testing.T, body []byte) { checkReassembled(t, APIChatCompletions, body) })
}

func FuzzReassembleMessages(f *testing.F) {
	fuzzSeeds(f, sse(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"x","citations":[1]}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"n":1}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkReassembled(t, APIMessages, body) })
}

// FuzzParseSSE: events never hold a line break other than the "\n" that
// joins data lines, and the parse of a body is the parse of its events
// written back out.
func FuzzParseSSE(f *testing.F) {
	fuzzSeeds(f, codexStubStream)
	f.Fuzz(func(t *testing.T, body []byte) {
		evs := parseSSE(body)
		var b bytes.Buffer
		for _, e := range evs {
			require.NotContains(t, e.name, "\n")
			require.NotContains(t, e.name, "\r")
			require.NotContains(t, string(e.data), "\r")
			if e.name != "" {
				b.WriteString("event: " + e.name + "\n")
			}
			for _, l := range bytes.Split(e.data, []byte("\n")) {
				b.WriteString("data: ")
				b.Write(l)
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
		require.Equal(t, evs, parseSSE(b.Bytes()))
	})
}
