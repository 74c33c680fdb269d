// Package runner is `svc runner`: it holds a member's stream on the broker,
// starts the member's agent under an adapter (Claude Code, Codex, a plain
// agent), wakes it with one turn per incoming message, derives its live
// activity state from its hook events and reports it, uploads the activity
// the telemetry does not carry, and on stop leaves runner_shutdown markers.
// It also holds `svc hook`, the command an agent's hooks run to report to
// the runner over the relay socket.
//
// It is a real client of the broker: it speaks gRPC and REST through
// cmd/internal/client and never imports the server, store or gateway.
package runner
