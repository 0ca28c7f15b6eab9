package timeoutprofile

import (
	"sync"
	"sync/atomic"
	"time"
)

// The stall-following margin (WithStallMargin; off by default). A call
// whose budget is its caller's deadline less the margin ends when its
// context's timer fires and its handler returns: the interceptor sees how
// late that was (the call's lateness: the time from the budget's end to
// the status being built). On a machine that stops running the process
// for tens of milliseconds (measured: gaps of 87–90 ms in an unrelated
// process beside two CPU hogs, while the gateway's GC paused 1–2 ms), the
// lateness is such a stall, and a caller whose deadline falls within it
// loses the details. With the switch on, the margin of later calls is at
// least 1.5 × the longest lateness seen in the last stallMemory (about:
// a shorter one seen meanwhile is forgotten with it) — and at
// most half of the time left, so that the call still runs — which covers
// a stall as long as the last one: the margin follows the process's
// recent stalls instead of growing for every caller at every time.

// stallMemory is how long a lateness raises the margin.
const stallMemory = 10 * time.Second

// stallGauge remembers the longest recent lateness. Safe for concurrent
// use; recent is a load.
type stallGauge struct {
	mu   sync.Mutex
	peak atomic.Pointer[stallPeak]
}

type stallPeak struct {
	late time.Duration
	at   time.Time
}

// note records a call's lateness observed at now. A lateness at least as
// long as the remembered one, or any after that one is stallMemory old,
// replaces it.
func (g *stallGauge) note(now time.Time, late time.Duration) {
	if late <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.peak.Load(); p == nil || late >= p.late || now.Sub(p.at) > stallMemory {
		g.peak.Store(&stallPeak{late: late, at: now})
	}
}

// floor is the least margin at now: 1.5 × the longest lateness of the last
// stallMemory, 0 without one.
func (g *stallGauge) floor(now time.Time) time.Duration {
	if g == nil {
		return 0
	}
	p := g.peak.Load()
	if p == nil || now.Sub(p.at) > stallMemory {
		return 0
	}
	return p.late * 3 / 2
}
