// Package wire holds the small renderings every service shares when it
// turns stored values into the API's messages: times as epoch
// milliseconds, stored JSON as a Struct. It is a shared package
// (docs/ARCHITECTURE.md): the root and the capabilities import it, and it
// imports nothing of ours.
package wire

import (
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// MS renders a time as epoch milliseconds, the API's time.
func MS(t time.Time) float64 { return float64(t.UnixMilli()) }

// OptMS renders a time that may be zero as an absent value.
func OptMS(t time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	v := MS(t)
	return &v
}

// Struct renders stored JSON as a Struct; nil when there is none or it is
// not a JSON object.
func Struct(b []byte) *structpb.Struct {
	if b == nil {
		return nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil
	}
	return s
}
