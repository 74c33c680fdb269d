package gateway

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"svc/server/apierr"
)

// writeError renders any error as {error, message, details?} through the
// server's single code table. Gateway errors, routing errors and hand-written
// handlers all end here.
func writeError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) {
	rend := apierr.Render(err)
	if rend.HTTPStatus >= 500 {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if rend.RetryAfter > 0 {
		h.Set("Retry-After", apierr.RetryAfterSeconds(rend.RetryAfter))
	}
	w.WriteHeader(rend.HTTPStatus)
	_ = json.NewEncoder(w).Encode(rend.Body)
}

// errNotFound is the answer for an unknown route.
var errNotFound = apierr.Errorf(apierr.CodeNotFound, "no such route")

// handlerFunc is a hand-written handler that returns its error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handlerFunc, writing its error with writeError.
func (g *Gateway) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				err = apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", mbe.Limit)
			}
			writeError(w, g.log, r, err)
		}
	})
}
