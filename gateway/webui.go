package gateway

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/pquerna/otp"

	"svc/server/apierr"
	"svc/server/auth"
)

// The web app (docs/WEBAPP.md): plain ES modules, HTML and CSS embedded in
// the binary and served under /ui/. There is no build step: what is in
// ui/static is what the browser gets.
//
//go:embed ui/static
var uiFiles embed.FS

// uiCSP is the Content-Security-Policy of every /ui/ response, for the
// host the browser reached. Nothing inline runs or styles (the app sets no
// style attribute), nothing loads from another origin; img-src allows blob:
// for the TOTP QR image, which the app fetches with its credential and shows
// from a blob URL. Scripts and workers come only from the app's own static
// path, never from elsewhere on the origin: /fs/read serves bytes members
// uploaded, and a <script src=/fs/read/...> must not run (docs/DECISIONS.md,
// "Stored files never run as the app").
func uiCSP(host string) string {
	scripts := "'none'"
	if cspHost.MatchString(host) {
		scripts = host + uiStaticPath
	}
	return "default-src 'self'; script-src " + scripts + "; style-src 'self'; img-src 'self' blob:; " +
		"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
		"frame-ancestors 'none'; form-action 'self'; worker-src " + scripts + "; manifest-src 'self'"
}

// uiStaticPath is where the app's scripts live; a CSP source ending in "/"
// matches every path below it.
const uiStaticPath = "/ui/static/"

// cspHost is a Host header that can stand in a CSP source expression as it
// is: a DNS name, IPv4 or bracketed IPv6 address and an optional port. A
// host with no port there matches only the scheme's default port, which is
// exactly when a browser leaves the port out of Host. Anything else (no
// browser sends it) gets no scripts rather than a header it could bend.
var cspHost = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$`)

// uiAsset is one embedded file, ready to serve.
type uiAsset struct {
	body  []byte
	gz    []byte // gzip of body; nil when it does not pay
	ctype string
	etag  string
}

// uiAssets are the files under ui/static by their path below it
// ("js/app.js"), and index.html, the shell every app route serves.
type uiAssets struct {
	files map[string]*uiAsset
	index *uiAsset
}

// loadUIAssets reads and compresses the embedded files once.
func loadUIAssets() (*uiAssets, error) {
	a := &uiAssets{files: map[string]*uiAsset{}}
	err := fs.WalkDir(uiFiles, "ui/static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFiles.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // not left to the host's mime tables
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".svg":
			ctype = "image/svg+xml"
		case ".txt": // a vendored library's licence and version
			ctype = "text/plain; charset=utf-8"
		case ".json", ".webmanifest":
			ctype = "application/json"
		}
		if ctype == "" {
			return fmt.Errorf("gateway: ui asset %s has no known content type", p)
		}
		sum := sha256.Sum256(b)
		as := &uiAsset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		if zb.Len() < len(b) {
			as.gz = zb.Bytes()
		}
		a.files[strings.TrimPrefix(p, "ui/static/")] = as
		return nil
	})
	if err != nil {
		return nil, err
	}
	if a.index = a.files["index.html"]; a.index == nil {
		return nil, fmt.Errorf("gateway: ui/static/index.html is missing")
	}
	return a, nil
}

// setUIHeaders sets the security headers of every /ui/ response, errors
// included.
func setUIHeaders(h http.Header, host string) {
	h.Set("Content-Security-Policy", uiCSP(host))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// handleUI serves GET /ui/...: files under /ui/static/ as they are
// (unknown ones 404), and index.html for every other path, the app's own
// routes (history routing: /ui/chat, /ui/enroll?code=...). A path whose
// last segment has an extension is taken for a file and never gets the
// shell, so a mistyped asset is a 404 and not HTML.
func (g *Gateway) handleUI(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
	setUIHeaders(w.Header(), r.Host)
	rest := strings.TrimPrefix(r.URL.Path, "/ui/")
	var a *uiAsset
	switch {
	case strings.HasPrefix(rest, "static/"):
		a = g.ui.files[strings.TrimPrefix(rest, "static/")]
	case rest == "index.html" || !strings.Contains(path.Base("/"+rest), "."):
		a = g.ui.index
	}
	if a == nil || strings.Contains(rest, "..") {
		return apierr.Errorf(apierr.CodeNotFound, "no such file")
	}
	if rest == "static/sw.js" {
		// The service worker lives with the other files but controls the
		// whole app (its notifications open /ui/ pages).
		w.Header().Set("Service-Worker-Allowed", "/ui/")
	}
	serveUIAsset(w, r, a)
	return nil
}

// serveUIAsset writes a, revalidated by its ETag and gzipped when the
// client takes it. Every response is revalidated (no-cache): the files keep
// their names across versions, and a 304 costs a round trip, not a body.
func serveUIAsset(w http.ResponseWriter, r *http.Request, a *uiAsset) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	if etagMatch(r.Header.Get("If-None-Match"), a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = a.gz
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// etagMatch reports whether an If-None-Match header names etag (weak or
// strong, or "*").
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip (and
// does not refuse it with q=0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// handleRoot serves GET /: a browser (Accept: text/html) is sent to the
// app; anything else gets the JSON 404 of every unknown route.
func (g *Gateway) handleRoot(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
	if !acceptsHTML(r.Header.Values("Accept")) {
		return errNotFound
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	return nil
}

// acceptsHTML reports whether an Accept header names text/html.
func acceptsHTML(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), "text/html") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// Bounds of POST /ui/qr.
const (
	qrMaxBody = 1 << 10
	qrMaxURI  = 512
	qrPixels  = 256
)

// handleQR serves POST /ui/qr {uri}: the PNG QR code of an otpauth:// TOTP
// URI, for the enrollment page (no QR encoder runs in the browser, and no
// third-party script is loaded). It is no general QR service: the caller
// must be authenticated, the URI must be a TOTP key URI of at most 512
// bytes, and its account must be the caller's own name, the only
// enrollment the caller can hold the URI of. The image carries the secret:
// it is never cached.
func (g *Gateway) handleQR(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, qrMaxBody))
	if err != nil {
		return err
	}
	var req struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return apierr.Errorf(apierr.CodeBadRequest, "body: must be JSON {uri}")
	}
	if req.URI == "" || len(req.URI) > qrMaxURI {
		return apierr.Errorf(apierr.CodeBadRequest, "uri: must be 1 to %d bytes", qrMaxURI)
	}
	u, err := url.Parse(req.URI)
	if err != nil || u.Scheme != "otpauth" || u.Host != "totp" || u.Query().Get("secret") == "" {
		return apierr.Errorf(apierr.CodeBadRequest, "uri: must be an otpauth://totp/ key URI")
	}
	key, err := otp.NewKeyFromURL(req.URI)
	if err != nil {
		return apierr.Errorf(apierr.CodeBadRequest, "uri: must be an otpauth://totp/ key URI")
	}
	if key.AccountName() != p.Member {
		return apierr.Errorf(apierr.CodeForbidden, "uri: only your own enrollment (%s) can be drawn", p.Member)
	}
	img, err := key.Image(qrPixels, qrPixels)
	if err != nil {
		return apierr.Errorf(apierr.CodeBadRequest, "uri: cannot be drawn as a QR code")
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return err
	}
	h := w.Header()
	setUIHeaders(h, r.Host)
	h.Set("Content-Type", "image/png")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", fmt.Sprint(out.Len()))
	_, err = w.Write(out.Bytes())
	return err
}
