package server

import (
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// TestClusterAgentProfileOwnerChooses: in cluster mode a job call that
// reaches a replica other than the session's owner is forwarded and runs
// on the owner, so the owner's per-agent profile bounds it — RunJob's, and
// WatchJob's of a job submitted through the other replica (the owner
// remembers the job's agent when the forwarded SubmitJob runs there). Only
// the owner (gw-a) maps the sleep agent to a short profile; gw-b, where
// every call enters, has no mapping, so a profile chosen there would be
// tool_call's 30 s and WatchJob's own unbounded stream.
func TestClusterAgentProfileOwnerChooses(t *testing.T) {
	owner := profileFile(t, `{
  "profiles": {"sleepy": {"default_timeout_ms": 300, "min_timeout_ms": 100, "max_timeout_ms": 300}},
  "sub_keys": {"sleep": {"profile": "sleepy", "streaming": {"initial_timeout_ms": 200, "total_timeout_ms": 400}}}
}`)
	gws := startReplicas(t, 2, func(c *Config) {
		if c.InstanceID == "gw-a" {
			c.TimeoutProfiles = owner
		}
	})
	ctx := ctxT(t, 30*time.Second)
	opened, err := gws[0].OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	id := opened.GetSessionId()
	forwarded := func(what string, md metadata.MD) {
		t.Helper()
		if got := md.Get(MetadataServedBy); len(got) != 1 || got[0] != "gw-b" {
			t.Fatalf("%s served by %v, want gw-b", what, got)
		}
		if got := md.Get(MetadataOwner); len(got) != 1 || got[0] != "gw-a" {
			t.Fatalf("%s: owner %v, want gw-a (the call must be forwarded)", what, got)
		}
	}

	var trailer metadata.MD
	start := time.Now()
	_, err = gws[1].RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 5000.0})},
		grpc.Trailer(&trailer))
	took := time.Since(start)
	forwarded("RunJob", trailer)
	te, ok := timeoutprofile.FromError(err)
	if !ok || te.GetProfileName() != "sleepy" || te.GetConfiguredTimeoutMs() != 300 || te.GetLimit() != "unary" {
		t.Fatalf("forwarded RunJob sleep: %v (details %v); want the owner's sleepy profile, 300 ms", err, te)
	}
	if took > 4*time.Second {
		t.Errorf("forwarded RunJob sleep ended after %v, want about 300 ms", took)
	}

	job, err := gws[1].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 5000.0})})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := gws[1].WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: job.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	events := 0
	for err == nil {
		if _, err = stream.Recv(); err == nil {
			events++
		}
	}
	forwarded("WatchJob", stream.Trailer())
	// The sleep agent reports progress every 100 ms: the owner's 400 ms
	// total ends the stream, long before the job's 5 s.
	if te, ok := timeoutprofile.FromError(err); !ok || te.GetProfileName() != "sleepy" || te.GetLimit() != "total" || te.GetConfiguredTimeoutMs() != 400 {
		t.Fatalf("forwarded WatchJob of a sleep job: %v after %d events (details %v); want the owner's sleepy 400 ms total", err, events, te)
	}
	if errors.Is(err, io.EOF) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("WatchJob ended with %v", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("forwarded WatchJob ended after %v, want about 400 ms", took)
	}
}
