package upstream_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

func TestConfigValidation(t *testing.T) {
	good := baseConfig("ws://127.0.0.1:1/arcp")
	tests := []struct {
		name   string
		mutate func(*upstream.Config)
		want   string
	}{
		{"no URL", func(c *upstream.Config) { c.URL = "" }, "URL is required"},
		{"http scheme", func(c *upstream.Config) { c.URL = "http://x/arcp" }, "scheme"},
		{"no host", func(c *upstream.Config) { c.URL = "ws:///arcp" }, "no host"},
		{"negative timeout", func(c *upstream.Config) { c.RequestTimeout = -time.Second }, "negative"},
		{"backoff order", func(c *upstream.Config) { c.BackoffInitial = time.Minute }, "exceeds BackoffMax"},
		{"negative cap", func(c *upstream.Config) { c.MaxLiveJobs = -1 }, "caps"},
		{"tiny frames", func(c *upstream.Config) { c.MaxFrameBytes = 100 }, "MaxFrameBytes"},
		{"empty feature", func(c *upstream.Config) { c.Features = []string{""} }, "feature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mutate(&cfg)
			_, err := upstream.Dial(testCtx(t, time.Second), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Dial err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestHandshakeAndFeatureIntersection(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{
		Name:     "rt-under-test",
		Features: []string{arcp.FeatureHeartbeat, arcp.FeatureAck, arcp.FeatureListJobs},
	})
	cfg := baseConfig(srv.URL())
	cfg.Features = []string{arcp.FeatureAck, arcp.FeatureSubscribe, arcp.FeatureListJobs, arcp.FeatureProgress}
	c := dial(t, cfg)
	st := c.Status()
	if want := []string{arcp.FeatureAck, arcp.FeatureListJobs}; !slices.Equal(st.Features, want) {
		t.Fatalf("features = %v, want %v", st.Features, want)
	}
	if st.State != upstream.StateReady || st.Generation != 1 || st.SessionID == "" || st.Runtime.Name != "rt-under-test" {
		t.Fatalf("status = %+v", st)
	}
	var names []string
	for _, a := range c.Welcome().Capabilities.Agents {
		names = append(names, a.Name)
	}
	for _, want := range []string{"echo", "sleep", "stream", "fail"} {
		if !slices.Contains(names, want) {
			t.Fatalf("agents %v lack %s", names, want)
		}
	}
	ctx := testCtx(t, 10*time.Second)
	// Not negotiated: refused locally, nothing sent.
	if err := c.Subscribe(ctx, "job", 0); !errors.Is(err, upstream.ErrFeatureNotNegotiated) {
		t.Fatalf("Subscribe err = %v", err)
	}
	// Negotiated: works.
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "hi")})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.ListJobs(ctx, arcp.ListJobs{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != acc.JobID {
		t.Fatalf("ListJobs = %+v, want the one job %s", jobs, acc.JobID)
	}
}

func TestHandshakeDefaultFeatures(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	c := dial(t, baseConfig(srv.URL()))
	if got := c.Status().Features; !slices.Equal(got, upstream.DefaultFeatures) {
		t.Fatalf("features = %v, want %v", got, upstream.DefaultFeatures)
	}
}

func TestHandshakeNoFeatures(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.Features = []string{}
	c := dial(t, cfg)
	if got := c.Status().Features; len(got) != 0 {
		t.Fatalf("features = %v, want none", got)
	}
	if _, err := c.ListJobs(testCtx(t, time.Second), arcp.ListJobs{}); !errors.Is(err, upstream.ErrFeatureNotNegotiated) {
		t.Fatalf("ListJobs err = %v", err)
	}
}

func TestHandshakeAuthFailure(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Tokens: map[string]string{"good": "alice"}})
	cfg := baseConfig(srv.URL())
	cfg.Token = "bad"
	_, err := upstream.Dial(testCtx(t, 5*time.Second), cfg)
	ae := asArcpError(err)
	if ae == nil || ae.Code != arcp.CodeUnauthenticated {
		t.Fatalf("Dial err = %#v, want *arcp.Error UNAUTHENTICATED", err)
	}
	cfg.Token = "good"
	c := dial(t, cfg)
	if c.Status().State != upstream.StateReady {
		t.Fatal("good token not ready")
	}
}

func TestHandshakeTimeout(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	srv.Runtime().SetHandshakeSilence(true)
	cfg := baseConfig(srv.URL())
	cfg.InitTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := upstream.Dial(testCtx(t, 10*time.Second), cfg)
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "handshake timed out") {
		t.Fatalf("Dial err = %v, want a handshake timeout", err)
	}
	if elapsed < 300*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("handshake timeout took %v, want about 300ms", elapsed)
	}
	// The caller's own context, when shorter, wins and is reported as such.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	cfg.InitTimeout = 5 * time.Second
	_, err = upstream.Dial(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with short ctx err = %v", err)
	}
}
