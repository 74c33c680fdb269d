// Package clientaddr finds the address of the client behind a request:
// the TCP peer, or, when the peer is a reverse proxy the operator trusts,
// the right-most address in X-Forwarded-For that is not a trusted proxy.
package clientaddr
