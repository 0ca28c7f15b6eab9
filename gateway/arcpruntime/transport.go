package arcpruntime

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// transport is one WebSocket connection. Its goroutines: the ServeHTTP
// goroutine runs the read loop; a writer goroutine is the connection's only
// writer; after the handshake a dispatcher goroutine handles requests in
// arrival order. ServeHTTP waits for both before returning.
type transport struct {
	// Immutable.
	r      *Runtime
	conn   *websocket.Conn
	ctx    context.Context // the connection's lifetime; every Read and Write uses it
	cancel context.CancelCauseFunc
	notify chan struct{} // cap 1: wakes the writer
	reqs   chan request  // read loop → dispatcher, bounded
	done   chan struct{} // closed when ServeHTTP has cleaned up
	remote string

	lastRecv atomic.Int64 // unix nanos of the last frame read

	// wmu is held by the writer across "check stall, take a frame, write
	// it", so Stall(true) can wait for a write in progress.
	wmu sync.Mutex

	// The heartbeat watchdog: a self re-arming timer that drops the
	// transport when the client was silent for two intervals. It is
	// separate from the writer so that a writer blocked on a client that
	// stopped reading is still interrupted.
	wdMu      sync.Mutex
	wd        *time.Timer // guarded by wdMu
	wdStopped bool        // guarded by wdMu
	wdNoticed bool        // guarded by wdMu; a HEARTBEAT_LOST notice is queued
	wdWG      sync.WaitGroup

	// Guarded by r.mu.
	sess      *session      // set by the handshake
	heartbeat time.Duration // 0 = heartbeat not negotiated
	ctrl      []outFrame    // unsent control frames, bounded by Options.WriteQueue
	sent      uint64        // every event_seq up to sent was handed to the writer
	sentBytes uint64        // session.total through sent
	closing   bool          // a closing frame is queued; nothing more is

	// Dialect.ReorderWindow: the rest of the block being sent in
	// descending order (all above sent), and where the block ends.
	block       []uint64
	blockEnd    uint64
	blockEndCum uint64

	// Dialect.LateAcceptAcrossResume: submits a previous transport of the
	// session left unanswered, for the dispatcher; replayed is closed once
	// the writer has sent everything up to replayTo (the session's seq at
	// the resume). All set by attachLocked before the dispatcher starts.
	late       []*arcp.Envelope
	replayTo   uint64
	replayed   chan struct{}
	replayDone bool
}

// outFrame is one message for the writer.
type outFrame struct {
	data   []byte
	binary bool
	// close, if set, makes the writer close the connection gracefully after
	// writing data.
	close *closeReq
	// through, if set, makes this frame (which has no data) a marker: the
	// writer sends sequenced envelopes up to through before any control
	// frame queued after it. It keeps an answer that is sequenced
	// (Dialect.RejectAs, Dialect.CancelledSeq) in its place among the
	// answers.
	through uint64
}

type closeReq struct {
	code   websocket.StatusCode
	reason string
}

// request is one unit of work for the dispatcher: an envelope, or an error
// answer decided by the read loop that must keep its place in the order.
type request struct {
	env *arcp.Envelope
	err *arcp.Error // answer this instead
	// fatal: after answering err, close the transport and end the session.
	fatal bool
}

const requestQueue = 256

// ServeHTTP upgrades the request to a WebSocket and serves one ARCP
// transport on it until the connection ends.
func (r *Runtime) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		http.Error(w, "runtime closed", http.StatusServiceUnavailable)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	defer r.wg.Done()

	conn, err := websocket.Accept(w, req, nil)
	if err != nil {
		r.log.Debug("websocket accept failed", "remote", req.RemoteAddr, "err", err)
		return
	}
	conn.SetReadLimit(r.opts.MaxFrameBytes)
	ctx, cancel := context.WithCancelCause(r.ctx)
	t := &transport{
		r:      r,
		conn:   conn,
		ctx:    ctx,
		cancel: cancel,
		notify: make(chan struct{}, 1),
		reqs:   make(chan request, requestQueue),
		done:   make(chan struct{}),
		remote: req.RemoteAddr,
	}
	t.lastRecv.Store(time.Now().UnixNano())
	defer close(t.done)

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		cancel(errClosed)
		conn.CloseNow()
		return
	}
	r.transports[t] = struct{}{}
	r.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(t.writeLoop)
	t.readLoop(&wg)
	t.cancel(errTransportDone)
	wg.Wait()
	t.stopWatchdog()
	conn.CloseNow()

	r.mu.Lock()
	if r.opts.Dialect.LateAcceptAcrossResume {
		// The read loop and the dispatcher are done: what is still queued
		// will not be pushed to or taken by anyone else.
		var queued []*arcp.Envelope
		for len(t.reqs) > 0 {
			if req := <-t.reqs; req.env != nil && req.env.Type == arcp.TypeSubmit {
				queued = append(queued, req.env)
			}
		}
		t.keepLateLocked(queued)
	}
	delete(r.transports, t)
	r.detachLocked(t)
	r.mu.Unlock()
	r.log.Debug("transport ended", "remote", t.remote, "cause", context.Cause(t.ctx))
}

// abort ends the transport abruptly: the context's end makes coder/websocket
// close the connection without a close frame. Safe with or without r.mu.
func (t *transport) abort(cause error) { t.cancel(cause) }

// enqueueLocked queues a control frame for the writer. A transport whose
// queue overflows is dropped: the client is not reading. It reports whether
// the frame was queued.
func (t *transport) enqueueLocked(f outFrame) bool {
	if t.closing || t.ctx.Err() != nil {
		return false
	}
	if len(t.ctrl) >= t.r.opts.WriteQueue {
		t.r.stats.slowConsumers.Add(1)
		t.abort(errSlowConsumer)
		return false
	}
	if f.close != nil {
		t.closing = true
	}
	t.ctrl = append(t.ctrl, f)
	t.wakeLocked()
	return true
}

func (t *transport) wakeLocked() {
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// sendLocked queues a control envelope.
func (t *transport) sendLocked(typ, jobID string, payload any) {
	t.sendTracedLocked(typ, jobID, "", payload)
}

// sendTracedLocked queues a control envelope carrying trace_id.
func (t *transport) sendTracedLocked(typ, jobID, traceID string, payload any) {
	sid := ""
	if t.sess != nil {
		sid = t.sess.id
	}
	data := t.r.encodeControlTraced(typ, sid, jobID, traceID, payload, nil)
	if data != nil {
		t.enqueueLocked(outFrame{data: data})
	}
}

// appendAnswerLocked buffers a sequenced envelope that answers a request
// and queues a marker, so that the writer sends it after the answers queued
// before it and before those queued after it.
func (t *transport) appendAnswerLocked(s *session, typ, jobID, traceID string, payload []byte) {
	t.r.appendLocked(s, typ, jobID, traceID, payload)
	if s.cur == t {
		t.enqueueLocked(outFrame{through: s.seq})
	}
}

// keepLateLocked hands unanswered submits to the session for the next
// transport of a resume (Dialect.LateAcceptAcrossResume). Callers keep them
// in the order they were read: the dispatcher (the submit in progress, then
// any it took from the queue) before ServeHTTP (the rest of the queue); a
// transport takes the session's list when it attaches, after the previous
// transport has ended.
func (t *transport) keepLateLocked(envs []*arcp.Envelope) {
	s := t.sess
	if len(envs) == 0 || s == nil || s.gone || t.r.closed {
		return
	}
	s.late = append(s.late, envs...)
}

// markReplayedLocked closes replayed once the writer has sent the replay.
func (t *transport) markReplayedLocked() {
	if t.replayed != nil && !t.replayDone && t.sent >= t.replayTo {
		t.replayDone = true
		close(t.replayed)
	}
}

// sendErrorLocked queues a session.error; if fatal, the connection is closed
// after it is written.
func (t *transport) sendErrorLocked(e *arcp.Error, fatal bool) {
	sid := ""
	if t.sess != nil {
		sid = t.sess.id
	}
	data := t.r.encodeControl(arcp.TypeError, sid, "", e, nil)
	if data == nil {
		return
	}
	f := outFrame{data: data}
	if fatal {
		f.close = &closeReq{code: websocket.StatusPolicyViolation, reason: e.Code}
	}
	t.enqueueLocked(f)
}

// closeLocked queues a graceful close with an optional last envelope.
func (t *transport) closeLocked(data []byte, reason string) {
	t.enqueueLocked(outFrame{data: data, close: &closeReq{code: websocket.StatusNormalClosure, reason: reason}})
}

// readLoop reads frames until the connection ends: first the handshake
// (bounded by the handshake timeout), then requests.
func (t *transport) readLoop(wg *sync.WaitGroup) {
	r := t.r
	hsCtx, hsCancel := context.WithTimeoutCause(t.ctx, r.opts.HandshakeTimeout, errHandshakeTimeout)
	defer hsCancel()
	readCtx := hsCtx
	established := false
	for {
		typ, data, err := t.conn.Read(readCtx)
		if err != nil {
			if c := context.Cause(readCtx); c != nil {
				err = c
			}
			t.cancel(err)
			return
		}
		t.lastRecv.Store(time.Now().UnixNano())
		r.stats.framesReceived.Add(1)
		if ch := r.stallCh(); ch != nil {
			select {
			case <-ch:
				t.lastRecv.Store(time.Now().UnixNano())
			case <-readCtx.Done():
				t.cancel(context.Cause(readCtx))
				return
			}
		}
		if typ != websocket.MessageText {
			r.stats.invalidFrames.Add(1)
			r.log.Debug("binary frame ignored", "remote", t.remote, "bytes", len(data))
			continue
		}
		if !established {
			if t.handshake(data) {
				established = true
				readCtx = t.ctx
				hsCancel()
				wg.Go(t.dispatchLoop)
			}
			continue
		}
		if !t.handleFrame(data) {
			return
		}
	}
}

// writeLoop is the connection's only writer. It sends queued control frames
// first, then sequenced envelopes from the session's replay buffer after the
// transport's cursor, and a ping after one heartbeat interval of silence.
// (The watchdog, not the writer, drops a silent client: the writer may be
// blocked on a client that stopped reading.)
func (t *transport) writeLoop() {
	r := t.r
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	lastSent := time.Now()
	for {
		t.wmu.Lock()
		r.mu.Lock()
		stall := r.unstallLocked()
		var (
			f   outFrame
			ok  bool
			err error
			hb  time.Duration
		)
		if stall == nil {
			f, ok, err = t.pullLocked()
			hb = t.heartbeat
		}
		r.mu.Unlock()
		if stall != nil {
			t.wmu.Unlock()
			select {
			case <-stall:
				// The client was not heard while we held its frames.
				t.lastRecv.Store(time.Now().UnixNano())
				continue
			case <-t.ctx.Done():
				return
			}
		}
		if err != nil {
			t.wmu.Unlock()
			if t.ctx.Err() == nil {
				r.stats.slowConsumers.Add(1)
			}
			t.abort(err)
			return
		}
		if ok {
			err := t.write(f)
			t.wmu.Unlock()
			if err != nil {
				t.abort(err)
				return
			}
			if f.close != nil {
				t.cancel(errTransportDone)
				return
			}
			lastSent = time.Now()
			continue
		}
		// Idle: heartbeat duties, then wait.
		if hb > 0 {
			idle := time.Since(lastSent)
			if idle >= hb {
				err := t.write(outFrame{data: t.pingFrame()})
				t.wmu.Unlock()
				if err != nil {
					t.abort(err)
					return
				}
				lastSent = time.Now()
				continue
			}
			timer.Reset(hb - idle)
		}
		t.wmu.Unlock()
		select {
		case <-t.notify:
		case <-timer.C:
		case <-t.ctx.Done():
			return
		}
		timer.Stop()
	}
}

// write writes one frame, closing the connection gracefully after it when
// asked to.
func (t *transport) write(f outFrame) error {
	if len(f.data) > 0 {
		typ := websocket.MessageText
		if f.binary {
			typ = websocket.MessageBinary
		}
		if err := t.conn.Write(t.ctx, typ, f.data); err != nil {
			return err
		}
		t.r.stats.framesSent.Add(1)
	}
	if f.close != nil {
		err := t.conn.Close(f.close.code, f.close.reason)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.r.log.Debug("close handshake", "remote", t.remote, "err", err)
		}
	}
	return nil
}

func (t *transport) pingFrame() []byte {
	sid := ""
	t.r.mu.Lock()
	if t.sess != nil {
		sid = t.sess.id
	}
	t.r.mu.Unlock()
	return t.r.encodeControl(arcp.TypePing, sid, "", arcp.Ping{Nonce: randomHex(8), SentAt: now3339()}, nil)
}

// pullLocked takes the next frame to write: a control frame if any is
// queued, else the next sequenced envelope after the cursor. An error means
// the cursor fell behind the replay buffer (the client was too slow).
func (t *transport) pullLocked() (outFrame, bool, error) {
	for len(t.ctrl) > 0 {
		f := t.ctrl[0]
		if f.through != 0 && t.sequencedDueLocked(f.through) {
			// A marker: what it waits for goes first.
			return t.pullSequencedLocked()
		}
		t.ctrl[0] = outFrame{}
		t.ctrl = t.ctrl[1:]
		if len(t.ctrl) == 0 {
			t.ctrl = nil
		}
		if f.through != 0 {
			continue
		}
		return f, true, nil
	}
	return t.pullSequencedLocked()
}

// sequencedDueLocked reports whether a sequenced envelope up to seq is
// still to be sent on this transport.
func (t *transport) sequencedDueLocked(seq uint64) bool {
	s := t.sess
	return !t.closing && s != nil && !s.gone && s.cur == t && t.sent < seq && t.sent < s.seq
}

// pullSequencedLocked takes the next sequenced envelope after the cursor:
// in order, or, with Dialect.ReorderWindow, from a block sent in descending
// order. sent only moves when a whole block was taken, so it always means
// "everything up to here was handed to the writer".
func (t *transport) pullSequencedLocked() (outFrame, bool, error) {
	s := t.sess
	if t.closing || s == nil || s.gone || s.cur != t {
		return outFrame{}, false, nil
	}
	if len(t.block) == 0 {
		if t.sent >= s.seq {
			return outFrame{}, false, nil
		}
		w := uint64(t.r.opts.Dialect.ReorderWindow)
		avail := s.seq - t.sent
		if w < 2 || avail < 2 {
			e, ok := s.entryLocked(t.sent + 1)
			if !ok {
				return outFrame{}, false, errSlowConsumer
			}
			t.sent, t.sentBytes = e.seq, e.cum
			t.markReplayedLocked()
			return outFrame{data: e.data}, true, nil
		}
		end := t.sent + min(avail, w)
		e, ok := s.entryLocked(end)
		if !ok {
			return outFrame{}, false, errSlowConsumer
		}
		t.blockEnd, t.blockEndCum = end, e.cum
		for q := end; q > t.sent; q-- {
			t.block = append(t.block, q)
		}
	}
	seq := t.block[0]
	t.block = t.block[1:]
	e, ok := s.entryLocked(seq)
	if !ok {
		return outFrame{}, false, errSlowConsumer
	}
	if len(t.block) == 0 {
		t.block = nil
		t.sent, t.sentBytes = t.blockEnd, t.blockEndCum
		t.markReplayedLocked()
	}
	return outFrame{data: e.data}, true, nil
}

// startWatchdog starts heartbeat enforcement for interval hb.
func (t *transport) startWatchdog(hb time.Duration) {
	t.wdMu.Lock()
	defer t.wdMu.Unlock()
	if !t.wdStopped && t.wd == nil {
		t.armWatchdogLocked(hb, 2*hb)
	}
}

func (t *transport) armWatchdogLocked(hb, after time.Duration) {
	t.wdWG.Add(1)
	t.wd = time.AfterFunc(after, func() {
		defer t.wdWG.Done()
		t.watchdog(hb)
	})
}

func (t *transport) watchdog(hb time.Duration) {
	t.wdMu.Lock()
	if t.wdStopped {
		t.wdMu.Unlock()
		return
	}
	silent := time.Since(time.Unix(0, t.lastRecv.Load()))
	notice := false
	switch {
	case t.wdNoticed:
		// The HEARTBEAT_LOST notice was not written within an interval.
		t.abort(errHeartbeatLost)
	case t.r.stalled.Load():
		// Stalled: frames are held, so the client cannot be judged.
		t.armWatchdogLocked(hb, 2*hb)
	case silent >= 2*hb:
		t.r.stats.heartbeatLosses.Add(1)
		if t.r.opts.Dialect.HeartbeatLostNotice {
			t.wdNoticed, notice = true, true
			t.armWatchdogLocked(hb, hb)
		} else {
			t.abort(errHeartbeatLost)
		}
	default:
		t.armWatchdogLocked(hb, 2*hb-silent)
	}
	t.wdMu.Unlock()
	if notice {
		// r.mu is taken after wdMu is released: attachLocked takes wdMu
		// under r.mu.
		t.sendHeartbeatLost()
	}
}

// sendHeartbeatLost queues session.error{HEARTBEAT_LOST} and a normal
// close (Dialect.HeartbeatLostNotice); the session stays resumable.
func (t *transport) sendHeartbeatLost() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	sid := ""
	if t.sess != nil {
		sid = t.sess.id
	}
	data := r.encodeControl(arcp.TypeError, sid, "", &arcp.Error{
		Code:      arcp.CodeHeartbeatLost,
		Message:   "heartbeat lost: nothing received for two intervals",
		Retryable: r.opts.Dialect.HeartbeatLostRetryable,
	}, nil)
	if data == nil || !t.enqueueLocked(outFrame{data: data, close: &closeReq{code: websocket.StatusNormalClosure, reason: "heartbeat lost"}}) {
		t.abort(errHeartbeatLost)
	}
}

// stopWatchdog stops the watchdog and waits for a callback in progress.
func (t *transport) stopWatchdog() {
	t.wdMu.Lock()
	t.wdStopped = true
	if t.wd != nil && t.wd.Stop() {
		t.wdWG.Done()
	}
	t.wdMu.Unlock()
	t.wdWG.Wait()
}
