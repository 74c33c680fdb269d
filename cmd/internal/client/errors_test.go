package client

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func withReason(c codes.Code, reason, msg string) error {
	st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "svc"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestCodeAndDescribe(t *testing.T) {
	const u = "http://b:1"
	tests := []struct {
		name     string
		err      error
		wantCode string
		want     string
	}{
		{name: "refused", err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED), want: "cannot reach the broker at http://b:1: connection refused"},
		{name: "grpc refused", err: status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused\""), want: "connection refused"},
		{name: "not svc", err: fmt.Errorf("%w: GET /healthz answered 404", ErrNotSvc), want: "http://b:1 does not look like an svc broker"},
		{name: "rest 401", err: &APIError{Status: 401, Code: "unauthenticated", Message: "bad token"}, wantCode: "unauthenticated", want: "unauthenticated: the broker at http://b:1 refused the token"},
		{name: "grpc 401", err: withReason(codes.Unauthenticated, "unauthenticated", "nope"), wantCode: "unauthenticated", want: "refused the token"},
		{name: "grpc reason", err: withReason(codes.InvalidArgument, "bad_request", "body:\nrequired"), wantCode: "bad_request", want: "bad_request: body: required"},
		{name: "grpc bare not found", err: status.Error(codes.NotFound, "x"), wantCode: "not_found", want: "not_found: x"},
		{name: "rest other", err: &APIError{Status: 403, Code: "forbidden", Message: "no"}, wantCode: "forbidden", want: "forbidden: no"},
		{name: "plain", err: errors.New("a\nb"), want: "a b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.wantCode, Code(tc.err))
			got := Describe(tc.err, u)
			require.Contains(t, got, tc.want)
			require.NotContains(t, got, "\n")
		})
	}
	require.Empty(t, Describe(nil, u))
}
