package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// moveRig starts gw-a and gw-b (no lame duck, acks every 20 ms with
// ackLag, sweeps every 20 ms) and opens a session on gw-a.
func moveRig(t *testing.T, ctx context.Context, ackLag time.Duration) (a, b *forwardReplica, sid string) {
	t.Helper()
	r := newForwardRig(t)
	cfg := func(cc *ClusterConfig) {
		cc.LameDuck, cc.AckEvery, cc.AckLag, cc.SweepEvery = -1, 20*time.Millisecond, ackLag, 20*time.Millisecond
	}
	a, b = r.start("gw-a", cfg), r.start("gw-b", cfg)
	open, err := a.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "watch-move-test"})
	if err != nil {
		t.Fatal(err)
	}
	sid = open.GetSessionId()
	waitOwner(t, ctx, b.dir, sid, "gw-a")
	return a, b, sid
}

// TestIdleJobWatchAcrossHandoff: a job that sent one event and will send
// the next in 2.5 s is watched on its session's owner gw-a; the watcher has
// read the first event when the session's other jobs' events, after it,
// are acked by gw-a. gw-a hands the session off (SIGTERM's Shutdown); the
// watch, cut with UNAVAILABLE, is opened again from its cursor through
// gw-b, which adopted the session with a resume point above that cursor.
// It must get the second event and the result, once each: the job had no
// event between the cursor and the resume point (the runtime's job listing
// says so, §6.6 last_event_seq), so nothing is missing. (Before, every
// watch of an adopted job from below the resume point was refused
// SLOW_CONSUMER: any watch of a job quieter than --ack-lag, across any
// rolling restart.)
func TestIdleJobWatchAcrossHandoff(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	a, b, sid := moveRig(t, ctx, 50*time.Millisecond)
	in, _ := structpb.NewValue(map[string]any{"count": 2, "interval_ms": 2500})
	sub, err := a.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetEvent() == nil {
		t.Fatalf("first item %v, %v; want the first event", first, err)
	}
	cursor := first.GetEventSeq()
	// Other jobs' events after the cursor, acked by gw-a.
	for range 5 {
		if _, err := echoOn(ctx, a, sid, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var resumeAt uint64
	for resumeAt <= cursor {
		rec, err := a.dir.Get(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		resumeAt = rec.AckedSeq
		select {
		case <-ctx.Done():
			t.Fatalf("gw-a never recorded an acked seq above the cursor %d (last %d)", cursor, resumeAt)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cut := make(chan error, 1)
	go func() {
		item, err := w.Recv()
		if err == nil {
			err = errors.New("an item before the hand-off: " + item.String())
		}
		cut <- err
	}()
	a.down()
	err = <-cut
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
		t.Fatalf("the watch on gw-a ended with %v, want UNAVAILABLE (handed off)", err)
	}
	waitOwner(t, ctx, b.dir, sid, "gw-b")

	again, err := b.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId(), FromEventSeq: cursor})
	if err != nil {
		t.Fatal(err)
	}
	var events int
	for {
		item, err := again.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatal("the watch ended without the job's result")
		}
		if err != nil {
			t.Fatalf("watch from the cursor %d through the adopter (resume point %d): %v", cursor, resumeAt, err)
		}
		if item.GetEventSeq() <= cursor {
			t.Fatalf("item at event_seq %d, at or below the cursor %d: %v", item.GetEventSeq(), cursor, item)
		}
		if ev := item.GetEvent(); ev != nil {
			events++
			if i := ev.GetBody().GetStructValue().GetFields()["i"].GetNumberValue(); i != 1 {
				t.Fatalf("event %v after the cursor, want the second (i=1)", ev.GetBody())
			}
		}
		if res := item.GetResult(); res != nil {
			if events != 1 {
				t.Fatalf("%d events before the result, want 1", events)
			}
			return
		}
	}
}

// TestWatchFromAcceptAcrossHandoff: a job submitted on gw-a, after gw-a
// acked the session's earlier events, has sent its first event when gw-a
// hands the session off to gw-b (SIGTERM's Shutdown) — an event in the
// runtime's replay to gw-b, above gw-b's resume point. A caller that had
// not read any of the job's events watches it through gw-b: from 0 it is
// refused SLOW_CONSUMER (gw-b holds the session's events only from its
// resume point on and cannot tell that none of the job's came before);
// from SubmitJobResponse.after_event_seq it gets every event and the
// result, once each. (gateway-chaos saw the first in a rolling restart: a
// watch cut before its first event, "the events after from_event_seq 0 are
// no longer retained".)
func TestWatchFromAcceptAcrossHandoff(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	// A 2 s ack lag: the hand-off must begin within it of the submit, so
	// that the resume point stays below the job's events.
	a, b, sid := moveRig(t, ctx, 2*time.Second)
	for range 3 { // events before the job, acked before it is submitted
		if _, err := echoOn(ctx, a, sid, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for {
		rec, err := a.dir.Get(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if rec.AckedSeq >= 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gw-a never acked the echo jobs' events (last %d)", rec.AckedSeq)
		case <-time.After(10 * time.Millisecond):
		}
	}
	in, _ := structpb.NewValue(map[string]any{"count": 3, "interval_ms": 300})
	submitted := time.Now()
	sub, err := a.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	after := sub.GetAfterEventSeq()
	if after < 3 {
		t.Fatalf("after_event_seq %d, want at least the echo jobs' events before the submit", after)
	}
	// The job's first event exists (read on gw-a, by another watcher).
	peek, err := a.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId(), FromEventSeq: after})
	if err != nil {
		t.Fatal(err)
	}
	first, err := peek.Recv()
	if err != nil || first.GetEvent() == nil || first.GetEventSeq() <= after {
		t.Fatalf("first item on gw-a %v, %v; want an event above after_event_seq %d", first, err, after)
	}
	a.down()
	if took := time.Since(submitted); took > 1900*time.Millisecond {
		t.Skipf("the hand-off began %v after the submit, past the 2 s ack lag: the scenario did not happen (machine too slow)", took)
	}
	waitOwner(t, ctx, b.dir, sid, "gw-b")
	rec, err := b.dir.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if rec.AckedSeq > after {
		t.Fatalf("resume point %d above after_event_seq %d: the scenario did not happen", rec.AckedSeq, after)
	}

	from0, err := b.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := from0.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("watch from 0 through the adopter (resume point %d): %v, want RESOURCE_EXHAUSTED SLOW_CONSUMER", rec.AckedSeq, err)
	}
	w, err := b.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId(), FromEventSeq: after})
	if err != nil {
		t.Fatal(err)
	}
	var seen []float64
	for {
		item, err := w.Recv()
		if err != nil {
			t.Fatalf("watch from after_event_seq %d through the adopter (resume point %d), after %v: %v", after, rec.AckedSeq, seen, err)
		}
		if ev := item.GetEvent(); ev != nil {
			seen = append(seen, ev.GetBody().GetStructValue().GetFields()["i"].GetNumberValue())
		}
		if item.GetResult() != nil {
			break
		}
	}
	if len(seen) != 3 || seen[0] != 0 || seen[1] != 1 || seen[2] != 2 {
		t.Fatalf("events %v, want 0, 1, 2 once each", seen)
	}
}
