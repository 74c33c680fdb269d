package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// assignee is the member the admin assigns the load's objectives to; it
	// holds no permission, as completing needs only being the assignee.
	assignee = "doer"
	// phaseCap bounds each closed-loop phase (a batch of creates, writes,
	// ...), so a slow broker shortens the figures instead of eating the run
	// budget; operations not started by then are reported as skipped.
	phaseCap = 2 * time.Minute
)

// objectiveClients are the concurrent REST clients of the objectives runs.
var objectiveClients = []int{1, 16}

// objectives has the admin create lg.objCount objectives for the
// assignee, then the assignee complete them, with each number of concurrent
// clients, and reports ops/s and latency per kind of operation.
func (lg *loadgen) objectives(ctx context.Context) error {
	if err := lg.createMember(ctx, assignee); err != nil {
		return err
	}
	for _, clients := range objectiveClients {
		if err := lg.objectiveRun(ctx, clients); err != nil {
			return err
		}
	}
	return nil
}

// objectiveAnswer is the part of an Objective the runs check.
type objectiveAnswer struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Assignee string `json:"assignee"`
}

func (lg *loadgen) objectiveRun(ctx context.Context, clients int) error {
	n := lg.objCount
	ids := make([]string, n)
	admin, doer := lg.tokens["admin"], lg.tokens[assignee]

	name := fmt.Sprintf("objectives create, %s (%d)", countN(clients, "client"), n)
	progress("%s", name)
	cpu := lg.startCPU()
	created := closedLoop(ctx, n, clients, phaseCap, func(ctx context.Context, i int) error {
		body, _ := json.Marshal(map[string]string{
			"title":    "load " + strconv.Itoa(i),
			"outcome":  "the load generator completes it",
			"assignee": assignee,
		})
		var o objectiveAnswer
		if err := lg.do(ctx, "/objectives", admin, body, &o); err != nil {
			return err
		}
		if o.ID == "" || o.Status != "active" || o.Assignee != assignee {
			return fmt.Errorf("create answered id %q status %q assignee %q, want an id, active, %s", o.ID, o.Status, o.Assignee, assignee)
		}
		ids[i] = o.ID
		return nil
	})
	lg.opRows(name, created, cpu())
	if err := context.Cause(ctx); err != nil {
		return err
	}

	name = fmt.Sprintf("objectives complete, %s (%d)", countN(clients, "client"), n)
	progress("%s", name)
	cpu = lg.startCPU()
	completed := closedLoop(ctx, n, clients, phaseCap, func(ctx context.Context, i int) error {
		if ids[i] == "" {
			return errNotCreated
		}
		var o objectiveAnswer
		if err := lg.do(ctx, "/objectives/"+ids[i]+"/complete", doer, []byte(`{"result":"done by svcload"}`), &o); err != nil {
			return err
		}
		if o.ID != ids[i] || o.Status != "done" {
			return fmt.Errorf("complete of %s answered id %q status %q, want done", ids[i], o.ID, o.Status)
		}
		return nil
	})
	lg.opRows(name, completed, cpu())
	return context.Cause(ctx)
}

// errNotCreated marks a complete not attempted because its create failed.
var errNotCreated = errors.New("objective not created")

// opRows appends the rate row of a closed-loop phase and, when operations
// failed or were skipped, a row saying so; failures also break the run.
func (lg *loadgen) opRows(name string, s opStats, cpu string) {
	lg.rows = append(lg.rows, row{
		name:   name,
		result: fmt.Sprintf("%.0f ops/s, %s", s.rate(), pctls(s.lats)),
		cpu:    cpu,
	})
	if s.fails == 0 && s.skipped == 0 {
		return
	}
	lg.rows = append(lg.rows, row{
		name:   "  failed/skipped",
		result: fmt.Sprintf("%d failed, %d not started of %d", s.fails, s.skipped, s.n),
		target: "0 / 0", met: verdict(false),
	})
	if s.fails > 0 {
		lg.broken = append(lg.broken, fmt.Errorf("%s: %d of %d failed, first: %w", name, s.fails, s.n, s.firstErr))
	}
}

// opStats is the outcome of a closed-loop batch of n operations.
type opStats struct {
	n        int
	lats     []time.Duration // one per success
	fails    int
	firstErr error
	skipped  int // not started: the phase cap passed or the run ended
	elapsed  time.Duration
}

// rate is successful operations per second.
func (s opStats) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.lats)) / s.elapsed.Seconds()
}

// closedLoop runs op(ctx, i) once for each i in [0, n) on clients workers,
// each starting its next operation when the last one answers, until all n
// ran, limit passed or ctx ended. Each operation gets callTimeout.
func closedLoop(ctx context.Context, n, clients int, limit time.Duration, op func(ctx context.Context, i int) error) opStats {
	var (
		next    atomic.Int64
		mu      sync.Mutex
		s       = opStats{n: n}
		started atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(limit)
	for range clients {
		wg.Go(func() {
			var lats []time.Duration
			fails := 0
			var firstErr error
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= n {
					break
				}
				started.Add(1)
				t := time.Now()
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				err := op(cctx, i)
				cancel()
				if err != nil {
					fails++
					if firstErr == nil {
						firstErr = fmt.Errorf("op %d: %w", i, err)
					}
					continue
				}
				lats = append(lats, time.Since(t))
			}
			mu.Lock()
			s.lats = append(s.lats, lats...)
			s.fails += fails
			if s.firstErr == nil {
				s.firstErr = firstErr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	s.skipped = n - int(started.Load())
	return s
}
