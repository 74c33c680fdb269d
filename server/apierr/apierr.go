// Package apierr is the one error table of svc: the wire codes, the domain
// error that carries one, its mapping to gRPC statuses and REST bodies,
// and the checks of request text every service makes. The services, the
// capability packages and the gateway share it without importing the
// server root.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/runtime/protoiface"
	"google.golang.org/protobuf/types/known/durationpb"

	"svc/server/auth"
	"svc/store"
)

// Code is a stable error code of the wire (docs/API.md, Conventions).
type Code string

// Error codes.
const (
	CodeBadRequest          Code = "bad_request"
	CodeUnsupportedProtocol Code = "unsupported_protocol"
	CodeUnauthenticated     Code = "unauthenticated"
	CodeForbidden           Code = "forbidden"
	CodeNotFound            Code = "not_found"
	CodeConflict            Code = "conflict"
	CodeGone                Code = "gone"
	CodePayloadTooLarge     Code = "payload_too_large"
	CodeRateLimited         Code = "rate_limited"
	CodeInternal            Code = "internal"
	CodeBadGateway          Code = "bad_gateway"
	CodeUnavailable         Code = "unavailable"
	// CodeInsufficientStorage: the broker's disk has no room for the
	// write; nothing was stored (docs/DECISIONS.md: Storage).
	CodeInsufficientStorage Code = "insufficient_storage"
	// CodeDataLoss: what the request needs is damaged or missing on the
	// broker's disk; retrying does not help.
	CodeDataLoss Code = "data_loss"
	// Device polling codes (RFC 8628 §3.5), all 400.
	CodeAuthorizationPending Code = "authorization_pending"
	CodeSlowDown             Code = "slow_down"
	CodeExpiredToken         Code = "expired_token"
	CodeAccessDenied         Code = "access_denied"
)

// errorDomain marks ErrorInfo details written by svc.
const errorDomain = "svc"

// descriptionKey is the ErrorInfo metadata key carrying an Error's
// Description over gRPC.
const descriptionKey = "errorDescription"

// codeTable is the only mapping from wire codes to gRPC codes and HTTP
// statuses; gRPC, the gateway and hand-written handlers all go through it.
var codeTable = map[Code]struct {
	grpc codes.Code
	http int
}{
	CodeBadRequest:          {codes.InvalidArgument, http.StatusBadRequest},
	CodeUnsupportedProtocol: {codes.InvalidArgument, http.StatusBadRequest},
	CodeUnauthenticated:     {codes.Unauthenticated, http.StatusUnauthorized},
	CodeForbidden:           {codes.PermissionDenied, http.StatusForbidden},
	CodeNotFound:            {codes.NotFound, http.StatusNotFound},
	CodeConflict:            {codes.AlreadyExists, http.StatusConflict},
	CodeGone:                {codes.FailedPrecondition, http.StatusGone},
	CodePayloadTooLarge:     {codes.ResourceExhausted, http.StatusRequestEntityTooLarge},
	CodeRateLimited:         {codes.ResourceExhausted, http.StatusTooManyRequests},
	CodeInternal:            {codes.Internal, http.StatusInternalServerError},
	CodeBadGateway:          {codes.Unavailable, http.StatusBadGateway},
	CodeUnavailable:         {codes.Unavailable, http.StatusServiceUnavailable},
	// gRPC documents ResourceExhausted for "the entire file system is out
	// of space"; the ErrorInfo reason tells it from 413 and 429.
	CodeInsufficientStorage:  {codes.ResourceExhausted, http.StatusInsufficientStorage},
	CodeDataLoss:             {codes.DataLoss, http.StatusInternalServerError},
	CodeAuthorizationPending: {codes.InvalidArgument, http.StatusBadRequest},
	CodeSlowDown:             {codes.InvalidArgument, http.StatusBadRequest},
	CodeExpiredToken:         {codes.InvalidArgument, http.StatusBadRequest},
	CodeAccessDenied:         {codes.InvalidArgument, http.StatusBadRequest},
}

// grpcFallback names the wire code of a status that carries no svc
// ErrorInfo: errors raised by grpc itself or by the gateway's decoding.
var grpcFallback = map[codes.Code]Code{
	codes.InvalidArgument:    CodeBadRequest,
	codes.OutOfRange:         CodeBadRequest,
	codes.Unauthenticated:    CodeUnauthenticated,
	codes.PermissionDenied:   CodeForbidden,
	codes.NotFound:           CodeNotFound,
	codes.Unimplemented:      CodeNotFound,
	codes.AlreadyExists:      CodeConflict,
	codes.Aborted:            CodeConflict,
	codes.FailedPrecondition: CodeConflict,
	codes.ResourceExhausted:  CodePayloadTooLarge,
	codes.Unavailable:        CodeUnavailable,
	codes.DeadlineExceeded:   CodeUnavailable,
	codes.Canceled:           CodeUnavailable,
}

// FieldViolation is one schema issue of a bad request.
type FieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// Error is a domain error with its wire code.
type Error struct {
	Code       Code
	Message    string
	RetryAfter time.Duration
	Details    []FieldViolation
	// Description is the errorDescription of a device polling error
	// (access_denied carries the approver's reason).
	Description string
	Err         error // cause; logged, never sent
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns a bad_request naming the offending field.
func Invalid(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Code: CodeBadRequest, Message: field + ": " + msg, Details: []FieldViolation{{Field: field, Description: msg}}}
}

// Classify turns any error into an *Error: the domain error it is or
// wraps, or the one its sentinel maps to.
func Classify(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, auth.ErrUnauthenticated):
		return &Error{Code: CodeUnauthenticated, Message: "missing or invalid credentials", Err: err}
	case errors.Is(err, auth.ErrForbidden):
		return &Error{Code: CodeForbidden, Message: forbiddenMessage(err), Err: err}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: "not found", Err: err}
	case errors.Is(err, store.ErrConflict):
		return &Error{Code: CodeConflict, Message: "already exists", Err: err}
	case errors.Is(err, store.ErrPrecondition):
		return &Error{Code: CodeConflict, Message: "the change conflicts with stored data", Err: err}
	case errors.Is(err, store.ErrStorageFull), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &Error{Code: CodeInsufficientStorage, Message: MsgStorageFull, Err: err}
	case errors.Is(err, store.ErrDamaged):
		return &Error{Code: CodeDataLoss, Message: MsgDamaged, Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &Error{Code: CodeUnavailable, Message: MsgUnavailable, Err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeUnavailable, Message: "request cancelled or timed out", Err: err}
	default:
		return &Error{Code: CodeInternal, Message: "internal error", Err: err}
	}
}

// MsgStorageFull and MsgDamaged are the messages of the storage errors:
// what happened to the request, and that it is the operator's to fix.
const (
	MsgStorageFull = "the broker's disk is full: nothing was stored; retry once its operator has freed space"
	MsgDamaged     = "stored data needed for this request is damaged on the broker; its operator must restore it (see the broker's log)"
	MsgUnavailable = "the broker cannot reach its database; retry shortly"
)

func forbiddenMessage(err error) string {
	// Only auth's own "forbidden: <reason>" is shown; text a caller wrapped
	// around it is not for the client.
	if msg, ok := strings.CutPrefix(err.Error(), auth.ErrForbidden.Error()+": "); ok && msg != "" {
		return msg
	}
	return "permission denied"
}

// grpcStatus returns the status err is or wraps, unchanged. A domain *Error
// in the chain wins: its cause, even a status from an upstream call, is
// never sent.
func grpcStatus(err error) (*status.Status, bool) {
	var e *Error
	if errors.As(err, &e) {
		return nil, false
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil {
			return st, true
		}
	}
	return nil, false
}

// ToStatus maps an error to the gRPC status sent to clients. A status error
// passes through unchanged. Internal causes never reach the client.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if st, ok := grpcStatus(err); ok {
		return st
	}
	e := Classify(err)
	row, ok := codeTable[e.Code]
	if !ok {
		row = codeTable[CodeInternal]
	}
	st := status.New(row.grpc, e.Message)
	info := &errdetails.ErrorInfo{Reason: string(e.Code), Domain: errorDomain}
	if e.Description != "" {
		info.Metadata = map[string]string{descriptionKey: e.Description}
	}
	details := []protoiface.MessageV1{info}
	if e.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(e.RetryAfter)})
	}
	if len(e.Details) > 0 {
		br := &errdetails.BadRequest{}
		for _, d := range e.Details {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: d.Field, Description: d.Description})
		}
		details = append(details, br)
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st
}

// IsInternal reports whether err maps to an internal error, or to a
// storage failure (a full disk, damage, an unreachable database) an
// operator must act on; such causes are logged at error level.
func IsInternal(err error) bool {
	if st, ok := grpcStatus(err); ok {
		return st.Code() == codes.Internal || st.Code() == codes.Unknown || st.Code() == codes.DataLoss
	}
	if errors.Is(err, store.ErrUnavailable) {
		return true
	}
	switch Classify(err).Code {
	case CodeInternal, CodeInsufficientStorage, CodeDataLoss:
		return true
	}
	return false
}

// Rendered is the REST rendering of an error.
type Rendered struct {
	HTTPStatus int
	Body       RenderedBody
	RetryAfter time.Duration
}

// RenderedBody is the JSON error body {error, message, details?,
// errorDescription?}.
type RenderedBody struct {
	Error   Code             `json:"error"`
	Message string           `json:"message"`
	Details []FieldViolation `json:"details,omitempty"`
	// ErrorDescription is set on device polling errors that carry one
	// (access_denied with the approver's reason).
	ErrorDescription string `json:"errorDescription,omitempty"`
}

// Render maps any error to its REST rendering through ToStatus and the same
// code table.
func Render(err error) Rendered {
	st := ToStatus(err)
	code, ok := grpcFallback[st.Code()]
	if !ok {
		code = CodeInternal
	}
	r := Rendered{Body: RenderedBody{Message: st.Message()}}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == errorDomain {
				if _, known := codeTable[Code(d.GetReason())]; known {
					code = Code(d.GetReason())
				}
				r.Body.ErrorDescription = d.GetMetadata()[descriptionKey]
			}
		case *errdetails.RetryInfo:
			r.RetryAfter = d.GetRetryDelay().AsDuration()
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				r.Body.Details = append(r.Body.Details, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		}
	}
	if code == CodeInternal {
		r.Body.Message = "internal error"
	}
	if r.Body.Message == "" {
		r.Body.Message = string(code)
	}
	r.Body.Error = code
	r.HTTPStatus = codeTable[code].http
	return r
}

// RetryAfterSeconds renders a Retry-After header value, rounding up.
func RetryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
