// Package toolbox is `svc mcp`: the agent toolbox of the spec served as an
// MCP server over stdio with the official Go SDK. Every tool is a call to
// the broker over REST, made with the caller's own credential; the broker
// stays the authority (a tool hidden from tools/list is still refused by
// the broker when called by name). Bound tool sources contribute their
// tools as <slug>__<name>, and registry events make the toolbox recompute
// its tool set and announce notifications/tools/list_changed.
package toolbox
