package server

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"svc/server/apierr"
	"svc/server/wire"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/hub"
	"svc/server/registry"
	"svc/server/teamconfig"
	"svc/store"
)

// Bounds of a push (docs/DECISIONS.md, Messaging).
const (
	maxTitle    = 1 << 10
	maxBody     = 64 << 10
	maxData     = 64 << 10
	maxThreadID = 256
)

// History page bounds (docs/API.md, "Chat": 50 by default, at most 500).
const (
	defaultHistoryLimit = 50
	maxHistoryLimit     = 500
)

// generalThread is the thread of broadcasts: the general channel.
const (
	generalID     = "general"
	generalThread = "chan:" + generalID
)

// levels are the LogLevels of a message (the Message in proto/svc/v1).
var levels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true, "error": true, "critical": true}

// brokerMessages serves chat: push, history and the live stream.
type brokerMessages struct{ *core }

// dmThread is the thread of the DMs between a and b.
func dmThread(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return "dm:" + a + ":" + b
}

// Push implements apiv1.BrokerServer.
func (b *brokerMessages) Push(ctx context.Context, req *apiv1.PushRequest) (*apiv1.PushResponse, error) {
	p := mustPrincipal(ctx)
	msg, pm, targets, ids, err := b.route(ctx, p, req)
	if err != nil {
		return nil, err
	}
	b.presence.touchIfSeen(p.Member)
	var grant func(ctx context.Context, tx store.Tx) ([]store.Message, error)
	if len(ids) > 0 {
		// Every recipient may read the attached files from the moment the
		// message is durable: the grants commit with it.
		grantees := msg.Recipients
		if msg.All {
			grantees = []string{store.Everyone}
		}
		grant = func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
			return nil, tx.GrantEntries(ctx, ids, grantees)
		}
	}
	r := b.msgs.push(ctx, grant, &msg, pm)
	if r.err != nil {
		return nil, r.err
	}
	return &apiv1.PushResponse{Delivery: &apiv1.Delivery{Live: int32(r.live), Targets: int32(targets)}, Message: r.msgs[0]}, nil
}

// route validates a push and decides where it goes. It returns the record
// to store, its wire form, the number of targets and the filesystem entries
// of its attachments.
func (b *brokerMessages) route(ctx context.Context, p *auth.Principal, req *apiv1.PushRequest) (store.Message, *apiv1.Message, int, []int64, error) {
	var msg store.Message
	if err := apierr.ValidText("body", req.GetBody(), maxBody, true); err != nil {
		return msg, nil, 0, nil, err
	}
	if err := apierr.ValidText("title", req.GetTitle(), maxTitle, false); err != nil {
		return msg, nil, 0, nil, err
	}
	level := req.GetLevel()
	if level == "" {
		level = "info"
	}
	if !levels[level] {
		return msg, nil, 0, nil, apierr.Invalid("level", "must be one of debug, info, notice, warning, error, critical")
	}
	attachments, err := b.attachments(ctx, p, req.GetAttachments())
	if err != nil {
		return msg, nil, 0, nil, err
	}
	var paths []string
	for _, a := range attachments {
		paths = append(paths, a.Path)
	}
	thread, hasThread := "", false
	if v, ok := req.GetData().GetFields()["thread"]; ok {
		sv, isString := v.GetKind().(*structpb.Value_StringValue)
		if !isString {
			return msg, nil, 0, nil, apierr.Invalid("data.thread", "must be a string")
		}
		thread, hasThread = sv.StringValue, true
	}
	msg = store.Message{From: p.Member, Title: req.GetTitle(), Body: req.GetBody(), Level: level, Attachments: paths}
	targets := 0
	switch to := req.GetTo(); {
	case to != "":
		if !teamconfig.ValidName(to) {
			return msg, nil, 0, nil, apierr.Invalid("to", "must be a member name")
		}
		if _, ok := b.team.Member(to); !ok {
			return msg, nil, 0, nil, apierr.Invalid("to", "no member %q", to)
		}
		if hasThread {
			return msg, nil, 0, nil, apierr.Invalid("data.thread", "a DM has no thread")
		}
		msg.To, msg.Thread, msg.Recipients, targets = to, dmThread(p.Member, to), []string{to}, 1
	case hasThread && !strings.HasPrefix(thread, "chan:"):
		// A mistyped thread must not turn a private post into a broadcast;
		// obj:, hook:, tool: and secret: threads are written by the broker.
		return msg, nil, 0, nil, apierr.Invalid("data.thread", "must be chan:<channel id> (other threads are written by the broker)")
	case hasThread && thread != generalThread:
		ch, members, err := b.postableChannel(ctx, p, strings.TrimPrefix(thread, "chan:"))
		if err != nil {
			return msg, nil, 0, nil, err
		}
		msg.Thread = "chan:" + ch.ID
		// Messages carry the stable id, even when the post named the slug.
		req.Data.Fields["thread"] = structpb.NewStringValue(msg.Thread)
		for _, m := range members {
			if m.Member != p.Member {
				msg.Recipients = append(msg.Recipients, m.Member)
			}
		}
		targets = len(msg.Recipients)
	default:
		msg.Thread, msg.All = generalThread, true
		targets = b.team.Len() - 1
	}
	if req.GetData() != nil {
		var err error
		if msg.Data, err = protojson.Marshal(req.GetData()); err != nil {
			return msg, nil, 0, nil, apierr.Invalid("data", "must be a JSON object")
		}
		if len(msg.Data) > maxData {
			return msg, nil, 0, nil, apierr.Invalid("data", "at most %d bytes of JSON", maxData)
		}
	}
	pm := &apiv1.Message{
		From: msg.From, Title: msg.Title, Body: msg.Body, Level: msg.Level,
		Data: req.GetData(), Attachments: nonNil(msg.Attachments),
	}
	if msg.To != "" {
		pm.To = &msg.To
	}
	return msg, pm, max(targets, 0), entryIDs(attachments), nil
}

// postableChannel returns a live channel the caller is a member of, with its
// members.
func (b *brokerMessages) postableChannel(ctx context.Context, p *auth.Principal, id string) (store.Channel, []store.ChannelMember, error) {
	ch, err := b.channel(ctx, id)
	if err != nil {
		return ch, nil, err
	}
	if !ch.ArchivedAt.IsZero() {
		return ch, nil, errArchived(ch)
	}
	members, err := b.store.ListChannelMembers(ctx, ch.ID)
	if err != nil {
		return ch, nil, err
	}
	if !isChannelMember(members, p.Member) {
		return ch, nil, errNotMember(ch)
	}
	return ch, members, nil
}

// messageToProto renders a stored message.
func messageToProto(m store.Message) *apiv1.Message {
	pm := &apiv1.Message{
		Id: formatMessageID(m.Seq), From: m.From, Title: m.Title, Body: m.Body, Level: m.Level,
		Attachments: nonNil(m.Attachments), CreatedAt: wire.MS(m.CreatedAt),
	}
	if m.To != "" {
		to := m.To
		pm.To = &to
	}
	pm.Data = wire.Struct(m.Data)
	pm.Meta = wire.Struct(m.Meta)
	setReplyChain(pm, m)
	return pm
}

// setReplyChain renders m's reply chain fields onto pm.
func setReplyChain(pm *apiv1.Message, m store.Message) {
	pm.ReplyTo = nil
	if m.ReplyTo > 0 {
		id := formatMessageID(m.ReplyTo)
		pm.ReplyTo = &id
	}
	pm.Hops, pm.LoopStopped = nil, nil
	if m.Hops > 0 {
		h := uint32(min(m.Hops, math.MaxUint32))
		pm.Hops = &h
	}
	if m.LoopStopped {
		stopped := true
		pm.LoopStopped = &stopped
	}
}

// History implements apiv1.BrokerServer.
func (b *brokerMessages) History(ctx context.Context, req *apiv1.HistoryRequest) (*apiv1.HistoryResponse, error) {
	p := mustPrincipal(ctx)
	n := 0
	for _, s := range []string{req.GetWith(), req.GetChannel(), req.GetThread()} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, apierr.Invalid("with", "give at most one of with, channel and thread")
	}
	var err error
	f := store.MessageFilter{Limit: defaultHistoryLimit}
	if req.Limit != nil {
		if req.GetLimit() < 1 {
			return nil, apierr.Invalid("limit", "must be at least 1")
		}
		f.Limit = int(min(req.GetLimit(), maxHistoryLimit))
	}
	if req.Before != nil {
		if req.GetBefore() <= 0 || req.GetBefore() > 1e15 {
			return nil, apierr.Invalid("before", "must be epoch milliseconds")
		}
		f.Before = time.UnixMilli(int64(req.GetBefore()))
	}
	if req.GetBeforeId() != "" {
		seq, perr := ParseMessageID(req.GetBeforeId())
		if perr != nil || seq == 0 {
			return nil, apierr.Invalid("beforeId", "must be a message id")
		}
		f.BeforeSeq = seq
	}
	switch {
	case req.GetWith() != "":
		if !teamconfig.ValidName(req.GetWith()) {
			return nil, apierr.Invalid("with", "must be a member name")
		}
		f.Thread = dmThread(p.Member, req.GetWith())
		if f.AfterSeq, err = b.memberSince(ctx, p.Member); err != nil {
			return nil, err
		}
	case req.GetChannel() != "" || strings.HasPrefix(req.GetThread(), "chan:"):
		id := req.GetChannel()
		if id == "" {
			id = strings.TrimPrefix(req.GetThread(), "chan:")
		}
		ch, err := b.readableChannel(ctx, p, id)
		if err != nil {
			return nil, err
		}
		f.Thread = "chan:" + ch.ID
	case req.GetThread() != "":
		if len(req.GetThread()) > maxThreadID || !utf8.ValidString(req.GetThread()) {
			return nil, apierr.Invalid("thread", "at most %d bytes", maxThreadID)
		}
		if err := b.threadReadable(ctx, p, req.GetThread()); err != nil {
			return nil, err
		}
		f.Thread, f.Viewer = req.GetThread(), p.Member
		if f.AfterSeq, err = b.memberSince(ctx, p.Member); err != nil {
			return nil, err
		}
	default:
		f.Thread = generalThread
	}
	msgs, err := b.store.ListMessages(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.HistoryResponse{Messages: make([]*apiv1.Message, 0, len(msgs))}
	for _, m := range msgs {
		resp.Messages = append(resp.Messages, messageToProto(m))
	}
	return resp, nil
}

// threadReadable refuses the history of a thread (other than a channel)
// the caller does not belong to: a thread you may not read is refused
// (403), never shown empty. An objective's thread belongs to its
// originator, assignee, watchers and every members.manage holder; a DM
// thread to its two members. A registry thread (tool:, secret:, hook:,
// hook-profile:) belongs to its registry's manage holders and to whoever
// received a message on it (registryThreadReadable); a hook: thread
// carries an endpoint's registry events and the DM copies of its
// deliveries. A loop guard notice's thread (loop:) and an approval's
// decision thread (approval:) belong to the members.manage holders and
// to whoever received a message on it (the asking agent, its
// approvers). An unknown objective is 404; a thread of no known kind is
// 400.
func (b *brokerMessages) threadReadable(ctx context.Context, p *auth.Principal, thread string) error {
	kind, id, _ := strings.Cut(thread, ":")
	switch kind {
	case "obj":
		o, err := b.store.GetObjective(ctx, id)
		if err != nil {
			return objectiveErr(err, id)
		}
		if !p.Has(auth.MembersManage) && !slices.Contains(participants(o, b.memberSnapshot()), p.Member) {
			return fmt.Errorf("%w: you are not in the thread of objective %s", auth.ErrForbidden, o.ID)
		}
		return nil
	case "dm":
		x, y, ok := strings.Cut(id, ":")
		if !ok || !teamconfig.ValidName(x) || !teamconfig.ValidName(y) {
			return apierr.Invalid("thread", "a DM thread is dm:<member>:<member>")
		}
		if p.Member != x && p.Member != y {
			return fmt.Errorf("%w: you are not in the thread %s", auth.ErrForbidden, thread)
		}
		return nil
	case "loop", strings.TrimSuffix(approvalThreadPrefix, ":"):
		return b.loopThreadReadable(ctx, p, thread)
	}
	if _, ok := registry.KindOfThread(kind); ok {
		return b.registryThreadReadable(ctx, p, kind, thread)
	}
	return apierr.Invalid("thread", "must be chan:<id>, obj:<id>, dm:<member>:<member>, hook:<slug>, hook-profile:<slug>, tool:<slug>, secret:<slug>, loop:<id> or approval:<id>")
}

// readableChannel returns a channel whose history the caller may read.
func (b *brokerMessages) readableChannel(ctx context.Context, p *auth.Principal, idOrSlug string) (store.Channel, error) {
	ch, err := b.channel(ctx, idOrSlug)
	if err != nil {
		return ch, err
	}
	if ch.ID == generalID || p.Has(auth.MembersManage) {
		return ch, nil
	}
	members, err := b.store.ListChannelMembers(ctx, ch.ID)
	if err != nil {
		return ch, err
	}
	if !isChannelMember(members, p.Member) {
		return ch, errNotMember(ch)
	}
	return ch, nil
}

// Subscribe implements apiv1.BrokerServer.
func (b *brokerMessages) Subscribe(req *apiv1.SubscribeRequest, stream apiv1.Broker_SubscribeServer) error {
	ctx := stream.Context()
	p := mustPrincipal(ctx)
	if req.GetName() != "" && req.GetName() != p.Member {
		return fmt.Errorf("%w: you may only subscribe as yourself", auth.ErrForbidden)
	}
	after, err := ParseMessageID(req.GetLastId())
	if err != nil {
		return err
	}
	f, err := b.attach(ctx, p, after, req.GetLastId() != "")
	f, err = b.counted(f, err, streamGRPC)
	f, err = b.runnerFeed(f, err, req.GetRunner(), p.Member)
	if err != nil {
		return err
	}
	defer f.Close()
	return serveFeed(ctx, f, func() error {
		return stream.Send(&apiv1.SubscribeResponse{Event: &apiv1.SubscribeResponse_Ready{Ready: &apiv1.Ready{Member: p.Member}}})
	}, func(ev *hub.Event) error {
		return stream.Send(&apiv1.SubscribeResponse{Event: &apiv1.SubscribeResponse_Message{Message: ev.Value.(*apiv1.Message)}})
	})
}
