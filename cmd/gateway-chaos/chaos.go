package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scenarios are the faults, in the order they run.
var Scenarios = []string{"rolling", "kill", "freeze", "redis-freeze"}

// Options configure a run.
type Options struct {
	Short         bool
	Sessions      int           // sessions, one RunJob loop each
	Watchers      int           // SubmitJob + WatchJob loops
	Events        int           // events of a watched job (a little more for some)
	EventInterval time.Duration // between a job's events
	TTL           time.Duration // --lease-ttl of the replicas
	CallTimeout   time.Duration // each unary call's deadline
	Think         time.Duration // a RunJob loop's pause between two calls
	WatchGiveUp   time.Duration // a watch without progress this long is abandoned
	Warmup        time.Duration // load before each fault
	Recover       time.Duration // the longest wait for every session to answer after a fault
	Timeout       time.Duration // bounds the whole run
	Scenarios     []string
	GatewayBin    string // "" = go build ./cmd/gateway
	Nginx         string // nginx binary, "" = PATH or /usr/sbin/nginx
	NginxConf     string // "" = the recipe of docs/balancers.md, docs/operations.md or README.md
	LogDir        string // "" = only the logs' tails are printed on a failure; else every log is written here too
	// EnforceAvailability makes the availability checks (sessions lost,
	// failed calls in the rolling restart, outage of kill and freeze) fail
	// the run; without it they are printed only.
	EnforceAvailability bool
	Progress            io.Writer
}

// enforceAvailabilityDefault is -enforce-availability's default in full
// mode: on since the load's direct route is the project's Go client, whose
// silence bound moves calls and watches off a frozen replica (before, a
// call it sent to the frozen replica itself waited for the thaw, and the
// freeze outage was about 10 s against a 6 s limit). Every full run passed
// every threshold: two of the final code (freeze outage max 4.36 / 5.21 s,
// kill 4.94 / 5.02 s, rolling restart 0 failed calls) and three before
// watches were bounded too (freeze 3.91, 3.85, 5.97 s); see the README's
// Cluster figures.
const enforceAvailabilityDefault = true

// enforceAvailabilityShort is its default with -short, the mode CI runs:
// on. What failed the short mode before, and the fixes (each with a test
// of its own): a quiet job's watch and a watch cut before its first event
// were refused by the replica that took the session over
// (TestIdleJobWatchAcrossHandoff, TestWatchFromAcceptAcrossHandoff); a job
// that ended after the resume point was refused when the runtime's job
// listing overtook the resume's replay (TestAdoptEndedJobAheadOfItsReplay);
// a call whose forward to a frozen owner was given up forwarded into the
// silence again past the lease's end (TestForwardAwaitsSilentOwnersLease),
// and one cut by the watchdog before the owner's header failed
// (TestForwardRoutedAgainWhenWatchdogDropsPeer). After them, on a 2-core
// machine with two CPU hogs beside the run and 6 watchers, 10 of 10 runs
// of all four scenarios and 10 of 10 of kill and freeze passed every
// threshold (freeze outage 1.62–2.10 s, kill 1.61–2.24 s, against TTL +
// 1 s = 3 s; before the silent-owner wait, freeze reached 2.84 s), and so
// did 25 of 25 rolling-only runs without hogs and the short mode under
// go test -race beside four other packages' tests.
const enforceAvailabilityShort = true

func defaultOptions(short bool) Options {
	if short {
		return Options{Short: true, Sessions: 9, Watchers: 3, Events: 20, EventInterval: 25 * time.Millisecond,
			TTL: 2 * time.Second, CallTimeout: 8 * time.Second, Think: 20 * time.Millisecond, WatchGiveUp: 15 * time.Second,
			Warmup: 1500 * time.Millisecond, Recover: 15 * time.Second, Timeout: 4 * time.Minute,
			Scenarios: Scenarios, EnforceAvailability: enforceAvailabilityShort}
	}
	return Options{Sessions: 40, Watchers: 15, Events: 100, EventInterval: 50 * time.Millisecond,
		TTL: 5 * time.Second, CallTimeout: 30 * time.Second, Think: 20 * time.Millisecond, WatchGiveUp: 40 * time.Second,
		Warmup: 5 * time.Second, Recover: 40 * time.Second, Timeout: 15 * time.Minute,
		Scenarios: Scenarios, EnforceAvailability: enforceAvailabilityDefault}
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "gateway-chaos: "+format+"\n", args...)
	}
}

func (o Options) validate() error {
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	switch {
	case o.Sessions < 1:
		return errors.New("-sessions: at least 1")
	case o.Watchers < 0:
		return errors.New("-watchers: not negative")
	case o.TTL < 500*time.Millisecond:
		return errors.New("-ttl: at least 500ms")
	case o.Think < 0 || o.Think > time.Second:
		return errors.New("-think: 0 to 1s")
	}
	return nil
}

// Run starts the rig, runs the load through a baseline and each scenario,
// and returns the report. An error means the run could not measure (a
// process did not start, the cluster did not recover); the report then
// holds what was measured.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	mode := "full"
	if o.Short {
		mode = "short"
	}
	rep := &Report{Mode: mode, LeaseTTLSeconds: o.TTL.Seconds(), Sessions: o.Sessions, Watchers: o.Watchers,
		EventsPerJob: o.Events, ThinkMS: o.Think.Milliseconds(), EnforceAvailability: o.EnforceAvailability}
	r, err := startRig(ctx, o)
	if err != nil {
		return nil, err
	}
	defer r.close()
	rec := newRecorder(o.Sessions)
	l := newLoad(o, r.viaNginx, r.direct.Conn(), rec)
	if err := l.open(ctx); err != nil {
		return nil, err
	}
	faults := map[string]string{}
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { l.run(lctx) })
	err = func() error {
		rec.begin("baseline")
		o.progress("baseline: %d sessions, %d watchers, no fault", o.Sessions, o.Watchers)
		if err := settle(ctx, o, rec); err != nil {
			return err
		}
		for _, s := range o.Scenarios {
			w := rec.begin(s)
			if err := settle(ctx, o, rec); err != nil {
				return err
			}
			desc, err := runScenario(ctx, o, r, rec, w)
			faults[s] = desc
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}()
	rec.finish()
	stopLoad()
	wg.Wait()
	rep.Pass = err == nil
	if err != nil {
		rep.Error = err.Error()
	}
	for _, w := range rec.windows {
		sr := scenarioReport(w, faults[w.name], o.TTL, o.EnforceAvailability)
		if len(sr.failed()) > 0 {
			rep.Pass = false
		}
		rep.Scenarios = append(rep.Scenarios, sr)
	}
	if !rep.Pass {
		r.dumpLogs(o)
	}
	return rep, err
}

// settle runs the load for the warm-up and until every session has
// answered since the window began (bounded by Recover).
func settle(ctx context.Context, o Options, rec *recorder) error {
	start := time.Now()
	pause(ctx, o.Warmup)
	return waitAnswered(ctx, o, rec, start)
}

// waitAnswered waits until every session has had a successful call after
// since, for at most o.Recover.
func waitAnswered(ctx context.Context, o Options, rec *recorder, since time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, o.Recover)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !rec.answeredSince(since) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not every session answered within %v: %w", o.Recover, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// victim is the replica that owns the most sessions (by the sessions'
// last status), so that a fault of it hits the load.
func victim(r *rig, rec *recorder) int {
	owners := rec.ownersOf()
	best := 0
	for i, rp := range r.c.Replicas {
		if owners[rp.Instance] > owners[r.c.Replicas[best].Instance] {
			best = i
		}
	}
	return best
}

// runScenario injects one fault, waits until every session answers again
// (recording how long that took), and restores the cluster: every replica
// SERVING, redis-server running.
func runScenario(ctx context.Context, o Options, r *rig, rec *recorder, w *window) (string, error) {
	twoTTL := 2 * o.TTL
	switch w.name {
	case "rolling":
		desc := "SIGTERM of each replica in turn, restarted and SERVING on grpc.health before the next"
		rec.markFault(w, "")
		for i, rp := range r.c.Replicas {
			o.progress("rolling: SIGTERM %s", rp.Instance)
			tctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			err := r.c.Term(tctx, i)
			cancel()
			if err != nil {
				return desc, err
			}
			if err := r.restart(ctx, i); err != nil {
				return desc, err
			}
			// Let the load run on the restarted replica before the next.
			start := time.Now()
			pause(ctx, o.Warmup/2)
			if err := waitAnswered(ctx, o, rec, start); err != nil {
				rec.note(w, "after %s restarted: %v", rp.Instance, err)
			}
		}
		rec.markFaultEnd(w)
		return desc, recovered(ctx, o, rec, w)
	case "kill":
		v := victim(r, rec)
		inst := r.c.Replicas[v].Instance
		desc := "SIGKILL of the replica owning most sessions; restarted after every session answered"
		o.progress("kill: SIGKILL %s", inst)
		rec.markFault(w, inst)
		r.c.Kill(v)
		rec.markFaultEnd(w)
		err := recovered(ctx, o, rec, w)
		return desc, errors.Join(err, r.restart(ctx, v))
	case "freeze":
		v := victim(r, rec)
		inst := r.c.Replicas[v].Instance
		desc := fmt.Sprintf("SIGSTOP of the replica owning most sessions for 2 × TTL (%v), then SIGCONT", twoTTL)
		pid := r.c.Pid(v)
		o.progress("freeze: SIGSTOP %s (pid %d) for %v", inst, pid, twoTTL)
		rec.markFault(w, inst)
		if err := r.stop(pid); err != nil {
			return desc, err
		}
		pause(ctx, twoTTL)
		err := r.cont(pid)
		rec.markFaultEnd(w)
		if err != nil {
			return desc, err
		}
		err = recovered(ctx, o, rec, w)
		// The thawed replica may have exited (a fenced replica may stop):
		// bring it back for the next scenario.
		return desc, errors.Join(err, r.restart(ctx, v))
	case "redis-freeze":
		desc := fmt.Sprintf("SIGSTOP of redis-server for 2 × TTL (%v), then SIGCONT", twoTTL)
		pid := r.c.RedisPid()
		o.progress("redis-freeze: SIGSTOP redis-server (pid %d) for %v", pid, twoTTL)
		rec.markFault(w, "")
		if err := r.stop(pid); err != nil {
			return desc, err
		}
		pause(ctx, twoTTL)
		err := r.cont(pid)
		rec.markFaultEnd(w)
		if err != nil {
			return desc, err
		}
		err = recovered(ctx, o, rec, w)
		for i := range r.c.Replicas {
			err = errors.Join(err, r.restart(ctx, i))
		}
		return desc, err
	}
	return "", fmt.Errorf("unknown scenario %q", w.name)
}

// recovered waits until every session answered after the fault ended and
// notes how long that took. Not recovering within o.Recover is a finding
// (the outage shows it), not an error of the run.
func recovered(ctx context.Context, o Options, rec *recorder, w *window) error {
	if err := waitAnswered(ctx, o, rec, w.faultEnd); err != nil {
		if ctx.Err() != nil {
			return err
		}
		rec.note(w, "%v", err)
		o.progress("%s: %v", w.name, err)
		return nil
	}
	w.recoveredIn = time.Since(w.faultEnd)
	o.progress("%s: every session answered %.2fs after the fault ended", w.name, w.recoveredIn.Seconds())
	return nil
}
