package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/groupcommit"
	"svc/server/hub"
	"svc/server/teamconfig"
	"svc/store"
)

// Bounds of a push (docs/DECISIONS.md, Messaging).
const (
	maxTitle          = 1 << 10
	maxBody           = 64 << 10
	maxData           = 64 << 10
	maxAttachments    = 64
	maxAttachmentPath = 1024
	maxThreadID       = 256
)

// History page bounds (spec: Limits).
const (
	defaultHistoryLimit = 50
	maxHistoryLimit     = 500
)

// Commit batching: the committer takes every push waiting when it starts a
// transaction, up to maxBatch; commitQueue bounds what may wait.
const (
	maxBatch    = 512
	commitQueue = 4096
	// replayPage is how many stored messages a resuming stream reads at
	// once; it bounds the memory of a resume (a message is at most ~200 KiB).
	replayPage = 100
)

// generalThread is the thread of broadcasts: the general channel.
const (
	generalID     = "general"
	generalThread = "chan:" + generalID
)

// levels are the LogLevels of a message (spec: Message).
var levels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true, "error": true, "critical": true}

// errShuttingDown answers pushes that arrive after the committer stopped.
var errShuttingDown = Errorf(CodeUnavailable, "the broker is shutting down")

// stopped maps a group-commit loop's ErrStopped to errShuttingDown.
func stopped(err error) error {
	if errors.Is(err, groupcommit.ErrStopped) {
		return errShuttingDown
	}
	return err
}

// errFellBehind ends a stream the hub cut off.
var errFellBehind = Errorf(CodeUnavailable, "subscriber fell behind; resume with the last id")

// outgoing is a change on its way to the store and the hub: a message, a
// transactional change that yields messages (apply), or both.
type outgoing struct {
	// apply, when set, runs inside the commit transaction, in a savepoint
	// of its own: an error fails this change alone. The messages it returns
	// are committed with it. apply may use only tx and data it captured:
	// the transaction holds the store's only writer connection, and
	// Team.change holds the team lock while it waits for that connection,
	// so reading the team (or the store outside tx) here can deadlock.
	apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)
	msg   *store.Message
	proto *apiv1.Message // rendered from msg; Id and CreatedAt set at commit
	done  chan committed

	out []store.Message // what commit appends for this change
	err error           // apply's error
}

type committed struct {
	msgs []*apiv1.Message // msg's first, then apply's, in commit order
	live int              // how many of msg's targets were live
	err  error
}

// messenger commits messages in groups and publishes them in commit order.
// Changes that must commit with their messages (objective transitions,
// attachment grants) go through it too, so a message never reaches a stream
// before the change it reports is durable, and such changes are serialized.
type messenger struct {
	store store.Store
	hub   *hub.Hub
	now   func() time.Time
	log   *slog.Logger
	queue *groupcommit.Queue[*outgoing]
	// afterPublish, when set, runs on the committer after each message is
	// published (web push).
	afterPublish func(m store.Message, live func(member string) bool)
	last         time.Time
}

func newMessenger(st store.Store, h *hub.Hub, now func() time.Time, log *slog.Logger) *messenger {
	return &messenger{store: st, hub: h, now: now, log: log, queue: groupcommit.New[*outgoing](commitQueue, maxBatch)}
}

// change commits a change and publishes its messages once they are
// durable: apply (when not nil) runs in the next commit, and msg (when not
// nil) is committed with it, first, once apply succeeds. A plain push is
// a change with msg alone.
func (m *messenger) change(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error), msg *store.Message, pm *apiv1.Message) committed {
	o := &outgoing{apply: apply, msg: msg, proto: pm, done: make(chan committed, 1)}
	return groupcommit.Submit(ctx, m.queue, o, o.done, func(err error) committed { return committed{err: stopped(err)} })
}

// run commits until ctx ends, then answers what is queued with an error.
func (m *messenger) run(ctx context.Context) {
	m.queue.Run(ctx, m.commit, func(o *outgoing) { o.done <- committed{err: errShuttingDown} })
}

// commit writes one batch in one transaction, then publishes each message
// and answers each change. Publishing happens on this one goroutine, in
// commit order, so every stream sees messages in id order.
func (m *messenger) commit(ctx context.Context, batch []*outgoing) {
	err := m.store.WithTx(ctx, func(tx store.Tx) error {
		var msgs []store.Message
		for _, o := range batch {
			o.out, o.err = o.out[:0], nil
			if o.apply != nil {
				o.err = tx.Savepoint(ctx, func() error {
					var err error
					o.out, err = o.apply(ctx, tx)
					return err
				})
				if o.err != nil {
					o.out = nil
					continue
				}
			}
			if o.msg != nil {
				o.out = append([]store.Message{*o.msg}, o.out...)
			}
			for i := range o.out {
				// Creation times never go backwards along the commit order,
				// so the history's time cursor agrees with its id order.
				now := m.now()
				if now.Before(m.last) {
					now = m.last
				}
				m.last = now
				o.out[i].CreatedAt = now
			}
			msgs = append(msgs, o.out...)
		}
		if len(msgs) == 0 {
			return nil
		}
		stored, err := tx.AppendMessages(ctx, msgs)
		if err != nil {
			return err
		}
		for _, o := range batch {
			n := copy(o.out, stored)
			stored = stored[n:]
		}
		return nil
	})
	if err != nil {
		m.log.ErrorContext(ctx, "message commit failed", "changes", len(batch), "err", err)
		for _, o := range batch {
			o.done <- committed{err: err}
		}
		return
	}
	live := func(member string) bool { return m.hub.Connected(member) > 0 }
	for _, o := range batch {
		if o.err != nil {
			o.done <- committed{err: o.err}
			continue
		}
		r := committed{msgs: make([]*apiv1.Message, len(o.out))}
		for i, s := range o.out {
			var pm *apiv1.Message
			if i == 0 && o.msg != nil {
				pm = o.proto
				pm.Id = formatMessageID(s.Seq)
				pm.CreatedAt = ms(s.CreatedAt)
			} else {
				pm = messageToProto(s)
			}
			n := m.hub.Publish(hub.NewEvent(s.Seq, pm), s.All, s.From, s.Recipients)
			if i == 0 && o.msg != nil {
				r.live = n
			}
			if m.afterPublish != nil {
				m.afterPublish(s, live)
			}
			r.msgs[i] = pm
		}
		o.done <- r
	}
}

// formatMessageID renders a sequence as the wire id: 16 zero-padded digits,
// so ids sort in commit order as strings and as numbers.
func formatMessageID(seq int64) string { return fmt.Sprintf("%016d", seq) }

// ParseMessageID reads a wire id (Last-Event-ID, lastId): a decimal of up to
// 19 digits. The empty string is position 0; "0" resumes from the start.
// Values past the int64 range read as its maximum.
func ParseMessageID(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, invalid("lastEventId", "must be a message id")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, invalid("lastEventId", "must be a message id")
	}
	// Past every id this store can hold: Attach resumes from the start.
	return int64(min(n, math.MaxInt64)), nil
}

// dmThread is the thread of the DMs between a and b.
func dmThread(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return "dm:" + a + ":" + b
}

// Push implements apiv1.BrokerServer.
func (b *Broker) Push(ctx context.Context, req *apiv1.PushRequest) (*apiv1.PushResponse, error) {
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
	r := b.msgs.change(ctx, grant, &msg, pm)
	if r.err != nil {
		return nil, r.err
	}
	return &apiv1.PushResponse{Delivery: &apiv1.Delivery{Live: int32(r.live), Targets: int32(targets)}, Message: r.msgs[0]}, nil
}

// route validates a push and decides where it goes. It returns the record
// to store, its wire form, the number of targets and the filesystem entries
// of its attachments.
func (b *Broker) route(ctx context.Context, p *auth.Principal, req *apiv1.PushRequest) (store.Message, *apiv1.Message, int, []int64, error) {
	var msg store.Message
	if err := validText("body", req.GetBody(), maxBody, true); err != nil {
		return msg, nil, 0, nil, err
	}
	if err := validText("title", req.GetTitle(), maxTitle, false); err != nil {
		return msg, nil, 0, nil, err
	}
	level := req.GetLevel()
	if level == "" {
		level = "info"
	}
	if !levels[level] {
		return msg, nil, 0, nil, invalid("level", "must be one of debug, info, notice, warning, error, critical")
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
			return msg, nil, 0, nil, invalid("data.thread", "must be a string")
		}
		thread, hasThread = sv.StringValue, true
	}
	msg = store.Message{From: p.Member, Title: req.GetTitle(), Body: req.GetBody(), Level: level, Attachments: paths}
	targets := 0
	switch to := req.GetTo(); {
	case to != "":
		if !teamconfig.ValidName(to) {
			return msg, nil, 0, nil, invalid("to", "must be a member name")
		}
		if _, ok := b.team.Member(to); !ok {
			return msg, nil, 0, nil, invalid("to", "no member %q", to)
		}
		if hasThread {
			return msg, nil, 0, nil, invalid("data.thread", "a DM has no thread")
		}
		msg.To, msg.Thread, msg.Recipients, targets = to, dmThread(p.Member, to), []string{to}, 1
	case hasThread && !strings.HasPrefix(thread, "chan:"):
		// A mistyped thread must not turn a private post into a broadcast;
		// obj:, hook:, tool: and secret: threads are written by the broker.
		return msg, nil, 0, nil, invalid("data.thread", "must be chan:<channel id> (other threads are written by the broker)")
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
			return msg, nil, 0, nil, invalid("data", "must be a JSON object")
		}
		if len(msg.Data) > maxData {
			return msg, nil, 0, nil, invalid("data", "at most %d bytes of JSON", maxData)
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
func (b *Broker) postableChannel(ctx context.Context, p *auth.Principal, id string) (store.Channel, []store.ChannelMember, error) {
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

func validText(field, s string, limit int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return invalid(field, "is required")
	case len(s) > limit:
		return invalid(field, "at most %d bytes", limit)
	case !utf8.ValidString(s):
		return invalid(field, "must be UTF-8")
	}
	return nil
}

// messageToProto renders a stored message.
func messageToProto(m store.Message) *apiv1.Message {
	pm := &apiv1.Message{
		Id: formatMessageID(m.Seq), From: m.From, Title: m.Title, Body: m.Body, Level: m.Level,
		Attachments: nonNil(m.Attachments), CreatedAt: ms(m.CreatedAt),
	}
	if m.To != "" {
		to := m.To
		pm.To = &to
	}
	pm.Data = jsonStruct(m.Data)
	pm.Meta = jsonStruct(m.Meta)
	return pm
}

func jsonStruct(b []byte) *structpb.Struct {
	if b == nil {
		return nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil
	}
	return s
}

// History implements apiv1.BrokerServer.
func (b *Broker) History(ctx context.Context, req *apiv1.HistoryRequest) (*apiv1.HistoryResponse, error) {
	p := mustPrincipal(ctx)
	n := 0
	for _, s := range []string{req.GetWith(), req.GetChannel(), req.GetThread()} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, invalid("with", "give at most one of with, channel and thread")
	}
	var err error
	f := store.MessageFilter{Limit: defaultHistoryLimit}
	if req.Limit != nil {
		if req.GetLimit() < 1 {
			return nil, invalid("limit", "must be at least 1")
		}
		f.Limit = int(min(req.GetLimit(), maxHistoryLimit))
	}
	if req.Before != nil {
		if req.GetBefore() <= 0 || req.GetBefore() > 1e15 {
			return nil, invalid("before", "must be epoch milliseconds")
		}
		f.Before = time.UnixMilli(int64(req.GetBefore()))
	}
	if req.GetBeforeId() != "" {
		seq, perr := ParseMessageID(req.GetBeforeId())
		if perr != nil || seq == 0 {
			return nil, invalid("beforeId", "must be a message id")
		}
		f.BeforeSeq = seq
	}
	switch {
	case req.GetWith() != "":
		if !teamconfig.ValidName(req.GetWith()) {
			return nil, invalid("with", "must be a member name")
		}
		f.Thread = dmThread(p.Member, req.GetWith())
		if f.Since, err = b.memberSince(ctx, p.Member); err != nil {
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
			return nil, invalid("thread", "at most %d bytes", maxThreadID)
		}
		f.Thread, f.Viewer = req.GetThread(), p.Member
		if f.Since, err = b.memberSince(ctx, p.Member); err != nil {
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

// memberSince is when the member's current incarnation was created: a
// name deleted and created again must not inherit the old member's DMs and
// thread messages.
func (b *Broker) memberSince(ctx context.Context, name string) (time.Time, error) {
	m, err := b.store.GetMember(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	return m.CreatedAt, err
}

// readableChannel returns a channel whose history the caller may read.
func (b *Broker) readableChannel(ctx context.Context, p *auth.Principal, idOrSlug string) (store.Channel, error) {
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
func (b *Broker) Subscribe(req *apiv1.SubscribeRequest, stream apiv1.Broker_SubscribeServer) error {
	ctx := stream.Context()
	p := mustPrincipal(ctx)
	if req.GetName() != "" && req.GetName() != p.Member {
		return fmt.Errorf("%w: you may only subscribe as yourself", auth.ErrForbidden)
	}
	after, err := ParseMessageID(req.GetLastId())
	if err != nil {
		return err
	}
	f, err := b.Attach(ctx, p, after, req.GetLastId() != "")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := stream.Send(&apiv1.SubscribeResponse{Event: &apiv1.SubscribeResponse_Ready{Ready: &apiv1.Ready{Member: p.Member}}}); err != nil {
		return err
	}
	for {
		ev, err := f.Next(ctx, nil)
		if err != nil {
			return err
		}
		if err := stream.Send(&apiv1.SubscribeResponse{Event: &apiv1.SubscribeResponse_Message{Message: ev.Message}}); err != nil {
			return err
		}
	}
}

// Feed is one member's stream: the messages after a position, replayed
// from the store in order, then live ones, each exactly once.
type Feed struct {
	b       *Broker
	member  string
	since   time.Time // replay skips what was addressed to an earlier member of this name
	sub     *hub.Subscription
	last    int64
	backlog []store.Message
	live    bool // the store has nothing more after last; read the hub
}

// Attach opens a feed of member's messages: with resume, every message
// after position after, then live ones; without, live ones only. The live
// subscription is taken before the store is read, so no message falls
// between replay and live delivery.
func (b *Broker) Attach(ctx context.Context, p *auth.Principal, after int64, resume bool) (*Feed, error) {
	member := p.Member
	sub, err := b.hub.Subscribe(member, streamCred(p))
	if errors.Is(err, hub.ErrClosed) {
		return nil, errShuttingDown
	}
	if err != nil {
		return nil, err
	}
	if resume && after > 0 {
		// An id past the newest message comes from before a store reset (the
		// in-memory default starts over at every restart): everything in this
		// store is new to the client, so replay it all rather than skip ids
		// until they catch up.
		newest, err := b.store.LastMessageSeq(ctx)
		if err != nil {
			sub.Close()
			return nil, err
		}
		if after > newest {
			after = 0
		}
	}
	f := &Feed{b: b, member: member, sub: sub, last: after, live: !resume}
	if resume {
		if f.since, err = b.memberSince(ctx, member); err != nil {
			sub.Close()
			return nil, err
		}
	}
	return f, nil
}

// streamCred names the credential a stream was opened with, so revoking it
// ends the stream.
func streamCred(p *auth.Principal) string {
	if p.Via == auth.ViaSession {
		return "session:" + hex.EncodeToString(p.Session[:])
	}
	return "token:" + p.TokenID
}

// isTokenCred reports whether a stream credential is a bearer token.
func isTokenCred(c string) bool { return strings.HasPrefix(c, "token:") }

// Close ends the feed's live subscription.
func (f *Feed) Close() { f.sub.Close() }

// Next returns the next message. It returns (nil, nil) when tick fires
// first (a nil tick never fires), errFellBehind when the hub cut the feed
// off, errShuttingDown when the hub closed.
func (f *Feed) Next(ctx context.Context, tick <-chan time.Time) (*hub.Event, error) {
	for {
		if len(f.backlog) > 0 {
			m := f.backlog[0]
			f.backlog = f.backlog[1:]
			f.last = m.Seq
			if m.CreatedAt.Before(f.since) {
				continue
			}
			return hub.NewEvent(m.Seq, messageToProto(m)), nil
		}
		if !f.live {
			page, err := f.b.store.MessagesFor(ctx, f.member, f.last, replayPage)
			if err != nil {
				return nil, err
			}
			f.backlog, f.live = page, len(page) < replayPage
			continue
		}
		select {
		case ev, ok := <-f.sub.C():
			if !ok {
				if f.sub.FellBehind() {
					return nil, errFellBehind
				}
				return nil, errShuttingDown
			}
			if ev.Seq <= f.last {
				continue // already replayed from the store
			}
			f.last = ev.Seq
			return ev, nil
		case <-tick:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Buffered returns the next message when one is ready without waiting.
func (f *Feed) Buffered() *hub.Event {
	if len(f.backlog) > 0 || !f.live {
		return nil
	}
	for {
		select {
		case ev, ok := <-f.sub.C():
			if !ok {
				return nil
			}
			if ev.Seq <= f.last {
				continue
			}
			f.last = ev.Seq
			return ev
		default:
			return nil
		}
	}
}
