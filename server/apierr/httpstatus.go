package apierr

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// HTTPCodeMD carries the HTTP status a REST call should answer (201, 204)
// from a service to the gateway; the gateway never forwards it to clients.
const HTTPCodeMD = "x-http-code"

// SetHTTPStatus asks the gateway to answer a REST call with code: services
// outside the server root (capabilities) call it as the root's do.
func SetHTTPStatus(ctx context.Context, code int) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(HTTPCodeMD, strconv.Itoa(code)))
}
