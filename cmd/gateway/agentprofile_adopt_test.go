package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// TestClusterAdoptedJobAgentProfile: a job whose session is taken over
// after its owner is SIGKILLed is watched on the adopter under its agent's
// profile, which the runtime's job listing (session.list_jobs, §6.6) names:
// the stream agent maps to "streamy", whose streaming total is 1.5 s, so
// the watch of a 15 s job through the adopter ends DEADLINE_EXCEEDED naming
// streamy. Before, the adopter knew no agent for a job it did not submit and
// watched it under WatchJob's own profile, to the job's end.
func TestClusterAdoptedJobAgentProfile(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	file := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(file, []byte(`{
  "profiles": {"streamy": {"default_timeout_ms": 60000, "min_timeout_ms": 100, "max_timeout_ms": 60000}},
  "sub_keys": {"stream": {"profile": "streamy", "streaming": {"initial_timeout_ms": 5000, "total_timeout_ms": 1500}}}
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, gws := startCluster(t, ctx, "--timeout-profiles", file)
	sid := openOn(t, ctx, gws[0])
	sub, err := gws[0].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: streamInput(300, 50)})
	if err != nil {
		t.Fatal(err)
	}
	// Three events through the owner, then the owner is killed.
	wctx, stop := context.WithCancel(ctx)
	var cursor uint64
	seen := 0
	stream, err := gws[0].WatchJob(wctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	for seen < 3 {
		item, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch through the owner: %v", err)
		}
		cursor = item.GetEventSeq()
		if _, ok := eventIndex(item); ok {
			seen++
		}
	}
	stop()
	c.Kill(0)

	// Through replica 2 from the cursor, until the session is taken over
	// and the adopter serves the watch.
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			t.Fatal("the job was never watched on an adopter")
		}
		start := time.Now()
		st, err := gws[1].WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId(), FromEventSeq: cursor})
		for err == nil {
			var item *sessiongatev1.WatchJobResponse
			if item, err = st.Recv(); err == nil {
				if item.GetResult() != nil || item.GetError() != nil {
					t.Fatalf("the watch through the adopter lasted to the job's end (%v); want the streamy profile's 1.5 s total", time.Since(start))
				}
				cursor = item.GetEventSeq()
			}
		}
		if errors.Is(err, io.EOF) {
			t.Fatalf("the watch through the adopter ended without the job's result or a timeout")
		}
		if te, ok := timeoutprofile.FromError(err); ok {
			if te.GetProfileName() != "streamy" || te.GetLimit() != "total" || te.GetConfiguredTimeoutMs() != 1500 {
				t.Fatalf("the adopted job's watch timed out under %q limit %s %d ms (%v); want streamy, total, 1500 ms", te.GetProfileName(), te.GetLimit(), te.GetConfiguredTimeoutMs(), err)
			}
			return
		}
		// The takeover is not done yet: the dead owner, or a session not
		// yet claimed.
		if c := status.Code(err); c != codes.Unavailable && c != codes.NotFound && c != codes.DeadlineExceeded && c != codes.FailedPrecondition {
			t.Fatalf("watch attempt %d through replica 2: %v", attempt, err)
		}
		t.Logf("watch attempt %d through replica 2: %v", attempt, err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // pacing between attempts, not synchronisation
		}
	}
}
