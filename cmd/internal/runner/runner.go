package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
	apiv1 "svc/gen/svc/v1"
)

// Timings of the runner.
const (
	// heartbeat: a non-idle state is re-posted every 10 s (docs/RUNNER.md).
	heartbeat = 10 * time.Second
	// stopGrace: after SIGTERM the agent has this long before SIGKILL.
	stopGrace = 5 * time.Second
	// callTimeout bounds one broker call.
	callTimeout = 15 * time.Second
	// Stream reconnect backoff: from minBackoff, doubling, capped.
	minBackoff = 500 * time.Millisecond
	maxBackoff = 15 * time.Second
	// uploadQueue bounds the tool results waiting for upload; past it a
	// result is dropped with a log line rather than holding memory.
	uploadQueue = 256
	// ackFlushGrace bounds how long a stopping runner waits for the
	// acknowledgements it handed over (turns that ended before the stop).
	ackFlushGrace = 5 * time.Second
)

// toolboxWait bounds how long the first turn waits for the agent's
// toolbox to redeem its ticket; then the ticket is void. A variable for
// tests.
var toolboxWait = 30 * time.Second

// toolboxStarter is an adapter whose agent starts the toolbox (`svc mcp`)
// with Setup.MCPEnv, the toolbox's one-time ticket included. The runner
// delivers no turn before that toolbox redeemed the ticket (or the ticket
// was voided after toolboxWait): the agent does nothing before its first
// turn, so no process the agent runs can present the ticket first
// (docs/RUNNER.md, "No credential within the agent's reach").
type toolboxStarter interface {
	startsToolbox() bool
}

// adapters are the agents the runner knows by name: a new agent is one
// more adapter file and one more entry here.
var adapters = map[string]func() Agent{"plain": NewPlain, "claude": NewClaude, "codex": NewCodex}

// pickAdapter chooses the adapter: --agent when given (it must be known),
// else the agent command's base name when an adapter has that name, else
// plain.
func pickAdapter(flag string, argv []string) (Agent, error) {
	if flag != "" {
		f, ok := adapters[flag]
		if !ok {
			return nil, fmt.Errorf("unknown agent %q (known: %s)", flag, strings.Join(adapterNames(), ", "))
		}
		return f(), nil
	}
	if f, ok := adapters[filepath.Base(argv[0])]; ok {
		return f(), nil
	}
	return NewPlain(), nil
}

func adapterNames() []string {
	var out []string
	for n := range adapters {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Options are one runner's settings, resolved by the command.
type Options struct {
	URL      string
	Token    string
	Agent    string // adapter name; "" picks by the command's base name
	Capture  bool
	StateDir string
	// TurnQuiet is how long a turn may show nothing before the runner
	// reports it; 0 means DefaultTurnQuiet.
	TurnQuiet time.Duration
	Argv      []string
	Stdout    io.Writer // the agent's output meant for a person
	Stderr    io.Writer // the runner's log; the agent's stderr
	Environ   []string  // the runner's environment, passed on to the agent
}

// AgentExit is the agent's own non-zero exit code, returned by Run when the
// agent ended by itself.
type AgentExit struct{ Code int }

func (e *AgentExit) Error() string { return fmt.Sprintf("the agent exited with code %d", e.Code) }

// logger serializes the runner's log lines.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// Run runs the runner until ctx ends (a signal: nil) or the agent exits by
// itself (nil, or *AgentExit with its code).
func Run(ctx context.Context, o Options) error {
	// Everything the runner prints, the agent's text and stderr included,
	// is redacted: the token from the start, the member's secrets once
	// known.
	stderr, stdout := newRedactWriter(o.Stderr, NewRedactor(o.Token)), newRedactWriter(o.Stdout, NewRedactor(o.Token))
	defer stdout.Flush()
	defer stderr.Flush()
	log := &logger{w: stderr}
	// The runner holds the bearer; the agent runs as the same user and
	// must not read it out of the runner's memory or environment.
	if err := relay.NoDump(); err != nil {
		log.logf("svc runner: cannot make the runner undumpable (%v): processes of the same user can read its memory", err)
	}
	cl, err := client.New(o.URL, o.Token)
	if err != nil {
		return err
	}
	defer cl.Close()
	describe := func(err error) error { return errors.New(client.Describe(err, o.URL)) }

	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := cl.Ping(cctx); err != nil {
		return describe(err)
	}
	brief, err := cl.Broker().GetBriefing(cctx, &apiv1.GetBriefingRequest{})
	if err != nil {
		return describe(err)
	}
	me := brief.GetMember().GetName()
	secrets := map[string]string{}
	if res, err := apiv1.NewSecretsClient(cl.Conn()).ResolveSecrets(cctx, &apiv1.ResolveSecretsRequest{}); err == nil {
		secrets = res.GetEnv()
	} else if client.Code(err) == "unavailable" {
		// No KEK: the broker can hold no secret values at all.
		log.logf("svc runner: the broker keeps no secrets (no KEK); the agent starts without any")
	} else {
		return describe(err)
	}
	// The broker keeps the member's delivery position: where the stream
	// resumes, and the message whose turn a stopped runner left open.
	statePath := ""
	if o.StateDir != "" {
		statePath = StatePath(o.StateDir, o.URL, me)
	}
	delivery, err := attachDelivery(cctx, cl.Broker(), me, statePath, log.logf)
	if err != nil {
		return describe(err)
	}
	start := startState(delivery)
	start.quiet = o.TurnQuiet
	if start.redeliver != "" {
		log.logf("svc runner: the turn of message %s did not finish under the last runner; it is delivered again", start.redeliver)
	}
	if delivery.Position == nil && delivery.GetBacklogOmitted() > 0 {
		log.logf("svc runner: first start: %d older message(s) are left out of the backlog", delivery.GetBacklogOmitted())
	}

	agent, err := pickAdapter(o.Agent, o.Argv)
	if err != nil {
		return err
	}
	approvalsCl := apiv1.NewApprovalsClient(cl.Conn())
	// Approvals a past life of this runner asked for wait for an agent that
	// is gone: withdrawn before the new agent can ask anything.
	withdrawLeftApprovals(cctx, approvalsCl, me, log)
	hooks := make(chan hookReq)
	loopDone := make(chan struct{})
	approvalIn := make(chan approvalReq)
	approve := func(ctx context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer {
		a := approvalReq{ctx: ctx, req: r, answer: make(chan relay.ApprovalAnswer, 1)}
		select {
		case approvalIn <- a:
		case <-loopDone:
			return refusal("the runner is stopping")
		case <-ctx.Done():
			return refusal("the agent stopped waiting")
		}
		select {
		case ans := <-a.answer:
			return ans
		case <-loopDone:
			return refusal("the runner stopped")
		}
	}
	srv, err := relay.Listen("", func(p json.RawMessage) {
		evs := agent.ParseHook(p)
		if len(evs) == 0 {
			return
		}
		done := make(chan struct{})
		select {
		case hooks <- hookReq{events: evs, done: done}:
		case <-loopDone:
			return
		}
		select {
		case <-done:
		case <-loopDone:
		}
	})
	if err != nil {
		return fmt.Errorf("relay socket: %w", err)
	}
	defer srv.Close()
	srv.SetApprover(approve)

	svcPath, err := os.Executable()
	if err != nil {
		return err
	}
	// The toolbox gets a one-time ticket, never the bearer; the agent's
	// telemetry goes through the runner's OTLP relay, which adds it.
	srv.OnRefusedTicket(func() {
		log.logf("svc runner: refused a toolbox ticket on the relay socket (spent or unknown): only the agent's first toolbox gets the credential")
	})
	ticket, err := srv.IssueTicket(o.Token)
	if err != nil {
		return err
	}
	var otlp *relay.OTLP
	if o.Capture {
		otlp, err = relay.StartOTLP(relay.OTLPOptions{Broker: o.URL, Token: o.Token, Log: stderr})
		if err != nil {
			return fmt.Errorf("OTLP relay: %w", err)
		}
		defer otlp.Close()
	}
	setup := Setup{
		Argv: o.Argv, Dir: srv.Dir(), Svc: svcPath, Capture: o.Capture,
		MCPEnv:       map[string]string{client.EnvURL: o.URL, relay.Env: srv.Path(), relay.TicketEnv: ticket.Value()},
		Env:          agentEnv(otlp, srv.Path(), secrets),
		SystemPrompt: SystemPrompt(brief),
		Log:          stderr,
		Approve:      approve,
	}
	redactor := NewRedactor(append(mapValues(secrets), o.Token)...)
	stderr.setRedactor(redactor)
	stdout.setRedactor(redactor)
	var genaiUp *GenAIUploader
	if o.Capture {
		genaiUp = newGenAIUploader(apiv1.NewActivityClient(cl.Conn()), me, redactor, log)
		setup.Inferences = genaiUp.Add
	}
	argv, extra, err := agent.Command(setup)
	if err != nil {
		return fmt.Errorf("agent %s: %w", agent.Name(), err)
	}
	env, dropped := mergeEnv(o.Environ, setup.Env, extra, o.Token)
	if len(dropped) > 0 {
		log.logf("svc runner: left out of the agent's environment, they hold the runner's token: %s", strings.Join(dropped, ", "))
	}
	proc, err := startAgent(argv, env, stderr)
	if err != nil {
		return fmt.Errorf("starting the agent: %w", err)
	}
	toolboxReady := gateOnToolbox(agent, ticket, log)
	events := make(chan Event, 64)
	session := agent.Attach(proc.stdin, proc.stdout, events, stdout)
	log.logf("svc runner: %s runs as %s on %s (agent %s, pid %d)", filepath.Base(argv[0]), me, o.URL, agent.Name(), proc.cmd.Process.Pid)

	rctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	var rep *reporter
	var up *uploader
	if o.Capture {
		rep = newReporter(func(ctx context.Context, st ActivityState) error {
			s := string(st)
			_, err := cl.Broker().SetActivity(ctx, &apiv1.SetActivityRequest{State: &s})
			return err
		}, log)
		go rep.run(rctx)
		up = newUploader(cl, me, redactor, log)
		go up.run(rctx)
		go genaiUp.Run(rctx)
	}
	objectives := apiv1.NewObjectivesClient(cl.Conn())
	// The open plate is the active and the blocked objectives: two filtered
	// calls, so a long life's done and cancelled objectives never ride along.
	fetchPlate := func(ctx context.Context) ([]*apiv1.Objective, error) {
		var open []*apiv1.Objective
		for _, st := range []string{"active", "blocked"} {
			res, err := objectives.ListObjectives(ctx, &apiv1.ListObjectivesRequest{Assignee: me, Status: st})
			if err != nil {
				return nil, err
			}
			open = append(open, res.GetObjectives()...)
		}
		return OpenPlate(open, me), nil
	}
	slugs := newSlugCache(cl)
	acks := newAcker(me, func(ctx context.Context, req *apiv1.UpdateDeliveryRequest) error {
		_, err := cl.Broker().UpdateDelivery(ctx, req)
		return err
	}, log.logf)
	go acks.run(rctx)
	deps := loopDeps{
		startTurn: func(ctx context.Context, id string) error {
			select {
			case <-toolboxReady:
			case <-ctx.Done():
				return ctx.Err()
			}
			return acks.startTurn(ctx, id)
		},
		deliver:    session.Deliver,
		ack:        acks.add,
		publish:    srv.Publish,
		fetchPlate: fetchPlate,
		slug:       slugs.slug,
		logf:       log.logf,
		askApproval: func(ctx context.Context, tool string, input json.RawMessage, objective string) (string, time.Time, error) {
			return askApproval(ctx, approvalsCl, tool, approvalInput(redactor, input), objective)
		},
		getApproval: func(ctx context.Context, id string) (*approvalDecision, error) {
			return getApproval(ctx, approvalsCl, id)
		},
		withdrawApproval: func(ctx context.Context, id, why string) error {
			_, err := approvalsCl.WithdrawApproval(ctx, &apiv1.WithdrawApprovalRequest{Id: id, Reason: &why})
			return err
		},
	}
	if o.Capture {
		deps.report = rep.set
		deps.upload = up.add
		deps.stalled = func(id string, started time.Time, quiet time.Duration) {
			go func() {
				sctx, cancel := context.WithTimeout(rctx, callTimeout)
				defer cancel()
				if err := uploadEvents(sctx, cl, me, []activityEvent{stallEvent(id, started, quiet)}); err != nil {
					log.logf("svc runner: stalled turn not reported: %s", client.Describe(err, o.URL))
				}
			}()
		}
	}
	l := newLoop(me, start, deps)
	l.appr.in = approvalIn

	// The re-brief goes at attach, once the agent runs and the plate is
	// fetched. The lifecycle messages of its objectives that the replay
	// will deliver are skipped: the re-brief states them (one turn for an
	// objective assigned while the runner was down).
	pctx, pcancel := context.WithTimeout(ctx, callTimeout)
	plate, err := fetchPlate(pctx)
	if err == nil {
		if events := replayedEvents(pctx, cl.Broker(), start.position, plate); len(events) > 0 {
			if plate, err = fetchPlate(pctx); err == nil {
				l.skip = coveredBy(events, plate)
			}
		}
	}
	pcancel()
	if err != nil {
		log.logf("svc runner: open objectives not fetched: %s", client.Describe(err, o.URL))
	}
	l.attach(plate)

	sctx, stopStream := context.WithCancel(ctx)
	msgs := make(chan *apiv1.Message)
	fatal := make(chan error, 1)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		follow(sctx, cl, start.position, msgs, fatal, log)
	}()

	loopErr := l.run(ctx, msgs, hooks, events, proc.done, fatal)
	stopStream()
	<-streamDone

	// Stop: end the agent's input, SIGTERM its group, SIGKILL after the
	// grace. A turn in progress is not acknowledged: the broker's turn
	// stays open and the next start delivers its message again.
	_ = session.Close()
	signaled := ctx.Err() != nil
	code := proc.stop(stopGrace)
	close(loopDone)

	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer fcancel()
	actx, acancel := context.WithTimeout(fctx, ackFlushGrace)
	acks.flush(actx)
	acancel()
	// The agent is gone: what it waited on is withdrawn (the loop has
	// ended, so its approvals are this goroutine's now).
	l.abandonApprovals(fctx)
	if up != nil {
		up.flush(fctx)
	}
	if genaiUp != nil {
		gctx, gcancel := context.WithTimeout(fctx, genaiDrainGrace)
		genaiUp.Flush(gctx)
		gcancel()
	}
	stopWorkers()
	if open, err := fetchPlate(fctx); err != nil {
		log.logf("svc runner: runner_shutdown markers not written: %s", client.Describe(err, o.URL))
	} else if len(open) > 0 {
		if err := uploadEvents(fctx, cl, me, shutdownMarkers(open)); err != nil {
			log.logf("svc runner: runner_shutdown markers not written: %s", client.Describe(err, o.URL))
		}
	}
	if rep != nil && rep.last() != StateIdle {
		s := string(StateIdle)
		if _, err := cl.Broker().SetActivity(fctx, &apiv1.SetActivityRequest{State: &s}); err != nil {
			log.logf("svc runner: final idle not posted: %s", client.Describe(err, o.URL))
		}
	}

	if loopErr != nil {
		return describe(loopErr)
	}
	if signaled || code == 0 {
		return nil
	}
	return &AgentExit{Code: code}
}

// gateOnToolbox returns a channel closed once the first turn may go: at
// once for an agent that starts no toolbox (its ticket is voided), else
// when the toolbox redeemed its ticket, or after toolboxWait, when the
// ticket is voided so that nothing the agent does later can redeem it.
func gateOnToolbox(agent Agent, ticket *relay.Ticket, log *logger) <-chan struct{} {
	ready := make(chan struct{})
	if ts, ok := agent.(toolboxStarter); !ok || !ts.startsToolbox() {
		ticket.Void()
		close(ready)
		return ready
	}
	go func() {
		defer close(ready)
		t := time.NewTimer(toolboxWait)
		defer t.Stop()
		select {
		case <-ticket.Done():
		case <-t.C:
			if ticket.Void() {
				log.logf("svc runner: the agent's toolbox did not ask for its credential within %s; its ticket is void and the toolbox cannot reach the broker", toolboxWait)
			}
		}
	}()
	return ready
}

// agentEnv is what the runner adds to the agent's environment: the
// member's secrets, the relay socket and, with capture on (otlp not nil),
// the OTLP exporter pointed at the runner's OTLP relay with the relay's
// key. No credential of the broker: the relay adds the bearer.
func agentEnv(otlp *relay.OTLP, socket string, secrets map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range secrets {
		env[k] = v
	}
	env[relay.Env] = socket
	if otlp != nil {
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp.Endpoint()
		env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
		env["OTEL_EXPORTER_OTLP_HEADERS"] = otlp.Headers()
		env["OTEL_LOGS_EXPORTER"] = "otlp"
		env["OTEL_LOG_USER_PROMPTS"] = "1"
		env["OTEL_LOG_RAW_API_BODIES"] = "1"
		env["OTEL_LOG_TOOL_DETAILS"] = "1"
	}
	return env
}

// brokerSecretEnv are the broker's own settings that carry credentials
// (a database or NATS URL with its password, libpq's password variables,
// the KEK): a runner started from the broker's shell or unit file must
// not hand them to its agent.
var brokerSecretEnv = map[string]bool{
	"SVC_DB_URL": true, "SVC_ACTIVITY_DB_URL": true, "SVC_NATS_URL": true, "SVC_KEK": true,
	"PGPASSWORD": true, "PGPASSFILE": true, "PGSERVICEFILE": true,
}

// mergeEnv is the agent's environment: the runner's own without its
// credential, relay socket and ticket (the agent reaches the broker only
// through its toolbox and the OTLP relay) and without any variable that
// holds the token (dropped names them), then the setup's, then the
// adapter's.
func mergeEnv(base []string, add map[string]string, extra []string, token string) (env, dropped []string) {
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if k == client.EnvToken || k == relay.Env || k == relay.TicketEnv || brokerSecretEnv[k] {
			continue
		}
		if token != "" && strings.Contains(v, token) {
			dropped = append(dropped, k)
			continue
		}
		env = append(env, kv)
	}
	for k, v := range add {
		env = append(env, k+"="+v)
	}
	return append(env, extra...), dropped
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// agentProc is the running agent: its own process group, stdin and stdout
// on pipes the runner made (so reading stdout never races Wait).
type agentProc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	done   chan struct{}
	code   int
}

func startAgent(argv, env []string, stderr io.Writer) (*agentProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.SysProcAttr = agentProcAttr()
	p := &agentProc{cmd: cmd, stdin: inW, stdout: outR, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The agent's parent-death signal is tied to the thread that
		// started it (agentProcAttr): this goroutine keeps that thread
		// until the agent is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.code = 1
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	inR.Close()
	outW.Close()
	return p, nil
}

// stop SIGTERMs the agent's process group, SIGKILLs it after grace, and
// returns the agent's exit code.
func (p *agentProc) stop(grace time.Duration) int {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		// Exited by itself: its children may still run.
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		return p.code
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	return p.code
}

// follow holds the Subscribe stream, resuming after the last id it got,
// reconnecting with backoff; a refused credential is fatal.
func follow(ctx context.Context, cl *client.Client, last string, out chan<- *apiv1.Message, fatal chan<- error, log *logger) {
	backoff := minBackoff
	attached := false
	for ctx.Err() == nil {
		ready, err := followOnce(ctx, cl, &last, out, func(member string) {
			if !attached {
				attached = true
				log.logf("svc runner: attached to the stream of %s", member)
			}
		})
		if ctx.Err() != nil {
			return
		}
		switch client.Code(err) {
		case "unauthenticated", "forbidden", "bad_request", "unsupported_protocol":
			fatal <- err
			return
		}
		if ready {
			backoff = minBackoff
		}
		log.logf("svc runner: stream dropped (%s); reconnecting in %s", client.Describe(err, cl.URL()), backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func followOnce(ctx context.Context, cl *client.Client, last *string, out chan<- *apiv1.Message, onReady func(string)) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cl.Broker().Subscribe(sctx, &apiv1.SubscribeRequest{LastId: *last, Runner: true})
	if err != nil {
		return false, err
	}
	ready := false
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
			ready = true
			onReady(e.Ready.GetMember())
		case *apiv1.SubscribeResponse_Message:
			select {
			case out <- e.Message:
				*last = e.Message.GetId()
			case <-ctx.Done():
				return ready, ctx.Err()
			}
		}
	}
}

// reporter posts the activity state on every change and re-posts a
// non-idle state every heartbeat.
type reporter struct {
	ch   chan ActivityState
	post func(context.Context, ActivityState) error
	log  *logger

	mu     sync.Mutex
	posted ActivityState
}

func newReporter(post func(context.Context, ActivityState) error, log *logger) *reporter {
	return &reporter{ch: make(chan ActivityState, 1), post: post, log: log, posted: StateIdle}
}

// set hands over the newest state; an older one not yet posted is replaced.
func (r *reporter) set(s ActivityState) {
	for {
		select {
		case r.ch <- s:
			return
		default:
			select {
			case <-r.ch:
			default:
			}
		}
	}
}

// last is the state the broker was last told.
func (r *reporter) last() ActivityState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posted
}

func (r *reporter) run(ctx context.Context) {
	cur := StateIdle
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	failing := false
	post := func(s ActivityState) {
		pctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := r.post(pctx, s)
		cancel()
		if err != nil {
			if !failing && ctx.Err() == nil {
				r.log.logf("svc runner: activity not posted: %v", err)
			}
			failing = true
			return
		}
		failing = false
		r.mu.Lock()
		r.posted = s
		r.mu.Unlock()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-r.ch:
			cur = s
			post(s)
			tick.Reset(heartbeat)
		case <-tick.C:
			if cur != StateIdle {
				post(cur)
			}
		}
	}
}

// activityEvent is one upload of POST /members/:name/activity.
type activityEvent struct {
	Kind        string         `json:"kind"`
	TS          float64        `json:"ts"`
	ObjectiveID string         `json:"objectiveId,omitempty"`
	Data        map[string]any `json:"data"`
}

func uploadEvents(ctx context.Context, cl *client.Client, me string, evs []activityEvent) error {
	for len(evs) > 0 {
		n := min(len(evs), 500)
		if err := cl.Do(ctx, http.MethodPost, "/members/"+url.PathEscape(me)+"/activity", map[string]any{"events": evs[:n]}, nil); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// shutdownMarkers are the objective_close markers of a runner stop.
func shutdownMarkers(open []*apiv1.Objective) []activityEvent {
	now := float64(time.Now().UnixMilli())
	out := make([]activityEvent, 0, len(open))
	for _, o := range open {
		out = append(out, activityEvent{Kind: "objective_close", TS: now, ObjectiveID: o.GetId(),
			Data: map[string]any{"reason": "runner_shutdown"}})
	}
	return out
}

// uploader uploads the tool results of the agent's post-tool hooks as
// redacted tool_action events, in order, off the loop.
type uploader struct {
	cl     *client.Client
	me     string
	redact *Redactor
	log    *logger
	ch     chan activityEvent
	wg     sync.WaitGroup
}

func newUploader(cl *client.Client, me string, r *Redactor, log *logger) *uploader {
	return &uploader{cl: cl, me: me, redact: r, log: log, ch: make(chan activityEvent, uploadQueue)}
}

func (u *uploader) add(e Event) {
	ev := activityEvent{Kind: "tool_action", TS: float64(time.Now().UnixMilli()), Data: u.redact.ToolAction(e)}
	u.wg.Add(1)
	select {
	case u.ch <- ev:
	default:
		u.wg.Done()
		u.log.logf("svc runner: tool result of %s not uploaded: upload queue full", oneLine(e.Tool, 64))
	}
}

func (u *uploader) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-u.ch:
			batch := []activityEvent{ev}
		more:
			for len(batch) < 500 {
				select {
				case ev := <-u.ch:
					batch = append(batch, ev)
				default:
					break more
				}
			}
			uctx, cancel := context.WithTimeout(ctx, callTimeout)
			if err := uploadEvents(uctx, u.cl, u.me, batch); err != nil {
				u.log.logf("svc runner: %d tool result(s) not uploaded: %s", len(batch), client.Describe(err, u.cl.URL()))
			}
			cancel()
			u.wg.Add(-len(batch))
		}
	}
}

// flush waits (bounded by ctx) until every queued result was sent.
func (u *uploader) flush(ctx context.Context) {
	done := make(chan struct{})
	go func() { u.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// slugCache names channel ids for turn headers.
type slugCache struct {
	cl      *client.Client
	slugs   map[string]string
	fetched time.Time
}

func newSlugCache(cl *client.Client) *slugCache {
	return &slugCache{cl: cl, slugs: map[string]string{}}
}

// slug is called from the loop only; an unknown id refetches the channel
// list at most every 10 s.
func (c *slugCache) slug(id string) string {
	if s, ok := c.slugs[id]; ok {
		return s
	}
	if time.Since(c.fetched) < 10*time.Second {
		return ""
	}
	c.fetched = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.cl.Broker().ListChannels(ctx, &apiv1.ListChannelsRequest{})
	if err != nil {
		return ""
	}
	for _, ch := range res.GetChannels() {
		c.slugs[ch.GetId()] = ch.GetSlug()
	}
	return c.slugs[id]
}
