package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"svc/server"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/vfs"
)

// fsReadPrefix is the route of file bytes: GET /fs/read/<segment>/...
const fsReadPrefix = "/fs/read/"

// readChunk is how much of a file goes out between write deadlines.
const readChunk = 64 << 10

// deadlineWriter arms a write deadline before every write.
type deadlineWriter struct {
	w   io.Writer
	arm func()
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	d.arm()
	return d.w.Write(p)
}

// fsReadRoute names the file-bytes route in routeRules.
const fsReadRoute = "GET " + fsReadPrefix

// inlineTypes are the stored MIME types a browser may show inline: ones
// that cannot run script in the broker's origin. Every other type is sent
// as a download (stored files are untrusted).
var inlineTypes = map[string]bool{
	"application/octet-stream": true,
	"application/json":         true,
	"text/plain":               true,
	"text/csv":                 true,
	"text/markdown":            true,
	"image/png":                true,
	"image/jpeg":               true,
	"image/gif":                true,
	"image/webp":               true,
	"image/avif":               true,
	"image/bmp":                true,
	"audio/mpeg":               true,
	"audio/ogg":                true,
	"audio/wav":                true,
	"video/mp4":                true,
	"video/webm":               true,
	// A PDF is shown by the browser's own viewer, which runs a document's
	// scripts (if at all) in its own process, never in the page's origin.
	"application/pdf": true,
}

// subresourceTypes are the MIME types a browser runs or applies when a
// page loads them as a script, worker, module or stylesheet, even with
// nosniff and an attachment disposition (neither stops <script src>).
// A stored file of one of these types is sent as application/octet-stream,
// which nosniff makes unusable as any of them; its stored type is still in
// its entry (docs/DECISIONS.md, "Stored files never run as the app").
var subresourceTypes = map[string]bool{
	"application/ecmascript":   true,
	"application/javascript":   true,
	"application/x-ecmascript": true,
	"application/x-javascript": true,
	"text/ecmascript":          true,
	"text/javascript":          true,
	"text/javascript1.0":       true,
	"text/javascript1.1":       true,
	"text/javascript1.2":       true,
	"text/javascript1.3":       true,
	"text/javascript1.4":       true,
	"text/javascript1.5":       true,
	"text/jscript":             true,
	"text/livescript":          true,
	"text/x-ecmascript":        true,
	"text/x-javascript":        true,
	"text/css":                 true,
}

// servedType is the Content-Type /fs/read sends for a stored MIME type: the
// stored one, except a script or style type, or one that does not parse
// (a browser's lenient parser might still read a script type into it).
func servedType(stored string) string {
	mt, _, err := mime.ParseMediaType(stored)
	if err != nil || subresourceTypes[mt] {
		return "application/octet-stream"
	}
	return stored
}

// withFsRead routes GET and HEAD /fs/read/<path> to read before the mux:
// the mux would clean "..", "." and "//" out of the URL and redirect, while
// a path that is not canonical must be refused (400), never resolved.
func withFsRead(read, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.EscapedPath(), fsReadPrefix) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			read.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handleFsRead serves GET /fs/read/<path>: each segment is URL-decoded on
// its own, so an encoded "/" never becomes a separator and an encoded ".."
// is refused like a plain one.
func (g *Gateway) handleFsRead(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	vp, err := readPath(strings.TrimPrefix(r.URL.EscapedPath(), fsReadPrefix))
	if err != nil {
		return err
	}
	entry, f, err := g.srv.Fs().Read(r.Context(), p, vp.String())
	if err != nil {
		return err
	}
	defer f.Close()

	h := w.Header()
	h.Set("Content-Type", servedType(entry.MimeType))
	h.Set("Content-Length", strconv.FormatInt(entry.Size, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	// Defence in depth for whatever a browser does render: no script, no
	// subresources, an opaque origin. Not sandbox for a PDF: Chromium
	// refuses to start its PDF viewer in a sandboxed document, and the
	// viewer already keeps the file's scripts away from the origin
	// (docs/DECISIONS.md, "PDFs open in the browser's viewer").
	csp := "default-src 'none'; sandbox"
	if mt, _, err := mime.ParseMediaType(entry.MimeType); err == nil && mt == "application/pdf" {
		csp = "default-src 'none'"
	}
	h.Set("Content-Security-Policy", csp)
	h.Set("Cache-Control", "private, no-cache")
	if mt, _, err := mime.ParseMediaType(entry.MimeType); err != nil || !inlineTypes[mt] {
		disp := mime.FormatMediaType("attachment", map[string]string{"filename": entry.Name()})
		if disp == "" {
			disp = "attachment"
		}
		h.Set("Content-Disposition", disp)
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	// Each chunk must reach the client within writeTimeout: a reader that
	// stops reading does not hold the handler and its connection.
	rc := http.NewResponseController(w)
	dw := deadlineWriter{w: w, arm: func() { _ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) }}
	if _, err := io.CopyBuffer(dw, io.LimitReader(f, entry.Size), make([]byte, readChunk)); err != nil {
		var damaged *vfs.DamageError
		if errors.As(err, &damaged) {
			// The content does not hash to its name (the server logged and
			// counted it). The last bytes were withheld; aborting also
			// resets the connection (HTTP/1.1) or the stream (HTTP/2), so
			// no client can take the body for complete.
			panic(http.ErrAbortHandler)
		}
		// Headers are gone; the short body tells the client.
		g.log.DebugContext(r.Context(), "file read cut short", "path", entry.Path, "err", err)
	}
	return nil
}

// readPath turns the escaped path after /fs/read/ into a virtual path,
// decoding each segment once and on its own: an encoded "/" stays inside
// its segment (and is refused), an encoded ".." is refused like a plain one.
func readPath(escaped string) (vfs.Path, error) {
	if escaped == "" {
		return vfs.Path{}, apierr.Errorf(apierr.CodeBadRequest, "path: is required: GET /fs/read/<member>/<name>")
	}
	if len(escaped) > 3*vfs.MaxPathLen {
		return vfs.Path{}, apierr.Errorf(apierr.CodeBadRequest, "path: longer than %d bytes", vfs.MaxPathLen)
	}
	parts := strings.Split(escaped, "/")
	segs := make([]string, len(parts))
	for i, s := range parts {
		seg, err := url.PathUnescape(s)
		if err != nil {
			return vfs.Path{}, apierr.Errorf(apierr.CodeBadRequest, "path: bad escape in segment %d", i+1)
		}
		if i == len(parts)-1 && seg == "" {
			// A trailing slash names a directory, which is not readable.
			return vfs.Path{}, apierr.Errorf(apierr.CodeBadRequest, "path: names a directory")
		}
		segs[i] = seg
	}
	vp, err := vfs.FromSegments(segs...)
	if err != nil {
		reason := "invalid path"
		var pe *vfs.PathError
		if errors.As(err, &pe) {
			reason += ": " + pe.Reason
		}
		return vfs.Path{}, apierr.Errorf(apierr.CodeBadRequest, "path: %s", reason)
	}
	return vp, nil
}

// handleFsWrite serves POST /fs/write?path=<p>&collide=<error|overwrite|suffix>:
// the body is the bytes, Content-Type the MIME type. A body of at most
// 64 KiB is kept in the database with its entry, a larger one is streamed
// to the blob store (server.Fs.Write); more than files.maxFileSize bytes
// is 413, refused up front when Content-Length declares it.
func (g *Gateway) handleFsWrite(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	q := r.URL.Query()
	for _, k := range []string{"path", "collide"} {
		if len(q[k]) > 1 {
			return apierr.Errorf(apierr.CodeBadRequest, "%s: given more than once", k)
		}
	}
	if ct := r.Header.Values("Content-Type"); len(ct) > 1 {
		return apierr.Errorf(apierr.CodeBadRequest, "Content-Type: given more than once")
	}
	entry, renamed, err := g.srv.Fs().Write(r.Context(), p, server.FileWrite{
		Path: q.Get("path"), Collide: q.Get("collide"), MimeType: r.Header.Get("Content-Type"),
		Size: r.ContentLength, Body: r.Body,
	})
	if err != nil {
		return err
	}
	e, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(server.FsEntryToProto(entry))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(struct {
		Entry   json.RawMessage `json:"entry"`
		Renamed bool            `json:"renamed"`
	}{e, renamed})
}
