package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// twoCallers is a gateway over a runtime of dialect d with callers alice
// and bob, who share the gateway's one upstream principal.
func twoCallers(t *testing.T, d arcpruntime.Dialect) (*harness, context.Context, context.Context) {
	t.Helper()
	h := newHarness(t, harnessOpts{runtime: arcpruntime.Options{Dialect: d}, config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok-a": "alice", "tok-b": "bob"}
	}})
	ctx := ctxT(t, 30*time.Second)
	return h, bearer(ctx, "tok-a"), bearer(ctx, "tok-b")
}

func openAs(t *testing.T, h *harness, ctx context.Context) string {
	t.Helper()
	o, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return o.GetSessionId()
}

// Bob never sees alice's jobs in ListJobs, in every dialect — also where
// the runtime lists every job of the shared principal (Go, TS; before, bob
// got alice's job with her trace id) — and paging stays correct: alice's
// jobs interleaved with bob's filter pages down, and the listing does not
// end before bob's last job.
func TestListJobsPerCaller(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			h, actx, bctx := twoCallers(t, d.Dialect)
			a, b := openAs(t, h, actx), openAs(t, h, bctx)
			var alices, bobs []string
			for i := range 9 {
				ctx, sid, dst := actx, a, &alices
				if i%3 == 2 {
					ctx, sid, dst = bctx, b, &bobs
				}
				r, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: mustValue(t, float64(i))})
				if err != nil {
					t.Fatal(err)
				}
				*dst = append(*dst, r.GetJobId())
			}
			list := func(ctx context.Context, sid string) (ids []string, pages int) {
				tok := ""
				for {
					resp, err := h.client.ListJobs(ctx, &sessiongatev1.ListJobsRequest{SessionId: sid, PageSize: 2, PageToken: tok})
					if err != nil {
						t.Fatal(err)
					}
					pages++
					if len(resp.GetJobs()) > 2 {
						t.Fatalf("page of %d jobs, page_size 2", len(resp.GetJobs()))
					}
					for _, j := range resp.GetJobs() {
						ids = append(ids, j.GetJobId())
					}
					if tok = resp.GetNextPageToken(); tok == "" {
						return ids, pages
					}
				}
			}
			gotB, pages := list(bctx, b)
			slices.Sort(gotB)
			slices.Sort(bobs)
			if !slices.Equal(gotB, bobs) {
				t.Fatalf("bob listed %v, want exactly his %v (alice's: %v)", gotB, bobs, alices)
			}
			gotA, _ := list(actx, a)
			slices.Sort(gotA)
			slices.Sort(alices)
			if !slices.Equal(gotA, alices) {
				t.Fatalf("alice listed %v, want %v", gotA, alices)
			}
			t.Logf("%s: bob's %d jobs in %d pages of at most 2", d.Name, len(gotB), pages)
		})
	}
}

// An idempotent retry from a second session of the same caller returns the
// job's result at once (within 1 s), in every dialect: before, with the
// official runtimes' principal-wide keys, it waited for events that went to
// the first session and ended DEADLINE_EXCEEDED. A reused key with other
// input is ALREADY_EXISTS; another caller's equal key is another job.
func TestIdempotentRetryFromAnotherSession(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			h, actx, bctx := twoCallers(t, d.Dialect)
			s1, s2 := openAs(t, h, actx), openAs(t, h, actx)
			req := func(sid string, n float64) *sessiongatev1.RunJobRequest {
				return &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "stream", IdempotencyKey: "order-42",
					Input: mustValue(t, map[string]any{"count": n, "interval_ms": 20.0})}
			}
			first, err := h.client.RunJob(actx, req(s1, 5))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rctx, cancel := context.WithTimeout(actx, 5*time.Second)
			defer cancel()
			again, err := h.client.RunJob(rctx, req(s2, 5))
			took := time.Since(start)
			if err != nil {
				t.Fatalf("retry from the second session after %v: %v", took, err)
			}
			if took > time.Second {
				t.Fatalf("retry took %v, want < 1 s", took)
			}
			if !protoEqual(again.GetResult(), first.GetResult()) {
				t.Fatalf("retry result %v, want %v", again.GetResult(), first.GetResult())
			}
			scoped := d.Dialect.IdempotencyScope == arcpruntime.ScopePrincipal
			if scoped && again.GetJobId() != first.GetJobId() {
				t.Fatalf("retry ran job %s, want the replay of %s", again.GetJobId(), first.GetJobId())
			}
			t.Logf("%s: retry from the second session answered in %v (job %s, same job: %v)", d.Name, took.Round(time.Millisecond), again.GetJobId(), again.GetJobId() == first.GetJobId())
			if scoped {
				_, err = h.client.RunJob(actx, req(s2, 6))
				wantCode(t, "reused key, other input", err, codes.AlreadyExists, "DUPLICATE_KEY")
			}
			other, err := h.client.RunJob(bctx, req(openAs(t, h, bctx), 5))
			if err != nil || other.GetJobId() == first.GetJobId() {
				t.Fatalf("bob's equal key: %v, %v; want a job of his own", other, err)
			}
		})
	}
}

// A replay whose owner session is still running the job: the retry waits
// for the owner's result, and both calls end with it.
func TestRetryWhileTheOwnerRuns(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		if d.Dialect.IdempotencyScope != arcpruntime.ScopePrincipal {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			h, actx, _ := twoCallers(t, d.Dialect)
			s1, s2 := openAs(t, h, actx), openAs(t, h, actx)
			req := func(sid string) *sessiongatev1.RunJobRequest {
				return &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "stream", IdempotencyKey: "long",
					Input: mustValue(t, map[string]any{"count": 10.0, "interval_ms": 50.0})}
			}
			sub, err := h.client.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: s1, Agent: "stream", IdempotencyKey: "long",
				Input: mustValue(t, map[string]any{"count": 10.0, "interval_ms": 50.0})})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(actx, 5*time.Second)
			defer cancel()
			r, err := h.client.RunJob(rctx, req(s2))
			if err != nil || r.GetJobId() != sub.GetJobId() || r.GetResult().GetStructValue().GetFields()["count"].GetNumberValue() != 10 {
				t.Fatalf("retry while the owner runs: %v, %v", r, err)
			}
		})
	}
}

func protoEqual(a, b interface{ String() string }) bool { return a.String() == b.String() }

// Edge answers: WatchJob from past a finished job's last event is
// OUT_OF_RANGE naming the last seq (before: OK with no item at all); from
// the terminal's own seq it is the terminal. CancelJob of a finished job is
// FAILED_PRECONDITION JOB_ALREADY_ENDED with the final status (before: OK,
// with no sign nothing happened).
func TestEdgeAnswers(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			h, actx, _ := twoCallers(t, d.Dialect)
			sid := openAs(t, h, actx)
			job, err := h.client.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream",
				Input: mustValue(t, map[string]any{"count": 3.0, "interval_ms": 1.0})})
			if err != nil {
				t.Fatal(err)
			}
			items := watchAll(t, actx, h.client, sid, job.GetJobId())
			last := items[len(items)-1]
			if last.GetResult() == nil {
				t.Fatalf("last item %v", last)
			}
			st, err := h.client.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: job.GetJobId(), FromEventSeq: last.GetEventSeq() + 5})
			if err == nil {
				_, err = st.Recv()
			}
			wantCode(t, "watch past the end", err, codes.OutOfRange, "EVENT_SEQ_OUT_OF_RANGE")
			if ei := errorInfo(err); ei.GetMetadata()["last_event_seq"] != strconv.FormatUint(last.GetEventSeq(), 10) || ei.GetMetadata()["job_id"] != job.GetJobId() {
				t.Fatalf("ErrorInfo %v, want last_event_seq %d", ei, last.GetEventSeq())
			}
			st, err = h.client.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: job.GetJobId(), FromEventSeq: last.GetEventSeq()})
			if err != nil {
				t.Fatal(err)
			}
			if it, err := st.Recv(); err != nil || it.GetResult() == nil || it.GetEventSeq() != last.GetEventSeq() {
				t.Fatalf("watch from the terminal's seq: %v, %v; want the terminal", it, err)
			}
			_, err = h.client.CancelJob(actx, &sessiongatev1.CancelJobRequest{SessionId: sid, JobId: job.GetJobId()})
			wantCode(t, "cancel of an ended job", err, codes.FailedPrecondition, "JOB_ALREADY_ENDED")
			if ei := errorInfo(err); ei.GetMetadata()["final_status"] != "success" {
				t.Fatalf("ErrorInfo %v, want final_status success", ei)
			}
		})
	}
}

// A WatchJob of a 20-event stream whose upstream transport is cut after
// the 8th event: in the dialects that go on streaming after a resume the
// stream is whole, once, in order; in the TS dialect (which loses the job)
// it ends, within the documented bound, with the terminal error JOB_LOST
// naming the job, and RunJob's answer is ABORTED JOB_LOST.
func TestWatchAcrossResumeEveryDialect(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			h, actx, _ := twoCallers(t, d.Dialect)
			sid := openAs(t, h, actx)
			job, err := h.client.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream",
				Input: mustValue(t, map[string]any{"count": 20.0, "interval_ms": 40.0})})
			if err != nil {
				t.Fatal(err)
			}
			st, err := h.client.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: job.GetJobId()})
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			var cut time.Time
			var last *sessiongatev1.WatchJobResponse
			for {
				it, err := st.Recv()
				if err != nil {
					break
				}
				last = it
				if ev := it.GetEvent(); ev != nil {
					got = append(got, ev.GetBody().GetStructValue().GetFields()["i"].GetNumberValue())
					if len(got) == 8 {
						h.rt.Runtime().DropTransports()
						cut = time.Now()
					}
				}
			}
			for i, v := range got {
				if v != float64(i) {
					t.Fatalf("events %v: not each once and in order", got)
				}
			}
			t.Logf("%s: %d events, last item %v, %v after the cut", d.Name, len(got), last, time.Since(cut).Round(time.Millisecond))
			if !d.Dialect.LoseRunningJobsOnResume {
				if len(got) != 20 || last.GetResult() == nil {
					t.Fatalf("%d events, last %v; want 20 and the result", len(got), last)
				}
				return
			}
			if last.GetError().GetCode() != upstream.CodeJobLost {
				t.Fatalf("last item %v; want the error %s", last, upstream.CodeJobLost)
			}
			if el := time.Since(cut); el > reattachBound {
				t.Fatalf("lost after %v, bound %v", el, reattachBound)
			}
			accepted := h.rt.Runtime().Stats().JobsAccepted
			done := make(chan error, 1)
			go func() {
				_, err := h.client.RunJob(actx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "stream",
					Input: mustValue(t, map[string]any{"count": 20.0, "interval_ms": 40.0})})
				done <- err
			}()
			waitFor(t, 10*time.Second, "the RunJob's job", func() bool { return h.rt.Runtime().Stats().JobsAccepted > accepted })
			h.rt.Runtime().DropTransports()
			select {
			case err := <-done:
				wantCode(t, "RunJob of a lost job", err, codes.Aborted, "JOB_LOST")
				if errorInfo(err).GetMetadata()["job_id"] == "" {
					t.Fatalf("JOB_LOST names no job: %v", err)
				}
			case <-time.After(reattachBound + 2*time.Second):
				t.Fatal("RunJob of a lost job did not end within the bound")
			}
		})
	}
}

// reattachBound: a job the runtime stops streaming after a resume ends as
// JOB_LOST within the first probe (1 s after the resume) plus the probe
// periods until the runtime stops listing it (it ends at its next event
// here) plus a re-attach round trip.
const reattachBound = 5 * time.Second

// A retry under the same traceparent as the original carries the
// original's trace id, so the runtime's replay looks like the retry's own
// new job to the connection. The gateway still answers it from the session
// that was handed the job first, at once (before: a wait to the deadline).
func TestRetryUnderTheSameTraceparent(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		if d.Dialect.IdempotencyScope != arcpruntime.ScopePrincipal {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			h, actx, _ := twoCallers(t, d.Dialect)
			s1, s2 := openAs(t, h, actx), openAs(t, h, actx)
			tctx := withTraceparent(actx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			req := func(sid string) *sessiongatev1.RunJobRequest {
				return &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "stream", IdempotencyKey: "same-trace",
					Input: mustValue(t, map[string]any{"count": 3.0, "interval_ms": 10.0})}
			}
			first, err := h.client.RunJob(tctx, req(s1))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rctx, cancel := context.WithTimeout(tctx, 5*time.Second)
			defer cancel()
			again, err := h.client.RunJob(rctx, req(s2))
			if err != nil || again.GetJobId() != first.GetJobId() || time.Since(start) > time.Second {
				t.Fatalf("retry under the same traceparent: %v, %v after %v; want job %s at once", again, err, time.Since(start), first.GetJobId())
			}
			// The retry's session holds no live job for it afterwards.
			for _, o := range h.gw.svc.table.List("alice") {
				if o.ID == s2 && o.Conn.ActiveJobs() != 0 {
					t.Fatalf("the retry's session still holds %d live jobs", o.Conn.ActiveJobs())
				}
			}
		})
	}
}

// upstreamSessionOf returns the upstream ARCP session id of alice's gateway
// session id.
func upstreamSessionOf(t *testing.T, h *harness, id string) string {
	t.Helper()
	for _, o := range h.gw.svc.table.List("alice") {
		if o.ID == id {
			return o.Conn.Status().SessionID
		}
	}
	t.Fatalf("no session %s of alice", id)
	return ""
}

// Alice watches, from her second session, a job of her first one
// (SubscribeJob with history, then WatchJob), through the gateway over
// real sockets, in every dialect; after 8 events only the observing
// session's upstream transport is dropped. The TS runtime ends a
// subscription with its transport while the job runs on: before, her watch
// then waited until the job's deadline. Now the observing session
// re-attaches the job and her watch gets all 20 events once, in order, and
// the result.
func TestSubscribedWatchAcrossResumeEveryDialect(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			h, actx, _ := twoCallers(t, d.Dialect)
			owner, observer := openAs(t, h, actx), openAs(t, h, actx)
			job, err := h.client.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: owner, Agent: "stream",
				Input: mustValue(t, map[string]any{"count": 20.0, "interval_ms": 60.0})})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.client.SubscribeJob(actx, &sessiongatev1.SubscribeJobRequest{SessionId: observer, JobId: job.GetJobId(), History: true}); err != nil {
				t.Fatal(err)
			}
			st, err := h.client.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: observer, JobId: job.GetJobId()})
			if err != nil {
				t.Fatal(err)
			}
			upID := upstreamSessionOf(t, h, observer)
			var got []float64
			var last *sessiongatev1.WatchJobResponse
			var cut time.Time
			for {
				it, err := st.Recv()
				if err != nil {
					break
				}
				last = it
				if ev := it.GetEvent(); ev != nil {
					got = append(got, ev.GetBody().GetStructValue().GetFields()["i"].GetNumberValue())
					if len(got) == 8 {
						if !h.rt.Runtime().DropSession(upID) {
							t.Fatal("the observing session had no transport to drop")
						}
						cut = time.Now()
					}
				}
			}
			t.Logf("%s: %d events, last item %v, %v after the cut", d.Name, len(got), last, time.Since(cut).Round(time.Millisecond))
			if len(got) != 20 || last.GetResult() == nil {
				t.Fatalf("%d events %v, last %v; want 20 and the result", len(got), got, last)
			}
			for i, v := range got {
				if v != float64(i) {
					t.Fatalf("events %v: not each once and in order", got)
				}
			}
		})
	}
}

// On a session that negotiated neither session.list_jobs nor job.subscribe
// (OpenSession features), the TS runtime stops streaming a running job
// after a resume. Nothing can ask the runtime about it, so the silence
// bound (Upstream.ReattachSilence, here 1 s) ends the caller's RunJob with
// ABORTED JOB_LOST naming the job, instead of a wait to its deadline
// (before: the 30 s deadline). The reference runtime, which goes on
// streaming, delivers the same job whole.
func TestLostJobBoundWithoutListJobs(t *testing.T) {
	for _, name := range []string{"ts-sdk", "reference"} {
		t.Run(name, func(t *testing.T) {
			var d arcpruntime.Dialect
			for _, nd := range arcpruntime.Dialects {
				if nd.Name == name {
					d = nd.Dialect
				}
			}
			h := newHarness(t, harnessOpts{runtime: arcpruntime.Options{Dialect: d}, config: func(c *Config) {
				c.Upstream.ReattachSilence = time.Second
			}})
			ctx := ctxT(t, 30*time.Second)
			o, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Features: []string{"heartbeat", "ack"}})
			if err != nil {
				t.Fatal(err)
			}
			accepted := h.rt.Runtime().Stats().JobsAccepted
			type answer struct {
				resp *sessiongatev1.RunJobResponse
				err  error
			}
			done := make(chan answer, 1)
			go func() {
				r, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: o.GetSessionId(), Agent: "stream",
					Input: mustValue(t, map[string]any{"count": 40.0, "interval_ms": 50.0})})
				done <- answer{r, err}
			}()
			waitFor(t, 10*time.Second, "the RunJob's job", func() bool { return h.rt.Runtime().Stats().JobsAccepted > accepted })
			h.rt.Runtime().DropTransports()
			cut := time.Now()
			var a answer
			select {
			case a = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("RunJob did not end within 10 s of the cut (bound: the 1 s silence window after the resume)")
			}
			t.Logf("%s: %v after the cut: %v", name, time.Since(cut).Round(time.Millisecond), a.err)
			if name == "reference" {
				if a.err != nil || a.resp.GetResult() == nil {
					t.Fatalf("RunJob on a runtime that goes on streaming: %v, %v; want its result", a.resp, a.err)
				}
				return
			}
			wantCode(t, "RunJob of a job lost without list_jobs", a.err, codes.Aborted, "JOB_LOST")
			if errorInfo(a.err).GetMetadata()["job_id"] == "" {
				t.Fatalf("JOB_LOST names no job: %v", a.err)
			}
		})
	}
}

// Alice watches a job of her first session from her second (SubscribeJob),
// and the runtime drops the first session's transport only, in every
// dialect. The TS runtime then loses the job: it sends nothing more to its
// submitter or to its subscribers. Before, the watch from the second
// session (which saw no resume of its own) waited to its deadline. Now the
// submitting session's JOB_LOST makes the observing one check on the job:
// the watch ends with JOB_LOST naming it, within the bound. Runtimes that go
// on streaming deliver the whole job to both.
func TestObservedJobLostByItsSubmitter(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			h, actx, _ := twoCallers(t, d.Dialect)
			owner, observer := openAs(t, h, actx), openAs(t, h, actx)
			job, err := h.client.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: owner, Agent: "stream",
				Input: mustValue(t, map[string]any{"count": 40.0, "interval_ms": 50.0})})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.client.SubscribeJob(actx, &sessiongatev1.SubscribeJobRequest{SessionId: observer, JobId: job.GetJobId(), History: true}); err != nil {
				t.Fatal(err)
			}
			st, err := h.client.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: observer, JobId: job.GetJobId()})
			if err != nil {
				t.Fatal(err)
			}
			upOwner := upstreamSessionOf(t, h, owner)
			var got []float64
			var last *sessiongatev1.WatchJobResponse
			var cut time.Time
			for {
				it, err := st.Recv()
				if err != nil {
					break
				}
				last = it
				if ev := it.GetEvent(); ev != nil {
					got = append(got, ev.GetBody().GetStructValue().GetFields()["i"].GetNumberValue())
					if len(got) == 5 {
						if !h.rt.Runtime().DropSession(upOwner) {
							t.Fatal("the submitting session had no transport to drop")
						}
						cut = time.Now()
					}
				}
			}
			t.Logf("%s: %d events, last item %v, %v after the cut", d.Name, len(got), last, time.Since(cut).Round(time.Millisecond))
			for i, v := range got {
				if v != float64(i) {
					t.Fatalf("events %v: not each once and in order", got)
				}
			}
			if !d.Dialect.LoseRunningJobsOnResume {
				if len(got) != 40 || last.GetResult() == nil {
					t.Fatalf("%d events, last %v; want 40 and the result", len(got), last)
				}
				return
			}
			if last.GetError().GetCode() != upstream.CodeJobLost || !strings.Contains(last.GetError().GetMessage(), job.GetJobId()) {
				t.Fatalf("last item %v; want the error %s naming the job", last, upstream.CodeJobLost)
			}
			if el := time.Since(cut); el > 2*reattachBound {
				t.Fatalf("the observer's watch ended %v after the cut; bound %v", el, 2*reattachBound)
			}
		})
	}
}
