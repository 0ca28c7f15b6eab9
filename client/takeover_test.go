package client_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/client"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// cutRecorder records the status of every WatchJob stream that ended with
// an error, as the client's interceptor chain sees it.
type cutRecorder struct {
	mu   sync.Mutex
	cuts []*status.Status
}

func (r *cutRecorder) interceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		r.record(err)
		return nil, err
	}
	return &recordingStream{ClientStream: cs, r: r}, nil
}

func (r *cutRecorder) record(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cuts = append(r.cuts, status.Convert(err))
}

type recordingStream struct {
	grpc.ClientStream
	r *cutRecorder
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && status.Code(err) != codes.OK && status.Code(err) != codes.Canceled {
		if _, ok := status.FromError(err); ok {
			s.r.record(err)
		}
	}
	return err
}

// TestWatchResumesAcrossTakeover runs a three-replica cluster (real
// processes, redis-server, an external runtime). The client talks to
// replica 2, which relays the watch to the session's owner, replica 1;
// replica 1 is SIGKILLed mid-stream. The relayed stream is cut with
// UNAVAILABLE (OWNER_UNREACHABLE), the watch re-opens itself from its
// cursor until replica 2 or 3 took the session over, and the loop sees
// every event once, in order.
func TestWatchResumesAcrossTakeover(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	c, err := clustertest.Start(ctx, clustertest.Options{Replicas: 3, LeaseTTL: time.Second})
	if errors.Is(err, clustertest.ErrNoBinary) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: apt-get install -y redis-server)", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	owner, err := client.New(c.Replicas[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	s, err := owner.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "go-takeover"})
	if err != nil {
		t.Fatal(err)
	}
	const count = 40
	job, err := s.Submit(ctx, "stream", map[string]any{"count": count, "interval_ms": 50})
	if err != nil {
		t.Fatal(err)
	}

	var rec cutRecorder
	viaTwo, err := client.New(c.Replicas[1].Addr, client.WithDialOptions(grpc.WithStreamInterceptor(rec.interceptor)))
	if err != nil {
		t.Fatal(err)
	}
	defer viaTwo.Close()
	w := viaTwo.Session(s.ID())
	var seen []int
	var last *client.WatchItem
	for it, err := range w.Watch(ctx, job.ID, client.WithResumePolicy(client.ResumePolicy{MaxAttempts: 40, MaxBackoff: 500 * time.Millisecond})) {
		if err != nil {
			for _, r := range c.Replicas {
				t.Logf("--- %s log (tail):\n%s", r.Instance, tailString(r.Log(), 3000))
			}
			t.Fatalf("after %d events: %v", len(seen), err)
		}
		if it.Event != nil {
			seen = append(seen, int(it.Event.Body.(map[string]any)["i"].(float64)))
			if len(seen) == 10 {
				c.Kill(0) // the owner dies mid-stream
			}
		}
		last = it
	}
	if len(seen) != count {
		t.Fatalf("saw %d events, want %d: %v", len(seen), count, seen)
	}
	for i, v := range seen {
		if v != i {
			t.Fatalf("event %d is i=%d: a gap or a duplicate across the takeover: %v", i, v, seen)
		}
	}
	if last == nil || last.Result == nil {
		t.Fatalf("last item %+v", last)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.cuts) == 0 {
		t.Fatal("the watch was never cut")
	}
	var reasons []string
	for _, st := range rec.cuts {
		reason := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		reasons = append(reasons, reason)
		if st.Code() != codes.Unavailable || !client.ResumableReasons[reason] {
			t.Errorf("cut with %v %s (%s), want UNAVAILABLE with a resumable reason", st.Code(), reason, st.Message())
		}
	}
	t.Logf("%d cuts, reasons %v; the first: %q", len(rec.cuts), reasons, rec.cuts[0].Message())
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
