package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	if reason != "" {
		if ei := errorInfo(err); ei == nil || ei.GetReason() != reason {
			t.Fatalf("%s: ErrorInfo %v, want reason %s", what, ei, reason)
		}
	}
}

func withTraceparent(ctx context.Context, tp string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "traceparent", tp)
}

func watchAll(t *testing.T, ctx context.Context, c sessiongatev1.SessionGatewayClient, sid, job string) []*sessiongatev1.WatchJobResponse {
	t.Helper()
	st, err := c.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: job})
	if err != nil {
		t.Fatal(err)
	}
	var out []*sessiongatev1.WatchJobResponse
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("WatchJob: %v", err)
		}
		out = append(out, m)
	}
}

// TestFeaturesInEffect: only what the gateway implements is negotiated, and
// OpenSession and GetSessionStatus report exactly the features in effect.
func TestFeaturesInEffect(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	open, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(open.GetFeatures(), arcp.FeatureProvisionedCredentials) || !slices.Equal(open.GetFeatures(), gatewayFeatures) {
		t.Fatalf("default features %v, want %v", open.GetFeatures(), gatewayFeatures)
	}
	// DefaultFeatures says what was negotiated, and its slice is the caller's.
	def := DefaultFeatures()
	if !slices.Equal(def, open.GetFeatures()) {
		t.Fatalf("DefaultFeatures %v, negotiated by default %v", def, open.GetFeatures())
	}
	def[0] = "teleport"
	if gatewayFeatures[0] == "teleport" {
		t.Fatal("DefaultFeatures handed out the gateway's own slice")
	}
	st, _ := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: open.GetSessionId()})
	if !slices.Equal(st.GetFeatures(), open.GetFeatures()) {
		t.Fatalf("status features %v, open %v", st.GetFeatures(), open.GetFeatures())
	}
	open, err = h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Features: []string{"provisioned_credentials", "ack"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(open.GetFeatures(), []string{"ack"}) {
		t.Fatalf("features %v, want [ack]", open.GetFeatures())
	}
	// Calls needing features not in effect fail before anything is sent.
	sid := open.GetSessionId()
	_, err = h.client.ListJobs(ctx, &sessiongatev1.ListJobsRequest{SessionId: sid})
	wantCode(t, "ListJobs without list_jobs", err, codes.FailedPrecondition, "FEATURE_NOT_NEGOTIATED")
	_, err = h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo",
		LeaseConstraints: &sessiongatev1.LeaseConstraints{ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}})
	wantCode(t, "expires_at without lease_expires_at", err, codes.FailedPrecondition, "FEATURE_NOT_NEGOTIATED")
	_, err = h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo",
		LeaseRequest: &sessiongatev1.Lease{Capabilities: map[string]*sessiongatev1.LeasePatterns{"cost.budget": {Patterns: []string{"USD:1"}}}}})
	wantCode(t, "cost.budget without the feature", err, codes.FailedPrecondition, "FEATURE_NOT_NEGOTIATED")
	_, err = h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Features: []string{"teleport"}})
	wantCode(t, "unknown feature", err, codes.InvalidArgument, "")
}

// TestSubmitExtras: agent version, lease request and constraints, vendor
// extensions and the caller's traceparent go upstream; the resolved agent,
// the granted lease, constraints and budget, the extensions and the trace
// id come back, in SubmitJob, RunJob, WatchJob and ListJobs.
func TestSubmitExtras(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 20*time.Second)
	sid := h.open(t, ctx)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	tctx := withTraceparent(ctx, "00-"+trace+"-00f067aa0ba902b7-01")
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	lease := &sessiongatev1.Lease{Capabilities: map[string]*sessiongatev1.LeasePatterns{
		"fs.read": {Patterns: []string{"/workspace/**"}}, "cost.budget": {Patterns: []string{"USD:5.00"}}, "model.use": {Patterns: []string{"tier-fast/*"}},
	}}
	ext := map[string]*structpb.Value{"x-vendor.acme.tag": structpb.NewStringValue("blue")}
	sub, err := h.client.SubmitJob(tctx, &sessiongatev1.SubmitJobRequest{
		SessionId: sid, Agent: "sleep", AgentVersion: "1.0.0", Input: mustValue(t, map[string]any{"ms": 250.0}),
		LeaseRequest: lease, LeaseConstraints: &sessiongatev1.LeaseConstraints{ExpiresAt: timestamppb.New(expires)}, Extensions: ext,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sub.GetAgent() != "sleep@1.0.0" || sub.GetTraceId() != trace {
		t.Errorf("agent %q trace %q", sub.GetAgent(), sub.GetTraceId())
	}
	if got := sub.GetLease().GetCapabilities()["fs.read"].GetPatterns(); !slices.Equal(got, []string{"/workspace/**"}) {
		t.Errorf("lease %v", sub.GetLease())
	}
	if sub.GetBudget()["USD"] != 5 || !sub.GetLeaseConstraints().GetExpiresAt().AsTime().Equal(expires) {
		t.Errorf("budget %v constraints %v", sub.GetBudget(), sub.GetLeaseConstraints())
	}
	if sub.GetExtensions()["x-vendor.acme.tag"].GetStringValue() != "blue" {
		t.Errorf("extensions %v", sub.GetExtensions())
	}
	items := watchAll(t, ctx, h.client, sid, sub.GetJobId())
	var progress int
	for _, it := range items {
		if it.GetExtensions()["x-vendor.acme.tag"].GetStringValue() != "blue" {
			t.Errorf("item %d lacks the extension: %v", it.GetEventSeq(), it)
		}
		if p := it.GetEvent().GetProgress(); p != nil {
			progress++
			if p.GetUnits() != "ms" || p.Total == nil || p.GetTotal() != 250 || p.GetCurrent() > 250 {
				t.Errorf("progress %v", p)
			}
		}
	}
	if progress < 2 || items[len(items)-1].GetResult() == nil {
		t.Fatalf("%d progress events; last item %v", progress, items[len(items)-1])
	}

	run, err := h.client.RunJob(tctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: mustValue(t, "x"), Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	if run.GetAgent() != "echo@1.0.0" || run.GetTraceId() != trace || run.GetExtensions()["x-vendor.acme.tag"].GetStringValue() != "blue" {
		t.Errorf("RunJob = %v", run)
	}
	list, err := h.client.ListJobs(ctx, &sessiongatev1.ListJobsRequest{SessionId: sid, Filter: `agent = "sleep"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetJobs()) != 1 {
		t.Fatalf("ListJobs = %v", list)
	}
	j := list.GetJobs()[0]
	if j.GetJobId() != sub.GetJobId() || j.GetTraceId() != trace || j.GetState() != sessiongatev1.JobState_JOB_STATE_SUCCEEDED ||
		j.GetCreateTime() == nil || j.GetLastEventSeq() == 0 || j.GetBudget()["USD"] != 5 || j.GetLease() == nil {
		t.Errorf("listed %v", j)
	}
}

// TestSubmitExtrasBadInput: each bad extra is a clear error.
func TestSubmitExtrasBadInput(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	sid := h.open(t, ctx)
	caps := func(ns string, p ...string) *sessiongatev1.Lease {
		return &sessiongatev1.Lease{Capabilities: map[string]*sessiongatev1.LeasePatterns{ns: {Patterns: p}}}
	}
	at := func(d time.Duration) *sessiongatev1.LeaseConstraints {
		return &sessiongatev1.LeaseConstraints{ExpiresAt: timestamppb.New(time.Now().Add(d))}
	}
	for _, tc := range []struct {
		name   string
		req    *sessiongatev1.SubmitJobRequest
		code   codes.Code
		reason string
	}{
		{"budget beyond the runtime's limit", &sessiongatev1.SubmitJobRequest{LeaseRequest: caps("cost.budget", "USD:1000")}, codes.PermissionDenied, arcp.CodePermissionDenied},
		{"currency the runtime does not take", &sessiongatev1.SubmitJobRequest{LeaseRequest: caps("cost.budget", "XYZ:1")}, codes.PermissionDenied, arcp.CodePermissionDenied},
		{"namespace the runtime does not grant", &sessiongatev1.SubmitJobRequest{LeaseRequest: caps("db.write", "*")}, codes.PermissionDenied, arcp.CodePermissionDenied},
		{"malformed amount", &sessiongatev1.SubmitJobRequest{LeaseRequest: caps("cost.budget", "five dollars")}, codes.InvalidArgument, arcp.CodeInvalidRequest},
		{"expires_at beyond the runtime's maximum", &sessiongatev1.SubmitJobRequest{LeaseConstraints: at(48 * time.Hour)}, codes.PermissionDenied, arcp.CodePermissionDenied},
		{"expires_at in the past", &sessiongatev1.SubmitJobRequest{LeaseConstraints: at(-time.Minute)}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"extension outside x-vendor", &sessiongatev1.SubmitJobRequest{Extensions: map[string]*structpb.Value{"acme": structpb.NewBoolValue(true)}}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"version twice", &sessiongatev1.SubmitJobRequest{Agent: "echo@1.0.0", AgentVersion: "1.0.0"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"unknown version", &sessiongatev1.SubmitJobRequest{AgentVersion: "9.9.9"}, codes.NotFound, arcp.CodeAgentVersionNotAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.SessionId = sid
			if req.Agent == "" {
				req.Agent = "echo"
			}
			_, err := h.client.SubmitJob(ctx, req)
			wantCode(t, tc.name, err, tc.code, tc.reason)
		})
	}
}

// TestLeaseExpires: a job still running at expires_at fails with
// LEASE_EXPIRED (§9.5).
func TestLeaseExpires(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	sid := h.open(t, ctx)
	_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 5000.0}),
		LeaseConstraints: &sessiongatev1.LeaseConstraints{ExpiresAt: timestamppb.New(time.Now().Add(300 * time.Millisecond))}})
	wantCode(t, "RunJob past its lease", err, codes.PermissionDenied, arcp.CodeLeaseExpired)
	if errorInfo(err).GetMetadata()["retryable"] != "false" {
		t.Errorf("LEASE_EXPIRED retryable: %v", errorInfo(err))
	}
}

// TestTraceparent: the caller's trace id becomes the job's; without one, or
// with a malformed one (W3C: start a new trace), the job gets a fresh one.
// Jobs sharing a trace id are told apart.
func TestTraceparent(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 20*time.Second)
	sid := h.open(t, ctx)
	const trace = "0af7651916cd43dd8448eb211c80319c"
	for _, tc := range []struct {
		name, header string
		want         string // "" = a fresh one
	}{
		{"absent", "", ""},
		{"valid", "00-" + trace + "-b7ad6b7169203331-01", trace},
		{"future version with more fields", "cc-" + trace + "-b7ad6b7169203331-01-what-comes-next", trace},
		{"uppercase", "00-" + strings.ToUpper(trace) + "-b7ad6b7169203331-01", ""},
		{"zero trace id", "00-00000000000000000000000000000000-b7ad6b7169203331-01", ""},
		{"zero parent id", "00-" + trace + "-0000000000000000-01", ""},
		{"version ff", "ff-" + trace + "-b7ad6b7169203331-01", ""},
		{"version 00 with more fields", "00-" + trace + "-b7ad6b7169203331-01-x", ""},
		{"garbage", "not a traceparent", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx := ctx
			if tc.header != "" {
				cctx = withTraceparent(ctx, tc.header)
			}
			resp, err := h.client.SubmitJob(cctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo"})
			if err != nil {
				t.Fatal(err)
			}
			got := resp.GetTraceId()
			if tc.want != "" && got != tc.want || tc.want == "" && (!arcp.ValidTraceID(got) || got == trace) {
				t.Fatalf("trace id %q, want %q (empty: fresh)", got, tc.want)
			}
		})
	}
	// Concurrent jobs sharing one trace id each get their own result.
	tctx := withTraceparent(ctx, "00-"+trace+"-b7ad6b7169203331-01")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			in := mustValue(t, float64(i))
			run, err := h.client.RunJob(tctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: in})
			if err != nil {
				t.Error(err)
				return
			}
			if run.GetResult().GetNumberValue() != float64(i) || run.GetTraceId() != trace {
				t.Errorf("job %d: result %v trace %s", i, run.GetResult(), run.GetTraceId())
			}
		})
	}
	wg.Wait()
}

// TestListJobsPages: page tokens walk the list; filters select; bad
// filters and tokens from elsewhere are INVALID_ARGUMENT.
func TestListJobsPages(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok-a": "alice", "tok-b": "bob"}
	}})
	ctx := ctxT(t, 20*time.Second)
	actx, bctx := bearer(ctx, "tok-a"), bearer(ctx, "tok-b")
	open := func(ctx context.Context) string {
		o, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return o.GetSessionId()
	}
	a1, a2, b1 := open(actx), open(actx), open(bctx)
	var ids []string
	for range 5 {
		r, err := h.client.RunJob(actx, &sessiongatev1.RunJobRequest{SessionId: a1, Agent: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetJobId())
	}
	sleeper, err := h.client.SubmitJob(actx, &sessiongatev1.SubmitJobRequest{SessionId: a1, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 3000.0})})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tok := ""
	for pages := 0; ; pages++ {
		resp, err := h.client.ListJobs(actx, &sessiongatev1.ListJobsRequest{SessionId: a1, PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range resp.GetJobs() {
			got = append(got, j.GetJobId())
			if !arcp.ValidTraceID(j.GetTraceId()) || j.GetCreateTime() == nil || j.GetAgent() == "" {
				t.Errorf("listed %v", j)
			}
		}
		if tok = resp.GetNextPageToken(); tok == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if want := append(slices.Clone(ids), sleeper.GetJobId()); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	live, err := h.client.ListJobs(actx, &sessiongatev1.ListJobsRequest{SessionId: a1, Filter: "(state = PENDING OR state = RUNNING) AND agent = \"sleep\""})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.GetJobs()) != 1 || live.GetJobs()[0].GetJobId() != sleeper.GetJobId() {
		t.Fatalf("live sleepers %v", live.GetJobs())
	}
	later, err := h.client.ListJobs(actx, &sessiongatev1.ListJobsRequest{SessionId: a1, Filter: `create_time > "` + time.Now().Add(time.Minute).UTC().Format(time.RFC3339) + `"`})
	if err != nil || len(later.GetJobs()) != 0 {
		t.Fatalf("future create_time: %v, %v", later, err)
	}

	first, err := h.client.ListJobs(actx, &sessiongatev1.ListJobsRequest{SessionId: a1, PageSize: 1, Filter: `state = SUCCEEDED`})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	tok = first.GetNextPageToken()
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	raw[len(raw)-1] ^= 1
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *sessiongatev1.ListJobsRequest
		why  string
	}{
		{"unknown filter field", actx, &sessiongatev1.ListJobsRequest{SessionId: a1, Filter: `owner = "me"`}, "unknown field"},
		{"unknown state", actx, &sessiongatev1.ListJobsRequest{SessionId: a1, Filter: `state = DONE`}, "state must be"},
		{"OR outside a state group", actx, &sessiongatev1.ListJobsRequest{SessionId: a1, Filter: `state = RUNNING OR agent = "echo"`}, "AND"},
		{"negative page size", actx, &sessiongatev1.ListJobsRequest{SessionId: a1, PageSize: -1}, "negative"},
		{"token for another session", actx, &sessiongatev1.ListJobsRequest{SessionId: a2, Filter: `state = SUCCEEDED`, PageToken: tok}, "another session"},
		{"token with another filter", actx, &sessiongatev1.ListJobsRequest{SessionId: a1, PageToken: tok}, "another filter"},
		{"token from another caller", bctx, &sessiongatev1.ListJobsRequest{SessionId: b1, Filter: `state = SUCCEEDED`, PageToken: tok}, "another caller"},
		{"tampered token", actx, &sessiongatev1.ListJobsRequest{SessionId: a1, Filter: `state = SUCCEEDED`, PageToken: base64.RawURLEncoding.EncodeToString(raw)}, "not a page token"},
	} {
		_, err := h.client.ListJobs(tc.ctx, tc.req)
		wantCode(t, tc.name, err, codes.InvalidArgument, "")
		if !strings.Contains(status.Convert(err).Message(), tc.why) {
			t.Errorf("%s: message %q lacks %q", tc.name, status.Convert(err).Message(), tc.why)
		}
	}
	next, err := h.client.ListJobs(actx, &sessiongatev1.ListJobsRequest{SessionId: a1, PageSize: 1, Filter: `state = SUCCEEDED`, PageToken: tok})
	if err != nil || len(next.GetJobs()) != 1 || next.GetJobs()[0].GetJobId() != ids[1] {
		t.Fatalf("second page: %v, %v", next, err)
	}
}

// TestSubscribeJob: a second session of the same caller attaches to a job
// (§7.6-7.7), with history, and WatchJob then works for it there; it may
// not cancel it. Another caller cannot attach.
func TestSubscribeJob(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok-a": "alice", "tok-b": "bob"}
	}})
	ctx := ctxT(t, 20*time.Second)
	actx, bctx := bearer(ctx, "tok-a"), bearer(ctx, "tok-b")
	open := func(ctx context.Context) string {
		o, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return o.GetSessionId()
	}
	src, dash, other := open(actx), open(actx), open(bctx)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	job, err := h.client.SubmitJob(withTraceparent(actx, "00-"+trace+"-00f067aa0ba902b7-01"), &sessiongatev1.SubmitJobRequest{
		SessionId: src, Agent: "stream", Input: mustValue(t, map[string]any{"count": 6.0, "interval_ms": 50.0}),
		LeaseRequest: &sessiongatev1.Lease{Capabilities: map[string]*sessiongatev1.LeasePatterns{"cost.budget": {Patterns: []string{"USD:2.50"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.SubscribeJob(bctx, &sessiongatev1.SubscribeJobRequest{SessionId: other, JobId: job.GetJobId(), History: true})
	wantCode(t, "another caller's job", err, codes.NotFound, "JOB_NOT_FOUND")
	_, err = h.client.SubscribeJob(actx, &sessiongatev1.SubscribeJobRequest{SessionId: dash, JobId: "job_nope", History: true})
	wantCode(t, "unknown job", err, codes.NotFound, "JOB_NOT_FOUND")
	_, err = h.client.SubscribeJob(actx, &sessiongatev1.SubscribeJobRequest{SessionId: dash, JobId: job.GetJobId(), FromEventSeq: 3})
	wantCode(t, "from_event_seq without history", err, codes.InvalidArgument, "")

	sub, err := h.client.SubscribeJob(actx, &sessiongatev1.SubscribeJobRequest{SessionId: dash, JobId: job.GetJobId(), History: true})
	if err != nil {
		t.Fatal(err)
	}
	d := sub.GetJob()
	if d.GetJobId() != job.GetJobId() || d.GetAgent() != "stream@1.0.0" || d.GetTraceId() != trace || d.GetBudget()["USD"] != 2.5 ||
		d.GetState() == sessiongatev1.JobState_JOB_STATE_UNSPECIFIED || !sub.GetReplayed() {
		t.Errorf("descriptor %v", sub)
	}
	_, err = h.client.CancelJob(actx, &sessiongatev1.CancelJobRequest{SessionId: dash, JobId: job.GetJobId()})
	wantCode(t, "subscriber cancels", err, codes.PermissionDenied, "SUBSCRIBER_CANNOT_CANCEL")
	items := watchAll(t, actx, h.client, dash, job.GetJobId())
	var logs int
	for _, it := range items {
		if it.GetEvent().GetKind() == "log" {
			logs++
		}
	}
	if logs != 6 || items[len(items)-1].GetResult() == nil {
		t.Fatalf("subscriber saw %d logs, last %v", logs, items[len(items)-1])
	}
}

// TestStreamedResultMetadata: result chunks carry typed metadata in
// WatchJob, and the result names the streamed result (§8.4), in WatchJob
// and RunJob.
func TestStreamedResultMetadata(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 20*time.Second)
	sid := h.open(t, ctx)
	in := mustValue(t, map[string]any{"size": 100000.0, "chunk_bytes": 30000.0})
	job, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "chunked", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	items := watchAll(t, ctx, h.client, sid, job.GetJobId())
	var chunks []*sessiongatev1.ResultChunk
	for _, it := range items {
		if c := it.GetEvent().GetResultChunk(); c != nil {
			chunks = append(chunks, c)
		}
	}
	res := items[len(items)-1].GetResult()
	if len(chunks) != 4 || chunks[3].GetMore() || !chunks[0].GetMore() || chunks[2].GetChunkSeq() != 2 || chunks[0].GetEncoding() != "utf8" {
		t.Fatalf("chunks %v", chunks)
	}
	if res.GetResultId() == "" || res.GetResultId() != chunks[0].GetResultId() || res.GetResultSize() != 100000 {
		t.Fatalf("result %v", res)
	}
	run, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "chunked", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if run.GetResultId() == "" || run.GetResultSize() != 100000 || len(run.GetResult().GetStringValue()) != 100000 {
		t.Fatalf("RunJob: id %q size %d len %d", run.GetResultId(), run.GetResultSize(), len(run.GetResult().GetStringValue()))
	}
}

// TestNewTraceID: fresh trace ids are W3C trace ids (32 lowercase hex
// digits, not all zero) and do not repeat.
func TestNewTraceID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newTraceID()
		if !arcp.ValidTraceID(id) || seen[id] {
			t.Fatalf("newTraceID gave %q (valid %v, seen before %v)", id, arcp.ValidTraceID(id), seen[id])
		}
		seen[id] = true
	}
}

func BenchmarkNewTraceID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newTraceID()
	}
}

// TestLeaseProto: the empty lease's shortcut answers as encoding/json's
// reading does, and only for the empty object.
func TestLeaseProto(t *testing.T) {
	slow := func(raw string) *sessiongatev1.Lease {
		l, err := arcp.ParseLease(json.RawMessage(raw))
		if err != nil || l == nil {
			return nil
		}
		out := &sessiongatev1.Lease{Capabilities: map[string]*sessiongatev1.LeasePatterns{}}
		for ns, p := range l {
			out.Capabilities[ns] = &sessiongatev1.LeasePatterns{Patterns: p}
		}
		return out
	}
	for _, raw := range []string{
		`{}`, ` { } `, "\t{\n}\r\n", `{"fs.read":["/tmp/**"]}`, `null`, ``, "\v{}", `[]`, `{`, `}`, `{}}`, `{x}`, `"{}"`, `{"a":[]}`,
	} {
		got, want := leaseProto(json.RawMessage(raw)), slow(raw)
		if (got == nil) != (want == nil) || !proto.Equal(got, want) {
			t.Errorf("leaseProto(%q) = %v, encoding/json's reading %v", raw, got, want)
		}
	}
}

func BenchmarkLeaseProto(b *testing.B) {
	raw := json.RawMessage(`{}`)
	b.ReportAllocs()
	for b.Loop() {
		if leaseProto(raw) == nil {
			b.Fatal("no lease")
		}
	}
}
