package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	apiv1 "svc/gen/svc/v1"
)

// Whoami runs `svc whoami`: GetBriefing over gRPC, printing the member, its
// role and its permissions, one per line.
func Whoami(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("whoami", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("whoami takes no arguments (got %q)", pos[0])
	}
	cl, err := dial(ctx, c, env)
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	b, err := cl.Broker().GetBriefing(cctx, &apiv1.GetBriefingRequest{})
	if err != nil {
		return fail(cl, err)
	}
	m := b.GetMember()
	role := m.GetRole().GetTitle()
	if role == "" {
		role = "-"
	}
	perms := "-"
	if len(m.GetPermissions()) > 0 {
		perms = strings.Join(m.GetPermissions(), ", ")
	}
	fmt.Fprintf(env.Stdout, "member: %s\nrole: %s\npermissions: %s\nbroker: %s\n", m.GetName(), role, perms, cl.URL())
	return nil
}
