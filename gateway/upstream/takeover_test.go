package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestTakeoverContinuesJobs: a connection detaches from a session mid-stream
// (its owner is gone, or hands off) without closing it; another connection
// takes it over with the latest resume token and the acked seq, adopts the
// running job, and a watcher continuing from its cursor sees every remaining
// event exactly once. A cursor from before the takeover gets a definite
// error. The detached connection never sent session.close.
func TestTakeoverContinuesJobs(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	ctx := testCtx(t, 20*time.Second)
	cfg := baseConfig(srv.URL())
	cfg.AckLimited = true
	var tokens []string
	cfg.OnWelcome = func(_, tok string) { tokens = append(tokens, tok) }
	a, err := upstream.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := a.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 60, "interval_ms": 10})})
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	var cursor uint64
	for len(seen) < 10 {
		it, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ I int }
		_ = json.Unmarshal(it.Event.Body, &body)
		seen = append(seen, body.I)
		cursor = it.Seq
	}
	a.SetAckLimit(cursor) // "recorded in the directory"
	w.Close()
	a.Detach()
	if !errors.Is(a.Err(), upstream.ErrDetached) {
		t.Fatalf("detached Err = %v", a.Err())
	}
	if len(tokens) != 1 {
		t.Fatalf("OnWelcome saw %d tokens", len(tokens))
	}

	cfg2 := baseConfig(srv.URL())
	cfg2.Resume = &upstream.ResumeFrom{SessionID: a.Status().SessionID, ResumeToken: tokens[0], LastEventSeq: cursor}
	b := dial(t, cfg2)
	if b.Status().SessionID != a.Status().SessionID {
		t.Fatalf("took over %s, want %s", b.Status().SessionID, a.Status().SessionID)
	}
	if err := b.AdoptJob(ctx, acc.JobID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Watch(acc.JobID, cursor-1); !errors.Is(err, upstream.ErrSlowConsumer) {
		t.Fatalf("Watch from before the takeover = %v, want ErrSlowConsumer", err)
	}
	w2, err := b.Watch(acc.JobID, cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	for {
		it, err := w2.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.Event == nil {
			continue
		}
		var body struct{ I int }
		_ = json.Unmarshal(it.Event.Body, &body)
		seen = append(seen, body.I)
	}
	if len(seen) != 60 {
		t.Fatalf("saw %d events across the takeover, want 60: %v", len(seen), seen)
	}
	for i, v := range seen {
		if v != i {
			t.Fatalf("event %d is i=%d: gap or duplicate across the takeover: %v", i, v, seen)
		}
	}
	if err := b.AdoptJob(ctx, "no-such-job"); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("AdoptJob of an unknown job = %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Close(cctx); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptEndedJobAheadOfItsReplay: a job that ended after the resume
// point, watched on the taking-over connection before the resume's replay
// has reached its frames. The reference runtime answers the listing that
// AdoptJob reads ahead of the replay (control frames first), so the listing
// says "success" while the connection has none of the job's frames yet.
// Before, AdoptJob took that for a job that ended before the takeover and
// answered ErrSlowConsumer: the caller's watch was cut for good although
// every event it lacked was on its way. Now the job is registered and its
// replayed frames fill it: every event once, in order, then the result. A
// long job of the same session replays first, so the listing's answer
// overtakes the replay.
func TestAdoptEndedJobAheadOfItsReplay(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{MaxBufferedEvents: 40000})
	ctx := testCtx(t, 30*time.Second)
	cfg := baseConfig(srv.URL())
	cfg.AckLimited = true // nothing acked: the whole session stays replayable
	var tokens []string
	cfg.OnWelcome = func(_, tok string) { tokens = append(tokens, tok) }
	a, err := upstream.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := func(count int) (string, uint64) {
		acc, err := a.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": count})})
		if err != nil {
			t.Fatal(err)
		}
		term, err := a.Wait(ctx, acc.JobID)
		if err != nil || term.Result == nil {
			t.Fatalf("job of %d events: %+v, %v", count, term, err)
		}
		return acc.JobID, term.Seq
	}
	run(30000)
	job, last := run(5)
	a.Detach()

	cfg2 := baseConfig(srv.URL())
	cfg2.Resume = &upstream.ResumeFrom{SessionID: a.Status().SessionID, ResumeToken: tokens[0]}
	b := dial(t, cfg2)
	if err := b.AdoptJob(ctx, job); err != nil {
		t.Fatalf("AdoptJob of a job that ended after the resume point = %v (delivered up to %d of %d)", err, b.Status().LastEventSeq, last)
	}
	w, err := b.Watch(job, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got, term := readJob(ctx, t, w, nil)
	if term.Result == nil || term.Seq != last {
		t.Fatalf("terminal %+v, want the result at %d", term, last)
	}
	if len(got) != 5 {
		t.Fatalf("events %v, want 0..4 once", got)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("events %v, want 0..4 once, in order", got)
		}
	}
}
