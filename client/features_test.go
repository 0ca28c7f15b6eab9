package client_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestInputErrorPath: input that cannot be sent is an *InputError naming
// its path, before any call.
func TestInputErrorPath(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 10*time.Second)
	type point struct {
		X float64 `json:"x"`
	}
	for _, c := range []struct {
		input any
		opts  []client.JobOption
		path  string
	}{
		{map[string]any{"ids": []any{1, int64(1) << 60}}, nil, "input.ids[1]"},
		{[]any{map[string]any{"f": math.NaN()}}, nil, "input[0].f"},
		{map[string]any{"p": point{X: math.Inf(1)}}, nil, "input.p"},
		{map[string]any{"c": make(chan int)}, nil, "input.c"},
		{uint64(1) << 54, nil, "input"},
		{nil, []client.JobOption{client.Extensions(map[string]any{"x-vendor.a": []any{math.Inf(-1)}})}, `extensions["x-vendor.a"][0]`},
	} {
		_, err := s.Run(ctx, "echo", c.input, c.opts...)
		var ie *client.InputError
		if !errors.As(err, &ie) || ie.Path != c.path {
			t.Errorf("input %v: %v (%T), want an *InputError at %s", c.input, err, err, c.path)
		}
		if _, err := s.Submit(ctx, "echo", c.input, c.opts...); !errors.As(err, &ie) {
			t.Errorf("Submit: %v", err)
		}
	}
}

// TestCloseTakesContext: Close runs under the caller's context; one that
// the context ended may be called again; once answered it is idempotent.
func TestCloseTakesContext(t *testing.T) {
	c := newClient(t)
	s, err := c.OpenSession(testContext(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Close(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close(cancelled ctx) = %v, want context.Canceled", err)
	}
	ctx := testContext(t, 10*time.Second)
	if st, err := c.Status(ctx, s.ID()); err != nil || st.GetStatus() != gatewayv1.SessionStatus_SESSION_STATUS_LIVE {
		t.Fatalf("after a cancelled Close: %v, %v (want still live)", st, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx, s.ID()); err != nil || st.GetStatus() != gatewayv1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatalf("after Close: %v, %v", st, err)
	}
	if err := s.Close(done); err != nil {
		t.Fatalf("Close after an answer: %v (want that answer)", err)
	}
}

// cutProxy is a TCP proxy in front of the gateway whose cut drops every
// connection it carries (with a reset) while it goes on accepting.
type cutProxy struct {
	ln  net.Listener
	wg  sync.WaitGroup
	mu  sync.Mutex
	cs  []*net.TCPConn
	got int // connections accepted
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.got++
			p.cs = append(p.cs, c.(*net.TCPConn), up.(*net.TCPConn))
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					_, _ = io.Copy(pair[1], pair[0])
					pair[0].Close()
					pair[1].Close()
				}()
			}
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	cs := p.cs
	p.cs = nil
	p.mu.Unlock()
	for _, c := range cs {
		_ = c.SetLinger(0) // a reset, not a graceful close
		c.Close()
	}
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// TestWatchResumesAfterCut cuts a watch's connection twice mid-stream: the
// loop sees every event once, in order, then the result. With
// WithoutResume the first cut ends the watch with UNAVAILABLE.
func TestWatchResumesAfterCut(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(map[bool]string{true: "resume", false: "without"}[resume], func(t *testing.T) {
			p := newCutProxy(t, gw.Addr)
			items, failure := watchWithCuts(t, p.addr(), p, resume, 3, 7)
			if !resume {
				var e *client.Error
				if !errors.As(failure, &e) || e.Code != codes.Unavailable || len(items) != 3 {
					t.Fatalf("without resume: %d items, %v", len(items), failure)
				}
				return
			}
			if failure != nil {
				t.Fatal(failure)
			}
			// Two cuts; the second may find the rest of the job already
			// delivered to the client, so one resume is the least.
			if p.connections() < 2 {
				t.Errorf("%d connections: the watch was never resumed", p.connections())
			}
			checkStreamOf12(t, items)
		})
	}
}

// watchWithCuts watches a 12-event stream job through target (p, or a
// balancer in front of p) and cuts p's connections after the items
// numbered in cutAt; it returns the items and the error that ended the
// watch.
func watchWithCuts(t *testing.T, target string, p *cutProxy, resume bool, cutAt ...int) ([]*client.WatchItem, error) {
	t.Helper()
	c, err := client.New(target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t, 60*time.Second)
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	job, err := s.Submit(ctx, "stream", map[string]any{"count": 12, "interval_ms": 60})
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.WatchOption
	if !resume {
		opts = append(opts, client.WithoutResume())
	}
	var items []*client.WatchItem
	for it, err := range s.Watch(ctx, job.ID, opts...) {
		if err != nil {
			return items, err
		}
		items = append(items, it)
		if slices.Contains(cutAt, len(items)) {
			p.cut()
		}
	}
	return items, nil
}

// checkStreamOf12 checks a whole watch of a 12-event stream job: each
// event once, in order, then the result.
func checkStreamOf12(t *testing.T, items []*client.WatchItem) {
	t.Helper()
	if len(items) != 13 {
		t.Fatalf("%d items, want 12 events and the result", len(items))
	}
	for i, it := range items[:12] {
		if it.Event == nil || it.Event.Body.(map[string]any)["i"] != float64(i) {
			t.Errorf("item %d: %+v", i, it)
		}
		if i > 0 && it.EventSeq <= items[i-1].EventSeq {
			t.Errorf("event_seq not increasing at %d", i)
		}
	}
	if r := items[12].Result; r == nil || r.Result.(map[string]any)["count"] != 12.0 {
		t.Errorf("last item %+v", items[12])
	}
}

// TestRunCancelCancelsTheJob: cancelling Run's context cancels the call,
// and the gateway cancels the job upstream: the runtime reports it
// cancelled.
func TestRunCancelCancelsTheJob(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 30*time.Second)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(rctx, "sleep", map[string]any{"ms": 30000})
		done <- err
	}()
	jobID := waitJob(t, ctx, s, `state = RUNNING AND agent = "sleep"`)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v", err)
	}
	if got := waitJob(t, ctx, s, `state = CANCELLED AND agent = "sleep"`); got != jobID {
		t.Fatalf("cancelled job %s, want %s", got, jobID)
	}
}

// waitJob polls ListJobs until a job matches filter, and returns its id.
func waitJob(t *testing.T, ctx context.Context, s *client.Session, filter string) string {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for j, err := range s.ListJobs(ctx, filter) {
			if err != nil {
				t.Fatal(err)
			}
			return j.GetJobId()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no job matches %q", filter)
		case <-tick.C:
		}
	}
}
