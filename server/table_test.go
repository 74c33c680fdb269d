package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
)

// TestRegisteredMethodsHaveARule complements auth's descriptor walk: it asks
// the real gRPC server what it serves, so a service registered in New but
// forgotten in that walk is still caught.
func TestRegisteredMethodsHaveARule(t *testing.T) {
	s := New(Deps{})
	info := s.GRPC().GetServiceInfo()
	require.NotEmpty(t, info)

	var missing []string
	n := 0
	for svc, si := range info {
		for _, m := range si.Methods {
			full := "/" + svc + "/" + m.Name
			n++
			if _, ok := auth.RuleFor(full); !ok {
				missing = append(missing, full)
			}
		}
	}
	require.Positive(t, n)
	require.Empty(t, missing, "served methods without a permission rule")
}
