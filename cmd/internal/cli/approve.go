package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	"svc/cmd/internal/client"
	apiv1 "svc/gen/svc/v1"
)

// maxApprovalID bounds an approval id given on the command line (a UUID is
// 36 bytes).
const maxApprovalID = 128

// Approve runs `svc approve <id>`: the agent that asked may use the tool.
func Approve(ctx context.Context, args []string, env Env) error {
	return decide(ctx, "approve", args, env)
}

// Deny runs `svc deny <id> [reason...]`: the agent gets the refusal with
// the reason (the words after the id, joined).
func Deny(ctx context.Context, args []string, env Env) error {
	return decide(ctx, "deny", args, env)
}

func decide(ctx context.Context, name string, args []string, env Env) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	c.register(fs, true)
	reasonFlag := ""
	fs.StringVar(&reasonFlag, "reason", "", "why; shown to the agent")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	usage := "usage: svc approve <approval id> [--reason R]"
	if name == "deny" {
		usage = "usage: svc deny <approval id> [reason...]"
	}
	if len(pos) == 0 || (name == "approve" && len(pos) > 1) {
		return usagef("%s", usage)
	}
	id := pos[0]
	if id == "" || len(id) > maxApprovalID || strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' }) {
		return usagef("%s: %q is not an approval id", name, id)
	}
	reason := strings.Join(pos[1:], " ")
	if reasonFlag != "" {
		reason = strings.TrimSpace(reasonFlag + " " + reason)
	}
	cl, err := dial(ctx, c, env)
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	decision := "allow"
	if name == "deny" {
		decision = "deny"
	}
	req := &apiv1.DecideApprovalRequest{Id: id, Decision: decision}
	if reason != "" {
		req.Reason = &reason
	}
	res, err := apiv1.NewApprovalsClient(cl.Conn()).DecideApproval(cctx, req)
	switch client.Code(err) {
	case "":
	case "not_found":
		return fmt.Errorf("no approval %s", id)
	case "forbidden":
		return fmt.Errorf("you may not decide approval %s (members.manage holders, the objective's originator and the agent's named approvers decide)", id)
	default:
		return fail(cl, err)
	}
	a := res.GetApproval()
	verb := "allowed"
	if a.GetStatus() != "allowed" {
		verb = "denied"
	}
	fmt.Fprintf(env.Stdout, "%s %s: %s %s %s\n", verb, a.GetId(), a.GetMember(), map[bool]string{true: "may use", false: "may not use"}[verb == "allowed"], a.GetTool())
	return nil
}

// Approvals runs `svc approvals [--decided|--all]`: the approvals you may
// decide and your own requests, one line each, newest first.
func Approvals(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("approvals", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	decided := fs.Bool("decided", false, "decided approvals instead of pending ones")
	all := fs.Bool("all", false, "pending and decided approvals")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || (*decided && *all) {
		return usagef("usage: svc approvals [--decided | --all]")
	}
	status := "pending"
	switch {
	case *decided:
		status = "decided"
	case *all:
		status = "all"
	}
	cl, err := dial(ctx, c, env)
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := apiv1.NewApprovalsClient(cl.Conn()).ListApprovals(cctx, &apiv1.ListApprovalsRequest{Status: status})
	if err != nil {
		return fail(cl, err)
	}
	if len(res.GetApprovals()) == 0 {
		fmt.Fprintf(env.Stdout, "no %s approvals\n", map[string]string{"pending": "pending", "decided": "decided", "all": ""}[status])
		return nil
	}
	for _, a := range res.GetApprovals() {
		input, _ := protojson.Marshal(a.GetInput())
		line := fmt.Sprintf("%s %s %s %s %s", a.GetId(), a.GetStatus(), safe(a.GetMember(), 64), safe(a.GetTool(), 128), safe(string(input), 160))
		if by := a.GetDecidedBy().GetStringValue(); by != "" {
			line += " by " + safe(by, 64)
		}
		if a.GetStatus() == "pending" {
			line += " expires " + time.UnixMilli(int64(a.GetExpiresAt())).Format(time.TimeOnly)
		}
		fmt.Fprintln(env.Stdout, line)
	}
	return nil
}

// safe makes s one printable line of at most max bytes: approval fields
// come from agents.
func safe(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
