// Package genai decodes GenAI inference uploads (one provider request and
// its assembled response) and maps them onto the OpenTelemetry GenAI message
// shapes, for Anthropic Messages, OpenAI Chat Completions and OpenAI
// Responses; it knows nothing of the server, the store or HTTP.
//
// Detection is by the response: an Anthropic Messages response has
// "type": "message", a Chat Completions response "object":
// "chat.completion" and a Responses response "object": "response". The
// request is then checked against that provider: it must have the
// provider's top-level container ("messages", or "input" for Responses
// which may also be absent), only the provider's roles, and none of the
// fields or content types only another provider uses, so an upload pairing
// one provider's request with another's response is refused.
//
// Mapping rules the OpenTelemetry conventions leave open:
//
//   - Thinking and reasoning are never stored: every object whose "type" is
//     thinking, redacted_thinking, reasoning, reasoning_text or
//     summary_text is dropped wherever a message, block, item, choice or
//     part is read, and provider reasoning fields (reasoning_content,
//     encrypted_content, …) are never read.
//   - Media is not stored: an image, document, file or audio part becomes a
//     text part whose content is "[" + kind + "]", kind being image,
//     document, file or audio, so a reader still sees that the message
//     carried one.
//   - Content types the provider has and this package does not map (server
//     tool blocks, web search results, local shell calls, item references,
//     compaction items, …) are skipped. Empty text is skipped too.
//   - A message whose parts are all dropped is kept with no parts, so input
//     messages stay one to one with the provider's (Responses items are
//     grouped, see below).
//   - Tool call arguments: a JSON object is kept as is; a string holding a
//     JSON object is parsed; any other string stays a JSON string; any
//     other JSON value is kept as is.
//   - Tool call responses: a string stays a JSON string; an array of
//     content parts becomes one JSON string, the text of its text parts and
//     the placeholders of its media parts joined by newlines; is_error is
//     not kept.
//   - Roles: Anthropic tool_result blocks stay in their user message; an
//     OpenAI "tool" (or legacy "function") message and a Responses
//     function_call_output item become a "tool" message. system and
//     developer messages (Chat Completions and Responses) go to
//     SystemInstructions, after the Responses "instructions". An
//     Anthropic system entry inside "messages" (Claude Code puts its
//     environment there, after the first user turn) stays an input
//     message of role "system" in its place: it is part of the
//     conversation at that point, which the OpenTelemetry input messages
//     allow, and the top-level "system" alone is the system
//     instructions. (So a Chat Completions request of system and user
//     string messages alone also reads as Anthropic; the response tells
//     the provider.)
//   - Responses input items are grouped: a function_call joins the assistant
//     message just before it (a message item or another call), a
//     function_call_output joins the tool message just before it, otherwise
//     each starts a message. custom_tool_call and custom_tool_call_output
//     map like function_call and function_call_output.
//   - Finish reasons: Anthropic stop_reason and Chat Completions
//     finish_reason verbatim. Responses: status "completed" is "tool_calls"
//     when the last mapped output item is a tool call and "stop" otherwise;
//     "incomplete" is "length" for max_output_tokens, else the
//     incomplete_details reason, else "incomplete"; any other status
//     verbatim.
//   - Usage buckets are disjoint on input and nested on output: InputTokens
//     counts input tokens neither read from nor written to the cache
//     (OpenAI's prompt_tokens or input_tokens less cached_tokens, floored at
//     0), so InputTokens + CacheReadTokens + CacheCreationTokens is the
//     whole prompt for every provider, as in Anthropic usage and the
//     llm_exchange records. OutputTokens counts every output token,
//     reasoning included; ReasoningTokens says how many of them were
//     reasoning.
//   - JSON null is the same as an absent field everywhere.
//
// Hostile input is bounded: nesting deeper than MaxDepth (also inside a
// tool-argument string, which is then kept as a string), more than
// MaxMessages messages or more than MaxParts parts is refused. Every error
// wraps ErrInvalid.
package genai
