package genai

// chat maps an OpenAI Chat Completions request and response.
func (m *mapper) chat(req, resp obj) error {
	const api = inChat
	if err := req.forbid("request", apiNames[api], "system", "input", "instructions"); err != nil {
		return err
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
		role, err := o.str("role", p)
		if err != nil {
			return err
		}
		switch role {
		case "system", "developer":
			if m.rec.SystemInstructions, err = m.content(m.rec.SystemInstructions, o["content"], api, join(p, "content")); err != nil {
				return err
			}
		case "user":
			parts, err := m.content([]Part{}, o["content"], api, join(p, "content"))
			if err != nil {
				return err
			}
			if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: role, Parts: parts}, p); err != nil {
				return err
			}
		case "assistant":
			parts, err := m.chatAssistant(o, p)
			if err != nil {
				return err
			}
			if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: role, Parts: parts}, p); err != nil {
				return err
			}
		case "tool", "function": // function: the deprecated form, with no id
			id, err := o.str("tool_call_id", p)
			if err != nil {
				return err
			}
			resp, err := toolResponse(o["content"], api, join(p, "content"))
			if err != nil {
				return err
			}
			parts, err := m.part([]Part{}, Part{Type: PartToolCallResponse, ID: id, Response: resp}, p)
			if err != nil {
				return err
			}
			if m.rec.InputMessages, err = m.message(m.rec.InputMessages, Message{Role: "tool", Parts: parts}, p); err != nil {
				return err
			}
		default:
			return invalid(join(p, "role"), quote(role)+` is not an openai chat completions role`)
		}
	}

	if !resp.has("choices") {
		return invalid("response.choices", "missing")
	}
	choices, err := resp.arr("choices", "response")
	if err != nil {
		return err
	}
	for i, raw := range choices {
		p := at("response.choices", i)
		c, err := asObj(raw, p)
		if err != nil {
			return err
		}
		if c.thought() {
			continue
		}
		finish, err := c.str("finish_reason", p)
		if err != nil {
			return err
		}
		msg, err := c.obj("message", p)
		if err != nil {
			return err
		}
		parts := []Part{}
		if msg != nil && !msg.thought() {
			mp := join(p, "message")
			if role, err := msg.str("role", mp); err != nil {
				return err
			} else if role != "" && role != "assistant" {
				return invalid(join(mp, "role"), "not assistant")
			}
			if parts, err = m.chatAssistant(msg, mp); err != nil {
				return err
			}
		}
		if m.rec.OutputMessages, err = m.message(m.rec.OutputMessages, Message{Role: "assistant", Parts: parts, FinishReason: finish}, p); err != nil {
			return err
		}
	}

	usage, err := resp.obj("usage", "response")
	if err != nil || usage == nil {
		return err
	}
	return openAIUsage(&m.rec.Usage, usage, "response.usage",
		"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")
}

// chatAssistant maps an assistant message: its content, refusal, tool
// calls and the deprecated function_call.
func (m *mapper) chatAssistant(o obj, p string) ([]Part, error) {
	parts, err := m.content([]Part{}, o["content"], inChat, join(p, "content"))
	if err != nil {
		return nil, err
	}
	refusal, err := o.str("refusal", p)
	if err != nil {
		return nil, err
	}
	if refusal != "" {
		if parts, err = m.part(parts, Part{Type: PartText, Content: refusal}, p); err != nil {
			return nil, err
		}
	}
	calls, err := o.arr("tool_calls", p)
	if err != nil {
		return nil, err
	}
	for i, raw := range calls {
		cp := at(join(p, "tool_calls"), i)
		call, err := asObj(raw, cp)
		if err != nil {
			return nil, err
		}
		if call.thought() {
			continue
		}
		typ, err := call.str("type", cp)
		if err != nil {
			return nil, err
		}
		var fnKey, argsKey string
		switch typ {
		case "", "function":
			fnKey, argsKey = "function", "arguments"
		case "custom":
			fnKey, argsKey = "custom", "input"
		default:
			continue
		}
		id, err := call.str("id", cp)
		if err != nil {
			return nil, err
		}
		fn, err := call.obj(fnKey, cp)
		if err != nil {
			return nil, err
		}
		pt := Part{Type: PartToolCall, ID: id}
		if fn != nil && !fn.thought() {
			if pt, err = toolCall(fn, "", argsKey, join(cp, fnKey)); err != nil {
				return nil, err
			}
			pt.ID = id
		}
		if parts, err = m.part(parts, pt, cp); err != nil {
			return nil, err
		}
	}
	fc, err := o.obj("function_call", p)
	if err != nil {
		return nil, err
	}
	if fc != nil && !fc.thought() {
		pt, err := toolCall(fc, "", "arguments", join(p, "function_call"))
		if err != nil {
			return nil, err
		}
		if parts, err = m.part(parts, pt, p); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// openAIUsage reads OpenAI usage, where the input count includes cached
// tokens and the output count includes reasoning tokens.
func openAIUsage(u *Usage, usage obj, p, inKey, outKey, inDetails, outDetails string) error {
	in, err := usage.count(inKey, p)
	if err != nil {
		return err
	}
	if u.OutputTokens, err = usage.count(outKey, p); err != nil {
		return err
	}
	if d, err := usage.obj(inDetails, p); err != nil {
		return err
	} else if d != nil {
		if u.CacheReadTokens, err = d.count("cached_tokens", join(p, inDetails)); err != nil {
			return err
		}
	}
	if d, err := usage.obj(outDetails, p); err != nil {
		return err
	} else if d != nil {
		if u.ReasoningTokens, err = d.count("reasoning_tokens", join(p, outDetails)); err != nil {
			return err
		}
	}
	u.InputTokens = max(in-u.CacheReadTokens, 0)
	return nil
}
