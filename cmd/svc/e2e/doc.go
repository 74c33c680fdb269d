// Package e2e holds the end-to-end tests of svc: the svc binary, built once
// per test run, started as child processes on 127.0.0.1:0 and spoken to
// over REST, SSE and gRPC as any client would (docs/TESTING.md).
package e2e
