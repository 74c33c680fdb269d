// Package server implements the gRPC services of svc over the store, with
// the error mapping and the interceptor chain every transport shares.
package server
