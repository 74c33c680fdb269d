package wire

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMS(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	require.Equal(t, float64(1_700_000_000_123), MS(at))
	require.Nil(t, OptMS(time.Time{}))
	require.Equal(t, float64(1_700_000_000_123), *OptMS(at))
}

func TestStruct(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want map[string]any // nil: no Struct
	}{
		{"none", nil, nil},
		{"object", []byte(`{"a":1,"b":"x"}`), map[string]any{"a": float64(1), "b": "x"}},
		{"empty object", []byte(`{}`), map[string]any{}},
		{"array", []byte(`[1]`), nil},
		{"broken", []byte(`{"a":`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Struct(tc.in)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, tc.want, got.AsMap())
		})
	}
}
