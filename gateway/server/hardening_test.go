package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// --- 1. Budgets ---

// TestLiveJobBudgets: a caller's live jobs are capped across its sessions
// with RESOURCE_EXHAUSTED naming the budget; a job's unit comes back when the
// job ends, and the gateway-wide cap holds across callers.
func TestLiveJobBudgets(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok-a": "alice", "tok-b": "bob", "tok-c": "carol"}
		c.MaxLiveJobsPerCaller = 2
		c.MaxLiveJobs = 3
	}})
	ctx := ctxT(t, 20*time.Second)
	alice, bob, carol := bearer(ctx, "tok-a"), bearer(ctx, "tok-b"), bearer(ctx, "tok-c")
	s1, s2 := h.open(t, alice), h.open(t, alice)
	long := mustValue(t, map[string]any{"ms": 60000.0})
	submit := func(ctx context.Context, id string, in *structpb.Value) (string, error) {
		r, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "sleep", Input: in})
		return r.GetJobId(), err
	}
	j1, err := submit(alice, s1, long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := submit(alice, s2, long); err != nil {
		t.Fatal(err)
	}
	_, err = submit(alice, s2, long)
	ei := errorInfo(err)
	if status.Code(err) != codes.ResourceExhausted || ei.GetReason() != "CAP_EXCEEDED" || ei.GetMetadata()["cap"] != "live_jobs_per_caller" ||
		ei.GetMetadata()["limit"] != "2" || !strings.Contains(status.Convert(err).Message(), "CancelJob") {
		t.Fatalf("alice's third job: %v %v", err, ei)
	}
	// RunJob is counted too, and refused the same way.
	if _, err := h.client.RunJob(alice, &sessiongatev1.RunJobRequest{SessionId: s1, Agent: "echo"}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("RunJob over the caller's budget: %v", err)
	}
	// bob takes the last gateway-wide unit; carol meets the gateway cap.
	sb, sc := h.open(t, bob), h.open(t, carol)
	if _, err := submit(bob, sb, long); err != nil {
		t.Fatal(err)
	}
	_, err = submit(carol, sc, long)
	if ei := errorInfo(err); status.Code(err) != codes.ResourceExhausted || ei.GetMetadata()["cap"] != "live_jobs" || ei.GetMetadata()["scope"] != "gateway" {
		t.Fatalf("carol over the gateway-wide cap: %v %v", err, ei)
	}
	// Cancelling one of alice's jobs gives its unit back once it has ended.
	if _, err := h.client.CancelJob(alice, &sessiongatev1.CancelJobRequest{SessionId: s1, JobId: j1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the cancelled job's unit to come back", func() bool {
		return h.gw.svc.liveJobs.InUse("alice") == 1
	})
	if _, err := h.client.RunJob(alice, &sessiongatev1.RunJobRequest{SessionId: s1, Agent: "echo", Input: structpb.NewNullValue()}); err != nil {
		t.Fatalf("RunJob after a unit came back: %v", err)
	}
	if got := h.gw.svc.liveJobs.InUse("alice"); got != 1 {
		t.Fatalf("alice holds %d live-job units after a finished RunJob, want 1", got)
	}
	// Closing a session gives back the units of its jobs.
	if _, err := h.client.CloseSession(alice, &sessiongatev1.CloseSessionRequest{SessionId: s2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "units of a closed session's jobs to come back", func() bool {
		return h.gw.svc.liveJobs.InUse("alice") == 0
	})
}

// TestSessionBudgetNamed: the session caps are budgets too, named in
// ErrorInfo with an actionable message.
func TestSessionBudgetNamed(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.MaxSessionsPerCaller = 1 }})
	ctx := ctxT(t, 10*time.Second)
	h.open(t, ctx)
	_, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	ei := errorInfo(err)
	if status.Code(err) != codes.ResourceExhausted || ei.GetMetadata()["cap"] != "sessions_per_caller" || ei.GetMetadata()["in_use"] != "1" ||
		!strings.Contains(status.Convert(err).Message(), "CloseSession") {
		t.Fatalf("second session: %v %v", err, ei)
	}
}

// --- 2. Stream limits ---

// slowReader is a client whose flow-control windows stay small (no BDP
// growth), so that a server sending to it and not being read blocks soon.
var slowReader = []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}

func watchGapConfig(t *testing.T, gapMS int) *timeoutprofile.Config {
	t.Helper()
	cfg, err := timeoutprofile.ParseConfig([]byte(`{"streaming": {"/sessiongate.v1.SessionGateway/WatchJob":
		{"initial_timeout_ms": 30000, "message_gap_timeout_ms": ` + itoa(gapMS) + `, "total_timeout_ms": 0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// stacksContain reports whether any goroutine's stack mentions fn.
func stacksContain(fn string) bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(fn))
}

// TestWatchJobNonReadingClientEndsAtGap: a client that opens WatchJob and
// never reads blocks the server's Send in HTTP/2 flow control. The handler
// still returns at the profile's gap limit, and the goroutine that was
// blocked in Send ends too, while the client connection stays open.
func TestWatchJobNonReadingClientEndsAtGap(t *testing.T) {
	const gap = 300 * time.Millisecond
	ended := make(chan error, 4)
	h := newHarness(t, harnessOpts{
		config: func(c *Config) { c.TimeoutProfiles = watchGapConfig(t, int(gap/time.Millisecond)) },
		setup:  func(g *Gateway) { g.svc.watchEnded = func(err error) { ended <- err } },
		dial:   slowReader,
	})
	ctx := ctxT(t, 30*time.Second)
	id := h.open(t, ctx)
	sub, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "stream",
		Input: mustValue(t, map[string]any{"count": 6000.0})})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	if _, err := h.client.WatchJob(wctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: sub.GetJobId()}); err != nil {
		t.Fatal(err)
	}
	// Never Recv.
	select {
	case err := <-ended:
		t.Logf("handler returned after %v: %v", time.Since(start), err)
	case <-time.After(15 * time.Second):
		t.Fatal("WatchJob handler still running 15 s after its 300 ms gap limit: Send is blocked in flow control")
	}
	waitFor(t, 10*time.Second, "the blocked sender goroutine to end", func() bool { return !stacksContain("(*service).startSender") })
	if wctx.Err() != nil {
		t.Fatal("the client gave up: the test must end the stream from the server")
	}
}

// TestWatchersPerJobCap: a job's WatchJob streams are capped with
// RESOURCE_EXHAUSTED naming watchers_per_job; a closed stream frees its slot.
func TestWatchersPerJobCap(t *testing.T) {
	ended := make(chan error, 8)
	h := newHarness(t, harnessOpts{
		config: func(c *Config) { c.MaxWatchersPerJob = 2 },
		setup:  func(g *Gateway) { g.svc.watchEnded = func(err error) { ended <- err } },
	})
	ctx := ctxT(t, 20*time.Second)
	id := h.open(t, ctx)
	sub, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 60000.0})})
	if err != nil {
		t.Fatal(err)
	}
	watch := func(ctx context.Context) (sessiongatev1.SessionGateway_WatchJobClient, error) {
		s, err := h.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: sub.GetJobId()})
		if err != nil {
			return nil, err
		}
		_, err = s.Recv() // the first progress event, or the refusal
		return s, err
	}
	c1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	if _, err := watch(c1); err != nil {
		t.Fatal(err)
	}
	if _, err := watch(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = watch(ctx)
	if ei := errorInfo(err); status.Code(err) != codes.ResourceExhausted || ei.GetMetadata()["cap"] != "watchers_per_job" {
		t.Fatalf("third watcher: %v %v", err, ei)
	}
	<-ended // the refused one
	cancel1()
	<-ended // the cancelled one
	if _, err := watch(ctx); err != nil {
		t.Fatalf("watcher after one closed: %v", err)
	}
}

// TestTransportLimits: the server announces MaxConcurrentStreams in its
// HTTP/2 SETTINGS and enforces the keepalive policy: a client that pings
// more often than KeepaliveMinTime gets GOAWAY ENHANCE_YOUR_CALM
// "too_many_pings". Raw HTTP/2 over TCP, because grpc-go's own client will
// not ping that often.
func TestTransportLimits(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.MaxConcurrentStreams = 7
		c.KeepaliveMinTime = time.Hour
	}})
	conn, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var maxStreams uint32
	pings := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d pings, no GOAWAY: %v", pings, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
				maxStreams = v
			}
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			for range 4 { // more than the two strikes grpc-go allows
				pings++
				if err := fr.WritePing(false, [8]byte{byte(pings)}); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeEnhanceYourCalm || string(f.DebugData()) != "too_many_pings" {
				t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", f.ErrCode, f.DebugData())
			}
			if maxStreams != 7 {
				t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want 7", maxStreams)
			}
			return
		}
	}
}

// --- 3. Events never kill a stream ---

// TestOddJSONNeverFails: event bodies, results and details that are valid
// JSON for a runtime but have no google.protobuf.Value form are delivered
// (leniently converted, or raw with their event_seq), never turned into an
// error that would end the stream.
func TestOddJSONNeverFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     string
		wantRaw bool
		check   func(*structpb.Value) bool
	}{
		{"duplicate keys, last wins", `{"a":1,"a":2}`, false, func(v *structpb.Value) bool {
			return v.GetStructValue().GetFields()["a"].GetNumberValue() == 2
		}},
		{"invalid UTF-8", "{\"a\":\"\xff\xfe\"}", true, nil},
		{"number beyond float64", `{"n":1e400}`, true, nil},
		{"plain", `{"a":[1,"x",null,true]}`, false, func(v *structpb.Value) bool {
			return len(v.GetStructValue().GetFields()["a"].GetListValue().GetValues()) == 4
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := json.RawMessage(tc.raw)
			for _, item := range []upstream.Item{
				{Seq: 41, Event: &arcp.Event{Kind: "log", Body: raw}},
				{Seq: 42, Result: &arcp.Result{Result: raw}},
				{Seq: 43, Error: &arcp.JobError{Code: "INTERNAL_ERROR", Details: raw}},
			} {
				msg := watchItem(item)
				if msg.GetEventSeq() != item.Seq {
					t.Fatalf("event_seq %d, want %d", msg.GetEventSeq(), item.Seq)
				}
				var v *structpb.Value
				var rawOut []byte
				switch it := msg.GetItem().(type) {
				case *sessiongatev1.WatchJobResponse_Event:
					v, rawOut = it.Event.GetBody(), it.Event.GetRawBody()
				case *sessiongatev1.WatchJobResponse_Result:
					v, rawOut = it.Result.GetResult(), it.Result.GetRawResult()
				case *sessiongatev1.WatchJobResponse_Error:
					v, rawOut = it.Error.GetDetails(), it.Error.GetRawDetails()
				}
				if tc.wantRaw {
					if v != nil || string(rawOut) != tc.raw {
						t.Fatalf("seq %d: value %v, raw %q; want the raw text only", item.Seq, v, rawOut)
					}
				} else if rawOut != nil || !tc.check(v) {
					t.Fatalf("seq %d: value %v, raw %q", item.Seq, v, rawOut)
				}
				// The message must be sendable: it marshals.
				if _, err := proto.Marshal(msg); err != nil {
					t.Fatalf("seq %d: message does not marshal: %v", item.Seq, err)
				}
			}
			v, rawOut := valueOrRaw(raw) // RunJob's result path
			if (rawOut != nil) != tc.wantRaw || (v != nil) == tc.wantRaw {
				t.Fatalf("RunJob result: %v, %q", v, rawOut)
			}
		})
	}
}

// --- 4. Shutdown ---

// TestShutdownEndsInfrastructureStreams: a client holding a health Watch and
// a reflection stream does not hold the shutdown until its deadline; both
// streams end with UNAVAILABLE after NOT_SERVING.
func TestShutdownEndsInfrastructureStreams(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 20*time.Second)
	w, err := healthpb.NewHealthClient(h.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := w.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health status: %v, %v", first, err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.gw.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Shutdown took %v with a health Watch open", took)
	} else {
		t.Logf("Shutdown took %v", took)
	}
	sawNotServing := false
	for {
		m, err := w.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("health Watch ended with %v, want Unavailable", err)
			}
			break
		}
		sawNotServing = sawNotServing || m.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	}
	if !sawNotServing {
		t.Error("health Watch ended without NOT_SERVING")
	}
	if _, err := rs.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("reflection stream ended with %v, want Unavailable", err)
	}
	h.stop()
}

// TestShutdownReportsHardStop: a call that outlives the deadline (a
// non-reading watcher with no gap limit reached) makes Shutdown stop hard
// and say so.
func TestShutdownReportsHardStop(t *testing.T) {
	h := newHarness(t, harnessOpts{dial: slowReader})
	ctx := ctxT(t, 20*time.Second)
	id := h.open(t, ctx)
	sub, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "stream",
		Input: mustValue(t, map[string]any{"count": 6000.0})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: sub.GetJobId()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a Send blocked in flow control", func() bool { return stacksContain("(*writeQuota).get") })
	sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = h.gw.Shutdown(sctx)
	if !errors.Is(err, ErrHardStop) {
		t.Fatalf("Shutdown = %v, want ErrHardStop", err)
	}
	h.stop()
}

// --- 5. Probes without credentials ---

func TestHealthWithoutCredentials(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.ClientTokens = map[string]string{"tok": "alice"} }})
	ctx := ctxT(t, 10*time.Second)
	hc := healthpb.NewHealthClient(h.conn)
	for _, svc := range []string{"", "sessiongate.v1.SessionGateway", "timeoutprofile.v1.TimeoutProfileService"} {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) without token = %v, %v", svc, r, err)
		}
	}
	list, err := hc.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(list.GetStatuses()) != 3 {
		t.Errorf("List without token = %v, %v", list, err)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "timeoutprofile.v1.TimeoutProfileService"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Watch without token = %v, %v", m, err)
	}
	// Everything else still needs the token.
	if _, err := timeoutprofilev1.NewTimeoutProfileServiceClient(h.conn).ListProfiles(ctx, &timeoutprofilev1.ListProfilesRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListProfiles without token: %v", err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx)
	if err == nil {
		_ = rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = rs.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without token: %v", err)
	}
	if _, err := h.client.ListSessions(ctx, &sessiongatev1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListSessions without token: %v", err)
	}
}

// --- 6. Every counter exported ---

// TestEveryCounterExported: every field of upstream.Counters is named in
// counterMetrics, exported per runtime on /metrics, and documented in
// docs/operations.md. A field added to Counters later fails this test until it is.
func TestEveryCounterExported(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.Runtimes = append(c.Runtimes, Runtime{Name: "second", URL: c.Runtimes[0].URL})
	}})
	ca, cb := h.gw.Counters("default"), h.gw.Counters("second")
	if ca == nil || cb == nil || ca == cb {
		t.Fatal("each runtime needs its own Counters")
	}
	ca.FIFOStalls.Add(3)
	cb.OutcomeUnknown.Add(5)
	readme, err := readREADME()
	if err != nil {
		t.Fatal(err)
	}
	body := scrape(t, h)
	typ := reflect.TypeFor[upstream.Counters]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		m, ok := counterMetrics[f.Name]
		if !ok {
			t.Errorf("upstream.Counters.%s has no entry in counterMetrics (metrics.go)", f.Name)
			continue
		}
		if f.Type != atomicUint64 {
			t.Errorf("upstream.Counters.%s is %v, not atomic.Uint64: the collector cannot export it", f.Name, f.Type)
		}
		name := "sessiongate_upstream_" + m.name + "_total"
		for _, rt := range []string{"default", "second"} {
			if !strings.Contains(body, name+`{runtime="`+rt+`"}`) {
				t.Errorf("/metrics lacks %s for runtime %s", name, rt)
			}
		}
		if !strings.Contains(readme, "`"+name+"`") {
			t.Errorf("docs/operations.md does not document %s", name)
		}
	}
	for _, want := range []string{
		`sessiongate_upstream_fifo_stalls_total{runtime="default"} 3`,
		`sessiongate_upstream_fifo_stalls_total{runtime="second"} 0`,
		`sessiongate_upstream_outcome_unknown_total{runtime="second"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for name := range counterMetrics {
		if _, ok := typ.FieldByName(name); !ok {
			t.Logf("counterMetrics names %s, which upstream.Counters does not have (yet, or any more)", name)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"FIFOStalls": "fifo_stalls", "LateAnswers": "late_answers", "OutcomeUnknown": "outcome_unknown", "HTTPRetries": "http_retries"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// --- 7. Input checks and job failures ---

func TestValueWithoutKind(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	for _, tc := range []struct {
		in    *structpb.Value
		field string
	}{
		{&structpb.Value{}, "input"}, // what @grpc/proto-loader sends for input: {hello: 'world'}
		{structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": {}}}), `input.struct_value.fields["a"]`},
	} {
		_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: tc.in})
		msg := status.Convert(err).Message()
		ei := errorInfo(err)
		if status.Code(err) != codes.InvalidArgument || ei.GetReason() != "VALUE_KIND_NOT_SET" || ei.GetMetadata()["field"] != tc.field ||
			!strings.HasPrefix(msg, tc.field+": google.protobuf.Value has no kind set") || !strings.Contains(msg, "structValue") ||
			!strings.Contains(msg, "ParseDict") {
			t.Errorf("input %v: %v %v", tc.in, err, ei)
		}
	}
}

func TestJobCode(t *testing.T) {
	for code, want := range map[string]codes.Code{
		"INTERNAL_ERROR":        codes.Aborted,
		"x-vendor.weird":        codes.Aborted,
		"TIMEOUT":               codes.Aborted,
		"CANCELLED":             codes.Canceled,
		"PERMISSION_DENIED":     codes.PermissionDenied,
		"LEASE_EXPIRED":         codes.PermissionDenied,
		"BUDGET_EXHAUSTED":      codes.ResourceExhausted,
		"INVALID_REQUEST":       codes.InvalidArgument,
		"AGENT_NOT_AVAILABLE":   codes.NotFound,
		"HEARTBEAT_LOST":        codes.Unavailable,
		"RESUME_WINDOW_EXPIRED": codes.Unavailable,
	} {
		if got := jobCode(code); got != want {
			t.Errorf("jobCode(%s) = %v, want %v", code, got, want)
		}
	}
	// A rejected request keeps the general mapping: the runtime's own fault.
	if arcpCode("INTERNAL_ERROR") != codes.Internal {
		t.Error("a request rejected with INTERNAL_ERROR must stay INTERNAL")
	}
}

// recordingHandler keeps every log record.
type recordingHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// TestAgentFailureIsNotAGatewayFault: a job that fails with INTERNAL_ERROR
// ends RunJob with ABORTED (ErrorInfo reason INTERNAL_ERROR, domain arcp),
// and nothing about it is logged at ERROR.
func TestAgentFailureIsNotAGatewayFault(t *testing.T) {
	rec := &recordingHandler{}
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.Logger = slog.New(rec) }})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "fail",
		Input: mustValue(t, map[string]any{"code": "INTERNAL_ERROR", "message": "model crashed", "retryable": true})})
	ei := errorInfo(err)
	if status.Code(err) != codes.Aborted || ei.GetReason() != "INTERNAL_ERROR" || ei.GetDomain() != "arcp" || ei.GetMetadata()["retryable"] != "true" {
		t.Fatalf("RunJob(fail INTERNAL_ERROR) = %v %v, want ABORTED with the ARCP code", err, ei)
	}
	h.stop()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	logged := false
	for _, r := range rec.recs {
		if r.Level >= slog.LevelError {
			t.Errorf("logged at %v: %s", r.Level, r.Message)
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "grpc.method" && a.Value.String() == "RunJob" {
				logged = true
			}
			return true
		})
	}
	if !logged {
		t.Error("the failed RunJob was not access-logged at all")
	}
}

// --- 8. HTTP probe bodies ---

func TestHTTPProbeSpeaksProtoJSON(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.ClientTokens = map[string]string{"tok": "alice"} }})
	ctx := bearer(ctxT(t, 10*time.Second), "tok")
	id := h.open(t, ctx)
	code, body := h.httpStatus(t, id, "tok")
	var got sessiongatev1.GetSessionStatusResponse
	if err := protojson.Unmarshal([]byte(body), &got); err != nil || code != 200 {
		t.Fatalf("HTTP probe %d %s: %v", code, body, err)
	}
	want, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("HTTP probe %v, gRPC %v", &got, want)
	}
	if !strings.Contains(body, `"lastEventSeq":"`) && want.GetLastEventSeq() != 0 {
		t.Errorf("uint64 not a JSON string: %s", body)
	}
	for _, tc := range []struct {
		id, token string
		code      int
		grpcCode  codes.Code
	}{
		{id, "", 401, codes.Unauthenticated},
		{id, "wrong", 401, codes.Unauthenticated},
		{"nope", "tok", 400, codes.InvalidArgument},
	} {
		code, body := h.httpStatus(t, tc.id, tc.token)
		var st struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
			} `json:"details"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != tc.code || st.Code != int(tc.grpcCode) || st.Message == "" ||
			len(st.Details) != 1 || st.Details[0].Reason == "" || strings.Contains(body, `"status":""`) {
			t.Errorf("probe %q with token %q: %d %s", tc.id, tc.token, code, body)
		}
	}
}

// --- helpers ---

func scrape(t *testing.T, h *harness) string {
	t.Helper()
	resp, err := h.admin.Client().Get(h.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readREADME reads the document that lists the metrics:
// docs/operations.md ("Metrics"), where the README sends operators.
func readREADME() (string, error) {
	b, err := os.ReadFile("../../docs/operations.md")
	return string(b), err
}
