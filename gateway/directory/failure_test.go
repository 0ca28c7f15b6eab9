package directory_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

// TestAuthURL: AUTH with the password (default user) or user:password (ACL
// user) from the URL; a wrong password is an error naming the directory
// without the password.
func TestAuthURL(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("s3cret"), redistest.WithUser("gw", "gw-pass"))
	ctx := testCtx(t)
	cfg := directory.Config{Instance: "a", Keys: testKeys}
	for i, url := range []string{srv.URL(), srv.UserURL("gw", "gw-pass")} {
		d, err := directory.Open(ctx, url, cfg)
		if err != nil {
			t.Fatalf("Open(%s): %v", url, err)
		}
		if _, err := d.Claim(ctx, session("s-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		_ = d.Close()
	}
	for _, url := range []string{srv.UserURL("", "wrong-pass"), srv.UserURL("gw", "wrong-pass"), "unix://" + srv.Socket()} {
		_, err := directory.Open(ctx, url, cfg)
		if !errors.Is(err, directory.ErrUnavailable) || !strings.Contains(err.Error(), "directory: redis at unix://") {
			t.Fatalf("Open with bad credentials: %v", err)
		}
		if strings.Contains(err.Error(), "wrong-pass") {
			t.Fatalf("error leaks the password: %v", err)
		}
		t.Log(err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := testCtx(t)
	good := directory.Config{Instance: "a", Keys: testKeys}
	for _, c := range []struct {
		name, url string
		cfg       directory.Config
		want      string
	}{
		{"no instance", "unix:///nonexistent", directory.Config{Keys: testKeys}, "Instance is required"},
		{"no keys", "unix:///nonexistent", directory.Config{Instance: "a"}, "no keys"},
		{"short lease", "unix:///nonexistent", directory.Config{Instance: "a", Keys: testKeys, LeaseTTL: time.Millisecond}, "LeaseTTL"},
		{"bad scheme", "http://x", good, "directory: redis URL http://x"},
		{"nothing listens", "unix://:pw@" + t.TempDir() + "/none.sock", good, "directory: redis at unix://:xxxxx@"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := directory.Open(ctx, c.url, c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want %q", err, c.want)
			}
		})
	}
}

// TestRedisDownAndBack: with Redis stopped every operation fails within a
// bounded time with an error naming the directory; the lease loop keeps
// trying; when Redis is back (empty: no persistence) everything works again.
func TestRedisDownAndBack(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	const opTimeout = 500 * time.Millisecond
	cfg := func(c *directory.Config) { c.OpTimeout = opTimeout; c.LeaseTTL = 150 * time.Millisecond }
	a := open(t, srv, "a", cfg)
	rc := raw(t, srv)
	run(t, a)
	waitLease(t, rc, a.LeaseKey("a"), true)
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	failures := a.Counters().LeaseFailures.Load()
	ops := map[string]func() error{
		"claim":    func() error { _, err := a.Claim(ctx, session("s2")); return err },
		"update":   func() error { return a.Update(ctx, "s", 1, directory.Change{AckedSeq: 5}) },
		"takeover": func() error { _, err := a.Takeover(ctx, "s"); return err },
		"release":  func() error { return a.Release(ctx, "s", 1) },
		"delete":   func() error { return a.Delete(ctx, "s", 1) },
		"get":      func() error { _, err := a.Get(ctx, "s"); return err },
		"owner":    func() error { _, err := a.Owner(ctx, "a"); return err },
		"orphans":  func() error { _, err := a.Orphans(ctx, 0); return err },
	}
	for op, f := range ops {
		start := time.Now()
		err := f()
		took := time.Since(start)
		var ue *directory.UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, directory.ErrUnavailable) || ue.Op != op ||
			!strings.HasPrefix(err.Error(), "directory: redis at unix://"+srv.Socket()+": "+op+": ") {
			t.Fatalf("%s with Redis down: %v", op, err)
		}
		if took > 4*opTimeout {
			t.Fatalf("%s took %v with Redis down (op timeout %v)", op, took, opTimeout)
		}
	}
	waitFor(t, 10*time.Second, "a lease failure", func() bool { return a.Counters().LeaseFailures.Load() > failures })

	srv.Start() // empty: Redis kept nothing
	waitLease(t, rc, a.LeaseKey("a"), true)
	// Redis lost its data and nobody has re-created the marker yet: a
	// missing record proves nothing (owners restore theirs).
	if _, err := a.Get(ctx, "s"); !errors.Is(err, directory.ErrRecovering) {
		t.Fatalf("Get after restart: %v, want ErrRecovering", err)
	}
	if m, err := a.Marker(ctx); err != nil || !strings.Contains(m, ":r:") {
		t.Fatalf("marker re-created after the loss: %q, %v", m, err)
	}
	if _, err := a.Get(ctx, "s"); !errors.Is(err, directory.ErrRecovering) {
		t.Fatalf("Get right after the marker was re-created: %v, want ErrRecovering", err)
	}
	if e, err := a.Claim(ctx, session("s")); err != nil || e != 1 {
		t.Fatalf("Claim after restart: %d, %v", e, err)
	}
	if err := a.Update(ctx, "s", 1, directory.Change{AckedSeq: 5}); err != nil {
		t.Fatal(err)
	}
}

// TestRedisHung: a Redis that accepts but does not answer (SIGSTOP) costs an
// operation its OpTimeout, not more, and the error says so.
func TestRedisHung(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	const opTimeout = 300 * time.Millisecond
	a := open(t, srv, "a", func(c *directory.Config) { c.OpTimeout = opTimeout })
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	start := time.Now()
	_, err := a.Get(ctx, "s")
	took := time.Since(start)
	srv.Thaw()
	if !errors.Is(err, directory.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within the operation timeout") {
		t.Fatalf("Get with Redis hung: %v", err)
	}
	if took < opTimeout || took > 4*opTimeout {
		t.Fatalf("Get with Redis hung took %v, op timeout %v", took, opTimeout)
	}
	// The caller's own deadline is the caller's, not the directory's.
	srv.Freeze()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = a.Get(cctx, "s")
	cancel()
	srv.Thaw()
	if errors.Is(err, directory.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get past the caller's deadline: %v", err)
	}
	waitFor(t, 10*time.Second, "Redis to answer again", func() bool {
		r, err := a.Get(ctx, "s")
		return err == nil && r.Owner == "a"
	})
}
