// Package gateway serves the REST facade: grpc-gateway routes over a real
// client connection to the gRPC server, and the hand-written handlers, with
// one error writer.
package gateway
