package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
)

// nested is a JSON value of depth levels: objects and arrays alternating.
func nested(depth int) string {
	v := `1`
	for i := range depth {
		if i%2 == 0 {
			v = `{"a":` + v + `}`
		} else {
			v = `[` + v + `]`
		}
	}
	return v
}

func TestCheckNesting(t *testing.T) {
	tests := []struct {
		name  string
		depth int
		ok    bool
	}{
		{"flat", 1, true},
		{"at the bound", maxNesting, true},
		{"one past", maxNesting + 1, false},
		{"far past", 5000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := &structpb.Struct{}
			// The push's data is itself one level: its value nests depth-1
			// more.
			require.NoError(t, protojson.UnmarshalOptions{RecursionLimit: 1 << 20}.Unmarshal([]byte(`{"v":`+nested(tc.depth-1)+`}`), data))
			err := checkNesting(&apiv1.PushRequest{Body: "x", Data: data})
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errTooDeep)
			}
		})
	}
	require.NoError(t, checkNesting(&apiv1.PushRequest{Body: strings.Repeat("x", 10)}))
	require.NoError(t, checkNesting(nil))
}
