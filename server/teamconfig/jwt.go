package teamconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"svc/server/federation"
)

// JWTOverlaySuffix names the overlay file beside the config: svc.json's is
// svc.json.jwt.json.
const JWTOverlaySuffix = ".jwt.json"

// maxOverlayBytes bounds the overlay file: three URLs and names.
const maxOverlayBytes = 64 << 10

// Validate checks that issuer, audience and jwksUrl are set and jwksUrl is
// an http or https URL.
func (j *JWT) Validate() error { return j.Federation().Validate() }

// Federation returns the block as the verifier's config.
func (j *JWT) Federation() federation.Config { return federation.Config(*j) }

// JWTOverlay is the overlay file platform connect writes: its jwt block
// wins over the team config's.
type JWTOverlay struct {
	JWT *JWT `json:"jwt"`
}

// LoadJWTOverlay reads the overlay file at path: nil when it does not
// exist, an error naming the problem when it is not a valid overlay.
func LoadJWTOverlay(path string) (*JWT, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxOverlayBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxOverlayBytes {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxOverlayBytes)
	}
	j, err := ParseJWTOverlay(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j, nil
}

// ParseJWTOverlay decodes and validates an overlay file's bytes.
func ParseJWTOverlay(data []byte) (*JWT, error) {
	var o JWTOverlay
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	if dec.More() {
		return nil, errors.New("overlay: trailing data")
	}
	if o.JWT == nil {
		return nil, errors.New("overlay: no jwt block")
	}
	if err := o.JWT.Validate(); err != nil {
		return nil, entryErr("jwt", "%w", err)
	}
	return o.JWT, nil
}

// SaveJWTOverlay writes the overlay file atomically, mode 0600 in a 0700
// directory, as Save writes the config.
func SaveJWTOverlay(path string, j *JWT) error {
	if err := j.Validate(); err != nil {
		return entryErr("jwt", "%w", err)
	}
	data, err := json.MarshalIndent(JWTOverlay{JWT: j}, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(data, '\n'))
}
