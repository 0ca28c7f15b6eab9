package upstream_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestFloodDoesNotEvictAwaitedResult: a job floods the session's event
// buffer while another job's result waits for its caller. The result a caller
// awaits (AwaitResult, as RunJob submits) survives; the flooding job sheds its
// own history. Without AwaitResult the same schedule evicts the result, so the
// test shows the rule is what keeps it.
func TestFloodDoesNotEvictAwaitedResult(t *testing.T) {
	for _, tc := range []struct {
		name    string
		awaited bool
	}{{"awaited", true}, {"not-awaited", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{})
			cfg := baseConfig(srv.URL())
			cfg.MaxBufferedEvents = 40
			c := dial(t, cfg)
			ctx := testCtx(t, 20*time.Second)

			acc, err := c.SubmitWith(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, map[string]string{"token": "mine"})},
				upstream.SubmitOptions{AwaitResult: tc.awaited})
			if err != nil {
				t.Fatal(err)
			}
			<-c.JobDone(acc.JobID) // its result is in, not yet collected
			flood, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 400})})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.JobDone(flood.JobID):
			case <-ctx.Done():
				t.Fatal("the flood did not end")
			}
			term, err := c.Wait(ctx, acc.JobID)
			if !tc.awaited {
				if !errors.Is(err, upstream.ErrResultEvicted) {
					t.Fatalf("without AwaitResult Wait = %v, %v; want ErrResultEvicted (the schedule must put the result under pressure)", term, err)
				}
				return
			}
			if err != nil || term.Result == nil || string(term.Result.Result) != `{"token":"mine"}` {
				t.Fatalf("Wait of the awaited result = %+v, %v", term.Result, err)
			}
		})
	}
}
