// Package capture is the runner's capturing proxy for model APIs: the
// agent's model provider is pointed at it, it forwards every request to the
// provider the user configured, streams the answer back unchanged, and
// hands each finished model call (a request/response pair) to a sink, a
// streamed (SSE) response reassembled into the provider's non-streamed JSON
// first. docs/CAPTURE.md says what is captured and what is not.
package capture
