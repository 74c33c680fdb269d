package capture

import "bytes"

// sseEvent is one dispatched server-sent event: its event name ("" when
// the stream gave none) and its data lines joined by "\n".
type sseEvent struct {
	name string
	data []byte
}

// parseSSE splits a text/event-stream body into events as the WHATWG
// EventSource rules do: lines end in "\n", "\r\n" or "\r"; a blank line
// dispatches; "data:" lines are joined with "\n"; a comment line (":")
// and the id and retry fields are ignored; a single space after the colon
// is dropped; an event with no data line is not dispatched, and neither is
// one the body ends in the middle of (no blank line after it).
func parseSSE(body []byte) []sseEvent {
	var out []sseEvent
	var name string
	var data []byte
	hasData := false
	for len(body) > 0 {
		i := bytes.IndexAny(body, "\r\n")
		if i < 0 {
			break // an unterminated last line: the stream was cut
		}
		line, eol := body[:i], body[i]
		body = body[i+1:]
		if eol == '\r' && len(body) > 0 && body[0] == '\n' {
			body = body[1:]
		}
		if len(line) == 0 {
			if hasData {
				out = append(out, sseEvent{name: name, data: data})
			}
			name, data, hasData = "", nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	return out
}
