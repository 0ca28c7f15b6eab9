package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/wsclient"
)

// run is the supervisor goroutine: it serves the current transport, tears it
// down when it ends, resumes on a new one, and ends the session. It owns the
// transports' reader and writer goroutines and waits for them.
func (c *Conn) run(t *transport) {
	defer close(c.runDone)
	defer c.cancel()
	for {
		cause := c.serve(t)
		if errors.Is(cause, errCloseRequested) {
			c.closeGracefully(t)
			return
		}
		if fatal := c.teardown(t, cause); fatal != nil {
			c.finish(fatal)
			return
		}
		if t = c.reconnect(cause); t == nil {
			return
		}
	}
}

// serve runs the timers of a live transport until it ends or Close is
// called: heartbeat, ack rate limit, and housekeeping (expiry, retention,
// the FIFO head check). Timers, not goroutines.
func (c *Conn) serve(t *transport) error {
	var hb *time.Timer
	var hbC <-chan time.Time
	if c.feat.heartbeat {
		c.mu.Lock()
		iv := c.hbInterval
		c.mu.Unlock()
		hb = time.NewTimer(iv / 2)
		defer hb.Stop()
		hbC = hb.C
	}
	house := time.NewTimer(c.cfg.knobs.housekeeping)
	defer house.Stop()
	slow := false // house runs at idleHousekeeping (c.houseIdle)
	defer func() {
		c.mu.Lock()
		c.houseIdle = false
		c.mu.Unlock()
	}()
	ack := time.NewTimer(time.Hour)
	ack.Stop()
	defer ack.Stop()
	ackArmed := false
	for {
		select {
		case <-t.ctx.Done():
			return context.Cause(t.ctx)
		case <-c.closeCtx.Done():
			return errCloseRequested
		case <-c.detachCh:
			return errDetach
		case <-hbC:
			hb.Reset(c.heartbeat(t))
		case <-c.kick:
			if !ackArmed {
				ack.Reset(c.cfg.knobs.ackEvery)
				ackArmed = true
			}
			if slow {
				house.Reset(c.cfg.knobs.housekeeping)
				slow = false
			}
		case <-ack.C:
			ackArmed = false
			c.mu.Lock()
			if c.feat.ack && !c.ackPaused && c.lastSeq.Load() > c.lastAcked {
				c.ackWanted = true
				c.wakeWriter()
			}
			c.mu.Unlock()
		case <-house.C:
			if slow = c.housekeep(t, time.Now()); slow {
				house.Reset(max(idleHousekeeping, c.cfg.knobs.housekeeping))
			} else {
				house.Reset(c.cfg.knobs.housekeeping)
			}
		}
	}
}

// heartbeat checks the transport's liveness and returns when to check next.
// Nothing received for two intervals is HEARTBEAT_LOST: the transport is
// dropped and resumed. Nothing sent for one interval sends session.ping.
func (c *Conn) heartbeat(t *transport) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	iv := c.hbInterval
	if c.tr != t {
		return iv
	}
	now := c.mono()
	recv := c.lastRecv.Load()
	if time.Duration(now-recv) >= 2*iv {
		c.ctr.HeartbeatLost.Add(1)
		if len(c.hbLost) >= 64 {
			c.hbLost = c.hbLost[1:]
		}
		c.hbLost = append(c.hbLost, heartbeatLoss{
			lastRecv: c.epoch.Add(time.Duration(recv)),
			detected: c.epoch.Add(time.Duration(now)),
		})
		c.log.Warn("upstream: heartbeat lost", "session_id", c.sessionID, "silent_for", time.Duration(now-recv))
		c.dropLocked(t, errHeartbeatLost, false)
		return iv
	}
	if time.Duration(now-c.lastSend.Load()) >= iv {
		ping := arcp.Ping{Nonce: newTraceID()[:16], SentAt: time.Now().UTC().Format(time.RFC3339Nano)}
		if c.queueCtrlLocked(c.frame(arcp.TypePing, "", ping)) {
			c.lastSend.Store(now)
		}
	}
	next := min(time.Duration(recv)+2*iv, time.Duration(c.lastSend.Load())+iv) - time.Duration(now)
	return max(next, time.Millisecond)
}

// idleHousekeeping is the housekeeping period of an idle connection: one
// with nothing for housekeeping to expire or check (see housekeep). It is a
// safety net only: whatever gives housekeeping something to look after
// calls busyLocked, which wakes the supervisor back to the short period. At
// the short period (at most a second) an idle session cost its supervisor a
// wake-up a second, 19,000 a second with 19,000 sessions open; at 10 s the
// gateway still spent 3.5 - 5 % of a core on 19,000 idle sessions (gateway-bench
// -short -sessions 1000,10000,19000, two runs), at 60 s 1 - 1.5 %.
const idleHousekeeping = 60 * time.Second

// housekeep expires tombstones and finished jobs, and checks the FIFO head.
// It returns whether the connection is idle: nothing housekeeping looks
// after is left (no tombstone, finished job, request, held frame, waiting
// submit, back-pressure or unbalanced reservation). Then c.houseIdle is
// set, and whatever gives it something to look after again calls busyLocked,
// which wakes the supervisor back to the short period.
func (c *Conn) housekeep(t *transport, now time.Time) (idle bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.houseRuns++
	defer func() {
		idle = c.tr == t && c.tombs.Len() == 0 && c.finished.len() == 0 && c.liveJobs == 0 && c.inflight == 0 &&
			len(c.pending) == 0 && c.out.live == 0 && !c.ackPaused && c.core.Idle() && c.seqr.Held() == 0 &&
			c.bufBytes == c.reserved
		c.houseIdle = idle
	}()
	if n := c.tombs.Expire(now); n > 0 {
		c.ctr.TombstonesExpired.Add(uint64(n))
	}
	c.expireJobsLocked(now)
	c.reserveRetainedLocked(now)
	if c.ackPaused && now.Sub(c.pausedAt) >= c.cfg.knobs.pressureGrace {
		// Back-pressure did not help: the slowest watcher fails.
		c.failSlowestLocked(now)
	}
	// The correlation core's clock: a stalled FIFO, an unanswered
	// reconciliation barrier, expired trace tombstones.
	c.core.Tick(now)
	c.applyLocked(t)
	c.reat.Tick(now)
	c.applyReattachLocked(c.tr)
	if c.tr == t && c.seqr.Expired(now) {
		// A hole in event_seq that stayed open: resume from the last
		// delivered seq.
		c.ctr.SequenceGaps.Add(1)
		c.dropLocked(t, errSeqGap, true)
	}
	return false // the deferred check decides
}

// expireJobsLocked forgets finished jobs past JobRetention, and the oldest
// finished records beyond MaxBufferedEvents of them.
func (c *Conn) expireJobsLocked(now time.Time) {
	for j := c.finished.peek(); j != nil; j = c.finished.peek() {
		if now.Sub(j.finishedAt) < c.cfg.JobRetention && c.finished.len() <= c.cfg.MaxBufferedEvents {
			break
		}
		c.finished.pop()
		c.removeJobLocked(j)
	}
}

// teardown ends transport t. If the runtime ended the session (c.fatal) it
// returns that error and leaves the requests to finish. Otherwise it settles
// the requests of t's generation: unanswered submits go to the correlation
// core's limbo (reconciled after the resume, never failed for the drop);
// sent list_jobs, subscribe and cancel requests are harmless to repeat and
// go back to the head of the outbox with fresh ids. Queued requests were
// never sent and stay queued.
func (c *Conn) teardown(t *transport, cause error) (fatal error) {
	c.mu.Lock()
	if c.tr == t {
		c.tr = nil
	}
	t.stopped = true
	c.mu.Unlock()
	t.cancel(cause)
	t.ws.CloseNow()
	t.wg.Wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal != nil {
		return c.fatal
	}
	// The connection's own frames belonged to that transport; the cancels
	// the core still owns are asked for again after the resume.
	clear(c.ctrl)
	c.ctrl = c.ctrl[:0]
	// Unanswered submits stay accountable: the core moves them to limbo
	// and reconciles them after the resume. Held reordered frames go: the
	// resume replays everything after the last delivered seq.
	c.core.Dropped()
	c.seqr.Reset()
	c.reattachDroppedLocked()
	for _, r := range c.subs {
		if r.state == stateSent {
			r.state = stateWritten
		}
	}
	var again []*request
	for id, r := range c.pending {
		delete(c.pending, id)
		r.env.ID = arcp.NewID()
		data, err := arcp.Encode(r.env)
		if err != nil {
			c.finishRequestLocked(r, err)
			continue
		}
		r.id, r.frame, r.state = r.env.ID, data, stateQueued
		if r.kind == kindSubscribe && r.job != nil && r.job.obs != nil && r.job.obsHistory {
			// Its history may have begun to arrive (the TS SDK sends
			// it before job.subscribed): sent again, it is replayed
			// again from the caller's cursor.
			r.job.obs.Reattaching()
		}
		again = append(again, r)
	}
	c.out.pushFront(again)
	c.log.Debug("upstream: transport down", "session_id", c.sessionID, "cause", cause)
	return nil
}

// closeGracefully sends session.close, waits for session.closed/bye (bounded
// by InitTimeout and by Close's ctx through c.ctx), closes the socket and
// ends the session with ErrClosed.
func (c *Conn) closeGracefully(t *transport) {
	c.moveTo(StateClosing)
	c.mu.Lock()
	live := c.tr == t
	if live {
		c.queueCtrlLocked(c.frame(arcp.TypeClose, "", arcp.Close{Reason: c.closeReason}))
	}
	c.mu.Unlock()
	clean := false
	if live {
		timer := time.NewTimer(c.cfg.InitTimeout)
		select {
		case <-c.closedRecv:
		case <-t.ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
		select {
		case <-c.closedRecv: // also when the runtime closed the socket right after
			clean = true
		default:
		}
		if clean {
			c.waitFlushed(t)
		}
	}
	if clean {
		// The close handshake runs while the reader is still reading; a
		// hard stop (Close's ctx) cancels t.ctx, which closes the socket.
		_ = t.ws.Close(wsclient.StatusNormalClosure, "session closed")
	}
	t.cancel(errCloseRequested)
	t.ws.CloseNow()
	c.mu.Lock()
	t.stopped = true
	c.mu.Unlock()
	t.wg.Wait()
	c.mu.Lock()
	if c.tr == t {
		c.tr = nil
	}
	if !clean {
		c.closeResult = errorf("close: the runtime did not confirm session.close")
		if c.ctx.Err() != nil {
			c.closeResult = fmt.Errorf("%w: %w", c.closeResult, context.Canceled)
		}
	}
	c.mu.Unlock()
	c.finish(ErrClosed)
}

// waitFlushed waits (at most InitTimeout) until the writer has written every
// queued frame of t: session.bye must reach the runtime before the socket
// closes.
func (c *Conn) waitFlushed(t *transport) {
	c.mu.Lock()
	if len(c.ctrl) == 0 && !t.writing {
		c.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	c.flushCh = ch
	c.wakeWriter()
	c.mu.Unlock()
	timer := time.NewTimer(c.cfg.InitTimeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-t.ctx.Done():
	case <-timer.C:
	}
}

// reconnect backs off and resumes until it succeeds, the resume is refused,
// the resume window since the drop has passed, or Close is called. It
// returns the new transport, or nil after ending the session.
//
// Giving up: the runtime keeps a session resumable for resume_window_sec
// after its transport goes, so dial failures are retried until that window
// (from the latest welcome) has passed since the drop; a session.error
// answer (RESUME_WINDOW_EXPIRED, UNAUTHENTICATED, or any other non-retryable
// code) ends the session at once.
func (c *Conn) reconnect(cause error) *transport {
	c.moveTo(StateReconnecting)
	c.mu.Lock()
	deadline := time.Now().Add(c.resumeWindow)
	c.mu.Unlock()
	c.log.Info("upstream: transport lost, resuming", "session_id", c.sessionID, "cause", cause)
	backoff := c.cfg.BackoffInitial
	timer := time.NewTimer(jitter(backoff))
	defer timer.Stop()
	attempts := 0
	for {
		select {
		case <-timer.C:
		case <-c.closeCtx.Done():
			c.closeWhileReconnecting()
			return nil
		case <-c.detachCh:
			c.finish(ErrDetached)
			return nil
		}
		if g := c.cfg.ResumeGate; g != nil && !g() {
			if now := time.Now(); now.Before(deadline) {
				timer.Reset(min(jitter(c.cfg.BackoffInitial), deadline.Sub(now)))
				continue
			}
		}
		attempts++
		c.ctr.Reconnects.Add(1)
		c.mu.Lock()
		resume := &arcp.Resume{SessionID: c.sessionID, ResumeToken: c.resumeToken, LastEventSeq: c.lastSeq.Load()}
		c.mu.Unlock()
		hs, err := c.handshake(c.closeCtx, resume)
		var refused *arcp.Error
		if errors.As(err, &refused) && refused.Code == arcp.CodeResumeWindowExpired && resume.LastEventSeq > 0 {
			// The TS SDK refuses a resume that has nothing to replay
			// (against §6.3). The newest event is never acked, so the
			// runtime still holds it: ask for it again; the sequencer
			// drops the duplicate. A runtime that really lost the
			// session refuses this too.
			c.ctr.CaughtUpRetries.Add(1)
			resume.LastEventSeq--
			hs, err = c.handshake(c.closeCtx, resume)
		}
		if err == nil && hs.sessionID != c.sessionID {
			hs.ws.CloseNow()
			c.ctr.ResumeFailures.Add(1)
			c.finish(&LostError{Code: arcp.CodeInternalError,
				Err: fmt.Errorf("%w: resumed %q, welcomed %.64q", ErrResumeMismatch, c.sessionID, hs.sessionID)})
			return nil
		}
		if err == nil && c.isDetached() {
			hs.ws.CloseNow()
			c.finish(ErrDetached)
			return nil
		}
		if err == nil {
			if c.cfg.OnWelcome != nil {
				c.cfg.OnWelcome(c.sessionID, hs.welcome.ResumeToken)
			}
			c.mu.Lock()
			c.recordWelcomeLocked(hs)
			t := c.newTransportLocked(hs)
			// Reconciliation: a barrier when submits were in flight, and
			// the cancels the connection still owns.
			c.core.Resumed(arcp.NewID(), time.Now())
			c.applyLocked(t)
			c.reattachResumedLocked(t, time.Now())
			c.mu.Unlock()
			c.moveTo(StateReady)
			c.ctr.Resumes.Add(1)
			c.log.Info("upstream: session resumed", "session_id", c.sessionID, "generation", t.gen, "attempts", attempts)
			return t
		}
		if State(c.state.Load()) == StateHandshaking {
			c.moveTo(StateReconnecting)
		}
		if c.closeCtx.Err() != nil {
			c.moveTo(StateClosing)
			c.finish(ErrClosed)
			return nil
		}
		var ae *arcp.Error
		if errors.As(err, &ae) && (!ae.Retryable || ae.Code == arcp.CodeResumeWindowExpired || ae.Code == arcp.CodeUnauthenticated) {
			c.ctr.ResumeFailures.Add(1)
			c.finish(&LostError{Code: arcp.NormalizeCode(ae.Code), Err: ae})
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			c.ctr.ResumeFailures.Add(1)
			c.finish(&LostError{Code: arcp.CodeResumeWindowExpired,
				Err: fmt.Errorf("no resume within the resume window after %d attempts: %w", attempts, err)})
			return nil
		}
		c.log.Debug("upstream: resume attempt failed", "session_id", c.sessionID, "attempt", attempts, "err", err)
		backoff = min(backoff*2, c.cfg.BackoffMax)
		timer.Reset(min(jitter(backoff), deadline.Sub(now)))
	}
}

// closeWhileReconnecting: Close was called while no transport is up. The
// runtime would otherwise keep the session and its jobs for its whole
// resume window, so one bounded attempt (InitTimeout, and Close's ctx) is
// made to resume and close it properly; if that fails the session ends here
// all the same and Close reports the unclean close.
func (c *Conn) closeWhileReconnecting() {
	c.moveTo(StateClosing)
	c.mu.Lock()
	resume := &arcp.Resume{SessionID: c.sessionID, ResumeToken: c.resumeToken, LastEventSeq: c.lastSeq.Load()}
	c.mu.Unlock()
	hs, err := c.handshake(c.ctx, resume)
	if err == nil && hs.sessionID == c.sessionID {
		if c.cfg.OnWelcome != nil {
			c.cfg.OnWelcome(c.sessionID, hs.welcome.ResumeToken)
		}
		c.mu.Lock()
		c.recordWelcomeLocked(hs)
		t := c.newTransportLocked(hs)
		c.mu.Unlock()
		c.closeGracefully(t)
		return
	}
	if err == nil {
		hs.ws.CloseNow()
		err = errorf("resumed another session")
	}
	c.mu.Lock()
	c.closeResult = fmt.Errorf("upstream: close: the runtime could not be reached during a reconnect: %w", err)
	c.mu.Unlock()
	c.finish(ErrClosed)
}

func (c *Conn) isDetached() bool {
	select {
	case <-c.detachCh:
		return true
	default:
		return false
	}
}

// jitter returns d ± 20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// finish ends the session with err: every waiter is failed (requests now,
// Wait and Watchers through done), the state becomes closed and done is
// closed. Idempotent.
func (c *Conn) finish(err error) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	c.err = err
	for _, r := range c.out.drain() {
		c.finishRequestLocked(r, err)
	}
	c.core.Closed(err)
	c.applyLocked(nil)
	for id, r := range c.subs {
		delete(c.subs, id)
		c.finishRequestLocked(r, err)
	}
	for id, r := range c.pending {
		delete(c.pending, id)
		c.finishRequestLocked(r, err)
	}
	for _, j := range c.jobs {
		j.notifyLocked()
		j.closeDoneLocked()
	}
	c.releaseRetainedLocked()
	if c.spaceCh != nil {
		close(c.spaceCh)
		c.spaceCh = nil
	}
	c.mu.Unlock()
	c.moveTo(StateClosed)
	close(c.done)
	c.log.Debug("upstream: session ended", "session_id", c.sessionID, "err", err)
}
