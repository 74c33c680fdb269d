package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Code is the spec's error code of err: the REST {error} or the gRPC
// ErrorInfo reason; "" when err is not an svc refusal.
func Code(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	if st, ok := status.FromError(err); ok && err != nil {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
				return info.GetReason()
			}
		}
		switch st.Code() {
		case codes.Unauthenticated:
			return "unauthenticated"
		case codes.PermissionDenied:
			return "forbidden"
		case codes.NotFound:
			return "not_found"
		}
	}
	return ""
}

// Describe turns err into one line a person can act on: the broker is
// down, the token is revoked or unknown, the URL is not svc, or the
// broker's own {error, message}. brokerURL names the broker in the line.
func Describe(err error, brokerURL string) string {
	if err == nil {
		return ""
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused"):
		return fmt.Sprintf("cannot reach the broker at %s: connection refused (is `svc serve` running?)", brokerURL)
	case errors.Is(err, ErrNotSvc):
		return fmt.Sprintf("%s does not look like an svc broker (%v)", brokerURL, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the broker at %s did not answer in time", brokerURL)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Sprintf("cannot reach the broker at %s: %v", brokerURL, dnsErr)
	}
	if Code(err) == "unauthenticated" {
		return fmt.Sprintf("unauthenticated: the broker at %s refused the token (revoked, expired or unknown); run `svc login`", brokerURL)
	}
	if st, ok := status.FromError(err); ok {
		msg := st.Message()
		if c := Code(err); c != "" {
			return oneLine(c + ": " + msg)
		}
		return oneLine(st.Code().String() + ": " + msg)
	}
	return oneLine(err.Error())
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.ReplaceAll(s, "\n", " ")
}
