package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// readAll reads a watcher to the end.
func readAll(ctx context.Context, w *upstream.Watcher) ([]upstream.Item, error) {
	var items []upstream.Item
	for {
		it, err := w.Next(ctx)
		if err == io.EOF {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		items = append(items, it)
	}
}

// watchAll watches jobID on c from fromSeq and reads every item to the
// terminal one.
func watchAll(t testing.TB, ctx context.Context, c *upstream.Conn, jobID string, fromSeq uint64) []upstream.Item {
	t.Helper()
	w, err := c.Watch(jobID, fromSeq)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	items, err := readAll(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func streamInput(t testing.TB, count, intervalMS int) json.RawMessage {
	return mustJSON(t, map[string]int{"count": count, "interval_ms": intervalMS})
}

func TestCancelJob(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
	if err != nil {
		t.Fatal(err)
	}
	if c.ActiveJobs() != 1 {
		t.Fatalf("ActiveJobs = %d", c.ActiveJobs())
	}
	if err := c.Cancel(ctx, acc.JobID, "test"); err != nil {
		t.Fatal(err)
	}
	if !srv.Runtime().Cancelled(acc.JobID) {
		t.Fatal("runtime did not see the cancel")
	}
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil || term.Error == nil || term.Error.Code != arcp.CodeCancelled || term.Result != nil {
		t.Fatalf("Wait = %+v, %v", term, err)
	}
	if c.ActiveJobs() != 0 {
		t.Fatalf("ActiveJobs = %d", c.ActiveJobs())
	}
	// A finished job: nothing is sent, and the answer says so.
	var ended *upstream.JobEndedError
	if err := c.Cancel(ctx, acc.JobID, "again"); !errors.As(err, &ended) || ended.FinalStatus != arcp.StatusCancelled || ended.JobID != acc.JobID {
		t.Fatalf("Cancel of a finished job = %v, want a JobEndedError (cancelled)", err)
	}
	if err := c.Cancel(ctx, "no-such-job", ""); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("Cancel unknown = %v", err)
	}
	if _, err := c.Wait(ctx, "no-such-job"); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("Wait unknown = %v", err)
	}
	if _, err := c.Watch("no-such-job", 0); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("Watch unknown = %v", err)
	}
}

func TestFailAgentAndTerminalOnce(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "fail", Input: mustJSON(t, map[string]string{"code": "BUDGET_EXHAUSTED", "message": "no more"})})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // every Wait call gets the terminal
		term, err := c.Wait(ctx, acc.JobID)
		if err != nil || term.Error == nil || term.Error.Code != arcp.CodeBudgetExhausted || term.Error.Message != "no more" {
			t.Fatalf("Wait = %+v, %v", term, err)
		}
	}
}

// TestWatchersShareTheLog: several watchers of one job, started before,
// during and after it ran, from different sequence numbers, each see their
// items once, in order, the terminal exactly once, then io.EOF.
func TestWatchersShareTheLog(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	const count = 50
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: streamInput(t, count, 2)})
	if err != nil {
		t.Fatal(err)
	}
	early, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var earlyItems []upstream.Item
	var earlyErr error
	wg.Go(func() { earlyItems, earlyErr = readAll(ctx, early) })
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if earlyErr != nil || len(earlyItems) != count+1 {
		t.Fatalf("early watcher: %d items, %v", len(earlyItems), earlyErr)
	}
	if it := earlyItems[count]; it.Result == nil || it.Seq != term.Seq {
		t.Fatalf("last item %+v, terminal %+v", it, term)
	}
	for i := 1; i < len(earlyItems); i++ {
		if earlyItems[i].Seq <= earlyItems[i-1].Seq {
			t.Fatal("items out of order")
		}
	}
	if _, err := early.Next(ctx); err != io.EOF {
		t.Fatalf("Next after EOF = %v", err)
	}
	early.Close()

	// Late watchers replay the retained history.
	mid := earlyItems[20].Seq
	for _, from := range []uint64{0, mid, term.Seq - 1, term.Seq} {
		items := watchAll(t, ctx, c, acc.JobID, from)
		want := 0
		for _, it := range earlyItems {
			if it.Seq > from {
				want++
			}
		}
		if from == term.Seq {
			want = 1 // from the terminal's own seq: the terminal again, so a watch always ends with one
		}
		if len(items) != want || (want > 0 && items[0].Seq <= from && from != term.Seq) {
			t.Fatalf("watch from %d: %d items, want %d", from, len(items), want)
		}
	}
	// Past the end: a definite error naming the last seq, not an empty stream.
	var beyond *upstream.BeyondEndError
	if _, err := c.Watch(acc.JobID, term.Seq+1); !errors.As(err, &beyond) || beyond.LastSeq != term.Seq {
		t.Fatalf("watch past the end = %v, want a BeyondEndError at %d", err, term.Seq)
	}
}

// TestSlowConsumerByCap: a watcher that never reads, next to one that keeps
// up, on a session whose event buffer is small. The slow one fails with
// ErrSlowConsumer (counted); the fast one sees everything; the buffer never
// holds more than the cap.
func TestSlowConsumerByCap(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.MaxBufferedEvents = 100
	upstream.SetKnobs(&cfg, upstream.Knobs{PressureGrace: time.Hour})
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	const count = 600
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: streamInput(t, count, 1)})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	maxSeen := 0
	n := 0
	for {
		it, err := fast.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("fast watcher after %d: %v", n, err)
		}
		if it.Event != nil {
			n++
		}
		if e, _ := c.Buffered(); e > maxSeen {
			maxSeen = e
		}
	}
	if n != count {
		t.Fatalf("fast watcher saw %d events", n)
	}
	if maxSeen > 100 {
		t.Fatalf("buffer held %d items, cap 100", maxSeen)
	}
	var got error
	for got == nil {
		_, got = slow.Next(ctx)
	}
	if !errors.Is(got, upstream.ErrSlowConsumer) {
		t.Fatalf("slow watcher err = %v", got)
	}
	ctr := cfgCounters(c)
	if ctr.SlowConsumers.Load() != 1 || ctr.BackPressure.Load() == 0 {
		t.Fatalf("slow consumers %d, back-pressure %d", ctr.SlowConsumers.Load(), ctr.BackPressure.Load())
	}
	// The history the slow watcher lost cannot be watched again from 0.
	if _, err := c.Watch(acc.JobID, 0); !errors.Is(err, upstream.ErrSlowConsumer) {
		t.Fatalf("Watch from 0 after trimming = %v", err)
	}
}

// TestSlowConsumerByGrace: the buffer never overflows, but a watcher that
// holds back-pressure (acks paused) longer than the grace period fails.
func TestSlowConsumerByGrace(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.MaxBufferedEvents = 1000
	upstream.SetKnobs(&cfg, upstream.Knobs{PressureGrace: 100 * time.Millisecond, Housekeeping: 5 * time.Millisecond})
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	const count = 900 // with the terminal, never over the cap
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: streamInput(t, count, 2)})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	waitFor(ctx, t, "the slow watcher to fail", func() bool { return cfgCounters(c).SlowConsumers.Load() == 1 })
	if cfgCounters(c).BackPressure.Load() == 0 {
		t.Fatal("no back-pressure before failing the watcher")
	}
	var got error
	for got == nil {
		_, got = slow.Next(ctx)
	}
	if !errors.Is(got, upstream.ErrSlowConsumer) {
		t.Fatalf("slow watcher err = %v", got)
	}
	if _, err := c.Wait(ctx, acc.JobID); err != nil {
		t.Fatal(err)
	}
}

// TestUnwatchedJobKeepsRunning: a chatty job nobody watches (Submit + Wait)
// is bounded by the caps without back-pressure and without failing anyone.
func TestUnwatchedJobKeepsRunning(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.MaxBufferedEvents = 50
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: streamInput(t, 500, 0)})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil || term.Result == nil {
		t.Fatalf("Wait = %+v, %v", term, err)
	}
	if e, _ := c.Buffered(); e > 50 {
		t.Fatalf("buffered %d", e)
	}
	ctr := cfgCounters(c)
	if ctr.BackPressure.Load() != 0 || ctr.SlowConsumers.Load() != 0 {
		t.Fatalf("back-pressure %d, slow consumers %d", ctr.BackPressure.Load(), ctr.SlowConsumers.Load())
	}
	// The tail is still watchable; the trimmed head is a definite error.
	if _, err := c.Watch(acc.JobID, 0); !errors.Is(err, upstream.ErrSlowConsumer) {
		t.Fatalf("Watch from 0 = %v", err)
	}
	w, err := c.Watch(acc.JobID, term.Seq-1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	it, err := w.Next(ctx)
	if err != nil || it.Result == nil {
		t.Fatalf("Next = %+v, %v", it, err)
	}
}

func TestMaxLiveJobs(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.MaxLiveJobs = 3
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	var ids []string
	for range 3 {
		acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.JobID)
	}
	_, err := c.Submit(ctx, arcp.Submit{Agent: "echo"})
	var ce *upstream.CapError
	if !errors.As(err, &ce) || ce.Cap != "live_jobs" || ce.Limit != 3 {
		t.Fatalf("4th Submit err = %v", err)
	}
	if srv.Runtime().Stats().JobsSubmitted != 3 {
		t.Fatal("the refused submit was sent")
	}
	if err := c.Cancel(ctx, ids[0], ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil {
		t.Fatalf("Submit after a job ended: %v", err)
	}
}

func TestJobRetention(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.JobRetention = 100 * time.Millisecond
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, acc.JobID); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the finished job to expire", func() bool {
		_, err := c.Watch(acc.JobID, 0)
		return errors.Is(err, upstream.ErrUnknownJob)
	})
	if _, err := c.Wait(ctx, acc.JobID); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("Wait after retention = %v", err)
	}
	if e, b := c.Buffered(); e != 0 || b != 0 {
		t.Fatalf("buffered %d items, %d bytes", e, b)
	}
}

// TestSubscribe: a second session of the same principal subscribes to the
// first session's job and watches it.
func TestSubscribe(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	a := dial(t, baseConfig(srv.URL()))
	b := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	acc, err := a.Submit(ctx, arcp.Submit{Agent: "stream", Input: streamInput(t, 30, 5)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, acc.JobID, 0); err != nil {
		t.Fatal(err)
	}
	items := watchAll(t, ctx, b, acc.JobID, 0)
	events := 0
	for _, it := range items {
		if it.Event != nil && it.Event.Kind == arcp.KindLog {
			events++
		}
	}
	if events != 30 || items[len(items)-1].Result == nil {
		t.Fatalf("subscriber saw %d events, last %+v", events, items[len(items)-1])
	}
	if err := b.Subscribe(ctx, "no-such-job", 0); asArcpError(err) == nil {
		t.Fatalf("Subscribe unknown = %v, want the runtime's rejection", err)
	}
	if _, err := b.Watch("no-such-job", 0); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("Watch after a failed Subscribe = %v", err)
	}
}
