// Package otlp decodes OTLP log exports of AI coding agents (Claude Code,
// Codex) and correlates their records into per-member activity events: it is
// a pure mechanism that knows nothing of the server, the store or HTTP.
//
// Decoding: DecodeJSON and DecodeProto read an ExportLogsServiceRequest;
// Records flattens it into Record values, named by event.name and attributed
// to an Agent. Correlation: a Correlator keeps each member's pending state
// (queued request bodies, exchanges waiting for their response, responses
// waiting for their accounting record) and turns records into Event values
// of the kinds llm_exchange, tool_action, user_prompt and opaque_http, as
// docs/TELEMETRY.md describes. State and Restore persist that state so the
// caller can commit it with the events an export completed.
//
// Beyond those rules, pairing uses what Claude Code's records carry: an
// accounting record claims only a body of its own session.id (sequence
// numbers count per session), and a response whose request_body_id names
// another queued body than the one claimed takes that body, the claimed one
// going back to the queue (a failed request's body is never accounted for,
// so the oldest body is not always the right one).
//
// Limits a hostile producer cannot get past: JSON nested deeper than 300
// levels, and attribute or body values nested deeper than 64 levels, are
// refused at decoding; a request or response body is kept in state only up
// to 256 KiB (bigger is handled as truncated); each member holds at most
// Options.MaxPending waiting records and Options.MaxBytes bytes of them.
// Thinking blocks are removed when a body is ingested, so they never reach
// state or output, and the attributes user.email and user.account_id are
// removed from every record.
package otlp
