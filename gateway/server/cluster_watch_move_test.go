package server

import (
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

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
	r := newForwardRig(t)
	fast := func(cc *ClusterConfig) {
		cc.LameDuck, cc.AckEvery, cc.AckLag, cc.SweepEvery = -1, 20*time.Millisecond, 50*time.Millisecond, 20*time.Millisecond
	}
	a := r.start("gw-a", fast)
	b := r.start("gw-b", fast)

	open, err := a.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "watch-move-test"})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	waitOwner(t, ctx, b.dir, sid, "gw-a")
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
