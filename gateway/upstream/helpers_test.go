package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCtx returns a context bounded by d, cancelled at cleanup.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// baseConfig is a configuration with short, test-friendly timings.
func baseConfig(url string) upstream.Config {
	return upstream.Config{
		URL:            url,
		Token:          "tok",
		Client:         arcp.ClientInfo{Name: "upstream-test", Version: "1"},
		InitTimeout:    2 * time.Second,
		RequestTimeout: 5 * time.Second,
		BackoffInitial: 5 * time.Millisecond,
		BackoffMax:     50 * time.Millisecond,
	}
}

// dial dials and registers a Close at cleanup that also checks the
// goroutines are gone (Close waits for them).
func dial(t testing.TB, cfg upstream.Config) *upstream.Conn {
	t.Helper()
	c, err := upstream.Dial(testCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func runtimeServer(t testing.TB, opts arcpruntime.Options) *arcpruntime.Server {
	return arcpruntime.NewTestServer(t, opts)
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls cond (a cheap read) until it holds or ctx ends; the polling
// is the assertion's own loop, not synchronisation between goroutines.
func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func asArcpError(err error) *arcp.Error {
	var ae *arcp.Error
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// readJob reads w to its end: the "i" of each event, in the order read
// (each is passed to each, when set, as it comes), and the terminal item.
func readJob(ctx context.Context, t testing.TB, w *upstream.Watcher, each func(i int)) (got []int, term upstream.Item) {
	t.Helper()
	for {
		it, err := w.Next(ctx)
		if errors.Is(err, io.EOF) {
			return got, term
		}
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if it.Event == nil {
			term = it
			continue
		}
		var body struct{ I int }
		_ = json.Unmarshal(it.Event.Body, &body)
		got = append(got, body.I)
		if each != nil {
			each(body.I)
		}
	}
}
