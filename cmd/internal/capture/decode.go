package capture

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// errTooLarge: a body, or what it decompresses to, is over the cap.
var errTooLarge = errors.New("over the capture cap")

// decodeBody undoes the Content-Encoding of a captured body (a list is
// undone last coding first): identity, gzip, deflate (zlib) and zstd. The
// result is capped at limit bytes, so a small compressed body cannot expand
// without bound. What the proxy forwards is never decoded.
func decodeBody(encoding string, b []byte, limit int64) ([]byte, error) {
	codings := strings.Split(encoding, ",")
	for i := len(codings) - 1; i >= 0; i-- {
		c := strings.ToLower(strings.TrimSpace(codings[i]))
		var r io.Reader
		switch c {
		case "", "identity":
			continue
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("gzip: %w", err)
			}
			defer zr.Close()
			r = zr
		case "deflate":
			zr, err := zlib.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("deflate: %w", err)
			}
			defer zr.Close()
			r = zr
		case "zstd":
			// The window is bounded too: a frame may not ask for more
			// memory than the cap it could fill.
			zr, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxMemory(uint64(limit)+1), zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))))
			if err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
			defer zr.Close()
			r = zr
		default:
			return nil, fmt.Errorf("content-encoding %q is not decoded", c)
		}
		out, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		if int64(len(out)) > limit {
			return nil, errTooLarge
		}
		b = out
	}
	return b, nil
}
