package upstream

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// TestWatchCursorHoldsForLaterItems: a Watch from a cursor skips the items
// at or below it also when they are appended after the Watch (after a
// takeover, the runtime's replay can arrive after the caller's Watch). It
// used to filter only the items present when Watch was called, so such a
// replay reached the caller twice.
func TestWatchCursorHoldsForLaterItems(t *testing.T) {
	c, tr := offlineConn(t)
	w, err := c.Watch("j1", 2)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		typ, payload := arcp.TypeEvent, any(arcp.Event{Kind: arcp.KindLog})
		if seq == 4 {
			typ, payload = arcp.TypeResult, arcp.Result{FinalStatus: arcp.StatusSuccess}
		}
		env, err := arcp.New(typ, "s1", payload)
		if err != nil {
			t.Fatal(err)
		}
		env.JobID, env.EventSeq = "j1", seq
		c.handle(tr, env, 10)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []uint64
	for {
		it, err := w.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, it.Seq)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("watch from seq 2 delivered seqs %v, want [3 4]", got)
	}
}

// TestForgetRightAfterFinishLeavesNoRecord: a job forgotten as soon as it
// finished (RunJob's) leaves the finished queue at once instead of waiting
// there, stripped, for its retention to end; one forgotten behind a newer
// finished job still waits (the queue is a FIFO).
func TestForgetRightAfterFinishLeavesNoRecord(t *testing.T) {
	c, tr := offlineConn(t)
	finish := func(id string, seq uint64) {
		t.Helper()
		c.mu.Lock()
		if c.jobs[id] == nil {
			c.addJobLocked(id) // as an accept does
		}
		c.mu.Unlock()
		w, err := c.Watch(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		env, err := arcp.New(arcp.TypeResult, "s1", arcp.Result{FinalStatus: arcp.StatusSuccess})
		if err != nil {
			t.Fatal(err)
		}
		env.JobID, env.EventSeq = id, seq
		c.handle(tr, env, 10)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for { // read to the end, as RunJob's Wait does
			if _, err := w.Next(ctx); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.finished.len()
	}
	finish("j1", 1)
	if n := queued(); n != 1 {
		t.Fatalf("finished queue holds %d after one job finished, want 1", n)
	}
	c.Forget("j1")
	if n := queued(); n != 0 {
		t.Fatalf("finished queue holds %d after the newest finished job was forgotten, want 0", n)
	}
	finish("j2", 2)
	finish("j3", 3)
	c.Forget("j2") // not the newest: stays until it expires
	if n := queued(); n != 2 {
		t.Fatalf("finished queue holds %d, want 2 (j2 behind j3)", n)
	}
	c.Forget("j3")
	if n := queued(); n != 1 {
		t.Fatalf("finished queue holds %d after forgetting the newest, want 1", n)
	}
}
