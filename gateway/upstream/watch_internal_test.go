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
