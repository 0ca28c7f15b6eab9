package cluster

import "time"

// CallWait paces one call on the replica that received it, while the
// session's owner is unsettled: how long the call may wait to be routed
// again, and when it is forwarded. The edge (gateway/server's clusterUnary
// and clusterStream) routes the call, asks CallWait what follows, sleeps the
// pauses it answers and routes again. Rule table (see doc.go, "Call pace"):
//
//	Pause          wait not over: now + next delay < until        pause the delay (20 ms doubling to 200 ms), then route again
//	Pause          wait over                                      no pause: the call gets the answer it has
//	PauseUntil(t)  now + (t − now) < until                        pause to t (a silent owner's lease end: Route's Await), then route again
//	PauseUntil(t)  otherwise                                      as Pause
//	Forward(o, a)  no forward yet                                 forward now: the owner is new to the call, whatever it waited before
//	Forward(o, a)  one forward, to another replica                forward now (the first re-route)
//	Forward(o, a)  otherwise                                      Pause first; wait over: no forward, the call gets the last refusal
//	Refused(o, a)  —                                              the forward to o at a counts; the next Forward follows the rules above
//
// until is set at the first Pause or Forward: Limit after it, and a reserve
// before the caller's deadline (a tenth of what is left, at least
// WaitReserve), so the owner has time to serve the call. Forward never
// answers "no forward" before a forward was refused: the call then always
// has an answer to give (before, a call routed to its owner for the first
// time just as its wait ended had none, and grpc-go sent the nil answer as
// an empty OK message).
type CallWait struct {
	// Limit is the longest a call waits in all (ClusterConfig.OwnerWait);
	// ≤ 0: it never pauses.
	Limit time.Duration

	started             bool
	until               time.Time
	delay               time.Duration
	forwards            int
	pauses              int
	lastOwner, lastAddr string

	broken string // a rule disabled on purpose (tests only)
}

// Pacing of a call's waits: 20 ms doubling to 200 ms between routings (a
// directory read each); the last WaitReserve (or tenth) of a deadline is
// left to the call itself.
const (
	WaitFirst   = 20 * time.Millisecond
	WaitMax     = 200 * time.Millisecond
	WaitReserve = 250 * time.Millisecond
)

func (w *CallWait) start(now, deadline time.Time) {
	if w.started {
		return
	}
	w.started = true
	w.until = now.Add(max(w.Limit, 0))
	if !deadline.IsZero() {
		reserve := max(deadline.Sub(now)/10, WaitReserve)
		if end := deadline.Add(-reserve); end.Before(w.until) {
			w.until = end
		}
	}
	w.delay = WaitFirst
}

// Pause says how long the call pauses before it is routed again; false:
// its wait is over. deadline is the caller's (zero: none).
func (w *CallWait) Pause(now, deadline time.Time) (time.Duration, bool) {
	w.start(now, deadline)
	if !now.Add(w.delay).Before(w.until) {
		return 0, false
	}
	d := w.delay
	w.delay = min(2*w.delay, WaitMax)
	w.pauses++
	return d, true
}

// PauseUntil says how long the call pauses to route again at t (a silent
// owner's lease end: Route's Await): until t, past which the session can
// be taken over, when t is within the wait; else as Pause (false: the wait
// is over). It leaves Pause's doubling delay as it was.
func (w *CallWait) PauseUntil(now, deadline, t time.Time) (time.Duration, bool) {
	w.start(now, deadline)
	d := max(t.Sub(now), time.Millisecond)
	if w.broken == "await-blind" || !now.Add(d).Before(w.until) {
		return w.Pause(now, deadline)
	}
	w.pauses++
	return d, true
}

// Forward says whether the call is forwarded to owner at addr: after a
// pause of d (0: at once), or not at all (false: the wait is over; the call
// gets its last forward's refusal, which Refused recorded).
func (w *CallWait) Forward(now, deadline time.Time, owner, addr string) (time.Duration, bool) {
	w.start(now, deadline)
	switch {
	case w.forwards == 0 && (w.broken != "pace-by-attempt" || w.pauses == 0):
		return 0, true
	case w.forwards == 1 && (owner != w.lastOwner || addr != w.lastAddr):
		return 0, true
	case w.broken == "no-pause-same":
		return 0, true
	}
	return w.Pause(now, deadline)
}

// Refused records a forward to owner at addr that was refused before the
// owner ran the call, or never reached it.
func (w *CallWait) Refused(owner, addr string) {
	w.forwards++
	w.lastOwner, w.lastAddr = owner, addr
}

// Forwards is the number of forwards Refused recorded.
func (w *CallWait) Forwards() int { return w.forwards }
