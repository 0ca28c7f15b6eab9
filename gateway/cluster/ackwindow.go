package cluster

import "time"

// AckWindow decides the acked seq an owner writes to the directory (and then
// lets the upstream connection ack). The runtime discards events once they
// are acked, and a replica that takes the session over resumes from the
// stored seq: a watcher whose cursor is below it gets a definite error
// (events no longer retained). So the owner acks not what it has received,
// but what it had received Lag ago: watchers that lag the upstream by less
// than Lag continue across a takeover with no gap and no duplicate.
//
// Feed it the delivered seq at every tick (Observe); Target says what may be
// acked now. It keeps at most a few samples per Lag. Not safe for concurrent
// use.
type AckWindow struct {
	Lag     time.Duration
	samples []sample // oldest first, times increasing
}

type sample struct {
	at  time.Time
	seq uint64
}

// Observe records that seq had been delivered at now.
func (w *AckWindow) Observe(now time.Time, seq uint64) {
	if n := len(w.samples); n > 0 && w.samples[n-1].seq == seq {
		return // nothing new: the older sample already says it
	}
	w.samples = append(w.samples, sample{now, seq})
}

// Target is the highest seq delivered at or before now-Lag (0 if none), and
// drops the samples it no longer needs.
func (w *AckWindow) Target(now time.Time) uint64 {
	cut := now.Add(-w.Lag)
	i := 0
	for i < len(w.samples) && !w.samples[i].at.After(cut) {
		i++
	}
	if i == 0 {
		return 0
	}
	t := w.samples[i-1].seq
	// Keep the last sample at or before the cut: it is the answer until a
	// newer one passes the cut.
	w.samples = append(w.samples[:0], w.samples[i-1:]...)
	return t
}
