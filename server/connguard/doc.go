// Package connguard bounds, per client address, the connections that have
// not yet presented a valid credential. A connection counts from the
// moment it is accepted until a request on it authenticates (or it
// closes); a client address at its bound has further connections closed
// at accept, so no client that holds no credential can exhaust the
// broker's file descriptors with idle or slow connections. Authenticated
// connections, however many, are bounded elsewhere (live streams per
// member).
package connguard
