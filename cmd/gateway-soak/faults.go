package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// Fault kinds, as they appear in the report.
const (
	faultLatency   = "latency"    // latency ± jitter on both directions
	faultBandwidth = "bandwidth"  // runtime → gateway limited to a few KB/s
	faultSlicer    = "slicer"     // TCP writes cut into small pieces, slightly delayed
	faultReset     = "reset_peer" // connections that carry data are closed (RST where the link started with it)
	faultHalfOpen  = "half_open"  // both directions black-holed, connections left open
	faultDrop      = "drop"       // the proxy stops: every connection closed, new ones refused
)

var faultKinds = []string{faultLatency, faultBandwidth, faultSlicer, faultReset, faultHalfOpen, faultDrop}

// faultProxy is a toxiproxy Proxy used as a library: one TCP proxy on
// 127.0.0.1 in front of the runtime, whose toxics are added and removed
// directly on its ToxicCollection (no HTTP API). Methods are called by one
// goroutine at a time (the fault scheduler, then teardown).
type faultProxy struct {
	p    *toxiproxy.Proxy
	addr string // immutable after newFaultProxy
	up   bool   // proxy started
}

// quietProxy silences toxiproxy's global zerolog logger, which some toxics
// log to at trace level on stderr.
var quietProxy sync.Once

func newFaultProxy(upstream string) (*faultProxy, error) {
	quietProxy.Do(func() { zlog.Logger = zerolog.Nop() })
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "runtime", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("toxiproxy: %w", err)
	}
	// Start has returned, so the listener's address is written (the proxy's
	// goroutine wrote it before signalling); later restarts reuse it.
	return &faultProxy{p: p, addr: p.Listen, up: true}, nil
}

// add adds a toxic with toxicity 1 on one stream ("upstream": gateway →
// runtime, "downstream": runtime → gateway).
func (f *faultProxy) add(name, typ, stream string, attrs any) error {
	doc, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if err != nil {
		return err
	}
	if _, err := f.p.Toxics.AddToxicJson(strings.NewReader(string(doc))); err != nil {
		return fmt.Errorf("toxiproxy: add %s: %w", name, err)
	}
	return nil
}

// clear removes every toxic.
func (f *faultProxy) clear() { f.p.Toxics.ResetToxics(context.Background()) }

// stop closes the listener and every proxied connection.
func (f *faultProxy) stop() {
	if f.up {
		f.p.Stop()
		f.up = false
	}
}

// start listens again on the same address.
func (f *faultProxy) start() error {
	if f.up {
		return nil
	}
	if err := f.p.Start(); err != nil {
		return fmt.Errorf("toxiproxy: restart on %s: %w", f.addr, err)
	}
	f.up = true
	return nil
}

// close removes the toxics and stops the proxy for good.
func (f *faultProxy) close() {
	f.clear()
	f.stop()
}

// faultCounts counts injected faults by kind; safe for concurrent use.
type faultCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *faultCounts) inc(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind]++
}

func (c *faultCounts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(faultKinds))
	for _, k := range faultKinds {
		out[k] = c.n[k]
	}
	return out
}

// faultScheduler injects one fault at a time, with calm periods between,
// all drawn from its own seeded source.
type faultScheduler struct {
	proxy     *faultProxy
	rng       *rand.Rand
	counts    *faultCounts
	heartbeat time.Duration // the runtime's heartbeat interval
	init      time.Duration // the gateway's upstream handshake timeout
	log       func(format string, args ...any)
}

// run injects faults until ctx ends, then leaves the proxy clean and up.
func (s *faultScheduler) run(ctx context.Context) error {
	defer func() {
		s.proxy.clear()
		_ = s.proxy.start()
	}()
	for ctx.Err() == nil {
		if !sleepCtx(ctx, s.between(500*time.Millisecond, 2500*time.Millisecond)) {
			return nil
		}
		kind := faultKinds[s.rng.IntN(len(faultKinds))]
		if err := s.episode(ctx, kind); err != nil {
			return err
		}
	}
	return nil
}

// episode injects one fault for a while and takes it away.
func (s *faultScheduler) episode(ctx context.Context, kind string) error {
	s.counts.inc(kind)
	var err error
	switch kind {
	case faultLatency:
		lat := 20 + s.rng.Int64N(280)
		jit := s.rng.Int64N(lat/2 + 1)
		s.log("fault: latency %d±%d ms", lat, jit)
		err = s.withToxics(ctx, s.between(time.Second, 5*time.Second),
			toxic{"lat_down", "latency", "downstream", map[string]any{"latency": lat, "jitter": jit}},
			toxic{"lat_up", "latency", "upstream", map[string]any{"latency": lat, "jitter": jit}})
	case faultBandwidth:
		rate := 16 + s.rng.Int64N(112)
		s.log("fault: bandwidth %d KB/s", rate)
		err = s.withToxics(ctx, s.between(time.Second, 4*time.Second),
			toxic{"bw_down", "bandwidth", "downstream", map[string]any{"rate": rate}})
	case faultSlicer:
		avg := 8 + s.rng.IntN(56)
		s.log("fault: slicer %d bytes", avg)
		attrs := map[string]any{"average_size": avg, "size_variation": avg / 2, "delay": s.rng.IntN(500)}
		err = s.withToxics(ctx, s.between(time.Second, 4*time.Second),
			toxic{"slice_down", "slicer", "downstream", attrs},
			toxic{"slice_up", "slicer", "upstream", attrs})
	case faultReset:
		// Every connection that carries data while the toxic is in place is
		// closed: at least one heartbeat interval, so idle sessions too.
		stream := []string{"downstream", "upstream"}[s.rng.IntN(2)]
		after := s.rng.Int64N(300)
		s.log("fault: reset_peer %s after %d ms", stream, after)
		err = s.withToxics(ctx, s.heartbeat+s.between(0, s.heartbeat/2),
			toxic{"reset", "reset_peer", stream, map[string]any{"timeout": after}})
	case faultHalfOpen:
		// Both directions black-holed, connections left open: only
		// heartbeats (2 intervals) and the handshake timeout can tell. Bytes
		// a live TCP connection swallowed must not reappear, so the proxy
		// closes whatever is still connected before the toxics go.
		d := max(2*s.heartbeat, s.init) + s.between(500*time.Millisecond, 2*time.Second)
		s.log("fault: half-open for %v", d.Round(time.Millisecond))
		for _, t := range []toxic{{"blackhole_down", "timeout", "downstream", map[string]any{"timeout": 0}}, {"blackhole_up", "timeout", "upstream", map[string]any{"timeout": 0}}} {
			if err := s.proxy.add(t.name, t.typ, t.stream, t.attrs); err != nil {
				return err
			}
		}
		sleepCtx(ctx, d)
		s.proxy.stop()
		s.proxy.clear()
		err = s.proxy.start()
	case faultDrop:
		d := s.between(200*time.Millisecond, 3*time.Second)
		s.log("fault: proxy down for %v", d.Round(time.Millisecond))
		s.proxy.stop()
		sleepCtx(ctx, d)
		err = s.proxy.start()
	}
	return err
}

type toxic struct {
	name, typ, stream string
	attrs             any
}

// withToxics adds the toxics, waits d (or until ctx ends) and removes them.
func (s *faultScheduler) withToxics(ctx context.Context, d time.Duration, ts ...toxic) error {
	defer s.proxy.clear()
	for _, t := range ts {
		if err := s.proxy.add(t.name, t.typ, t.stream, t.attrs); err != nil {
			return err
		}
	}
	sleepCtx(ctx, d)
	return nil
}

// between draws a duration in [lo, hi).
func (s *faultScheduler) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

// sleepCtx waits d; it reports false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
