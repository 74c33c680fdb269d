package genai

import (
	"encoding/json"
	"strings"
)

// apiSet is a set of the three APIs, for the content types each one has.
type apiSet uint8

const (
	inAnthropic apiSet = 1 << iota
	inChat
	inResponses
)

// apiNames names each API in errors.
var apiNames = map[apiSet]string{
	inAnthropic: "anthropic messages",
	inChat:      "openai chat completions",
	inResponses: "openai responses",
}

// partKind is what a content type maps to.
type partKind uint8

const (
	kindText partKind = iota + 1
	kindRefusal
	kindMedia
	kindToolUse
	kindToolResult
)

// contentType is one provider content (block or part) type.
type contentType struct {
	kind        partKind
	apis        apiSet
	placeholder string // kindMedia: the text part standing in for it
}

// contentTypes are the content types this package knows, with the APIs
// that have each. A known type in another API's content is refused (that
// is how a request of one provider paired with the response of another is
// caught); an unknown type is skipped, as providers add types often.
var contentTypes = map[string]contentType{
	"text":        {kind: kindText, apis: inAnthropic | inChat | inResponses},
	"input_text":  {kind: kindText, apis: inResponses},
	"output_text": {kind: kindText, apis: inResponses},
	"refusal":     {kind: kindRefusal, apis: inChat | inResponses},
	"image":       {kind: kindMedia, apis: inAnthropic, placeholder: "[image]"},
	"image_url":   {kind: kindMedia, apis: inChat, placeholder: "[image]"},
	"input_image": {kind: kindMedia, apis: inResponses, placeholder: "[image]"},
	"document":    {kind: kindMedia, apis: inAnthropic, placeholder: "[document]"},
	"file":        {kind: kindMedia, apis: inChat, placeholder: "[file]"},
	"input_file":  {kind: kindMedia, apis: inResponses, placeholder: "[file]"},
	"input_audio": {kind: kindMedia, apis: inChat | inResponses, placeholder: "[audio]"},
	"tool_use":    {kind: kindToolUse, apis: inAnthropic},
	"tool_result": {kind: kindToolResult, apis: inAnthropic},
}

// contentElem decodes one element of a content array: its object and its
// type, or ok false when it is skipped (thinking, or a type this package
// does not know).
func contentElem(raw json.RawMessage, api apiSet, p string) (o obj, ct contentType, ok bool, err error) {
	if o, err = asObj(raw, p); err != nil {
		return nil, ct, false, err
	}
	if o.thought() {
		return nil, ct, false, nil
	}
	t, err := o.str("type", p)
	if err != nil {
		return nil, ct, false, err
	}
	if t == "" {
		return nil, ct, false, invalid(join(p, "type"), "missing")
	}
	ct, known := contentTypes[t]
	if !known {
		return nil, ct, false, nil
	}
	if ct.apis&api == 0 {
		return nil, ct, false, invalid(join(p, "type"), `"`+t+`" is not a content type of `+apiNames[api])
	}
	return o, ct, true, nil
}

// content maps message content (a string, or an array of blocks or parts)
// onto parts, appending to parts.
func (m *mapper) content(parts []Part, raw json.RawMessage, api apiSet, p string) ([]Part, error) {
	switch kindOf(raw) {
	case 0, 'n':
		if isNull(raw) {
			return parts, nil
		}
	case '"':
		s, err := asStr(raw, p)
		if err != nil || s == "" {
			return parts, err
		}
		return m.part(parts, Part{Type: PartText, Content: s}, p)
	case '[':
		elems, err := asArr(raw, p)
		if err != nil {
			return parts, err
		}
		for i, e := range elems {
			if parts, err = m.contentPart(parts, e, api, at(p, i)); err != nil {
				return parts, err
			}
		}
		return parts, nil
	}
	return parts, invalid(p, "not a string or an array")
}

// contentPart maps one block or part.
func (m *mapper) contentPart(parts []Part, raw json.RawMessage, api apiSet, p string) ([]Part, error) {
	o, ct, ok, err := contentElem(raw, api, p)
	if err != nil || !ok {
		return parts, err
	}
	var pt Part
	switch ct.kind {
	case kindText, kindRefusal:
		key := "text"
		if ct.kind == kindRefusal {
			key = "refusal"
		}
		s, err := o.str(key, p)
		if err != nil || s == "" {
			return parts, err
		}
		pt = Part{Type: PartText, Content: s}
	case kindMedia:
		pt = Part{Type: PartText, Content: ct.placeholder}
	case kindToolUse:
		if pt, err = toolCall(o, "id", "input", p); err != nil {
			return parts, err
		}
	case kindToolResult:
		id, err := o.str("tool_use_id", p)
		if err != nil {
			return parts, err
		}
		resp, err := toolResponse(o["content"], api, join(p, "content"))
		if err != nil {
			return parts, err
		}
		pt = Part{Type: PartToolCallResponse, ID: id, Response: resp}
	}
	return m.part(parts, pt, p)
}

// toolCall maps an object with an id (none when idKey is empty), a name
// and arguments.
func toolCall(o obj, idKey, argsKey, p string) (Part, error) {
	var id string
	if idKey != "" {
		var err error
		if id, err = o.str(idKey, p); err != nil {
			return Part{}, err
		}
	}
	name, err := o.str("name", p)
	if err != nil {
		return Part{}, err
	}
	args, err := arguments(o[argsKey], join(p, argsKey))
	if err != nil {
		return Part{}, err
	}
	return Part{Type: PartToolCall, ID: id, Name: name, Arguments: args}, nil
}

// toolResponse maps a tool's output: a string stays a JSON string, an
// array of content parts becomes one JSON string of their texts and
// placeholders joined by newlines.
func toolResponse(raw json.RawMessage, api apiSet, p string) (json.RawMessage, error) {
	switch kindOf(raw) {
	case 0, 'n':
		if isNull(raw) {
			return nil, nil
		}
	case '"':
		s, err := asStr(raw, p)
		if err != nil {
			return nil, err
		}
		return jsonString(s), nil
	case '[':
		elems, err := asArr(raw, p)
		if err != nil {
			return nil, err
		}
		var texts []string
		for i, e := range elems {
			o, ct, ok, err := contentElem(e, api, at(p, i))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			var s string
			switch ct.kind {
			case kindText:
				s, err = o.str("text", at(p, i))
			case kindRefusal:
				s, err = o.str("refusal", at(p, i))
			case kindMedia:
				s = ct.placeholder
			}
			if err != nil {
				return nil, err
			}
			if s != "" {
				texts = append(texts, s)
			}
		}
		return jsonString(strings.Join(texts, "\n")), nil
	}
	return nil, invalid(p, "not a string or an array")
}
