package directory_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

// BenchmarkUpdate: one acked-seq Update (EVALSHA, owner/epoch check, HSET,
// PEXPIRE) against a real redis-server on a unix socket, from parallel
// goroutines on distinct sessions.
func BenchmarkUpdate(b *testing.B) {
	srv := redistest.Start(b)
	ctx := testCtx(b)
	d := open(b, srv, "a")
	const n = 256
	for i := range n {
		if _, err := d.Claim(ctx, session("b"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := "b" + strconv.Itoa(int(next.Add(1)%n))
		var seq uint64
		for pb.Next() {
			seq++
			if err := d.Update(ctx, id, 1, directory.Change{AckedSeq: seq}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkUpdateToken: an Update that also writes a new (encrypted) token.
func BenchmarkUpdateToken(b *testing.B) {
	srv := redistest.Start(b)
	ctx := testCtx(b)
	d := open(b, srv, "a")
	if _, err := d.Claim(ctx, session("s")); err != nil {
		b.Fatal(err)
	}
	tok := "resume-token-0123456789abcdef0123456789abcdef"
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := d.Update(ctx, "s", 1, directory.Change{ResumeToken: tok, AckedSeq: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkGet: a status probe's read-only Get (EVALSHA_RO), parallel.
func BenchmarkGet(b *testing.B) {
	srv := redistest.Start(b)
	ctx := testCtx(b)
	d := open(b, srv, "a")
	if _, err := d.Claim(ctx, session("s")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := d.Get(ctx, "s"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkSeal: encrypting one resume token (AES-256-GCM), no I/O.
func BenchmarkSeal(b *testing.B) {
	kr, _ := directory.ParseKeyRing(newKey("k1"))
	b.ReportAllocs()
	for b.Loop() {
		_ = kr.Seal("session-id", "resume-token-0123456789abcdef0123456789abcdef")
	}
}

// BenchmarkOrphans: one sweep's Orphans call with 20,000 session records in
// Redis, all owned by a live replica, so there is nothing to adopt. With
// how=check it is a steady cluster's call (the sweep check alone); with
// how=walk OrphanScanEvery is 1 ns, so every call walks the keyspace, as
// every call did before the check.
func BenchmarkOrphans(b *testing.B) {
	srv := redistest.Start(b)
	ctx := testCtx(b)
	owner := open(b, srv, "a")
	run(b, owner)
	const n = 20000
	for i := range n {
		if _, err := owner.Claim(ctx, session("o"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		how   string
		every time.Duration
	}{{"check", 0}, {"walk", time.Nanosecond}} {
		b.Run("how="+c.how, func(b *testing.B) {
			d := open(b, srv, "s-"+c.how, func(cfg *directory.Config) { cfg.OrphanScanEvery = c.every })
			if got, err := d.Orphans(ctx, 64); err != nil || len(got) != 0 {
				b.Fatalf("Orphans: %v, %v; want none", got, err)
			}
			scans := d.Counters().OrphanScans.Load()
			b.ReportAllocs()
			for b.Loop() {
				if got, err := d.Orphans(ctx, 64); err != nil || len(got) != 0 {
					b.Fatalf("Orphans: %v, %v; want none", got, err)
				}
			}
			b.ReportMetric(float64(d.Counters().OrphanScans.Load()-scans)/float64(b.N), "walks/op")
		})
	}
}
