// Package auth authenticates callers (bearer tokens, session cookies) and
// authorizes them against the per-method permission table; the gRPC
// interceptors and the hand-written HTTP handlers share it.
package auth
