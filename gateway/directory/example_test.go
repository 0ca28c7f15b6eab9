package directory_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/sessiongate/sessiongate/gateway/directory"
)

// The life of a session in the directory, as a replica sees it. (Not run:
// it needs a Redis; the tests run the same steps on a real redis-server.)
func Example() {
	ctx := context.Background()
	d, err := directory.Open(ctx, "unix://:password@/run/redis/redis.sock", directory.Config{
		Instance:  "gw-1",
		Advertise: "10.0.0.1:8443",
		Keys:      []string{"k2026:" + strings.Repeat("A", 43) + "="}, // from configuration; first encrypts
	})
	if err != nil {
		log.Fatal(err) // "directory: redis at unix://:xxxxx@/run/redis/redis.sock: ping: …"
	}
	defer d.Close()

	// The lease loop is the caller's: run it beside the server, and stop it
	// after the sessions were released on shutdown.
	g, gctx := errgroup.WithContext(ctx)
	leaseCtx, stopLease := context.WithCancel(gctx)
	g.Go(func() error { return d.Run(leaseCtx) })
	defer func() { stopLease(); _ = g.Wait() }()

	// A new session: claim it after the first welcome.
	epoch, err := d.Claim(ctx, directory.Session{
		ID: "sess-1", Caller: "alice", Runtime: "demo",
		UpstreamSessionID: "arcp-42", ResumeToken: "rt-1",
	})
	if err != nil {
		log.Fatal(err)
	}
	// The acked seq before acking upstream; the new token after each welcome.
	err = d.Update(ctx, "sess-1", epoch, directory.Change{AckedSeq: 17})
	if errors.Is(err, directory.ErrFenced) {
		return // somebody else owns it now: drop the session silently
	}
	_ = d.Update(ctx, "sess-1", epoch, directory.Change{ResumeToken: "rt-2"})

	// Another replica, for a call on a session it does not hold:
	r, err := d.Takeover(ctx, "sess-2")
	var owned *directory.OwnedError
	switch {
	case errors.As(err, &owned):
		fmt.Println("forward to", owned.Addr)
	case err == nil:
		fmt.Println("resume", r.UpstreamSessionID, "with the stored token from seq", r.AckedSeq)
	}

	// Draining: hand the session off instead of closing it.
	_ = d.Release(ctx, "sess-1", epoch)
}

// A background sweeper adopts sessions whose owner is gone, well inside the
// runtime's resume window.
func ExampleDirectory_Orphans() {
	var d *directory.Directory // opened as in Example
	sweep := func(ctx context.Context) {
		orphans, err := d.Orphans(ctx, 100)
		if err != nil {
			return // Redis trouble: try at the next tick
		}
		for _, o := range orphans {
			r, err := d.Takeover(ctx, o.SessionID)
			if err != nil {
				continue // ErrOwned: somebody else was quicker
			}
			_ = r // resume upstream with r.ResumeToken, then Update the new token
		}
	}
	_ = sweep
}

func ExampleParseKeyRing() {
	kr, err := directory.ParseKeyRing(
		"k2:"+strings.Repeat("B", 43)+"=", // new key: encrypts
		"k1:"+strings.Repeat("A", 43)+"=", // old key: still decrypts
	)
	fmt.Println(kr.EncryptID(), err)
	_, err = directory.ParseKeyRing("k1:c2hvcnQ=")
	fmt.Println(err)
	// Output:
	// k2 <nil>
	// directory: key ring: key "k1": 5 bytes, want 32 (AES-256)
}
