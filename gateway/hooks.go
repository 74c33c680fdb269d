package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/notify"
)

// handleHook serves POST /hooks/{slug}, the unauthenticated ingress of
// inbound notifications: it reads at most notify.MaxBody+1 raw bytes
// (one more tells an oversized body; the rest is never read) and hands
// them to the notify capability, which runs the checks in the order
// docs/HOOKS.md gives. A failed verification is a bare 401 with an empty
// body; an accepted delivery is 202 {id, status}.
func (g *Gateway) handleHook(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, notify.MaxBody+1))
	if err != nil {
		return apierr.Errorf(apierr.CodeBadRequest, "request body could not be read")
	}
	res, err := g.srv.Notify().Ingress(r.Context(), clientAddr(r), r.PathValue("slug"), r.URL.Query(), r.Header, body)
	if len(body) > notify.MaxBody {
		// After the call: a read deadline now would cancel its context.
		refuseUnread(w)
	}
	if errors.Is(err, notify.ErrRejected) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusUnauthorized)
		return nil
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	return json.NewEncoder(w).Encode(res)
}
