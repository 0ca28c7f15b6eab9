package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestMain checks for leaked goroutines after the tests, except the fault
// proxy's: toxiproxy's link goroutines can outlive the connection a toxic
// cut (a reset_peer toxic stops reading its input, and the stub before it
// blocks); they belong to the test rig, not to the gateway.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var opts []goleak.Option
		for _, fn := range proxyFunctions() {
			opts = append(opts, goleak.IgnoreAnyFunction(fn))
		}
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proxyFunctions names every toxiproxy function on a goroutine's stack now.
func proxyFunctions() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(buf), "\n") {
		if !strings.HasPrefix(line, proxyMarker) {
			continue
		}
		if i := strings.LastIndex(line, "("); i > 0 {
			line = line[:i]
		}
		if !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	return out
}

// TestSoakShort runs the CI soak in-process: the reference runtime behind
// the fault-injecting proxy, the gateway, the mixed load. It must find no
// violation, and it must have had something to find: faults injected of
// several kinds, upstream resumes, streams and RunJobs that succeeded.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s soak")
	}
	o := defaultOptions(true)
	// -race makes everything several times slower on a shared machine.
	o.Slack = 4 * time.Second
	var progress syncBuffer
	o.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	var text bytes.Buffer
	writeText(&text, rep)
	t.Log("\n" + text.String())
	if !rep.Pass {
		t.Errorf("violations: %s", strings.Join(rep.Violations, ", "))
	}
	kinds := 0
	for _, n := range rep.Faults {
		if n > 0 {
			kinds++
		}
	}
	if kinds < 3 {
		t.Errorf("faults of %d kinds injected (%v), want at least 3", kinds, rep.Faults)
	}
	if rep.Upstream["resumes"] == 0 {
		t.Errorf("no upstream resume: the faults did not reach the gateway's upstream (%v)", rep.Upstream)
	}
	if rep.Calls["RunJob"]["OK"] == 0 || rep.Calls["WatchJob"]["OK"] == 0 || rep.Events == 0 {
		t.Errorf("no successful RunJob or WatchJob, or no event checked: %v, %d events", rep.Calls, rep.Events)
	}
}

// TestStreamCheck shows that the stream rules catch what they name: a
// deliberately broken stream for each.
func TestStreamCheck(t *testing.T) {
	ev := func(seq uint64, i, count int) *sessiongatev1.WatchJobResponse {
		body, _ := structpb.NewValue(map[string]any{"i": i, "message": fmt.Sprintf("line %d of %d", i+1, count)})
		return &sessiongatev1.WatchJobResponse{EventSeq: seq, Item: &sessiongatev1.WatchJobResponse_Event{Event: &sessiongatev1.JobEvent{Kind: "log", Body: body}}}
	}
	res := func(seq uint64, count int) *sessiongatev1.WatchJobResponse {
		v, _ := structpb.NewValue(map[string]any{"count": count})
		return &sessiongatev1.WatchJobResponse{EventSeq: seq, Item: &sessiongatev1.WatchJobResponse_Result{Result: &sessiongatev1.JobResult{Result: v}}}
	}
	cancelled := func(seq uint64) *sessiongatev1.WatchJobResponse {
		return &sessiongatev1.WatchJobResponse{EventSeq: seq, Item: &sessiongatev1.WatchJobResponse_Error{Error: &sessiongatev1.JobError{Code: "CANCELLED"}}}
	}
	tests := []struct {
		name                string
		count               int
		items               []*sessiongatev1.WatchJobResponse
		code                codes.Code
		lost, dup, misdeliv int
	}{
		{"complete", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3), ev(2, 1, 3), ev(3, 2, 3), res(4, 3)}, codes.OK, 0, 0, 0},
		{"gap", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3), ev(3, 2, 3), res(4, 3)}, codes.OK, 1, 0, 0},
		{"gap then a definite error", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3), ev(3, 2, 3)}, codes.Unavailable, 1, 0, 0},
		{"missing tail at OK", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3), res(4, 3)}, codes.OK, 2, 0, 0},
		{"no terminal at OK", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3)}, codes.OK, 1, 0, 0},
		{"truncated by a definite error", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3)}, codes.DeadlineExceeded, 0, 0, 0},
		{"cancelled", 3, []*sessiongatev1.WatchJobResponse{ev(1, 0, 3), cancelled(2)}, codes.OK, 0, 0, 0},
		{"repeated i", 2, []*sessiongatev1.WatchJobResponse{ev(1, 0, 2), ev(2, 0, 2), ev(3, 1, 2), res(4, 2)}, codes.OK, 0, 1, 0},
		{"repeated seq", 2, []*sessiongatev1.WatchJobResponse{ev(1, 0, 2), ev(1, 1, 2), res(4, 2)}, codes.OK, 0, 1, 0},
		{"another job's event", 2, []*sessiongatev1.WatchJobResponse{ev(1, 0, 2), ev(2, 0, 5), ev(3, 1, 2), res(4, 2)}, codes.OK, 0, 0, 1},
		{"another job's result", 1, []*sessiongatev1.WatchJobResponse{ev(1, 0, 1), res(2, 7)}, codes.OK, 0, 0, 1},
		{"item after the terminal", 1, []*sessiongatev1.WatchJobResponse{ev(1, 0, 1), res(2, 1), ev(3, 0, 1)}, codes.OK, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := streamCheck{count: tc.count}
			for _, it := range tc.items {
				c.item(it)
			}
			c.end(tc.code)
			if c.lost != tc.lost || c.dup != tc.dup || len(c.misdelivered) != tc.misdeliv {
				t.Errorf("lost %d, duplicated %d, misdelivered %v; want %d, %d, %d", c.lost, c.dup, c.misdelivered, tc.lost, tc.dup, tc.misdeliv)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"JobIDReused": "job_id_reused", "FIFOStalls": "fifo_stalls", "Resumes": "resumes", "OutcomeUnknown": "outcome_unknown"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
