package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"svc/cmd/internal/client"
	apiv1 "svc/gen/svc/v1"
)

// TargetKind is what the <to> of `svc send` names.
type TargetKind int

const (
	// TargetMember is a DM to a member name.
	TargetMember TargetKind = iota + 1
	// TargetChannel is a post to a channel given as #slug (or #id).
	TargetChannel
	// TargetGeneral is the broadcast: `general` or `-`.
	TargetGeneral
)

// Target is a parsed <to>.
type Target struct {
	Kind TargetKind
	Name string // member name or channel slug; empty for general
}

// maxTargetLen bounds <to> before anything is sent.
const maxTargetLen = 128

// ParseTarget reads <to>: `general` or `-` is the broadcast, `#slug` a
// channel, anything else a member name. Whitespace and control characters
// are refused: no member or slug carries them.
func ParseTarget(s string) (Target, error) {
	if s == "" {
		return Target{}, errors.New("empty recipient")
	}
	if len(s) > maxTargetLen {
		return Target{}, fmt.Errorf("recipient longer than %d bytes", maxTargetLen)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return Target{}, fmt.Errorf("recipient %q has a space or control character", s)
		}
	}
	switch {
	case s == "general" || s == "-":
		return Target{Kind: TargetGeneral}, nil
	case strings.HasPrefix(s, "#"):
		slug := s[1:]
		if slug == "" || strings.HasPrefix(slug, "#") {
			return Target{}, fmt.Errorf("recipient %q: want #<channel>", s)
		}
		return Target{Kind: TargetChannel, Name: slug}, nil
	}
	return Target{Kind: TargetMember, Name: s}, nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// Send runs `svc send <to> <body> [--title T] [--level L] [--attach path]...`.
// Attachments are virtual filesystem paths, each checked with StatFile
// first: the first missing path or directory stops the send.
func Send(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	title := fs.String("title", "", "message title")
	level := fs.String("level", "", "debug, info (default), notice, warning, error or critical")
	var attach multiFlag
	fs.Var(&attach, "attach", "attach a file by its virtual path (repeatable)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("usage: svc send <member|#channel|general> <body> [--title T] [--level L] [--attach path]...")
	}
	target, err := ParseTarget(pos[0])
	if err != nil {
		return usagef("send: %v", err)
	}
	cl, err := dial(ctx, c, env)
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	for _, p := range attach {
		st, err := cl.Fs().StatFile(cctx, &apiv1.StatFileRequest{Path: p})
		if client.Code(err) == "not_found" {
			return fmt.Errorf("attachment %s: no such file", p)
		}
		if err != nil {
			return fmt.Errorf("attachment %s: %s", p, client.Describe(err, cl.URL()))
		}
		if st.GetEntry().GetKind() == "dir" {
			return fmt.Errorf("attachment %s: is a directory", p)
		}
	}

	req := &apiv1.PushRequest{Title: *title, Body: pos[1], Level: *level, Attachments: attach}
	switch target.Kind {
	case TargetMember:
		req.To = &target.Name
	case TargetChannel:
		ch, err := cl.Broker().GetChannel(cctx, &apiv1.GetChannelRequest{Channel: target.Name})
		if client.Code(err) == "not_found" {
			return fmt.Errorf("no channel #%s", target.Name)
		}
		if err != nil {
			return fail(cl, err)
		}
		req.Data = &structpb.Struct{Fields: map[string]*structpb.Value{
			"thread": structpb.NewStringValue("chan:" + ch.GetChannel().GetId()),
		}}
	}
	resp, err := cl.Broker().Push(cctx, req)
	if err != nil {
		return fail(cl, err)
	}
	d := resp.GetDelivery()
	fmt.Fprintf(env.Stdout, "sent %s (live %d of %d)\n", resp.GetMessage().GetId(), d.GetLive(), d.GetTargets())
	return nil
}
