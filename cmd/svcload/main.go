// Command svcload drives an svc broker over loopback and prints delivery
// latency, push throughput over REST and over gRPC, broadcast reach,
// ordering/loss and memory per subscriber beside their targets, file throughput beside the raw disk's,
// objective operations per second, and telemetry: OTLP ingest and activity
// upload rates, chat delivery beside OTLP ingest, and what invoking a tool
// through svc adds over calling its upstream directly, and verified inbound
// hook deliveries per second and their 202 latency, and how fast `svc
// runner` wakes an idle agent and what it costs while idle. It spawns the broker
// itself, so it knows the pid whose memory it reads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// plan holds the durations and counts of one run.
type plan struct {
	name       string
	fanoutDur  time.Duration // each delivery-latency run
	rate       int           // broadcasts per second in the latency runs
	tputDur    time.Duration // each telemetry ingest run
	reachCount int           // broadcasts in the reach run
	reachGap   time.Duration // spacing of those broadcasts
	settle     time.Duration // pause before reading VmRSS, so the heap settles
	budget     time.Duration // hard bound on the whole run
	only       []string      // scenario groups to run; empty means all
	fileCases  []fileCase    // file sizes and counts of the files runs
	objCount   int           // objectives created, then completed, per objectives run
	pushDur    time.Duration // each mode of the push throughput group
}

var (
	fullPlan  = plan{"full", 5 * time.Second, 100, 5 * time.Second, 50, 50 * time.Millisecond, 3 * time.Second, 10 * time.Minute, nil, fullFileCases, 2000, 10 * time.Second}
	quickPlan = plan{"quick", time.Second, 100, time.Second, 20, 50 * time.Millisecond, time.Second, 3 * time.Minute, nil, quickFileCases, 200, time.Second}
)

func main() {
	if path := os.Getenv(stubAgentEnv); path != "" {
		os.Exit(stubAgent(path))
	}
	svcPath := flag.String("svc", "bin/svc", "path to the svc binary to spawn")
	quick := flag.Bool("quick", false, "short durations for a smoke run")
	outPath := flag.String("out", "", "also write the summary table to this file")
	only := flag.String("only", "", "comma-separated scenario groups to run: memory, delivery, reach, throughput, files, objectives, telemetry, tools, hooks, runner (default all)")
	pushDur := flag.Duration("push-dur", 0, "publish window of each throughput mode (default 10s, 1s with --quick)")
	flag.Usage = usage
	flag.Parse()

	p := fullPlan
	if *quick {
		p = quickPlan
	}
	if *pushDur < 0 {
		fmt.Fprintln(os.Stderr, "svcload: --push-dur must not be negative")
		os.Exit(2)
	}
	if *pushDur > 0 {
		p.pushDur = *pushDur
	}
	if *only != "" {
		p.only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, p, *svcPath, *outPath)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "svcload:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `usage: svcload [flags]

svcload spawns --svc on 127.0.0.1 with a temporary file store, runs the
scenario groups (all, or those --only names) and prints each figure beside
its target. The throughput group is the kit's cell 3 against our broker on
both transports, one after the other: 16 publishers (members tpub0..15)
broadcast 64-byte bodies back to back for --push-dur, first with REST
POST /push over one HTTP/1.1 keep-alive connection each, then with native
gRPC Broker.Push over one HTTP/2 connection each (bearer and
x-svc-protocol in the metadata); one SSE subscriber checks that no
acknowledged push is lost, duplicated or out of order per publisher. It
reports accepted pushes/s, the publish round trip p50/p99/max and the
broker's CPU (utime+stime) per accepted push.

`)
	flag.PrintDefaults()
}

// run spawns the broker, runs every scenario, stops the broker and prints the
// summary. It fails only on a broken run: an error, or the broker dying.
func run(ctx context.Context, p plan, svcPath, outPath string) error {
	nofile, err := raiseNoFile()
	if err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, p.budget, errors.New("run budget exceeded"))
	defer cancel()
	b, err := startBroker(ctx, svcPath)
	if err != nil {
		return err
	}
	ctx, abort := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-b.done:
			abort(errBrokerDied)
		case <-ctx.Done():
		}
	}()

	lg := newLoadgen(p, b)
	runErr := lg.all(ctx)
	if runErr == nil && lg.runs("tools") {
		runErr = lg.tools(ctx)
	}
	if runErr == nil && lg.runs("hooks") {
		runErr = lg.hooks(ctx)
	}
	if runErr == nil && lg.runs("runner") {
		runErr = lg.runner(ctx)
	}
	if c := context.Cause(ctx); runErr != nil && c != nil && !errors.Is(runErr, c) && !errors.Is(c, context.Canceled) {
		runErr = fmt.Errorf("%w (%w)", runErr, c)
	}
	lg.close()
	stopErr := b.stop()

	header := fmt.Sprintf("svcload %s run: broker pid %d at %s, %d CPUs, RLIMIT_NOFILE %d",
		p.name, b.pid, b.addr, runtime.NumCPU(), nofile)
	var sb strings.Builder
	writeTable(&sb, header, lg.rows)
	fmt.Print(sb.String())
	if outPath != "" {
		if err := os.WriteFile(outPath, []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	if err := errors.Join(runErr, stopErr, lg.brokenErr()); err != nil {
		if _, err := os.Stat(b.dir); err == nil {
			fmt.Fprintf(os.Stderr, "broker state kept in %s\n", b.dir)
		}
		fmt.Fprintf(os.Stderr, "last broker log lines:\n%s\n", b.stderrTail())
		return err
	}
	return nil
}

// raiseNoFile lifts the soft open-file limit to the hard one. The spawned
// broker inherits it: it holds a socket per subscriber, as do we.
func raiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	rl.Cur = rl.Max
	return rl.Cur, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
}

// row is one line of the summary.
type row struct {
	name, result, target string
	met                  *bool  // nil: no target
	cpu                  string // cores busy: broker / svcload / rest of the machine
}

func verdict(ok bool) *bool { return &ok }

func writeTable(w io.Writer, header string, rows []row) {
	fmt.Fprintf(w, "\n%s\n\n", header)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASUREMENT\tRESULT\tTARGET\tMET\tCORES BROKER/SVCLOAD/OTHER")
	for _, r := range rows {
		met := ""
		if r.met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*r.met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.name, r.result, r.target, met, r.cpu)
	}
	tw.Flush()
}
