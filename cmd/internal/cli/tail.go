package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"svc/cmd/internal/client"
	apiv1 "svc/gen/svc/v1"
)

// Reconnect backoff of `svc tail`: from minBackoff, doubling, capped.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 15 * time.Second
)

// Tail runs `svc tail [--from ID]`: it follows the caller's stream over
// gRPC Subscribe and prints one line per message. After a drop it
// reconnects with backoff and resumes after the last id it printed, so no
// message is lost or repeated. A refused credential ends it.
func Tail(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	from := fs.String("from", "", "resume after this message id (replays every later message first)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("tail takes no arguments (got %q)", pos[0])
	}
	cl, err := dial(ctx, c, env)
	if err != nil {
		return err
	}
	defer cl.Close()
	last := *from
	backoff := minBackoff
	for {
		ready, err := follow(ctx, cl, env, &last)
		if ctx.Err() != nil {
			return nil
		}
		switch client.Code(err) {
		case "unauthenticated", "forbidden", "bad_request", "unsupported_protocol", "not_found":
			return fail(cl, err)
		}
		if ready {
			backoff = minBackoff
		}
		fmt.Fprintf(env.Stderr, "svc tail: stream dropped (%s); reconnecting in %s\n", client.Describe(err, cl.URL()), backoff)
		if env.sleep(ctx, backoff) != nil {
			return nil
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// follow runs one Subscribe until it ends; ready says the broker opened it.
func follow(ctx context.Context, cl *client.Client, env Env, last *string) (ready bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cl.Broker().Subscribe(sctx, &apiv1.SubscribeRequest{LastId: *last})
	if err != nil {
		return false, err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the broker closed the stream")
			}
			return ready, err
		}
		switch e := ev.GetEvent().(type) {
		case *apiv1.SubscribeResponse_Ready:
			if !ready {
				ready = true
				fmt.Fprintf(env.Stderr, "svc tail: following %s as %s\n", cl.URL(), e.Ready.GetMember())
			}
		case *apiv1.SubscribeResponse_Message:
			fmt.Fprintln(env.Stdout, FormatMessage(e.Message))
			*last = e.Message.GetId()
		}
	}
}

// FormatMessage is one line of `svc tail`:
// <time> <id> <from> -> <dest> [<level>] <title>: <body>, with newlines
// and control characters of the text escaped so a message is one line.
func FormatMessage(m *apiv1.Message) string {
	dest := "general"
	switch {
	case m.To != nil:
		dest = m.GetTo()
	case m.GetData().GetFields()["thread"].GetStringValue() != "":
		dest = m.GetData().GetFields()["thread"].GetStringValue()
	}
	at := time.UnixMilli(int64(m.GetCreatedAt())).UTC().Format(time.RFC3339)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s -> %s", at, m.GetId(), clean(m.GetFrom()), clean(dest))
	if m.GetLevel() != "" && m.GetLevel() != "info" {
		fmt.Fprintf(&b, " [%s]", clean(m.GetLevel()))
	}
	b.WriteString(": ")
	if m.GetTitle() != "" {
		b.WriteString(clean(m.GetTitle()) + " — ")
	}
	b.WriteString(clean(m.GetBody()))
	if n := len(m.GetAttachments()); n > 0 {
		fmt.Fprintf(&b, " (+%d attachment(s): %s)", n, clean(strings.Join(m.GetAttachments(), ", ")))
	}
	return b.String()
}

// clean escapes control characters (terminal escapes included) so a
// message cannot break the one-line format or drive the terminal.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '·'
		}
		return r
	}, s)
}
