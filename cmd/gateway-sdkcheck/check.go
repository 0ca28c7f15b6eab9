package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/server"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// lostBound is how soon after the cut a job the runtime stops streaming
// must end as JOB_LOST (see correlate's rule table: the first probe after a
// second, the runtime's next event, a subscribe round trip).
const lostBound = 5 * time.Second

// retryBound is how soon a retry of a job that has ended must answer.
const retryBound = time.Second

// obsBound is how soon after the observer's cut a subscribed job must go on
// (or end as JOB_LOST): listed live at two probes in a row (the first a
// second after the resume, the next two seconds later), then a subscribe
// round trip.
const obsBound = 8 * time.Second

// obsCount and obsCutAt shape scenario 5's stream.
const (
	obsCount = 30
	obsCutAt = 8
)

type call struct {
	took   time.Duration
	job    string
	result string
	err    error
}

type report struct {
	original          string
	retryRunning      call
	retryEnded        call
	otherInput        error
	cutEvents         []int
	cutTerminal       string // "result", or the error item's code
	cutEnd            time.Duration
	cutStreamErr      error
	aliceJobs, bobIDs []string
	bobSawAlice       []string
	watchPast, cancel error
	obsEvents         []int
	obsTerminal       string
	obsEnd            time.Duration
	obsCutDone        bool
	obsStreamErr      error
	frames            int
}

func errText(err error) string {
	if err == nil {
		return "OK"
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return fmt.Sprintf("%s %s %v: %s", st.Code(), ei.GetReason(), ei.GetMetadata(), st.Message())
		}
	}
	return fmt.Sprintf("%s: %s", st.Code(), st.Message())
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "1a retry from session 2 while the job runs: %v, job %s (original %s), result %s, %s\n",
		r.retryRunning.took.Round(time.Millisecond), r.retryRunning.job, r.original, r.retryRunning.result, errText(r.retryRunning.err))
	fmt.Fprintf(w, "1b retry from session 3 after the job ended: %v, job %s, result %s, %s\n",
		r.retryEnded.took.Round(time.Millisecond), r.retryEnded.job, r.retryEnded.result, errText(r.retryEnded.err))
	fmt.Fprintf(w, "1c the key with other input: %s\n", errText(r.otherInput))
	fmt.Fprintf(w, "2  20-event stream cut after the 8th event: events %v, then %s, %v after the cut (stream: %s)\n",
		r.cutEvents, r.cutTerminal, r.cutEnd.Round(time.Millisecond), errText(r.cutStreamErr))
	fmt.Fprintf(w, "3  alice lists %d of her jobs; bob lists %v; alice's jobs in bob's list: %v\n", len(r.aliceJobs), r.bobIDs, r.bobSawAlice)
	fmt.Fprintf(w, "4a WatchJob past the end: %s\n", errText(r.watchPast))
	fmt.Fprintf(w, "4b CancelJob of the ended job: %s\n", errText(r.cancel))
	fmt.Fprintf(w, "5  %d-event stream watched through SubscribeJob from another session, the observer's transport cut after event %d (cut: %v): events %v, then %s, %v after the cut (stream: %s)\n",
		obsCount, obsCutAt, r.obsCutDone, r.obsEvents, r.obsTerminal, r.obsEnd.Round(time.Millisecond), errText(r.obsStreamErr))
	fmt.Fprintf(w, "frames through the proxy: %d\n", r.frames)
}

// broken lists the promises the run broke.
func (r *report) broken() []string {
	var b []string
	if r.retryRunning.err != nil || r.retryRunning.result == "" {
		b = append(b, "retry while the job runs: "+errText(r.retryRunning.err))
	}
	// With keys private to a session (the reference) the retry is a new
	// job of its own, which takes its full run.
	if r.retryEnded.err != nil || r.retryEnded.result == "" || r.retryEnded.job == r.original && r.retryEnded.took > retryBound {
		b = append(b, fmt.Sprintf("retry after the job ended: %v, %s", r.retryEnded.took, errText(r.retryEnded.err)))
	}
	if r.retryRunning.job == r.original && status.Code(r.otherInput) != codes.AlreadyExists {
		b = append(b, "a reused key with other input: "+errText(r.otherInput))
	}
	for i, v := range r.cutEvents {
		if v != i {
			b = append(b, fmt.Sprintf("cut stream: events %v not each once and in order", r.cutEvents))
			break
		}
	}
	switch {
	case r.cutTerminal == "result" && len(r.cutEvents) == 20:
	case r.cutTerminal == upstream.CodeJobLost && r.cutEnd <= lostBound:
	default:
		b = append(b, fmt.Sprintf("cut stream: %d events, then %q after %v", len(r.cutEvents), r.cutTerminal, r.cutEnd))
	}
	if len(r.bobSawAlice) > 0 {
		b = append(b, fmt.Sprintf("bob listed alice's jobs %v", r.bobSawAlice))
	}
	if status.Code(r.watchPast) != codes.OutOfRange {
		b = append(b, "WatchJob past the end: "+errText(r.watchPast))
	}
	if status.Code(r.cancel) != codes.FailedPrecondition {
		b = append(b, "CancelJob of an ended job: "+errText(r.cancel))
	}
	for i, v := range r.obsEvents {
		if v != i {
			b = append(b, fmt.Sprintf("subscribed stream: events %v not each once and in order", r.obsEvents))
			break
		}
	}
	switch {
	case !r.obsCutDone:
		b = append(b, "subscribed stream: the observer's transport was not cut")
	case r.obsTerminal == "result" && len(r.obsEvents) == obsCount:
	case r.obsTerminal == upstream.CodeJobLost && r.obsEnd <= obsBound:
	default:
		b = append(b, fmt.Sprintf("subscribed stream: %d events, then %q after %v", len(r.obsEvents), r.obsTerminal, r.obsEnd))
	}
	return b
}

// run starts the proxy and the gateway and runs the scenarios.
func run(ctx context.Context, runtimeURL string, log io.Writer) (*report, error) {
	pctx, stopProxy := context.WithCancel(ctx)
	px := &proxy{target: runtimeURL, start: time.Now(), ctx: pctx, log: log}
	plis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopProxy()
		return nil, err
	}
	hs := &http.Server{Handler: px, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(plis) }()
	defer func() {
		stopProxy()
		_ = hs.Close()
		<-served
		px.wg.Wait()
	}()

	gw, err := server.New(server.Config{
		InstanceID:    "sdkcheck",
		Runtimes:      []server.Runtime{{Name: "default", URL: "ws://" + plis.Addr().String() + "/arcp"}},
		UpstreamToken: "tok",
		ClientTokens:  map[string]string{"tok-a": "alice", "tok-b": "bob"},
		Upstream:      upstream.Config{BackoffInitial: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, InitTimeout: 3 * time.Second},
		Registry:      prometheus.NewRegistry(),
	})
	if err != nil {
		return nil, err
	}
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gserved := make(chan error, 1)
	go func() { gserved <- gw.Serve(glis) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = gw.Shutdown(sctx)
		<-gserved
	}()
	cc, err := grpc.NewClient(glis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	r := &report{}
	err = scenarios(ctx, sessiongatev1.NewSessionGatewayClient(cc), px, r)
	px.mu.Lock()
	r.frames = px.frames
	px.mu.Unlock()
	return r, err
}

func scenarios(ctx context.Context, cl sessiongatev1.SessionGatewayClient, px *proxy, r *report) error {
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-a")
	bctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-b")
	open := func(ctx context.Context) (string, error) {
		o, err := cl.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "sdkcheck"})
		return o.GetSessionId(), err
	}
	stream := func(n, ms float64) *structpb.Value {
		v, _ := structpb.NewValue(map[string]any{"count": n, "interval_ms": ms})
		return v
	}
	runJob := func(ctx context.Context, sid string, in *structpb.Value) call {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cl.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "stream", IdempotencyKey: "sdkcheck-retry", Input: in})
		c := call{took: time.Since(start), job: resp.GetJobId(), err: err}
		if resp.GetResult() != nil {
			c.result = strings.Join(strings.Fields(resp.GetResult().String()), " ")
		}
		return c
	}
	var sids [5]string
	for i := range sids {
		var err error
		if sids[i], err = open(actx); err != nil {
			return fmt.Errorf("OpenSession: %w", err)
		}
	}

	// 1. Retries from other sessions of the same caller.
	sub, err := cl.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: sids[0], Agent: "stream", IdempotencyKey: "sdkcheck-retry", Input: stream(10, 100)})
	if err != nil {
		return fmt.Errorf("SubmitJob: %w", err)
	}
	r.original = sub.GetJobId()
	r.retryRunning = runJob(actx, sids[1], stream(10, 100))
	r.retryEnded = runJob(actx, sids[2], stream(10, 100))
	_, r.otherInput = cl.RunJob(actx, &sessiongatev1.RunJobRequest{SessionId: sids[1], Agent: "stream", IdempotencyKey: "sdkcheck-retry", Input: stream(11, 100)})

	// 2. A 20-event stream cut after its 8th event.
	job, err := cl.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: sids[3], Agent: "stream", Input: stream(20, 100)})
	if err != nil {
		return fmt.Errorf("SubmitJob: %w", err)
	}
	wctx, cancel := context.WithTimeout(actx, 30*time.Second)
	defer cancel()
	ws, err := cl.WatchJob(wctx, &sessiongatev1.WatchJobRequest{SessionId: sids[3], JobId: job.GetJobId()})
	if err != nil {
		return fmt.Errorf("WatchJob: %w", err)
	}
	var cut time.Time
	for {
		it, err := ws.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.cutStreamErr = err
			}
			break
		}
		if ev := it.GetEvent(); ev != nil {
			if i, ok := eventIndex(ev); ok {
				r.cutEvents = append(r.cutEvents, i)
				if len(r.cutEvents) == 8 {
					px.cut()
					cut = time.Now()
				}
			}
			continue
		}
		if it.GetResult() != nil {
			r.cutTerminal = "result"
		} else {
			r.cutTerminal = it.GetError().GetCode()
		}
		r.cutEnd = time.Since(cut)
	}

	// 3. ListJobs per caller, with jobs running (some runtimes list only
	// live jobs).
	b1, err := open(bctx)
	if err != nil {
		return err
	}
	alice := map[string]bool{r.original: true, job.GetJobId(): true}
	for range 3 {
		j, err := cl.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: sids[4], Agent: "stream", Input: stream(30, 100)})
		if err != nil {
			return err
		}
		alice[j.GetJobId()] = true
	}
	if _, err := cl.SubmitJob(bctx, &sessiongatev1.SubmitJobRequest{SessionId: b1, Agent: "stream", Input: stream(30, 100)}); err != nil {
		return err
	}
	list := func(ctx context.Context, sid string) ([]string, error) {
		var ids []string
		tok := ""
		for range 100 {
			resp, err := cl.ListJobs(ctx, &sessiongatev1.ListJobsRequest{SessionId: sid, PageSize: 2, PageToken: tok})
			if err != nil {
				return ids, err
			}
			for _, j := range resp.GetJobs() {
				ids = append(ids, j.GetJobId())
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				break
			}
		}
		return ids, nil
	}
	if r.aliceJobs, err = list(actx, sids[4]); err != nil {
		return fmt.Errorf("alice's ListJobs: %w", err)
	}
	if r.bobIDs, err = list(bctx, b1); err != nil {
		return fmt.Errorf("bob's ListJobs: %w", err)
	}
	for _, id := range r.bobIDs {
		if alice[id] {
			r.bobSawAlice = append(r.bobSawAlice, id)
		}
	}

	// 4. Edge answers on a finished job (submitted, watched to its end:
	// RunJob's results are not retained).
	short, err := cl.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: sids[4], Agent: "stream", Input: stream(2, 1)})
	if err != nil {
		return fmt.Errorf("SubmitJob: %w", err)
	}
	all, err := cl.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: sids[4], JobId: short.GetJobId()})
	for err == nil {
		var it *sessiongatev1.WatchJobResponse
		if it, err = all.Recv(); it.GetResult() != nil || it.GetError() != nil {
			break
		}
	}
	w, err := cl.WatchJob(actx, &sessiongatev1.WatchJobRequest{SessionId: sids[4], JobId: short.GetJobId(), FromEventSeq: 1 << 40})
	if err == nil {
		_, err = w.Recv()
	}
	r.watchPast = err
	_, r.cancel = cl.CancelJob(actx, &sessiongatev1.CancelJobRequest{SessionId: sids[4], JobId: short.GetJobId()})

	// 5. A job watched from another session of its caller (SubscribeJob
	// with history), the observer's transport alone cut mid-stream.
	owner, observer := sids[0], sids[2]
	oj, err := cl.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: owner, Agent: "stream", Input: stream(obsCount, 150)})
	if err != nil {
		return fmt.Errorf("SubmitJob: %w", err)
	}
	if _, err := cl.SubscribeJob(actx, &sessiongatev1.SubscribeJobRequest{SessionId: observer, JobId: oj.GetJobId(), History: true}); err != nil {
		return fmt.Errorf("SubscribeJob: %w", err)
	}
	octx, ocancel := context.WithTimeout(actx, 30*time.Second)
	defer ocancel()
	ow, err := cl.WatchJob(octx, &sessiongatev1.WatchJobRequest{SessionId: observer, JobId: oj.GetJobId()})
	if err != nil {
		return fmt.Errorf("WatchJob: %w", err)
	}
	var ocut time.Time
	for {
		it, err := ow.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.obsStreamErr = err
			}
			break
		}
		if ev := it.GetEvent(); ev != nil {
			if i, ok := eventIndex(ev); ok {
				r.obsEvents = append(r.obsEvents, i)
				if len(r.obsEvents) == obsCutAt {
					r.obsCutDone = px.cutSubscriber(oj.GetJobId())
					ocut = time.Now()
				}
			}
			continue
		}
		if it.GetResult() != nil {
			r.obsTerminal = "result"
		} else {
			r.obsTerminal = it.GetError().GetCode()
		}
		r.obsEnd = time.Since(ocut)
	}
	return nil
}

// eventIndex reads the stream agent's event number: body.i (reference),
// body.fields.i (Go SDK) or "i=N" in body.message (TS SDK).
func eventIndex(ev *sessiongatev1.JobEvent) (int, bool) {
	f := ev.GetBody().GetStructValue().GetFields()
	if v, ok := f["i"]; ok {
		return int(v.GetNumberValue()), true
	}
	if v, ok := f["fields"].GetStructValue().GetFields()["i"]; ok {
		return int(v.GetNumberValue()), true
	}
	if m, ok := strings.CutPrefix(f["message"].GetStringValue(), "i="); ok {
		n, err := strconv.Atoi(m)
		return n, err == nil
	}
	return 0, false
}
