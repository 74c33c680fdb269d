package otlp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// genericJSONRecords is the reference DecodeJSONRecords must equal.
func genericJSONRecords(b []byte) ([]Record, error) {
	req, err := DecodeJSON(b)
	if err != nil {
		return nil, err
	}
	return Records(req), nil
}

// requireSameJSONRecords checks DecodeJSONRecords against the generic path
// on b (the same records, or the same error), and reports whether the
// walker took it.
func requireSameJSONRecords(t testing.TB, b []byte) bool {
	t.Helper()
	want, werr := genericJSONRecords(b)
	got, gerr := DecodeJSONRecords(b)
	if werr != nil || gerr != nil {
		require.Error(t, werr, "the walker refused what the generic path takes")
		require.Error(t, gerr, "the walker took what the generic path refuses: %v", werr)
		require.Equal(t, werr.Error(), gerr.Error(), "the same error")
	} else {
		require.Equal(t, want, got)
	}
	_, walked := walkJSONRequest(b)
	if walked {
		require.NoError(t, werr, "the walker took a request the generic path refuses")
	}
	return walked
}

// jsonCaptures are the real Claude Code exports, as they were sent.
func jsonCaptures(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/claude-code-*.json")
	require.NoError(t, err)
	var out [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		out = append(out, raw)
	}
	require.NotEmpty(t, out)
	return out
}

// jsonRecord wraps one LogRecord's JSON fields in a whole request.
func jsonRecord(fields string) string {
	return `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"claude-code"}}]},` +
		`"scopeLogs":[{"scope":{"name":"s","version":"1"},"logRecords":[{` + fields + `}]}]}]}`
}

// jsonAttr wraps one attribute value's JSON in a whole request.
func jsonAttr(value string) string {
	return jsonRecord(`"body":{"stringValue":"claude_code.api_request"},"attributes":[{"key":"k","value":` + value + `}]`)
}

func TestDecodeJSONRecords(t *testing.T) {
	for _, b := range jsonCaptures(t) {
		require.True(t, requireSameJSONRecords(t, b), "a real export is walked")
	}
	deep := strings.Repeat(`{"arrayValue":{"values":[`, MaxValueDepth-1) + `{"stringValue":"x"}` + strings.Repeat(`]}}`, MaxValueDepth-1)
	tooDeep := strings.Repeat(`{"arrayValue":{"values":[`, MaxValueDepth) + `{"stringValue":"x"}` + strings.Repeat(`]}}`, MaxValueDepth)
	deepList := strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, MaxValueDepth-1) + `{"stringValue":"x"}` + strings.Repeat(`}]}}`, MaxValueDepth-1)
	tooDeepList := strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, MaxValueDepth) + `{"stringValue":"x"}` + strings.Repeat(`}]}}`, MaxValueDepth)
	tests := []struct {
		name   string
		doc    string
		walked bool // taken by the walker; the rest go to the generic path
	}{
		{"the sample", samplePayload, true},
		{"empty object", `{}`, true},
		{"empty resourceLogs", `{"resourceLogs":[]}`, true},
		{"empty record", jsonRecord(``), true},
		{"snake_case names", `{"resource_logs":[{"scope_logs":[{"log_records":[{"time_unix_nano":"5","observed_time_unix_nano":6,"event_name":"claude_code.x","severity_number":9,"severity_text":"INFO","dropped_attributes_count":0,"trace_id":"` + traceHex + `","span_id":"` + spanHex + `"}]}],"schema_url":"u"}]}`, true},
		{"camelCase names", jsonRecord(`"timeUnixNano":"5","observedTimeUnixNano":6,"eventName":"claude_code.x","severityNumber":9,"severityText":"INFO","droppedAttributesCount":0,"flags":1,"traceId":"` + traceHex + `","spanId":"` + spanHex + `"`), true},
		{"upper-case hex ids", jsonRecord(`"traceId":"` + strings.ToUpper(traceHex) + `","spanId":"` + strings.ToUpper(spanHex) + `"`), true},
		{"empty ids", jsonRecord(`"traceId":"","spanId":""`), true},
		{"resource after its records", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"exec"}}]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"Codex CLI"}}]}}]}`, true},
		{"two resources", `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"codex"}}]},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a"}}]}]},{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"b"}}]}]}]}`, true},
		{"private attributes", jsonRecord(`"attributes":[{"key":"user.email","value":{"stringValue":"a@b"}},{"key":"user.account_id","value":{"stringValue":"1"}},{"key":"x","value":{"stringValue":"y"}}]`), true},
		{"a later key wins", jsonRecord(`"attributes":[{"key":"x","value":{"stringValue":"1"}},{"key":"x","value":{"intValue":"2"}}]`), true},
		{"a key without value", jsonRecord(`"attributes":[{"key":"x"}]`), true},
		{"whitespace everywhere", " \n{ \"resourceLogs\" : [ { \"scopeLogs\" : [ { \"logRecords\" : [ { \"body\" : { \"stringValue\" : \"x\" } } ] } ] } ] }\r\n\t", true},
		{"escapes", jsonAttr(`{"stringValue":"a\"b\\c\/d\b\f\n\r\t\u00e9\u003c\u2028"}`), true},
		{"escaped key names", `{"resource\u004cogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`, true},
		{"int as string", jsonAttr(`{"intValue":"-9223372036854775808"}`), true},
		{"int as number", jsonAttr(`{"intValue":9223372036854775807}`), true},
		{"int past int64", jsonAttr(`{"intValue":"9223372036854775808"}`), false},
		{"int with exponent", jsonAttr(`{"intValue":1e3}`), false},
		{"int with fraction", jsonAttr(`{"intValue":1.0}`), false},
		{"int minus zero", jsonAttr(`{"intValue":"-0"}`), false},
		{"int with spaces in its string", jsonAttr(`{"intValue":" 1"}`), false},
		{"int as a bool", jsonAttr(`{"intValue":true}`), false},
		{"double", jsonAttr(`{"doubleValue":-1.5e-7}`), true},
		{"double minus zero", jsonAttr(`{"doubleValue":-0}`), true},
		{"double as string", jsonAttr(`{"doubleValue":"1.5"}`), false},
		{"double NaN", jsonAttr(`{"doubleValue":"NaN"}`), false},
		{"double out of range", jsonAttr(`{"doubleValue":1e400}`), false},
		{"bool", jsonAttr(`{"boolValue":false}`), true},
		{"bool as string", jsonAttr(`{"boolValue":"true"}`), false},
		{"bytes", jsonAttr(`{"bytesValue":"AQI="}`), true},
		{"bytes url-safe unpadded", jsonAttr(`{"bytesValue":"-_8"}`), true},
		{"bytes not base64", jsonAttr(`{"bytesValue":"!!"}`), false},
		{"empty array", jsonAttr(`{"arrayValue":{"values":[]}}`), true},
		{"key-value list", jsonAttr(`{"kvlistValue":{"values":[{"key":"a","value":{"intValue":"1"}},{"key":"b","value":{"arrayValue":{"values":[{"doubleValue":"Infinity"}]}}}]}}`), true},
		{"nested at the limit", jsonAttr(deep), true},
		{"nested past the limit", jsonAttr(tooDeep), false},
		{"key-value lists nested at the limit", jsonAttr(deepList), true},
		{"key-value lists nested past the limit", jsonAttr(tooDeepList), false},
		{"nested past the JSON limit", jsonAttr(strings.Repeat(`{"arrayValue":{"values":[`, 200) + strings.Repeat(`]}}`, 200)), false},
		{"two cases of one value", jsonAttr(`{"stringValue":"a","intValue":1}`), false},
		{"empty value", jsonAttr(`{}`), true},
		{"body not a string", jsonRecord(`"body":{"kvlistValue":{"values":[]}}`), true},
		{"severity by name", jsonRecord(`"severityNumber":"SEVERITY_NUMBER_INFO"`), true},
		{"severity by a name not in the enum", jsonRecord(`"severityNumber":"severity_number_info"`), false},
		{"severity by unknown name", jsonRecord(`"severityNumber":"LOUD"`), false},
		{"severity number out of range", jsonRecord(`"severityNumber":2147483648`), false},
		{"time as number", jsonRecord(`"timeUnixNano":1700000000000000000`), true},
		{"time with exponent", jsonRecord(`"timeUnixNano":1e18`), false},
		{"time negative", jsonRecord(`"timeUnixNano":"-1"`), false},
		{"time past uint64", jsonRecord(`"timeUnixNano":"18446744073709551616"`), false},
		{"time past int64 nanoseconds", jsonRecord(`"timeUnixNano":"18446744073709551615","observedTimeUnixNano":"7"`), true},
		{"flags as string", jsonRecord(`"flags":"1"`), false},
		{"trace id not hex", jsonRecord(`"traceId":"zz"`), false},
		{"trace id too short", jsonRecord(`"traceId":"` + traceHex[:30] + `"`), false},
		{"trace id as base64", jsonRecord(`"traceId":"W47/95gDgQPSabYzgT/GDA=="`), false},
		{"span id a number", jsonRecord(`"spanId":7`), false},
		{"both spellings of one field", jsonRecord(`"traceId":"` + traceHex + `","trace_id":"` + traceHex + `"`), false},
		{"duplicate key", jsonRecord(`"eventName":"a","eventName":"b"`), false},
		{"duplicate resourceLogs", `{"resourceLogs":[],"resourceLogs":[]}`, false},
		{"duplicate key with a trace (rewritten, so accepted)", jsonRecord(`"eventName":"a","eventName":"b","traceId":"` + traceHex + `"`), false},
		{"unknown field", jsonRecord(`"somethingNew":{"a":[1,2,{"b":null}]}`), false},
		{"unknown top-level field", `{"resourceLogs":[],"extra":1}`, false},
		{"null field", jsonRecord(`"body":null`), false},
		{"null record", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[null]}]}]}`, false},
		{"NUL escape", jsonAttr(`{"stringValue":"a\u0000b"}`), false},
		{"NUL escape in a key", jsonRecord(`"attributes":[{"key":"a\u0000","value":{"stringValue":"x"}}]`), false},
		{"surrogate pair", jsonAttr(`{"stringValue":"\ud83d\ude00"}`), false},
		{"lone surrogate", jsonAttr(`{"stringValue":"\ud800"}`), false},
		{"invalid UTF-8", jsonAttr("{\"stringValue\":\"\xff\"}"), false},
		{"invalid UTF-8 with a trace", jsonRecord("\"traceId\":\"\",\"body\":{\"stringValue\":\"\xff\"}"), false},
		{"raw control character", jsonAttr("{\"stringValue\":\"a\tb\"}"), false},
		{"bad escape", jsonAttr(`{"stringValue":"\x"}`), false},
		{"short unicode escape", jsonAttr(`{"stringValue":"\u12"}`), false},
		{"bad JSON", `{"resourceLogs":[`, false},
		{"trailing comma", `{"resourceLogs":[],}`, false},
		{"trailing data", `{"resourceLogs":[]} {}`, false},
		{"not an object", `[]`, false},
		{"empty document", ``, false},
		{"wrong type for resourceLogs", `{"resourceLogs":{}}`, false},
		{"wrong type for a string", jsonRecord(`"eventName":5`), false},
		{"leading zero", jsonRecord(`"flags":01`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			walked := requireSameJSONRecords(t, []byte(tc.doc))
			require.Equal(t, tc.walked, walked, "taken by the walker")
		})
	}
}

func FuzzDecodeJSONRecords(f *testing.F) {
	for _, b := range jsonCaptures(f) {
		f.Add(b)
	}
	f.Add([]byte(samplePayload))
	f.Add(encodeOTLPJSON(f, sampleRequest(), true))
	f.Add(encodeOTLPJSON(f, sampleRequest(), false))
	f.Add(encodeOTLPJSON(f, nestedRequest(MaxValueDepth), false))
	f.Add([]byte(jsonAttr(`{"kvlistValue":{"values":[{"key":"a","value":{"bytesValue":"AQI="}}]}}`)))
	f.Add([]byte(jsonRecord(`"timeUnixNano":"5","severityNumber":9,"flags":1,"traceId":"` + traceHex + `","spanId":"` + spanHex + `"`)))
	f.Add([]byte(jsonAttr(`{"intValue":"-12","doubleValue":1e5}`)))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		requireSameJSONRecords(t, b)
	})
}

// BenchmarkDecodeJSONRecords compares the walker with the generic path on
// the real Claude Code exports.
func BenchmarkDecodeJSONRecords(b *testing.B) {
	docs := jsonCaptures(b)
	b.Run("generic", func(b *testing.B) { benchRecords(b, docs, genericJSONRecords) })
	b.Run("walker", func(b *testing.B) { benchRecords(b, docs, DecodeJSONRecords) })
}
