package directory_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/goleak"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

func TestMain(m *testing.M) {
	// go-redis logs failed dials on a process-wide logger; the tests that
	// stop Redis would fill the output.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// newKey returns a fresh "id:base64key" entry.
func newKey(id string) string {
	var k [32]byte
	_, _ = rand.Read(k[:])
	return id + ":" + base64.StdEncoding.EncodeToString(k[:])
}

// testKeys is one key ring shared by the replicas of a test.
var testKeys = []string{newKey("k1")}

// testCtx is a context with a timeout for one test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open opens a Directory as instance on srv, closed at cleanup.
func open(t testing.TB, srv *redistest.Server, instance string, mod ...func(*directory.Config)) *directory.Directory {
	t.Helper()
	cfg := directory.Config{
		Instance:  instance,
		Advertise: "127.0.0.1:9" + instance,
		Keys:      testKeys,
		Prefix:    "t:",
	}
	for _, m := range mod {
		m(&cfg)
	}
	d, err := directory.Open(testCtx(t), srv.URL(), cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", instance, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// raw is a plain client to inspect and poke Redis, closed at cleanup.
func raw(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// run runs d.Run until cleanup (or until the returned stop is called) and
// waits for it to return.
func run(t testing.TB, d *directory.Directory) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond (which reads state, usually Redis's) every 5 ms until it
// holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// leaseLive waits until instance's lease exists.
func waitLease(t testing.TB, rc *redis.Client, key string, live bool) {
	t.Helper()
	waitFor(t, 10*time.Second, "lease "+key+" live="+map[bool]string{true: "yes", false: "no"}[live], func() bool {
		n, err := rc.Exists(context.Background(), key).Result()
		return err == nil && (n == 1) == live
	})
}

// verdictOf maps an API error to the scripts' verdicts.
func verdictOf(t testing.TB, err error) directory.Verdict {
	t.Helper()
	switch {
	case err == nil:
		return directory.VOK
	case errors.Is(err, directory.ErrExists):
		return directory.VExists
	case errors.Is(err, directory.ErrNotFound):
		return directory.VNotFound
	case errors.Is(err, directory.ErrFenced):
		return directory.VFenced
	case errors.Is(err, directory.ErrOwned):
		return directory.VOwned
	}
	t.Fatalf("unexpected error: %v", err)
	return ""
}
