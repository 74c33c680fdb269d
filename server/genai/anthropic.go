package genai

// anthropic maps an Anthropic Messages request and response.
func (m *mapper) anthropic(req, resp obj) error {
	const api = inAnthropic
	if err := req.forbid("request", apiNames[api], "input", "instructions"); err != nil {
		return err
	}

	// system: a string or an array of text blocks.
	if sys := req["system"]; !isNull(sys) {
		parts, err := m.content(nil, sys, api, "request.system")
		if err != nil {
			return err
		}
		for _, pt := range parts {
			if pt.Type != PartText {
				return invalid("request.system", "holds a "+pt.Type)
			}
		}
		m.rec.SystemInstructions = append(m.rec.SystemInstructions, parts...)
	}

	if !req.has("messages") {
		return invalid("request.messages", "missing")
	}
	msgs, err := req.arr("messages", "request")
	if err != nil {
		return err
	}
	for i, raw := range msgs {
		p := at("request.messages", i)
		o, err := asObj(raw, p)
		if err != nil {
			return err
		}
		if o.thought() {
			continue
		}
		if err := o.forbid(p, apiNames[api], "tool_calls", "tool_call_id"); err != nil {
			return err
		}
		role, err := o.str("role", p)
		if err != nil {
			return err
		}
		// Claude Code puts a system entry (its environment) among the
		// messages; it stays there, in its place (doc.go).
		if role != "user" && role != "assistant" && role != "system" {
			return invalid(join(p, "role"), quote(role)+` is not an anthropic messages role`)
		}
		parts, err := m.content([]Part{}, o["content"], api, join(p, "content"))
		if err != nil {
			return err
		}
		if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: role, Parts: parts}, p); err != nil {
			return err
		}
	}

	// The response: one assistant message.
	if role, err := resp.str("role", "response"); err != nil {
		return err
	} else if role != "" && role != "assistant" {
		return invalid("response.role", "not assistant")
	}
	if !resp.has("content") {
		return invalid("response.content", "missing")
	}
	if _, err := resp.arr("content", "response"); err != nil {
		return err
	}
	parts, err := m.content([]Part{}, resp["content"], api, "response.content")
	if err != nil {
		return err
	}
	stop, err := resp.str("stop_reason", "response")
	if err != nil {
		return err
	}
	if m.rec.OutputMessages, err = m.message(m.rec.OutputMessages, Message{Role: "assistant", Parts: parts, FinishReason: stop}, "response"); err != nil {
		return err
	}

	usage, err := resp.obj("usage", "response")
	if err != nil || usage == nil {
		return err
	}
	u := &m.rec.Usage
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"input_tokens", &u.InputTokens},
		{"output_tokens", &u.OutputTokens},
		{"cache_read_input_tokens", &u.CacheReadTokens},
		{"cache_creation_input_tokens", &u.CacheCreationTokens},
	} {
		if *f.dst, err = usage.count(f.key, "response.usage"); err != nil {
			return err
		}
	}
	return nil
}
