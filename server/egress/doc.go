// Package egress is the one HTTP client for requests the broker makes to
// addresses its members choose: web push endpoints today, JWKS, custom tool
// upstreams and MCP upstreams next. Such a request must never reach the
// broker's own host or network, so every connection is checked at dial
// time, after name resolution (DNS cannot route around it), against a
// policy: public addresses only, unless the operator allows more.
package egress
