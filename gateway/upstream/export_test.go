package upstream

import (
	"encoding/json"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// Test access to internals.

var CanTransition = canTransition

// Knobs shortens internal tuning values for tests.
type Knobs struct {
	TombstoneSlack time.Duration
	Housekeeping   time.Duration
	AckEvery       time.Duration
	PressureGrace  time.Duration
	AckBatch       uint64
	NoTraceIDs     bool
	NoAutoKeys     bool
	ReattachProbe  time.Duration
}

func SetKnobs(cfg *Config, k Knobs) {
	cfg.knobs = &knobs{
		tombstoneSlack: k.TombstoneSlack,
		housekeeping:   k.Housekeeping,
		ackEvery:       k.AckEvery,
		pressureGrace:  k.PressureGrace,
		ackBatch:       k.AckBatch,
		noTraceIDs:     k.NoTraceIDs,
		noAutoKeys:     k.NoAutoKeys,
		reattachProbe:  k.ReattachProbe,
	}
}

// KnownEcho returns Traits that already know whether the runtime echoes
// trace ids (1 yes, -1 no), as if another session had learned it.
func KnownEcho(e int8) *Traits {
	t := &Traits{}
	t.echo.Store(int32(e))
	return t
}

// ResumeTokens returns the resume tokens of every welcome, oldest first.
func (c *Conn) ResumeTokens() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.tokens...)
}

// OrphanJobs returns the ids of the jobs cancelled as orphans.
func (c *Conn) OrphanJobs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.orphans...)
}

type HeartbeatLoss struct{ LastRecv, Detected time.Time }

func (c *Conn) HeartbeatLosses() []HeartbeatLoss {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []HeartbeatLoss
	for _, l := range c.hbLost {
		out = append(out, HeartbeatLoss{l.lastRecv, l.detected})
	}
	return out
}

// Buffered returns the retained items and bytes across job logs.
func (c *Conn) Buffered() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bufEvents, c.bufBytes
}

func (c *Conn) Tombstones() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tombs.Len()
}

// FIFOLen is the number of sent submits waiting for an answer.
func (c *Conn) FIFOLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Waiting()
}

// HandleStale dispatches env as if read from a transport of an older
// generation.
func (c *Conn) HandleStale(env *arcp.Envelope) {
	c.handle(&transport{gen: c.gen.Load() - 1}, env, 0)
}

// TombstoneTTL is the TTL a call with budget gets.
func (c *Conn) TombstoneTTL(budget time.Duration) time.Duration { return c.cfg.tombstoneTTL(budget) }

// CountersOf returns the connection's counters.
func CountersOf(c *Conn) *Counters { return c.ctr }

// HandleCurrent dispatches env as if read from the current transport.
func (c *Conn) HandleCurrent(env *arcp.Envelope) {
	c.mu.Lock()
	t := c.tr
	c.mu.Unlock()
	if t != nil {
		c.handle(t, env, 0)
	}
}

// HeadTombstone returns the FIFO head's tombstone expiry, if the head's
// caller gave up.
func (c *Conn) HeadTombstone() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.HeadTombstone()
}

// HeartbeatIntervalOf is the interval a welcome with the millisecond
// extension ext (raw JSON, "" for none) and heartbeat_interval_sec sec gives.
func HeartbeatIntervalOf(ext string, sec int) time.Duration {
	env := &arcp.Envelope{}
	if ext != "" {
		env.Extensions = map[string]json.RawMessage{HeartbeatIntervalMSExtension: json.RawMessage(ext)}
	}
	return heartbeatInterval(env, &arcp.Welcome{HeartbeatIntervalSec: float64(sec)})
}

// HousekeepingIdle reports whether housekeeping runs at the idle period.
func (c *Conn) HousekeepingIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.houseIdle
}

// HousekeepingRuns returns how many housekeeping passes have run.
func (c *Conn) HousekeepingRuns() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.houseRuns
}
