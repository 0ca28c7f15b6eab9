package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// reattachProbe is the re-attach probe period the tests run with; the bound
// a lost job's callers wait is a few of them.
const reattachProbe = 200 * time.Millisecond

// A 20-event stream is cut after its 8th event (the runtime drops every
// transport), in every dialect. Runtimes that go on streaming after a
// resume (reference, Go) deliver it whole, once and in order, and are never
// sent a job.subscribe for it (a Go runtime would then send every later
// event twice). The TS runtime stops streaming it (its job writes to the
// dead transport); before re-attachment the watcher waited forever. Now it
// ends, within a few probe periods, with the terminal job.error JOB_LOST
// naming the job, after every event that reached the runtime's buffer.
func TestStreamCutMidwayAfterResume(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{Dialect: d.Dialect})
			cfg := baseConfig(srv.URL())
			upstream.SetKnobs(&cfg, upstream.Knobs{ReattachProbe: reattachProbe})
			c := dial(t, cfg)
			ctx := testCtx(t, 20*time.Second)
			acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 20, "interval_ms": 40})})
			if err != nil {
				t.Fatal(err)
			}
			w, err := c.Watch(acc.JobID, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var got []int
			var term upstream.Item
			var cutAt time.Time
			for {
				it, err := w.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("after %v: %v", got, err)
				}
				if it.Event != nil {
					var b struct{ I int }
					_ = json.Unmarshal(it.Event.Body, &b)
					got = append(got, b.I)
					if len(got) == 8 {
						srv.Runtime().DropTransports()
						cutAt = time.Now()
					}
					continue
				}
				term = it
			}
			lost := cfgCounters(c).JobsLost.Load()
			t.Logf("%s: events %v, terminal result=%v error=%+v, %v after the cut; reattached %d, lost %d",
				d.Name, got, term.Result != nil, term.Error, time.Since(cutAt).Round(time.Millisecond), cfgCounters(c).Reattached.Load(), lost)
			for i, v := range got {
				if v != i {
					t.Fatalf("events %v: not each once and in order", got)
				}
			}
			if !d.Dialect.LoseRunningJobsOnResume {
				if len(got) != 20 || term.Result == nil {
					t.Fatalf("got %d events and terminal %+v; want the whole stream and its result", len(got), term)
				}
				if n := cfgCounters(c).Reattached.Load(); n != 0 {
					t.Fatalf("%d job.subscribe re-attachments sent for a job the runtime went on streaming", n)
				}
				return
			}
			if term.Error == nil || term.Error.Code != upstream.CodeJobLost {
				t.Fatalf("terminal %+v; want job.error %s", term, upstream.CodeJobLost)
			}
			if len(got) < 8 {
				t.Fatalf("events %v: the ones before the cut are missing", got)
			}
			if el := time.Since(cutAt); el > 10*reattachProbe+2*time.Second {
				t.Fatalf("the lost job ended %v after the cut; the bound is a few probe periods", el)
			}
			if lost != 1 {
				t.Fatalf("JobsLost = %d, want 1", lost)
			}
		})
	}
}

// A job still running when the TS runtime loses it, and silent (a sleep),
// is listed live by the first probe: it is not lost while the runtime says
// it runs, and ends as lost once the runtime stops listing it. Wait returns
// the definite error too.
func TestSilentLostJobEndsWhenTheRuntimeStopsListingIt(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	cfg := baseConfig(srv.URL())
	upstream.SetKnobs(&cfg, upstream.Knobs{ReattachProbe: reattachProbe})
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 1500})})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the first progress event", func() bool { return c.Status().LastEventSeq > 0 })
	srv.Runtime().DropTransports()
	start := time.Now()
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if term.Error == nil || term.Error.Code != upstream.CodeJobLost {
		t.Fatalf("terminal %+v; want %s", term, upstream.CodeJobLost)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("lost after %v", el)
	}
	if cfgCounters(c).Reattached.Load() == 0 {
		t.Fatal("the job was failed without a re-attachment attempt")
	}
}

// Both official runtimes share idempotency keys among a principal's
// sessions; the gateway namespaces keys per caller, so a caller's retry
// from its second session replays the first session's job.accepted, while
// the job's events go to the first session. Before: the second session's
// Wait waited for a terminal that never came. Now the replayed job is
// attached to the second session (job.subscribe, history from 0) and its
// result arrives there.
func TestReplayOfAnotherSessionsJobIsAttached(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{Dialect: d.Dialect})
			cfg := baseConfig(srv.URL())
			cfg.KeyNamespace = "alice"
			a, b := dial(t, cfg), dial(t, cfg)
			ctx := testCtx(t, 20*time.Second)
			s := arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 5, "interval_ms": 60}), IdempotencyKey: "k1"}
			accA, err := a.Submit(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			accB, err := b.Submit(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			term, err := b.Wait(wctx, accB.JobID)
			if err != nil {
				t.Fatalf("second session's Wait: %v", err)
			}
			if term.Result == nil {
				t.Fatalf("second session's terminal %+v, want the result", term)
			}
			if d.Dialect.IdempotencyScope != arcpruntime.ScopePrincipal {
				if accB.JobID == accA.JobID {
					t.Fatal("session-scoped keys gave the same job")
				}
				return
			}
			if accB.JobID != accA.JobID {
				t.Fatalf("retry got job %s, want the replay of %s", accB.JobID, accA.JobID)
			}
			if !b.OwnedElsewhere(accB.JobID) || cfgCounters(b).ForeignReplays.Load() != 1 {
				t.Fatalf("the replay was not recognised as another session's job (foreign replays %d)", cfgCounters(b).ForeignReplays.Load())
			}
			termA, err := a.Wait(ctx, accA.JobID)
			if err != nil || termA.Result == nil || string(termA.Result.Result) != string(term.Result.Result) {
				t.Fatalf("first session: %+v %v; second: %s", termA, err, term.Result.Result)
			}
			if n := cfgCounters(b).OrphansCancelled.Load(); n != 0 {
				t.Fatalf("the second session cancelled %d jobs as orphans", n)
			}
		})
	}
}

// takenOver returns a connection that took over a session with a running
// job (the job's id), dialled with features.
func takenOver(t *testing.T, srv *arcpruntime.Server, features []string) (*upstream.Conn, string) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	cfg := baseConfig(srv.URL())
	cfg.Features = features
	var tokens []string
	cfg.OnWelcome = func(_, tok string) { tokens = append(tokens, tok) }
	a, err := upstream.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := a.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 3000})})
	if err != nil {
		t.Fatal(err)
	}
	a.Detach()
	cfg2 := baseConfig(srv.URL())
	cfg2.Features = features
	cfg2.Resume = &upstream.ResumeFrom{SessionID: a.Status().SessionID, ResumeToken: tokens[0]}
	return dial(t, cfg2), acc.JobID
}

// AdoptJob is bounded: unknown job ids on a taken-over session cost one
// listing per generation in all (before: up to 100 list_jobs requests per
// id), are never registered (before, without list_jobs, every id a caller
// sent was registered and never removed), and a job the runtime lists is
// adopted.
func TestAdoptJobBounded(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	b, job := takenOver(t, srv, nil)
	ctx := testCtx(t, 20*time.Second)
	for i := range 200 {
		if err := b.AdoptJob(ctx, "job_nope_"+strconv.Itoa(i)); !errors.Is(err, upstream.ErrUnknownJob) {
			t.Fatalf("AdoptJob of an unknown id = %v", err)
		}
	}
	if err := b.AdoptJob(ctx, job); err != nil {
		t.Fatalf("AdoptJob of the running job = %v", err)
	}
	if n := cfgCounters(b).AdoptListings.Load(); n != 1 {
		t.Fatalf("%d listings for 201 AdoptJob calls in one generation, want 1", n)
	}
	if got := b.ActiveJobs(); got != 1 {
		t.Fatalf("%d jobs registered, want only the runtime's one", got)
	}
	if !b.HasJob(job) || b.HasJob("job_nope_0") {
		t.Fatal("registered the wrong jobs")
	}

	// Without list_jobs nothing is registered ahead of the runtime.
	srv2 := runtimeServer(t, arcpruntime.Options{})
	c, job2 := takenOver(t, srv2, []string{arcp.FeatureHeartbeat, arcp.FeatureAck})
	for i := range 200 {
		if err := c.AdoptJob(ctx, "job_nope_"+strconv.Itoa(i)); !errors.Is(err, upstream.ErrUnknownJob) {
			t.Fatalf("AdoptJob without list_jobs = %v", err)
		}
	}
	if c.ActiveJobs() != 0 && !c.HasJob(job2) {
		t.Fatalf("%d jobs registered without list_jobs", c.ActiveJobs())
	}
	waitFor(ctx, t, "the running job to be adopted by its frames", func() bool { return c.HasJob(job2) })
	if c.HasJob("job_nope_0") || c.ActiveJobs() != 1 {
		t.Fatalf("registered %d jobs", c.ActiveJobs())
	}
}

// A replayed job of another session that the runtime will not attach here
// (no subscribe negotiated), before any event: Wait and a Watch from 0 both
// end with the JOB_LOST terminal at once.
func TestForeignJobWithoutSubscribeEndsAtOnce(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	cfg := baseConfig(srv.URL())
	cfg.KeyNamespace = "alice"
	a := dial(t, cfg)
	cfg.Features = []string{arcp.FeatureHeartbeat, arcp.FeatureAck, arcp.FeatureListJobs}
	b := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	s := arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 2000}), IdempotencyKey: "k"}
	if _, err := a.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	acc, err := b.Submit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	it, err := w.Next(ctx)
	if err != nil || it.Error == nil || it.Error.Code != upstream.CodeJobLost {
		t.Fatalf("watch of another session's job without subscribe: %+v, %v; want the %s terminal", it, err, upstream.CodeJobLost)
	}
	term, err := b.Wait(ctx, acc.JobID)
	if err != nil || term.Error == nil || term.Error.Code != upstream.CodeJobLost {
		t.Fatalf("Wait = %+v, %v", term, err)
	}
}

// A job observed through job.subscribe (another session's, history from 0)
// is cut mid-stream by a drop of the observer's transport only, in every
// dialect. The TS runtime ends a subscription with its transport (the job
// runs on in its own session and is still listed); before, the observer's
// watcher then waited forever. Now the observer re-attaches it from its
// subscription cursor and drops what that replays again: the watcher gets
// all 20 events once, in order, and the result. Runtimes whose
// subscriptions survive the resume deliver it whole without help.
func TestObservedJobAcrossObserverResume(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{Dialect: d.Dialect})
			cfg := baseConfig(srv.URL())
			upstream.SetKnobs(&cfg, upstream.Knobs{ReattachProbe: reattachProbe})
			a, b := dial(t, cfg), dial(t, cfg)
			ctx := testCtx(t, 30*time.Second)
			acc, err := a.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 20, "interval_ms": 60})})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Subscribe(ctx, acc.JobID, 0); err != nil {
				t.Fatal(err)
			}
			w, err := b.Watch(acc.JobID, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			n := 0
			got, term := readJob(ctx, t, w, func(int) {
				if n++; n == 8 {
					if !srv.Runtime().DropSession(b.Status().SessionID) {
						t.Fatal("the observer's session had no transport to drop")
					}
				}
			})
			t.Logf("%s: events %v, terminal result=%v error=%+v; re-attachments %d, lost %d",
				d.Name, got, term.Result != nil, term.Error, cfgCounters(b).Reattached.Load(), cfgCounters(b).JobsLost.Load())
			if len(got) != 20 || term.Result == nil {
				t.Fatalf("observer got %d events and terminal %+v; want all 20 and the result", len(got), term)
			}
			for i, v := range got {
				if v != i {
					t.Fatalf("events %v: not each once and in order", got)
				}
			}
			if d.Dialect.SubscriptionsEndWithTransport && cfgCounters(b).Reattached.Load() == 0 {
				t.Fatal("the runtime ended the subscription with the transport, yet the observer did not re-attach")
			}
		})
	}
}

// A live-only subscription (history false) that the runtime ends with the
// observer's transport has no cursor to go back to: the observer's watcher
// ends with the definite JOB_LOST naming the job, within a few probe
// periods, instead of waiting for the job's end.
func TestLiveOnlyObservedJobLostDefinitely(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	cfg := baseConfig(srv.URL())
	upstream.SetKnobs(&cfg, upstream.Knobs{ReattachProbe: reattachProbe})
	a, b := dial(t, cfg), dial(t, cfg)
	ctx := testCtx(t, 30*time.Second)
	acc, err := a.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 100, "interval_ms": 60})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.SubscribeJob(ctx, arcp.Subscribe{JobID: acc.JobID}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "an observed event", func() bool { return b.Status().LastEventSeq > 0 })
	if !srv.Runtime().DropSession(b.Status().SessionID) {
		t.Fatal("no transport to drop")
	}
	start := time.Now()
	term, err := b.Wait(ctx, acc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if term.Error == nil || term.Error.Code != upstream.CodeJobLost || !strings.Contains(term.Error.Message, acc.JobID) {
		t.Fatalf("terminal %+v; want %s naming the job", term, upstream.CodeJobLost)
	}
	if el := time.Since(start); el > 10*reattachProbe+2*time.Second {
		t.Fatalf("lost after %v; the job itself runs 6 s", el)
	}
}
