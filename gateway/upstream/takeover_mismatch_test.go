package upstream_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcptest/hostile"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestTakeoverWelcomedIntoAnotherSession: a takeover (Config.Resume) that
// the runtime answers with a welcome for another session fails as a resume
// does: a *LostError wrapping ErrResumeMismatch, not RESUME_WINDOW_EXPIRED
// (which would tell the caller its session merely aged out).
func TestTakeoverWelcomedIntoAnotherSession(t *testing.T) {
	srv, err := hostile.Listen(hostile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx := testCtx(t, 20*time.Second)
	cfg := baseConfig(srv.URL(hostile.ModeResumeOther))
	cfg.Resume = &upstream.ResumeFrom{SessionID: "sess-taken-over", ResumeToken: "tok", LastEventSeq: 3}
	ctr := &upstream.Counters{}
	cfg.Counters = ctr
	conn, err := upstream.Dial(ctx, cfg)
	if err == nil {
		conn.Detach()
		t.Fatal("a takeover welcomed into another session succeeded")
	}
	var lost *upstream.LostError
	if !errors.As(err, &lost) || !errors.Is(err, upstream.ErrResumeMismatch) {
		t.Fatalf("Dial = %T %v; want a *LostError wrapping ErrResumeMismatch", err, err)
	}
	var ae *arcp.Error
	if errors.As(err, &ae) || lost.Code == arcp.CodeResumeWindowExpired {
		t.Fatalf("Dial = %v: reads as the runtime's refusal %q", err, lost.Code)
	}
	if got := ctr.ResumeFailures.Load(); got != 1 {
		t.Errorf("ResumeFailures = %d, want 1", got)
	}
}
