// Package connguard bounds, per client address, the connections that have
// not yet presented a valid credential. A connection counts from the
// moment it is accepted until a request on it authenticates (or it
// closes); a client address at its bound has further connections closed
// at accept, so no client that holds no credential can exhaust the
// broker's file descriptors with idle or slow connections. A client
// address is an IPv4 address or an IPv6 /64, and all addresses together
// have a bound too. Authenticated connections are not counted here. A
// connection from a trusted reverse proxy is counted only toward that
// bound on all connections; its requests are counted instead, each
// against the client address the proxy names.
package connguard
