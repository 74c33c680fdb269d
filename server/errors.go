package server

import "svc/server/apierr"

// The error table, the domain error and the text checks live in package
// apierr, which capability packages and the gateway import without the
// root. These are the root's own names for them, so the services of the
// core read as they always did; code outside the root says apierr.

type (
	// Code is a stable error code of the wire.
	Code = apierr.Code
	// Error is a domain error with its wire code.
	Error = apierr.Error
	// FieldViolation is one schema issue of a bad request.
	FieldViolation = apierr.FieldViolation
	// Rendered is the REST rendering of an error.
	Rendered = apierr.Rendered
)

// Error codes.
const (
	CodeBadRequest           = apierr.CodeBadRequest
	CodeUnsupportedProtocol  = apierr.CodeUnsupportedProtocol
	CodeUnauthenticated      = apierr.CodeUnauthenticated
	CodeForbidden            = apierr.CodeForbidden
	CodeNotFound             = apierr.CodeNotFound
	CodeConflict             = apierr.CodeConflict
	CodeGone                 = apierr.CodeGone
	CodePayloadTooLarge      = apierr.CodePayloadTooLarge
	CodeRateLimited          = apierr.CodeRateLimited
	CodeInternal             = apierr.CodeInternal
	CodeBadGateway           = apierr.CodeBadGateway
	CodeUnavailable          = apierr.CodeUnavailable
	CodeInsufficientStorage  = apierr.CodeInsufficientStorage
	CodeDataLoss             = apierr.CodeDataLoss
	CodeAuthorizationPending = apierr.CodeAuthorizationPending
	CodeSlowDown             = apierr.CodeSlowDown
	CodeExpiredToken         = apierr.CodeExpiredToken
	CodeAccessDenied         = apierr.CodeAccessDenied
)

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return apierr.Errorf(code, format, args...)
}

// ToStatus maps an error to the gRPC status sent to clients.
var ToStatus = apierr.ToStatus

// Render maps any error to its REST rendering.
var Render = apierr.Render

// IsInternal reports whether err maps to an error an operator must act on.
var IsInternal = apierr.IsInternal

var (
	invalid      = apierr.Invalid
	classify     = apierr.Classify
	validText    = apierr.ValidText
	truncateUTF8 = apierr.TruncateUTF8
	firstErr     = apierr.FirstErr
)
