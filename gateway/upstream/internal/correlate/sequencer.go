package correlate

import (
	"slices"
	"time"
)

// SeqVerdict is what Sequencer.Offer decided about a frame.
type SeqVerdict uint8

const (
	// Deliver the frame now (then call Next for any held frames that
	// became deliverable).
	SeqDeliver SeqVerdict = iota + 1
	// SeqHeld: the frame is ahead of a hole; the sequencer keeps it.
	SeqHeld
	// SeqDuplicate: at or below what was delivered: drop it.
	SeqDuplicate
	// SeqGap: the hole will not close within the window: resume.
	SeqGap
)

// SeqConfig bounds the reorder window.
type SeqConfig struct {
	Window      int           // frames held at most (0: no reordering tolerated)
	WindowBytes int           // bytes held at most
	MaxHold     time.Duration // longest a hole may stay open
}

// Sequencer puts sequenced frames back in event_seq order within a bounded
// window. T is the held frame's representation. Not safe for concurrent use.
type Sequencer[T any] struct {
	cfg       SeqConfig
	delivered uint64
	held      []held[T] // sorted by seq
	heldBytes int
	holeSince time.Time // when the oldest held frame arrived
}

type held[T any] struct {
	seq  uint64
	size int
	v    T
}

// NewSequencer returns a sequencer that has delivered everything up to last.
func NewSequencer[T any](cfg SeqConfig, last uint64) *Sequencer[T] {
	return &Sequencer[T]{cfg: cfg, delivered: last}
}

// Delivered is the highest seq delivered: everything up to it, gap-free.
func (s *Sequencer[T]) Delivered() uint64 { return s.delivered }

// Held is the number of frames held.
func (s *Sequencer[T]) Held() int { return len(s.held) }

// Offer takes a frame with seq of size bytes at now.
func (s *Sequencer[T]) Offer(seq uint64, size int, v T, now time.Time) SeqVerdict {
	switch {
	case seq <= s.delivered:
		return SeqDuplicate
	case seq == s.delivered+1:
		s.delivered = seq
		return SeqDeliver
	}
	i, found := slices.BinarySearchFunc(s.held, seq, func(h held[T], seq uint64) int {
		switch {
		case h.seq < seq:
			return -1
		case h.seq > seq:
			return 1
		}
		return 0
	})
	if found {
		return SeqDuplicate
	}
	if seq-s.delivered > uint64(s.cfg.Window) || len(s.held) >= s.cfg.Window ||
		s.heldBytes+size > s.cfg.WindowBytes {
		return SeqGap
	}
	if len(s.held) == 0 {
		s.holeSince = now
	}
	s.held = slices.Insert(s.held, i, held[T]{seq: seq, size: size, v: v})
	s.heldBytes += size
	return SeqHeld
}

// Next returns the next held frame that has become deliverable, if any.
func (s *Sequencer[T]) Next(now time.Time) (T, uint64, bool) {
	var zero T
	if len(s.held) == 0 || s.held[0].seq != s.delivered+1 {
		return zero, 0, false
	}
	h := s.held[0]
	s.held[0] = held[T]{}
	s.held = s.held[1:]
	s.heldBytes -= h.size
	s.delivered = h.seq
	if len(s.held) > 0 {
		s.holeSince = now
	}
	return h.v, h.seq, true
}

// Expired reports whether a hole has stayed open longer than MaxHold.
func (s *Sequencer[T]) Expired(now time.Time) bool {
	return len(s.held) > 0 && now.Sub(s.holeSince) >= s.cfg.MaxHold
}

// Reset discards held frames (the transport dropped: the resume replays
// everything after Delivered).
func (s *Sequencer[T]) Reset() {
	clear(s.held)
	s.held = s.held[:0]
	s.heldBytes = 0
}
