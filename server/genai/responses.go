package genai

// responses maps an OpenAI Responses request and response.
func (m *mapper) responses(req, resp obj) error {
	const api = inResponses
	if err := req.forbid("request", apiNames[api], "messages", "system"); err != nil {
		return err
	}
	instructions, err := req.str("instructions", "request")
	if err != nil {
		return err
	}
	if instructions != "" {
		if m.rec.SystemInstructions, err = m.part(m.rec.SystemInstructions, Part{Type: PartText, Content: instructions}, "request.instructions"); err != nil {
			return err
		}
	}

	switch input := req["input"]; kindOf(input) {
	case '"':
		parts, err := m.content([]Part{}, input, api, "request.input")
		if err != nil {
			return err
		}
		if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: "user", Parts: parts}, "request.input"); err != nil {
			return err
		}
	case '[':
		if err := m.responsesInput(input); err != nil {
			return err
		}
	default:
		if !isNull(input) {
			return invalid("request.input", "not a string or an array")
		}
	}

	return m.responsesOutput(resp)
}

// responsesInput maps the input items, grouping calls into the assistant
// message before them and call outputs into the tool message before them.
func (m *mapper) responsesInput(input []byte) error {
	const api = inResponses
	items, err := asArr(input, "request.input")
	if err != nil {
		return err
	}
	open := -1 // the input message the next call or output may join
	for i, raw := range items {
		p := at("request.input", i)
		o, typ, err := responsesItem(raw, p)
		if err != nil {
			return err
		}
		var pt Part
		var role string
		switch typ {
		case "message":
			if err := o.forbid(p, apiNames[api], "tool_calls", "tool_call_id"); err != nil {
				return err
			}
			if role, err = o.str("role", p); err != nil {
				return err
			}
			switch role {
			case "system", "developer":
				if m.rec.SystemInstructions, err = m.content(m.rec.SystemInstructions, o["content"], api, join(p, "content")); err != nil {
					return err
				}
				open = -1
			case "user", "assistant":
				parts, err := m.content([]Part{}, o["content"], api, join(p, "content"))
				if err != nil {
					return err
				}
				if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: role, Parts: parts}, p); err != nil {
					return err
				}
				open = len(m.rec.InputMessages) - 1
			default:
				return invalid(join(p, "role"), quote(role)+` is not an openai responses role`)
			}
			continue
		case "function_call", "custom_tool_call":
			args := "arguments"
			if typ == "custom_tool_call" {
				args = "input"
			}
			if pt, err = toolCall(o, "call_id", args, p); err != nil {
				return err
			}
			role = "assistant"
		case "function_call_output", "custom_tool_call_output":
			id, err := o.str("call_id", p)
			if err != nil {
				return err
			}
			out, err := toolResponse(o["output"], api, join(p, "output"))
			if err != nil {
				return err
			}
			pt, role = Part{Type: PartToolCallResponse, ID: id, Response: out}, "tool"
		default:
			continue // reasoning (dropped) or an item this package does not map
		}
		if open >= 0 && open == len(m.rec.InputMessages)-1 && m.rec.InputMessages[open].Role == role {
			msg := &m.rec.InputMessages[open]
			if msg.Parts, err = m.part(msg.Parts, pt, p); err != nil {
				return err
			}
			continue
		}
		parts, err := m.part([]Part{}, pt, p)
		if err != nil {
			return err
		}
		if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: role, Parts: parts}, p); err != nil {
			return err
		}
		open = len(m.rec.InputMessages) - 1
	}
	return nil
}

// responsesOutput maps the output items onto one assistant message, and
// the usage.
func (m *mapper) responsesOutput(resp obj) error {
	const api = inResponses
	items, err := resp.arr("output", "response")
	if err != nil {
		return err
	}
	parts, lastCall := []Part{}, false
	for i, raw := range items {
		p := at("response.output", i)
		o, typ, err := responsesItem(raw, p)
		if err != nil {
			return err
		}
		switch typ {
		case "message":
			if role, err := o.str("role", p); err != nil {
				return err
			} else if role != "" && role != "assistant" {
				return invalid(join(p, "role"), "not assistant")
			}
			if parts, err = m.content(parts, o["content"], api, join(p, "content")); err != nil {
				return err
			}
			lastCall = false
		case "function_call", "custom_tool_call":
			args := "arguments"
			if typ == "custom_tool_call" {
				args = "input"
			}
			pt, err := toolCall(o, "call_id", args, p)
			if err != nil {
				return err
			}
			if parts, err = m.part(parts, pt, p); err != nil {
				return err
			}
			lastCall = true
		}
	}

	status, err := resp.str("status", "response")
	if err != nil {
		return err
	}
	finish := status
	switch status {
	case "completed":
		finish = "stop"
		if lastCall {
			finish = "tool_calls"
		}
	case "incomplete":
		d, err := resp.obj("incomplete_details", "response")
		if err != nil {
			return err
		}
		reason := ""
		if d != nil && !d.thought() {
			if reason, err = d.str("reason", "response.incomplete_details"); err != nil {
				return err
			}
		}
		switch reason {
		case "max_output_tokens":
			finish = "length"
		case "":
		default:
			finish = reason
		}
	}
	if m.rec.OutputMessages, err = m.message(m.rec.OutputMessages, Message{Role: "assistant", Parts: parts, FinishReason: finish}, "response.output"); err != nil {
		return err
	}

	usage, err := resp.obj("usage", "response")
	if err != nil || usage == nil {
		return err
	}
	return openAIUsage(&m.rec.Usage, usage, "response.usage",
		"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details")
}

// responsesItem decodes an input or output item and its type: "message"
// for a message with no type, "" for one that is dropped (reasoning).
func responsesItem(raw []byte, p string) (obj, string, error) {
	o, err := asObj(raw, p)
	if err != nil {
		return nil, "", err
	}
	if o.thought() {
		return nil, "", nil
	}
	typ, err := o.str("type", p)
	if err != nil {
		return nil, "", err
	}
	if typ == "" {
		if !o.has("role") {
			return nil, "", invalid(p, "neither type nor role")
		}
		typ = "message"
	}
	return o, typ, nil
}
