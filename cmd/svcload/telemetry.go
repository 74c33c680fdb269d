package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
)

// The telemetry group: OTLP log ingest of Claude Code sessions over
// http/protobuf and http/json, chat delivery alone and beside that ingest,
// and activity uploads. Every figure is checked against the rows the broker
// stored, so it counts work done, not requests refused.
const (
	telMembers   = 32  // OTLP exporters, each with a token of its own
	telSenders   = 8   // concurrent OTLP senders; sender s owns members s, s+8, …
	otlpBatch    = 100 // log records per export, as an exporter batches them
	telSampled   = 4   // members whose llm_exchange rows are counted after each ingest run
	actMembers   = 8   // concurrent activity uploaders, one member each
	actBatch     = 500 // events per upload: the most one may carry
	chatSubs     = 100 // subscribers of the chat load run alone and beside ingest
	besideWarmup = 300 * time.Millisecond
)

// Targets, reported beside the figures.
const (
	targetOTLPProto = 100000 // records/s over http/protobuf
	targetOTLPJSON  = 30000  // records/s over http/json
	targetChatRatio = 1.5    // chat delivery p99 beside ingest over alone
)

// telemetry runs the group: ingest over each encoding, chat delivery alone
// then beside protobuf ingest, then activity uploads.
func (lg *loadgen) telemetry(ctx context.Context) error {
	t := newTelRun(lg, time.Now())
	for i := range telMembers {
		if err := lg.createMember(ctx, telMember(i)); err != nil {
			return err
		}
	}
	for i := range actMembers {
		if err := lg.createMember(ctx, actMember(i)); err != nil {
			return err
		}
	}
	for _, enc := range []*otlpEncoding{t.proto, t.json} {
		if err := t.throughput(ctx, enc); err != nil {
			return err
		}
	}
	if err := t.chat(ctx); err != nil {
		return err
	}
	return t.uploads(ctx)
}

func telMember(i int) string { return "tel" + strconv.Itoa(i) }
func actMember(i int) string { return "act" + strconv.Itoa(i) }

// telRun holds the session templates of a run and what each member was
// sent, to check the stored rows against.
type telRun struct {
	lg          *loadgen
	proto, json *otlpEncoding
	// exchanges is the llm_exchange rows one session gives.
	exchanges int
	next      atomic.Uint64 // session counter, patched into every id
	sessions  [telMembers]atomic.Int64
	// tainted marks a member one of whose exports failed: its row count is
	// then unknown, and not checked.
	tainted [telMembers]atomic.Bool
}

func newTelRun(lg *loadgen, now time.Time) *telRun {
	recs, exchanges := claudeSession(now.Add(-time.Minute))
	return &telRun{
		lg: lg, exchanges: exchanges,
		proto: newEncoding("http/protobuf", "application/x-protobuf", recs, encodeOTLPProto),
		json:  newEncoding("http/json", "application/json", recs, encodeOTLPJSON),
	}
}

// ingestStats is the outcome of one ingest run: per export its latency.
type ingestStats struct {
	opStats
	records   int64 // in acknowledged exports
	unused    int64 // of those, records the broker said it did not use
	mismatch  int   // exports whose unused count was not the expected one
	firstMism error
}

// ingest runs telSenders closed-loop senders, each sending whole sessions
// (two exports) of its members in turn until stop says so at a session's
// end, the run ends, or an export fails.
func (t *telRun) ingest(ctx context.Context, enc *otlpEncoding, stop func() bool) ingestStats {
	var (
		mu sync.Mutex
		st ingestStats
		wg sync.WaitGroup
	)
	start := time.Now()
	for s := range telSenders {
		wg.Go(func() {
			var mine ingestStats
			defer func() {
				mu.Lock()
				st.n += mine.n
				st.lats = append(st.lats, mine.lats...)
				st.fails += mine.fails
				st.records += mine.records
				st.unused += mine.unused
				st.mismatch += mine.mismatch
				if st.firstErr == nil {
					st.firstErr = mine.firstErr
				}
				if st.firstMism == nil {
					st.firstMism = mine.firstMism
				}
				mu.Unlock()
			}()
			for k := 0; !stop() && ctx.Err() == nil; k++ {
				m := s + (k%(telMembers/telSenders))*telSenders
				member := telMember(m)
				tok := t.lg.tokens[member]
				session := t.next.Add(1)
				for part, rq := range enc.reqs {
					mine.n++
					begin := time.Now()
					unused, err := t.lg.export(ctx, enc, tok, rq.instance(session))
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						mine.fails++
						mine.firstErr = fmt.Errorf("%s session %d export %d: %w", member, session, part+1, err)
						t.tainted[m].Store(true)
						return
					}
					mine.lats = append(mine.lats, time.Since(begin))
					mine.records += int64(rq.records)
					mine.unused += unused
					if unused != int64(rq.unused) {
						mine.mismatch++
						if mine.firstMism == nil {
							mine.firstMism = fmt.Errorf("%s session %d export %d: %d records not used, want %d",
								member, session, part+1, unused, rq.unused)
						}
					}
				}
				t.sessions[m].Add(1)
			}
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	return st
}

// throughput reports one encoding's ingest rate, then checks the rows.
func (t *telRun) throughput(ctx context.Context, enc *otlpEncoding) error {
	lg := t.lg
	name := fmt.Sprintf("OTLP ingest %s, %d members, %d senders", enc.name, telMembers, telSenders)
	progress("%s", name)
	target := map[string]float64{"http/protobuf": targetOTLPProto, "http/json": targetOTLPJSON}[enc.name]
	cpu := lg.startCPU()
	deadline := time.Now().Add(lg.tputDur)
	st := t.ingest(ctx, enc, func() bool { return !time.Now().Before(deadline) })
	cpuUse := cpu()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	t.ingestRows(name, enc, st, target, cpuUse)
	return t.verify(ctx)
}

// ingestRows appends the rate row of an ingest run (with a target when
// target > 0) and, when exports failed or were answered unexpectedly, a row
// saying so; both break the run.
func (t *telRun) ingestRows(name string, enc *otlpEncoding, st ingestStats, target float64, cpu string) {
	lg := t.lg
	rate := 0.0
	if st.elapsed > 0 {
		rate = float64(st.records) / st.elapsed.Seconds()
	}
	unusedPct := 0.0
	if st.records > 0 {
		unusedPct = 100 * float64(st.unused) / float64(st.records)
	}
	r := row{
		name: name,
		result: fmt.Sprintf("%.0f records/s (%.0f exports/s of %d, %.0f KB each; %.1f%% unused by svc), export %s",
			rate, st.rate(), otlpBatch, enc.meanKB(), unusedPct, pctls(st.lats)),
		cpu: cpu,
	}
	if target > 0 {
		r.target, r.met = fmt.Sprintf("≥ %.0f records/s", target), verdict(rate >= target)
	}
	lg.rows = append(lg.rows, r)
	if st.fails == 0 && st.mismatch == 0 {
		return
	}
	lg.rows = append(lg.rows, row{
		name:   "  failed/unexpected",
		result: fmt.Sprintf("%d failed, %d answered with another unused count, of %d exports", st.fails, st.mismatch, st.n),
		target: "0 / 0", met: verdict(false),
	})
	if st.fails > 0 {
		lg.broken = append(lg.broken, fmt.Errorf("%s: %d of %d exports failed, first: %w", name, st.fails, st.n, st.firstErr))
	}
	if st.mismatch > 0 {
		lg.broken = append(lg.broken, fmt.Errorf("%s: %d of %d exports answered unexpectedly, first: %w", name, st.mismatch, st.n, st.firstMism))
	}
}

// verify counts the llm_exchange rows of sampled members against the
// sessions they were sent, and checks a few of the newest are whole
// exchanges (request, accounting and response correlated).
func (t *telRun) verify(ctx context.Context) error {
	lg := t.lg
	var (
		parts      []string
		exact, ok  = 0, true
		considered = 0
		sent       int64 // exchanges the sampled members were sent
	)
	for k := range telSampled {
		// One member of each of telSampled senders.
		m := (k*(telMembers/telSampled) + k) % telMembers
		member := telMember(m)
		if t.tainted[m].Load() {
			parts = append(parts, member+" not checked (an export failed)")
			continue
		}
		considered++
		want := t.sessions[m].Load() * int64(t.exchanges)
		sent += want
		got, err := lg.exchangeCount(ctx, member)
		if err != nil {
			return fmt.Errorf("verify %s: %w", member, err)
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d", member, got, want))
		if got == want {
			exact++
		} else {
			ok = false
			lg.broken = append(lg.broken, fmt.Errorf("OTLP ingest: %s has %d llm_exchange rows, want %d (%d sessions of %d)",
				member, got, want, t.sessions[m].Load(), t.exchanges))
		}
	}
	sample, whole, err := lg.wholeExchanges(ctx, telMember(0), 5)
	if err != nil {
		return fmt.Errorf("verify %s rows: %w", telMember(0), err)
	}
	if whole != sample || sample == 0 {
		ok = false
		lg.broken = append(lg.broken, fmt.Errorf("OTLP ingest: %d of the %d newest llm_exchange rows of %s are whole exchanges",
			whole, sample, telMember(0)))
	}
	lg.rows = append(lg.rows, row{
		name: "  verify llm_exchange rows",
		result: fmt.Sprintf("%s; %d of %d newest rows of %s whole exchanges",
			strings.Join(parts, ", "), whole, sample, telMember(0)),
		target: "= sent", met: verdict(ok && considered > 0 && exact == considered && sent > 0),
	})
	return nil
}

// chat reports chat delivery p99 of the same load alone and beside
// protobuf ingest at full speed, and their ratio.
func (t *telRun) chat(ctx context.Context) error {
	lg := t.lg
	count := int(lg.fanoutDur.Seconds() * float64(lg.rate))
	gap := time.Second / time.Duration(lg.rate)
	label := fmt.Sprintf("chat delivery %s × %d msg/s", subsN(chatSubs), lg.rate)
	alone, err := lg.fanoutAs(ctx, label+", alone", chatSubs, count, gap, false)
	if err != nil {
		return err
	}

	name := label + ", beside OTLP " + t.proto.name + " ingest"
	var (
		stop atomic.Bool
		st   ingestStats
		done = make(chan struct{})
	)
	cpu := lg.startCPU()
	go func() {
		defer close(done)
		st = t.ingest(ctx, t.proto, stop.Load)
	}()
	err = sleep(ctx, besideWarmup)
	beside := time.Duration(0)
	if err == nil {
		beside, err = lg.fanoutAs(ctx, name, chatSubs, count, gap, false)
	}
	stop.Store(true)
	<-done
	cpuUse := cpu()
	if err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	t.ingestRows(fmt.Sprintf("  OTLP ingest beside it, %d senders", telSenders), t.proto, st, 0, cpuUse)
	r := row{name: "  p99 beside / alone", result: "n/a: no samples", target: fmt.Sprintf("≤ %.1fx", targetChatRatio), met: verdict(false)}
	if alone > 0 && beside > 0 {
		ratio := float64(beside) / float64(alone)
		r.result = fmt.Sprintf("%.2fx (%s vs %s)", ratio, ms(beside), ms(alone))
		r.met = verdict(ratio <= targetChatRatio)
	}
	lg.rows = append(lg.rows, r)
	return t.verify(ctx)
}

// export posts one OTLP logs export and returns how many records the
// answer says were not used (partialSuccess.rejectedLogRecords).
func (lg *loadgen) export(ctx context.Context, enc *otlpEncoding, token string, body []byte) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lg.base+"/otlp/v1/logs", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", enc.contentType)
	resp, err := lg.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, statusError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if enc.contentType == "application/json" {
		var out struct {
			PartialSuccess *struct {
				RejectedLogRecords json.Number `json:"rejectedLogRecords"`
			} `json:"partialSuccess"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return 0, fmt.Errorf("decode the answer: %w", err)
		}
		if out.PartialSuccess == nil || out.PartialSuccess.RejectedLogRecords == "" {
			return 0, nil
		}
		return out.PartialSuccess.RejectedLogRecords.Int64()
	}
	var out collogspb.ExportLogsServiceResponse
	if err := proto.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("decode the answer: %w", err)
	}
	return out.GetPartialSuccess().GetRejectedLogRecords(), nil
}

// get sends a GET with a bearer token and decodes a 2xx JSON answer.
func (lg *loadgen) get(ctx context.Context, path, token string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lg.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := lg.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// exchangeCount is how many llm_exchange rows member has, all time (the
// usage route counts them).
func (lg *loadgen) exchangeCount(ctx context.Context, member string) (int64, error) {
	var out struct {
		Usage struct {
			Exchanges float64 `json:"exchanges"`
		} `json:"usage"`
	}
	if err := lg.get(ctx, "/members/"+url.PathEscape(member)+"/usage", lg.tokens[member], &out); err != nil {
		return 0, err
	}
	return int64(out.Usage.Exchanges), nil
}

// wholeExchanges reads member's newest n llm_exchange rows and counts those
// that carry request, accounting and response: correlated, not flushed
// alone.
func (lg *loadgen) wholeExchanges(ctx context.Context, member string, n int) (read, whole int, err error) {
	var out struct {
		Activity []struct {
			Kind string `json:"kind"`
			Data struct {
				Model       string          `json:"model"`
				RequestID   string          `json:"requestId"`
				ResponseID  string          `json:"responseId"`
				Messages    json.RawMessage `json:"messages"`
				Content     json.RawMessage `json:"content"`
				Usage       map[string]any  `json:"usage"`
				RequestOnly bool            `json:"requestOnly"`
				Truncated   bool            `json:"truncated"`
			} `json:"data"`
		} `json:"activity"`
	}
	path := fmt.Sprintf("/members/%s/activity?kind=llm_exchange&limit=%d", url.PathEscape(member), n)
	if err := lg.get(ctx, path, lg.tokens[member], &out); err != nil {
		return 0, 0, err
	}
	for _, r := range out.Activity {
		d := r.Data
		if r.Kind == "llm_exchange" && d.Model != "" && d.RequestID != "" && d.ResponseID != "" &&
			len(d.Messages) > 2 && len(d.Content) > 2 && len(d.Usage) > 0 && !d.RequestOnly && !d.Truncated {
			whole++
		}
	}
	return len(out.Activity), whole, nil
}

// uploads runs actMembers closed-loop uploaders of actBatch-event activity
// uploads, one member each, and reports rows/s; then checks the rows.
func (t *telRun) uploads(ctx context.Context) error {
	lg := t.lg
	name := fmt.Sprintf("activity upload %d events, %s", actBatch, countN(actMembers, "member"))
	progress("%s", name)
	body, exchanges := activityUpload(time.Now().Add(-time.Minute))
	var (
		acks [actMembers]int64
		lats = make([][]time.Duration, actMembers)
		errs = make([]error, actMembers)
		wg   sync.WaitGroup
	)
	cpu := lg.startCPU()
	start := time.Now()
	deadline := start.Add(lg.tputDur)
	for i := range actMembers {
		member := actMember(i)
		path, tok := "/members/"+member+"/activity", lg.tokens[member]
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				begin := time.Now()
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				var out struct {
					Accepted int `json:"accepted"`
				}
				err := lg.do(cctx, path, tok, body, &out)
				cancel()
				if err == nil && out.Accepted != actBatch {
					err = fmt.Errorf("accepted %d of %d events", out.Accepted, actBatch)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = fmt.Errorf("%s: %w", member, err)
					}
					return
				}
				lats[i] = append(lats[i], time.Since(begin))
				acks[i]++
			}
		})
	}
	wg.Wait()
	elapsed, cpuUse := time.Since(start), cpu()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	var all []time.Duration
	var uploads int64
	for i := range actMembers {
		all = append(all, lats[i]...)
		uploads += acks[i]
	}
	lg.rows = append(lg.rows, row{
		name: name,
		result: fmt.Sprintf("%.0f rows/s (%.1f uploads/s, %.0f KB each), upload %s",
			float64(uploads*actBatch)/elapsed.Seconds(), float64(uploads)/elapsed.Seconds(), float64(len(body))/1e3, pctls(all)),
		cpu: cpuUse,
	})
	if err := errors.Join(errs...); err != nil {
		lg.broken = append(lg.broken, fmt.Errorf("%s: %w", name, err))
	}

	// Each acknowledged upload stored its exchanges: count them per member.
	exact, checked := 0, 0
	for i := range actMembers {
		if errs[i] != nil {
			continue
		}
		checked++
		member := actMember(i)
		got, err := lg.exchangeCount(ctx, member)
		if err != nil {
			return fmt.Errorf("verify %s: %w", member, err)
		}
		if want := acks[i] * int64(exchanges); got == want {
			exact++
		} else {
			lg.broken = append(lg.broken, fmt.Errorf("%s: %s has %d llm_exchange rows, want %d (%d uploads of %d)",
				name, member, got, want, acks[i], exchanges))
		}
	}
	lg.rows = append(lg.rows, row{
		name:   "  verify",
		result: fmt.Sprintf("%d of %d members hold every acknowledged row (%d uploads, %d rows)", exact, checked, uploads, uploads*actBatch),
		target: "= sent", met: verdict(checked == actMembers && exact == checked && uploads > 0),
	})
	return nil
}
