package upstream_test

import (
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestIdleSessionHousekeepsRarely: a connection with nothing for
// housekeeping to look after runs it at the idle period, not every few
// milliseconds; a submit brings the short period back at once, and when
// the job is done and forgotten the connection goes idle again.
func TestIdleSessionHousekeepsRarely(t *testing.T) {
	rt := arcpruntime.NewTestServer(t, arcpruntime.Options{})
	cfg := baseConfig(rt.URL())
	upstream.SetKnobs(&cfg, upstream.Knobs{Housekeeping: 5 * time.Millisecond})
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	waitFor(ctx, t, "the idle housekeeping period", c.HousekeepingIdle)

	// At the short period (5 ms) a 300 ms window would see some 60 passes.
	// Slowness (CPU hogs) only makes fewer.
	before := c.HousekeepingRuns()
	time.Sleep(300 * time.Millisecond) // an observation window, not synchronisation
	if n := c.HousekeepingRuns() - before; n > 1 {
		t.Fatalf("an idle connection ran housekeeping %d times in 300 ms (period 5 ms, idle period 60 s)", n)
	}

	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if c.HousekeepingIdle() {
		t.Fatal("still idle right after a submit: the job's housekeeping would wait for the idle period")
	}
	before = c.HousekeepingRuns()
	waitFor(ctx, t, "housekeeping at the short period again", func() bool { return c.HousekeepingRuns() >= before+3 })
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil || term.Result == nil {
		t.Fatalf("Wait = %+v, %v", term, err)
	}
	c.Forget(acc.JobID)
	waitFor(ctx, t, "the idle period after the job was forgotten", c.HousekeepingIdle)
}
