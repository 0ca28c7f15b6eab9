package client_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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

// watchLog records, in order, each WatchJob stream the client opens (its
// from_event_seq) and how each one ended with an error (its status), as
// the client's interceptor chain sees them.
type watchLog struct {
	mu     sync.Mutex
	events []watchLogEntry
	// delivered is the event_seq of the last item the caller's loop got.
	delivered atomic.Uint64
}

type watchLogEntry struct {
	open      bool   // a stream opened
	from      uint64 // its request's from_event_seq
	delivered uint64 // the seq of the last item delivered when it opened
	reason    string // a cut: its ErrorInfo reason ("" without one)
	cut       *status.Status
}

func (l *watchLog) add(e watchLogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *watchLog) snapshot() []watchLogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]watchLogEntry(nil), l.events...)
}

func (l *watchLog) interceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		l.cutBy(err)
		return nil, err
	}
	if !strings.HasSuffix(method, "/WatchJob") {
		return cs, nil
	}
	return &loggedStream{ClientStream: cs, l: l}, nil
}

func (l *watchLog) cutBy(err error) {
	st := status.Convert(err)
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	l.add(watchLogEntry{cut: st, reason: reason})
}

type loggedStream struct {
	grpc.ClientStream
	l *watchLog
}

func (s *loggedStream) SendMsg(m any) error {
	if req, ok := m.(*gatewayv1.WatchJobRequest); ok {
		s.l.add(watchLogEntry{open: true, from: req.GetFromEventSeq(), delivered: s.l.delivered.Load()})
	}
	return s.ClientStream.SendMsg(m)
}

func (s *loggedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		if _, ok := status.FromError(err); ok && status.Code(err) != 0 {
			s.l.cutBy(err)
		}
	}
	return err
}

// TestWatchResumesAcrossHandoff runs a three-replica cluster (real
// processes, redis-server, an external runtime) and a client that knows
// every replica and sends each call to its session's owner. A watch is
// open on the owner when the owner is drained (SIGTERM, as a rolling
// restart does): the owner hands the session off, and the watch's stream is
// cut with UNAVAILABLE, reason SESSION_HANDED_OFF. The client re-opens it
// from the event_seq of the last item it delivered, on a replica that is
// still up, which reaches the adopter; the loop sees every event once, in
// order, and the job's result.
func TestWatchResumesAcrossHandoff(t *testing.T) {
	ctx := testContext(t, 120*time.Second)
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

	var addrs []string
	for _, r := range c.Replicas {
		addrs = append(addrs, r.Addr)
	}
	var log watchLog
	cl, err := client.New("", client.WithReplicas(addrs...), client.WithSessionAffinity(),
		client.WithDialOptions(grpc.WithStreamInterceptor(log.interceptor)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "go-handoff"})
	if err != nil {
		t.Fatal(err)
	}
	owner := -1
	for i, r := range c.Replicas {
		if strings.HasPrefix(s.ID(), "s1."+r.Instance+".") {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatalf("session %s names none of the replicas", s.ID())
	}
	const count = 60
	job, err := s.Submit(ctx, "stream", map[string]any{"count": count, "interval_ms": 50})
	if err != nil {
		t.Fatal(err)
	}

	termDone := make(chan error, 1)
	var seen []int
	var last *client.WatchItem
	for it, err := range s.Watch(ctx, job.ID, client.WithResumePolicy(client.ResumePolicy{MaxAttempts: 40, MaxBackoff: 500 * time.Millisecond})) {
		if err != nil {
			for _, r := range c.Replicas {
				t.Logf("--- %s log (tail):\n%s", r.Instance, tailString(r.Log(), 3000))
			}
			t.Fatalf("after %d events: %v", len(seen), err)
		}
		log.delivered.Store(it.EventSeq)
		if it.Event != nil {
			seen = append(seen, int(it.Event.Body.(map[string]any)["i"].(float64)))
			if len(seen) == 10 {
				// The owner drains while the loop goes on reading.
				go func() { termDone <- c.Term(ctx, owner) }()
			}
		}
		last = it
	}
	if err := <-termDone; err != nil {
		t.Fatal(err)
	}
	if len(seen) != count {
		t.Fatalf("saw %d events, want %d: %v", len(seen), count, seen)
	}
	for i, v := range seen {
		if v != i {
			t.Fatalf("event %d is i=%d: a gap or a duplicate across the hand-off: %v", i, v, seen)
		}
	}
	if last == nil || last.Result == nil {
		t.Fatalf("last item %+v", last)
	}

	// The stream on the owner was cut with SESSION_HANDED_OFF; every cut
	// was one the client resumes after; the first stream asked from 0 and
	// every re-opened one from the seq of the last item delivered.
	entries := log.snapshot()
	var reasons []string
	handedOff, opens, reopenedAfterHandoff := false, 0, 0
	for _, e := range entries {
		if e.open {
			opens++
			want := e.delivered
			if opens == 1 {
				want = 0
			}
			if e.from != want {
				t.Errorf("stream %d opened from_event_seq %d, want %d (the last delivered)", opens, e.from, want)
			}
			if handedOff {
				reopenedAfterHandoff++
			}
			continue
		}
		reasons = append(reasons, e.cut.Code().String()+" "+e.reason)
		if e.cut.Code() != codes.Unavailable || (e.reason != "" && !client.ResumableReasons[e.reason]) {
			t.Errorf("cut with %v %q (%s), want UNAVAILABLE with a resumable reason or none", e.cut.Code(), e.reason, e.cut.Message())
		}
		if e.reason == "SESSION_HANDED_OFF" {
			handedOff = true
		}
	}
	t.Logf("owner %s; %d streams opened; cuts %v", c.Replicas[owner].Instance, opens, reasons)
	if !handedOff {
		t.Fatalf("no stream was cut with SESSION_HANDED_OFF: cuts %v", reasons)
	}
	if reopenedAfterHandoff == 0 {
		t.Fatal("the watch was not re-opened after the hand-off")
	}
}
