package apierr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/runtime/protoiface"

	"svc/server/auth"
	"svc/store"
)

// overTheWire sends st through its protobuf encoding, as a gRPC client (or
// the gateway's client connection) receives it.
func overTheWire(t *testing.T, st *status.Status) error {
	t.Helper()
	b, err := proto.Marshal(st.Proto())
	require.NoError(t, err)
	var p spb.Status
	require.NoError(t, proto.Unmarshal(b, &p))
	return status.FromProto(&p).Err()
}

// errorInfoReason returns the svc ErrorInfo reason of st, if any.
func errorInfoReason(st *status.Status) string {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == errorDomain {
			return ei.GetReason()
		}
	}
	return ""
}

func TestEveryCodeMapsToItsStatus(t *testing.T) {
	tests := []struct {
		name     string
		code     Code
		wantHTTP int
		wantGRPC codes.Code
	}{
		{name: "bad_request", code: CodeBadRequest, wantHTTP: http.StatusBadRequest, wantGRPC: codes.InvalidArgument},
		{name: "unsupported_protocol", code: CodeUnsupportedProtocol, wantHTTP: http.StatusBadRequest, wantGRPC: codes.InvalidArgument},
		{name: "unauthenticated", code: CodeUnauthenticated, wantHTTP: http.StatusUnauthorized, wantGRPC: codes.Unauthenticated},
		{name: "forbidden", code: CodeForbidden, wantHTTP: http.StatusForbidden, wantGRPC: codes.PermissionDenied},
		{name: "not_found", code: CodeNotFound, wantHTTP: http.StatusNotFound, wantGRPC: codes.NotFound},
		{name: "conflict", code: CodeConflict, wantHTTP: http.StatusConflict, wantGRPC: codes.AlreadyExists},
		{name: "gone", code: CodeGone, wantHTTP: http.StatusGone, wantGRPC: codes.FailedPrecondition},
		{name: "payload_too_large", code: CodePayloadTooLarge, wantHTTP: http.StatusRequestEntityTooLarge, wantGRPC: codes.ResourceExhausted},
		{name: "rate_limited", code: CodeRateLimited, wantHTTP: http.StatusTooManyRequests, wantGRPC: codes.ResourceExhausted},
		{name: "internal", code: CodeInternal, wantHTTP: http.StatusInternalServerError, wantGRPC: codes.Internal},
		{name: "bad_gateway", code: CodeBadGateway, wantHTTP: http.StatusBadGateway, wantGRPC: codes.Unavailable},
		{name: "unavailable", code: CodeUnavailable, wantHTTP: http.StatusServiceUnavailable, wantGRPC: codes.Unavailable},
		{name: "insufficient_storage", code: CodeInsufficientStorage, wantHTTP: http.StatusInsufficientStorage, wantGRPC: codes.ResourceExhausted},
		{name: "data_loss", code: CodeDataLoss, wantHTTP: http.StatusInternalServerError, wantGRPC: codes.DataLoss},
		{name: "authorization_pending", code: CodeAuthorizationPending, wantHTTP: http.StatusBadRequest, wantGRPC: codes.InvalidArgument},
		{name: "slow_down", code: CodeSlowDown, wantHTTP: http.StatusBadRequest, wantGRPC: codes.InvalidArgument},
		{name: "expired_token", code: CodeExpiredToken, wantHTTP: http.StatusBadRequest, wantGRPC: codes.InvalidArgument},
		{name: "access_denied", code: CodeAccessDenied, wantHTTP: http.StatusBadRequest, wantGRPC: codes.InvalidArgument},
	}
	// The table covers the whole code table, so a new code needs a row.
	require.Len(t, tests, len(codeTable))

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, string(tc.code), "the wire string of the code")
			msg := "something about " + tc.name
			err := Errorf(tc.code, "%s", msg)

			st := ToStatus(err)
			require.Equal(t, tc.wantGRPC, st.Code())
			require.Equal(t, string(tc.code), errorInfoReason(st))

			wantMsg := msg
			if tc.code == CodeInternal {
				wantMsg = "internal error"
			}
			r := Render(err)
			require.Equal(t, tc.wantHTTP, r.HTTPStatus)
			require.Equal(t, tc.code, r.Body.Error)
			require.Equal(t, wantMsg, r.Body.Message)
			require.Empty(t, r.Body.Details)
			require.Zero(t, r.RetryAfter)

			// The code survives the trip through gRPC: the gateway renders
			// what its client connection received.
			wire := overTheWire(t, st)
			require.Equal(t, r, Render(wire))
			require.Equal(t, r, Render(fmt.Errorf("gateway: %w", wire)), "a wrapped status renders the same")
			require.Equal(t, tc.wantGRPC, ToStatus(wire).Code(), "a status passes through")
		})
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantCode    Code
		wantHTTP    int
		wantMessage string // checked when set
		wantGRPC    codes.Code
	}{
		{name: "store not found wrapped", err: fmt.Errorf("get member %q: %w", "x", store.ErrNotFound), wantCode: CodeNotFound, wantHTTP: 404, wantMessage: "not found", wantGRPC: codes.NotFound},
		{name: "store conflict wrapped", err: fmt.Errorf("create token: %w", store.ErrConflict), wantCode: CodeConflict, wantHTTP: 409, wantGRPC: codes.AlreadyExists},
		{name: "store precondition wrapped", err: fmt.Errorf("create token: %w", store.ErrPrecondition), wantCode: CodeConflict, wantHTTP: 409},
		{name: "store sentinel twice wrapped", err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", store.ErrNotFound)), wantCode: CodeNotFound, wantHTTP: 404},
		{name: "store error joined", err: errors.Join(errors.New("x"), store.ErrConflict), wantCode: CodeConflict, wantHTTP: 409},
		{name: "unauthenticated wrapped", err: fmt.Errorf("%w: token revoked", auth.ErrUnauthenticated), wantCode: CodeUnauthenticated, wantHTTP: 401, wantMessage: "missing or invalid credentials", wantGRPC: codes.Unauthenticated},
		{name: "unauthenticated bare", err: auth.ErrUnauthenticated, wantCode: CodeUnauthenticated, wantHTTP: 401},
		{name: "forbidden from Authorize", err: auth.Authorize("/svc.v1.Broker/CreateMember", &auth.Principal{Member: "x"}), wantCode: CodeForbidden, wantHTTP: 403, wantMessage: "requires members.manage", wantGRPC: codes.PermissionDenied},
		{name: "forbidden bare", err: auth.ErrForbidden, wantCode: CodeForbidden, wantHTTP: 403, wantMessage: "permission denied"},
		{name: "forbidden wrapped by a caller", err: fmt.Errorf("x: %w", auth.ErrForbidden), wantCode: CodeForbidden, wantHTTP: 403, wantMessage: "permission denied"},
		{name: "forbidden wrapped twice", err: fmt.Errorf("delete member: %w", fmt.Errorf("%w: requires team.manage", auth.ErrForbidden)), wantCode: CodeForbidden, wantHTTP: 403, wantMessage: "permission denied"},
		{name: "context canceled", err: context.Canceled, wantCode: CodeUnavailable, wantHTTP: 503},
		{name: "context canceled wrapped", err: fmt.Errorf("list: %w", context.Canceled), wantCode: CodeUnavailable, wantHTTP: 503},
		{name: "deadline exceeded", err: context.DeadlineExceeded, wantCode: CodeUnavailable, wantHTTP: 503},
		{name: "store full", err: fmt.Errorf("commit: %w (database or disk is full)", store.ErrStorageFull), wantCode: CodeInsufficientStorage, wantHTTP: 507, wantMessage: MsgStorageFull, wantGRPC: codes.ResourceExhausted},
		{name: "store full through a closure", err: fmt.Errorf("append: %w", fmt.Errorf("%w: %w", store.ErrStorageFull, errors.New("driver"))), wantCode: CodeInsufficientStorage, wantHTTP: 507, wantGRPC: codes.ResourceExhausted},
		{name: "no space writing a file", err: fmt.Errorf("write config: %w", &fs.PathError{Op: "write", Path: "/etc/svc.json.tmp", Err: syscall.ENOSPC}), wantCode: CodeInsufficientStorage, wantHTTP: 507, wantMessage: MsgStorageFull},
		{name: "over a disk quota", err: &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}, wantCode: CodeInsufficientStorage, wantHTTP: 507},
		{name: "database unreachable", err: fmt.Errorf("begin: %w: %w", store.ErrUnavailable, errors.New("dial unix /run/postgresql/.s.PGSQL.5432: connect: connection refused")), wantCode: CodeUnavailable, wantHTTP: 503, wantMessage: MsgUnavailable, wantGRPC: codes.Unavailable},
		{name: "store damaged", err: fmt.Errorf("list: %w (database disk image is malformed)", store.ErrDamaged), wantCode: CodeDataLoss, wantHTTP: 500, wantMessage: MsgDamaged, wantGRPC: codes.DataLoss},
		{name: "unknown error is internal", err: errors.New("sqlite: disk I/O error at /var/secret.db"), wantCode: CodeInternal, wantHTTP: 500, wantMessage: "internal error", wantGRPC: codes.Internal},
		{name: "typed internal keeps cause out", err: &Error{Code: CodeInternal, Message: "internal error", Err: errors.New("password=hunter2")}, wantCode: CodeInternal, wantHTTP: 500, wantMessage: "internal error"},
		{name: "domain error with cause", err: &Error{Code: CodeNotFound, Message: "no such member", Err: errors.New("row 42 of /var/secret.db")}, wantCode: CodeNotFound, wantHTTP: 404, wantMessage: "no such member"},
		{name: "domain error wrapped", err: fmt.Errorf("handler: %w", Errorf(CodeGone, "channel archived")), wantCode: CodeGone, wantHTTP: 410, wantMessage: "channel archived"},
		{name: "domain error wrapping a store sentinel keeps its own code", err: &Error{Code: CodeBadRequest, Message: "last admin", Err: store.ErrConflict}, wantCode: CodeBadRequest, wantHTTP: 400, wantMessage: "last admin"},
		{name: "domain error wrapping a grpc status keeps its own code", err: &Error{Code: CodeBadGateway, Message: "upstream unreachable", Err: status.Error(codes.Unavailable, "dial 10.0.0.7: secret")}, wantCode: CodeBadGateway, wantHTTP: 502, wantMessage: "upstream unreachable", wantGRPC: codes.Unavailable},
		{name: "unknown code is internal", err: &Error{Code: "teapot", Message: "short and stout"}, wantCode: CodeInternal, wantHTTP: 500, wantMessage: "internal error"},
		{name: "grpc invalid argument", err: status.Error(codes.InvalidArgument, "bad field x"), wantCode: CodeBadRequest, wantHTTP: 400, wantMessage: "bad field x", wantGRPC: codes.InvalidArgument},
		{name: "grpc not found", err: status.Error(codes.NotFound, "nope"), wantCode: CodeNotFound, wantHTTP: 404},
		{name: "grpc unimplemented", err: status.Error(codes.Unimplemented, "unknown method"), wantCode: CodeNotFound, wantHTTP: 404},
		{name: "grpc unauthenticated", err: status.Error(codes.Unauthenticated, "who"), wantCode: CodeUnauthenticated, wantHTTP: 401},
		{name: "grpc permission denied", err: status.Error(codes.PermissionDenied, "no"), wantCode: CodeForbidden, wantHTTP: 403},
		{name: "grpc resource exhausted", err: status.Error(codes.ResourceExhausted, "message larger than max"), wantCode: CodePayloadTooLarge, wantHTTP: 413},
		{name: "grpc unavailable", err: status.Error(codes.Unavailable, "connection refused"), wantCode: CodeUnavailable, wantHTTP: 503},
		{name: "grpc unknown is internal", err: status.Error(codes.Unknown, "panic: secret"), wantCode: CodeInternal, wantHTTP: 500, wantMessage: "internal error"},
		{name: "grpc internal hides message", err: status.Error(codes.Internal, "stack trace"), wantCode: CodeInternal, wantHTTP: 500, wantMessage: "internal error"},
		{name: "grpc data loss is internal", err: status.Error(codes.DataLoss, "x"), wantCode: CodeInternal, wantHTTP: 500, wantMessage: "internal error"},
		{name: "grpc empty message gets the code", err: status.Error(codes.NotFound, ""), wantCode: CodeNotFound, wantHTTP: 404, wantMessage: "not_found"},
		{name: "foreign ErrorInfo domain ignored", err: mustWithDetails(t, status.New(codes.NotFound, "x"), &errdetails.ErrorInfo{Reason: "gone", Domain: "other"}), wantCode: CodeNotFound, wantHTTP: 404},
		{name: "unknown svc reason ignored", err: mustWithDetails(t, status.New(codes.NotFound, "x"), &errdetails.ErrorInfo{Reason: "teapot", Domain: errorDomain}), wantCode: CodeNotFound, wantHTTP: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Render(tc.err)
			require.Equal(t, tc.wantCode, r.Body.Error)
			require.Equal(t, tc.wantHTTP, r.HTTPStatus)
			if tc.wantMessage != "" {
				require.Equal(t, tc.wantMessage, r.Body.Message)
			}
			require.NotEmpty(t, r.Body.Message)

			st := ToStatus(tc.err)
			if tc.wantGRPC != codes.OK {
				require.Equal(t, tc.wantGRPC, st.Code())
			}
			// Whatever ToStatus sends, the gateway renders the same.
			require.Equal(t, r, Render(overTheWire(t, st)))
		})
	}
}

func mustWithDetails(t *testing.T, st *status.Status, details ...protoiface.MessageV1) error {
	t.Helper()
	withDetails, err := st.WithDetails(details...)
	require.NoError(t, err)
	return withDetails.Err()
}

func TestInternalCauseNeverLeaks(t *testing.T) {
	secret := "password=hunter2 at /var/lib/svc/secret.db"
	for _, err := range []error{
		errors.New(secret),
		fmt.Errorf("query: %w", errors.New(secret)),
		&Error{Code: CodeInternal, Message: "internal error", Err: errors.New(secret)},
		&Error{Code: CodeNotFound, Message: "no such thing", Err: errors.New(secret)},
		&Error{Code: CodeBadGateway, Message: "upstream failed", Err: status.Error(codes.Internal, secret)},
		fmt.Errorf("%s: %w", secret, store.ErrStorageFull),
		fmt.Errorf("%s: %w", secret, store.ErrDamaged),
		fmt.Errorf("%s: %w", secret, store.ErrUnavailable),
	} {
		st := ToStatus(err)
		require.NotContains(t, st.Message(), "hunter2")
		for _, d := range st.Details() {
			require.NotContains(t, fmt.Sprint(d), "hunter2")
		}
		b, jerr := json.Marshal(Render(err).Body)
		require.NoError(t, jerr)
		require.NotContains(t, string(b), "hunter2")
	}
}

func TestRenderRetryAfterAndDetails(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantRetry   time.Duration
		wantDetails []FieldViolation
		wantJSON    string
	}{
		{
			name:      "rate limited with retry",
			err:       &Error{Code: CodeRateLimited, Message: "too many failed logins; retry later", RetryAfter: 90 * time.Second},
			wantRetry: 90 * time.Second,
			wantJSON:  `{"error":"rate_limited","message":"too many failed logins; retry later"}`,
		},
		{
			name:      "sub-second retry survives",
			err:       fmt.Errorf("login: %w", &Error{Code: CodeRateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond}),
			wantRetry: 1500 * time.Millisecond,
			wantJSON:  `{"error":"rate_limited","message":"slow down"}`,
		},
		{
			name:        "field violation",
			err:         Invalid("name", "must match %s", "[a-z]+"),
			wantDetails: []FieldViolation{{Field: "name", Description: "must match [a-z]+"}},
			wantJSON:    `{"error":"bad_request","message":"name: must match [a-z]+","details":[{"field":"name","description":"must match [a-z]+"}]}`,
		},
		{
			name:        "several field violations in order",
			err:         &Error{Code: CodeBadRequest, Message: "invalid", Details: []FieldViolation{{Field: "a", Description: "x"}, {Field: "b.c", Description: "y"}}},
			wantDetails: []FieldViolation{{Field: "a", Description: "x"}, {Field: "b.c", Description: "y"}},
			wantJSON:    `{"error":"bad_request","message":"invalid","details":[{"field":"a","description":"x"},{"field":"b.c","description":"y"}]}`,
		},
		{
			name:     "no retry, no details",
			err:      Errorf(CodeConflict, "name taken"),
			wantJSON: `{"error":"conflict","message":"name taken"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, overTheWire(t, ToStatus(tc.err))} {
				r := Render(err)
				require.Equal(t, tc.wantRetry, r.RetryAfter)
				require.Equal(t, tc.wantDetails, r.Body.Details)
				b, jerr := json.Marshal(r.Body)
				require.NoError(t, jerr)
				require.JSONEq(t, tc.wantJSON, string(b))
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{name: "zero is at least one", d: 0, want: "1"},
		{name: "negative is at least one", d: -time.Minute, want: "1"},
		{name: "a nanosecond rounds up", d: time.Nanosecond, want: "1"},
		{name: "half a second rounds up", d: 500 * time.Millisecond, want: "1"},
		{name: "exactly one second", d: time.Second, want: "1"},
		{name: "just over one second", d: time.Second + time.Nanosecond, want: "2"},
		{name: "ninety seconds", d: 90 * time.Second, want: "90"},
		{name: "full TOTP window", d: auth.TOTPWindow, want: "900"},
		{name: "just under the window", d: auth.TOTPWindow - time.Millisecond, want: "900"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, RetryAfterSeconds(tc.d))
		})
	}
}

func TestIsInternal(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "plain error", err: errors.New("x"), want: true},
		{name: "typed internal", err: Errorf(CodeInternal, "x"), want: true},
		{name: "grpc internal", err: status.Error(codes.Internal, "x"), want: true},
		{name: "grpc unknown", err: status.Error(codes.Unknown, "x"), want: true},
		{name: "storage full: the operator must act", err: store.ErrStorageFull, want: true},
		{name: "damage: the operator must act", err: store.ErrDamaged, want: true},
		{name: "unreachable database: the operator must act", err: fmt.Errorf("commit: %w", store.ErrUnavailable), want: true},
		{name: "grpc data loss", err: status.Error(codes.DataLoss, "x"), want: true},
		{name: "payload too large", err: Errorf(CodePayloadTooLarge, "x"), want: false},
		{name: "not found", err: store.ErrNotFound, want: false},
		{name: "forbidden", err: auth.ErrForbidden, want: false},
		{name: "bad request", err: Invalid("f", "x"), want: false},
		{name: "grpc invalid argument", err: status.Error(codes.InvalidArgument, "x"), want: false},
		{name: "typed bad gateway wrapping internal status", err: &Error{Code: CodeBadGateway, Message: "x", Err: status.Error(codes.Internal, "y")}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, IsInternal(tc.err))
		})
	}
}

func TestToStatusNil(t *testing.T) {
	require.Nil(t, ToStatus(nil))
}

func TestErrorString(t *testing.T) {
	require.Equal(t, "not_found: no such member", Errorf(CodeNotFound, "no such %s", "member").Error())
	cause := errors.New("row missing")
	e := &Error{Code: CodeNotFound, Message: "no such member", Err: cause}
	require.Equal(t, "not_found: no such member: row missing", e.Error())
	require.ErrorIs(t, e, cause)
}

// An access_denied carries the approver's reason as errorDescription, over
// gRPC in the ErrorInfo metadata and in the REST body; other errors carry
// none.
func TestRenderErrorDescription(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"with description", &Error{Code: CodeAccessDenied, Message: "denied", Description: "not our laptop"}, "not our laptop"},
		{"without", Errorf(CodeExpiredToken, "expired"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Render(tc.err)
			require.Equal(t, http.StatusBadRequest, r.HTTPStatus)
			require.Equal(t, tc.want, r.Body.ErrorDescription)
			b, err := json.Marshal(r.Body)
			require.NoError(t, err)
			require.Equal(t, tc.want != "", strings.Contains(string(b), `"errorDescription"`), "%s", b)
		})
	}
}

func TestValidText(t *testing.T) {
	for _, tc := range []struct {
		name, s  string
		required bool
		wantErr  string
	}{
		{"plain", "hello", true, ""},
		{"blank required", "  ", true, "is required"},
		{"blank optional", "", false, ""},
		{"too long", "abcdef", false, "at most 5 bytes"},
		{"not UTF-8", "a\xffb", false, "must be UTF-8"},
		{"NUL", "a\x00b", false, "must not contain NUL"},
		{"other control characters stay", "a\tb\x01c", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidText("body", tc.s, 5, tc.required)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
