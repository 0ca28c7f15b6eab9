// Package proctuner runs the gateway on one P (GOMAXPROCS=1) while its
// goroutines never wait for one, and on all of them as soon as they do.
//
// # Why
//
// A gateway call is a chain of goroutines handing over to each other: the
// gRPC connection's reader, the handler, the upstream socket's reader, the
// gRPC connection's writer. With two or more Ps, each hand-off may wake an
// idle P's thread (a futex wake, then a spinning thread that steals the
// goroutine or finds nothing and sleeps again), so a call pays cross-CPU
// wake-ups and the spinning threads' CPU, which on a small machine is taken
// from the agent runtime beside the gateway. On one P every hand-off is a
// switch on the same thread. On a 2 vCPU AMD EPYC VM (24 GiB, linux/amd64,
// Go 1.26.8; 2026-11-23, `gateway-bench -short` with the bench process at
// GOMAXPROCS 1 or 2 and the runtime child at 2, two runs each), RunJob's
// median at one call at a time was 392 – 420 µs with the gateway's process
// at GOMAXPROCS=1 against 477 – 508 µs at 2, while the direct ARCP call and
// the plain gRPC call measured in the same runs did not move. Under load
// one P is too few: at 64 callers the same gateway served 10 – 35 % fewer
// calls a second. With the tuner, five full runs of the harness on that VM
// gave a RunJob p50 ratio of 1.28 (1.27 – 1.30) against 1.53 (1.49 – 1.59)
// in four runs without it, and RunJob's p50 373 µs against 499.
//
// # Opt-in
//
// cmd/gateway runs the tuner only when asked (--procs-tuner,
// SESSIONGATE_PROCS_TUNER=true): by default GOMAXPROCS is the Go runtime's
// (container-aware since Go 1.25), as operators of grpc-go services expect,
// and an explicit GOMAXPROCS always wins. The figures above come from one
// small machine with the runtime on the same two cores; on larger machines,
// or with the runtime elsewhere, they are unmeasured.
//
// # The rule
//
// Rule decides from one window (Every, 100 ms by default) at a time, on the
// runtime's own measure of waiting: the scheduling latencies of the window
// (/sched/latencies:seconds, the time goroutines spent runnable before they
// ran). A window whose 90th percentile is Pressed (250 µs) or more, with at
// least MinEvents sampled events, is pressed; one under Light (100 µs), or
// with fewer events (an idle gateway), is light.
//
//   - On one P, a pressed window goes to Max Ps at once.
//   - On Max Ps, LightRun light windows in a row (1 s) try one P again.
//   - A try that is pressed within Confirm windows of starting, with no
//     idle window (fewer than MinEvents events) between, failed: the next
//     try waits twice as many light windows, up to MaxLightRun (about a
//     minute), so that a load which needs every P costs one pressed window
//     a minute at most. A try that lasts Confirm windows, or sees the
//     gateway idle (what presses it afterwards is a new load, not the one
//     the try was for), resets the wait. So does a failed try whose next
//     window, back on Max, is pressed too: a load that presses every P did
//     not press one P because of the try (the start of a heavy load right
//     after a try looks like this).
//
// On Max Ps the spinning threads count as busy, so CPU time cannot tell
// whether one P would do (a chain of hand-offs on two Ps used 0.78 – 0.92 of
// a core where the same chain on one P used 0.70 – 0.79); trying and watching
// the latencies can.
//
// Rule is pure (no clock, no runtime calls) and property-tested; Tuner is
// the I/O: a goroutine that reads the histogram every window and calls
// runtime.GOMAXPROCS on a change (a short stop of the world, at most once a
// window).
package proctuner

import "time"

// Config is the rule's parameters; zero fields take the defaults.
type Config struct {
	Max         int           // Ps when pressed; default: GOMAXPROCS when the tuner starts
	Every       time.Duration // window length; default 100 ms
	Pressed     time.Duration // p90 latency at or above which a window is pressed; default 250 µs
	Light       time.Duration // p90 latency under which a window is light; default 100 µs
	MinEvents   uint64        // fewer sampled events: the window is light; default 8
	LightRun    int           // light windows on Max before trying one P; default 10
	MaxLightRun int           // the longest wait a failed try doubles to; default 640
	Confirm     int           // windows on one P after which a try has held; default 10
}

// Defaults of Config.
const (
	DefaultEvery       = 100 * time.Millisecond
	DefaultPressed     = 250 * time.Microsecond
	DefaultLight       = 100 * time.Microsecond
	DefaultMinEvents   = 8
	DefaultLightRun    = 10
	DefaultMaxLightRun = 640
	DefaultConfirm     = 10
)

func (c Config) withDefaults() Config {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Every <= 0 {
		c.Every = DefaultEvery
	}
	if c.Pressed <= 0 {
		c.Pressed = DefaultPressed
	}
	if c.Light <= 0 || c.Light > c.Pressed {
		c.Light = min(DefaultLight, c.Pressed)
	}
	if c.MinEvents == 0 {
		c.MinEvents = DefaultMinEvents
	}
	set(&c.Max, 1)
	set(&c.LightRun, DefaultLightRun)
	set(&c.MaxLightRun, DefaultMaxLightRun)
	set(&c.Confirm, DefaultConfirm)
	c.MaxLightRun = max(c.MaxLightRun, c.LightRun)
	return c
}

// Window is what the rule reads of one window.
type Window struct {
	Events uint64        // scheduling events the runtime sampled in the window
	P90    time.Duration // their 90th percentile latency
}

// kind classifies a window.
type kind int

const (
	kindMiddle  kind = iota // neither: changes nothing, breaks a run of light windows
	kindLight               // idle, or goroutines ran at once
	kindPressed             // goroutines waited for a P
)

// classify says what kind of window w is under c (defaults applied).
func (c Config) classify(w Window) kind {
	switch {
	case c.idle(w) || w.P90 < c.Light:
		return kindLight
	case w.P90 >= c.Pressed:
		return kindPressed
	}
	return kindMiddle
}

// Rule is the tuner's state machine. The zero value is not ready: use
// NewRule.
type Rule struct {
	cfg   Config
	procs int // current Ps: 1 or cfg.Max
	light int // light windows in a row on Max
	need  int // light windows a try waits for
	tried int // windows on one P since the try began; -1: the try has held
	undo  int // after a failed try, the wait before it doubled (0: none)
}

// idle says w is too quiet to judge: the gateway had next to nothing to run.
func (c Config) idle(w Window) bool { return w.Events < c.MinEvents }

// NewRule starts on Max Ps, the Go default, so that a tuner that never
// sees a light window changes nothing.
func NewRule(c Config) *Rule {
	c = c.withDefaults()
	return &Rule{cfg: c, procs: c.Max, need: c.LightRun, tried: -1}
}

// Procs is the number of Ps the rule wants now.
func (r *Rule) Procs() int { return r.procs }

// Wait is the light windows the next try waits for.
func (r *Rule) Wait() int { return r.need }

// Step takes one window and returns the Ps wanted after it.
func (r *Rule) Step(w Window) int {
	c := r.cfg
	if c.Max <= 1 {
		return r.procs
	}
	k := c.classify(w)
	if r.procs == 1 {
		if k == kindPressed {
			if r.tried >= 0 && r.tried < c.Confirm {
				r.undo, r.need = r.need, min(2*r.need, c.MaxLightRun) // the try failed
			}
			r.procs, r.light, r.tried = c.Max, 0, -1
			return r.procs
		}
		if r.tried >= 0 {
			if r.tried++; r.tried >= c.Confirm || c.idle(w) {
				r.need, r.tried = c.LightRun, -1 // the try held
			}
		}
		return r.procs
	}
	if r.undo > 0 {
		if k == kindPressed {
			r.need = r.undo // pressed on Max too: not the try's doing
		}
		r.undo = 0
	}
	if k != kindLight {
		r.light = 0
		return r.procs
	}
	if r.light++; r.light >= r.need {
		r.procs, r.light, r.tried = 1, 0, 0
	}
	return r.procs
}
