// Package federation verifies federation JWTs: compact JWS tokens a platform
// signs, checked against the issuer, audience and JWKS URL the broker was
// configured or bound with. It knows nothing of services or members; the
// authenticator maps a verified token's subject to a member.
package federation
