package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The check passes against the reference runtime in every dialect: the
// gateway keeps each promise of issue 29 with each runtime behaviour the
// official SDKs show (this is the assembled gateway over real sockets, with
// the proxy cutting the transport).
func TestCheckEveryDialect(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			srv := arcpruntime.NewTestServer(t, arcpruntime.Options{Dialect: d.Dialect})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var frames bytes.Buffer
			rep, err := run(ctx, srv.URL(), &frames)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rep.print(&out)
			t.Logf("%s:\n%s", d.Name, out.String())
			if bad := rep.broken(); len(bad) > 0 {
				t.Fatalf("broken: %q", bad)
			}
			if rep.frames == 0 || !bytes.Contains(frames.Bytes(), []byte("--- CUT")) {
				t.Fatal("the frame log has no frames or no cut")
			}
		})
	}
}

// broken notices a broken promise: a report as the gateway gave them before
// issue 29 (a retry that waited to its deadline, bob seeing alice's job, an
// empty watch past the end, an OK cancel of an ended job) fails.
func TestBrokenNoticesEachPromise(t *testing.T) {
	good := func() *report {
		return &report{original: "j1", retryRunning: call{job: "j1", result: "r"}, retryEnded: call{job: "j1", result: "r", took: time.Millisecond},
			otherInput: statusErr(6), cutEvents: []int{0, 1, 2, 3, 4, 5, 6, 7}, cutTerminal: "JOB_LOST", cutEnd: time.Second,
			watchPast: statusErr(11), cancel: statusErr(9),
			obsEvents: []int{0, 1, 2, 3, 4, 5, 6, 7}, obsTerminal: "JOB_LOST", obsEnd: time.Second, obsCutDone: true}
	}
	if b := good().broken(); len(b) != 0 {
		t.Fatalf("a good report is broken: %q", b)
	}
	for name, spoil := range map[string]func(*report){
		"retry waited":         func(r *report) { r.retryEnded = call{took: 4900 * time.Millisecond, err: statusErr(4)} },
		"replayed retry slow":  func(r *report) { r.retryEnded.took = 2 * time.Second },
		"other input accepted": func(r *report) { r.otherInput = nil },
		"stream hung":          func(r *report) { r.cutTerminal, r.cutEnd = "", 30*time.Second },
		"duplicate event":      func(r *report) { r.cutEvents = []int{0, 1, 2, 2, 3} },
		"bob saw alice":        func(r *report) { r.bobSawAlice = []string{"j1"} },
		"watch past the end":   func(r *report) { r.watchPast = nil },
		"cancel of ended job":  func(r *report) { r.cancel = nil },
		"subscribed hung":      func(r *report) { r.obsTerminal, r.obsEnd = "", 30*time.Second },
		"subscribed duplicate": func(r *report) { r.obsEvents = []int{0, 1, 2, 3, 3, 4} },
		"subscribed gap":       func(r *report) { r.obsEvents, r.obsTerminal = []int{0, 1, 2, 3, 4, 5, 6, 7, 12}, "result" },
		"observer not cut":     func(r *report) { r.obsCutDone = false },
	} {
		r := good()
		spoil(r)
		if len(r.broken()) == 0 {
			t.Errorf("%s: not noticed", name)
		}
	}
	r := good()
	r.print(io.Discard)
}

func statusErr(c uint32) error { return status.Error(codes.Code(c), "x") }
