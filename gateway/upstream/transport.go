package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/wsclient"
)

// transport is one WebSocket of the session. Its reader and writer
// goroutines run until ctx is cancelled; the supervisor waits for them (wg).
type transport struct {
	gen    uint64         // immutable
	ws     *wsclient.Conn // closed (CloseNow) when ctx ends
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the reader and, while it runs, the writer

	// Guarded by Conn.mu.
	writing bool // a writer goroutine is running for this transport
	stopped bool // torn down: no writer may start (wg is being waited on)
}

type handshakeResult struct {
	ws        *wsclient.Conn
	sessionID string
	welcome   arcp.Welcome
	heartbeat time.Duration
}

// handshake dials and exchanges hello/welcome within InitTimeout (and ctx).
// The context bounds only the handshake: while it runs, the context's end
// closes the socket, which ends a blocked read or write.
func (c *Conn) handshake(ctx context.Context, resume *arcp.Resume) (*handshakeResult, error) {
	// The dial's context must not descend from the caller's: the WebSocket
	// keeps its HTTP request, and so that context, for the connection's
	// whole life, while the caller's is a short-lived RPC's (with its
	// stream, metadata and timers). The caller's cancellation still ends
	// the handshake, with its cause.
	base, cancelBase := context.WithCancelCause(context.Background())
	defer cancelBase(nil)
	stop := context.AfterFunc(ctx, func() { cancelBase(context.Cause(ctx)) })
	defer stop()
	hctx, cancel := context.WithTimeoutCause(base, c.cfg.InitTimeout, errHandshakeTimeout)
	defer cancel()
	fail := func(stage string, err error) error {
		if cause := context.Cause(hctx); cause != nil {
			if errors.Is(cause, errHandshakeTimeout) {
				return &UnreachableError{Stage: stage, Err: fmt.Errorf("%w after %v: %w", errHandshakeTimeout, c.cfg.InitTimeout, context.DeadlineExceeded)}
			}
			return fmt.Errorf("upstream: handshake (%s): %w", stage, cause) // the caller's
		}
		return &UnreachableError{Stage: stage, Err: err}
	}
	ws, err := wsclient.Dial(hctx, c.cfg.URL, wsclient.Options{TLSConfig: c.cfg.TLSConfig, ReadLimit: c.cfg.MaxFrameBytes})
	if err != nil {
		return nil, fail("dial", err)
	}
	c.moveTo(StateHandshaking)
	ok := false
	stopWatch := context.AfterFunc(hctx, func() { ws.CloseNow() })
	defer func() {
		if !ok {
			stopWatch()
			ws.CloseNow()
		}
	}()
	hello := arcp.Hello{
		Client:       c.cfg.Client,
		Auth:         arcp.Auth{Scheme: "bearer", Token: c.cfg.Token},
		Capabilities: arcp.Capabilities{Encodings: []string{"json"}, Features: c.cfg.Features},
		Resume:       resume,
	}
	env, err := arcp.New(arcp.TypeHello, "", hello)
	if err != nil {
		return nil, fail("hello", err)
	}
	data, err := arcp.Encode(env)
	if err != nil {
		return nil, fail("hello", err)
	}
	if err := ws.Write(true, data); err != nil {
		return nil, fail("send hello", err)
	}
	for {
		text, data, err := ws.Read()
		if err != nil {
			if errors.Is(err, wsclient.ErrMessageTooBig) {
				c.ctr.OversizeFrames.Add(1)
			}
			return nil, fail("read welcome", err)
		}
		if !text {
			c.ctr.BinaryFrames.Add(1)
			continue
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{})
		if err != nil {
			// Nothing but a welcome (or a refusal) may come now: waiting
			// on would only turn the runtime's fault into a timeout.
			c.ctr.MalformedFrames.Add(1)
			return nil, fail("welcome", &ProtocolError{Stage: "handshake", Detail: "unreadable frame instead of session.welcome: " + err.Error()})
		}
		switch env.Type {
		case arcp.TypeWelcome:
			w, err := arcp.DecodePayload[arcp.Welcome](env)
			if err != nil || env.SessionID == "" || w.ResumeToken == "" {
				c.ctr.MalformedFrames.Add(1)
				detail := "session.welcome without session_id or resume_token"
				if err != nil {
					detail = "malformed session.welcome: " + err.Error()
				}
				return nil, fail("welcome", &ProtocolError{Stage: "handshake", Detail: detail})
			}
			if !stopWatch() {
				// The handshake's context ended as the welcome came: the
				// socket is being closed.
				return nil, fail("welcome", context.Cause(hctx))
			}
			ok = true
			return &handshakeResult{ws: ws, sessionID: env.SessionID, welcome: w, heartbeat: heartbeatInterval(env, &w)}, nil
		case arcp.TypeError:
			e, err := arcp.DecodePayload[arcp.Error](env)
			if err != nil {
				c.ctr.MalformedFrames.Add(1)
				return nil, fail("session.error", err)
			}
			return nil, &e
		case arcp.TypePing:
			// Liberal: answer, although no runtime should ping before welcome.
			if pong := c.pongFrame(env, ""); pong != nil {
				_ = ws.Write(true, pong)
			}
		default:
			if arcp.KnownType(env.Type) {
				c.ctr.ProtocolViolations.Add(1)
			} else {
				c.ctr.UnknownTypes.Add(1)
			}
			return nil, fail("welcome", &ProtocolError{Stage: "handshake", Detail: fmt.Sprintf("%.64q instead of session.welcome", env.Type)})
		}
	}
}

// newTransportLocked makes hs's socket the current transport of a new
// generation and starts its reader and writer.
func (c *Conn) newTransportLocked(hs *handshakeResult) *transport {
	t := &transport{gen: c.gen.Add(1), ws: hs.ws}
	t.ctx, t.cancel = context.WithCancelCause(c.ctx)
	context.AfterFunc(t.ctx, func() { t.ws.CloseNow() })
	c.tr = t
	c.lastAcked = c.lastSeq.Load() // the resume's last_event_seq counts as an ack
	now := c.mono()
	c.lastRecv.Store(now)
	c.lastSend.Store(now)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		c.readLoop(t)
	}()
	c.wakeWriter()
	return t
}

// readLoop reads frames until the transport ends (its context's end closes
// the socket) and dispatches each.
func (c *Conn) readLoop(t *transport) {
	for {
		text, data, err := t.ws.Read()
		if err != nil {
			if errors.Is(err, wsclient.ErrMessageTooBig) {
				c.ctr.OversizeFrames.Add(1)
				c.mu.Lock()
				c.dropLocked(t, errOversize, true)
				c.mu.Unlock()
				return
			}
			t.cancel(fmt.Errorf("upstream: read: %w", err))
			return
		}
		c.lastRecv.Store(c.mono())
		if !text {
			c.ctr.BinaryFrames.Add(1)
			continue
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{RequireSession: true, MaxBytes: int(c.cfg.MaxFrameBytes)})
		if err != nil {
			c.ctr.MalformedFrames.Add(1)
			c.log.Debug("upstream: malformed frame", "err", err)
			if mayBeSubmitAnswer(data) {
				c.mu.Lock()
				if c.tr == t {
					c.unreadableAnswerLocked(t)
				}
				c.mu.Unlock()
			}
			continue
		}
		c.handle(t, env, len(data))
	}
}

// mayBeSubmitAnswer reports whether an undecodable frame could be a
// job.accepted or a session.error: its type reads as one of them, or cannot
// be read at all.
func mayBeSubmitAnswer(data []byte) bool {
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return true
	}
	var typ string
	if json.Unmarshal(probe.Type, &typ) != nil {
		return true
	}
	return typ == arcp.TypeAccepted || typ == arcp.TypeError
}

// writeLoop is the connection's one writer: it takes frames queued by the
// reader, the supervisor and callers, and writes them in order, each batch
// in one write to the socket.
func (c *Conn) writeLoop(t *transport) {
	var batch [][]byte
	for {
		batch = c.takeBatch(t, batch[:0])
		if len(batch) == 0 {
			return // takeBatch cleared t.writing under mu
		}
		if !c.writeBatch(t, batch, time.Time{}) {
			return
		}
	}
}

// writeInline is the writer run by a caller that found none running
// (claimWriterLocked): the submit it just queued, and whatever else is
// queued, are written from its own goroutine — no goroutine is started and
// none woken, the commonest case at low concurrency. It writes one batch.
// A write blocks only when the socket's send buffer is full — the runtime
// has left megabytes unread — so that the caller is not held past its
// deadline by such a runtime, the write is bounded by the caller's
// deadline, but never less than inlineWriteFloor from now: a write that
// fails there drops the transport (the submit is then reconciled after the
// resume like any other in flight at a drop), which a caller's short
// deadline alone must never cause. What was queued meanwhile goes to a
// writer goroutine.
//
// It changes nothing the correlation core sees: takeBatch, under the
// connection's lock, still decides what is written and in which order, and
// the single-writer rule (t.writing) still holds, so frames reach the wire
// in the order the core recorded them, exactly as from writeLoop.
func (c *Conn) writeInline(ctx context.Context, t *transport) {
	batch := c.takeBatch(t, nil)
	if len(batch) == 0 {
		t.wg.Done()
		return
	}
	dl := time.Now().Add(inlineWriteFloor)
	if d, ok := ctx.Deadline(); ok && d.After(dl) {
		dl = d
	}
	if !c.writeBatch(t, batch, dl) {
		t.wg.Done()
		return
	}
	if batch = c.takeBatch(t, batch[:0]); len(batch) == 0 {
		t.wg.Done()
		return
	}
	go func() {
		defer t.wg.Done()
		if c.writeBatch(t, batch, time.Time{}) {
			c.writeLoop(t)
		}
	}()
}

// inlineWriteFloor is the least time writeInline lets a write block.
const inlineWriteFloor = time.Second

// writeBatch writes batch in one write, before deadline dl unless it is
// zero. A failed write ends the transport and the writer (false).
func (c *Conn) writeBatch(t *transport, batch [][]byte, dl time.Time) bool {
	var err error
	if dl.IsZero() {
		err = t.ws.Write(true, batch...)
	} else {
		_ = t.ws.SetWriteDeadline(dl)
		err = t.ws.Write(true, batch...)
		_ = t.ws.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		t.cancel(fmt.Errorf("upstream: write: %w", err))
		c.mu.Lock()
		t.writing = false
		c.mu.Unlock()
		return false
	}
	c.lastSend.Store(c.mono())
	clear(batch)
	return true
}

// takeBatch takes what the writer should send next: the connection's own
// frames, an ack if one is due, then up to 64 caller frames in queue order.
// Taking a caller frame is what "sends" it: the request joins the pending
// map and, for a submit, the FIFO, in exactly the order of the wire.
func (c *Conn) takeBatch(t *transport, batch [][]byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tr != t || t.stopped {
		t.writing = false
		return batch
	}
	batch = append(batch, c.ctrl...)
	clear(c.ctrl)
	c.ctrl = c.ctrl[:0]
	if c.ackWanted && c.feat.ack && !c.ackPaused {
		// The newest event is never acked: the runtime keeps it, so a
		// resume always has something to replay (see reconnect).
		seq := max(c.lastSeq.Load(), 1) - 1
		if c.cfg.AckLimited {
			seq = min(seq, c.ackLimit)
		}
		if seq > c.lastAcked {
			if f := c.frame(arcp.TypeAck, "", arcp.Ack{LastProcessedSeq: seq}); f != nil {
				batch = append(batch, f)
				c.lastAcked = seq
			}
		}
		c.ackWanted = false
	}
	took := false
	for n := 0; n < 64 && c.closeCtx.Err() == nil; n++ {
		// While the correlation core waits for a reconciliation barrier
		// no submit may be written (and nothing behind one, to keep
		// queue order).
		// A submit that cannot be pipelined (the runtime is not known to
		// echo trace ids, or its trace id names other submits too) waits
		// until the submits before it are answered.
		if r := c.out.peek(); r == nil || r.kind == kindSubmit && !c.core.MayWriteSubmit(r.cid, r.traceID) {
			break
		}
		r := c.out.pop()
		took = true
		r.state = stateSent
		r.gen = t.gen
		if r.kind == kindSubmit {
			if !c.core.Written(r.cid, r.id, r.traceID, r.key, r.callerKey) {
				continue // the core did not ask for this write
			}
			r.written = true
		} else {
			c.pending[r.id] = r
		}
		batch = append(batch, r.frame)
	}
	if took && c.spaceCh != nil {
		close(c.spaceCh)
		c.spaceCh = nil
	}
	if len(batch) == 0 {
		// Nothing to send: the writer exits, deciding so under mu, so a
		// wakeWriter after this starts a new one and none is lost.
		t.writing = false
		if c.flushCh != nil {
			close(c.flushCh)
			c.flushCh = nil
		}
	}
	return batch
}

// frame encodes a message of the session; nil if it cannot be encoded.
func (c *Conn) frame(typ, jobID string, payload any) []byte {
	env, err := arcp.New(typ, c.sessionID, payload)
	if err != nil {
		c.log.Error("upstream: encode", "type", typ, "err", err)
		return nil
	}
	env.JobID = jobID
	data, err := arcp.Encode(env)
	if err != nil {
		c.log.Error("upstream: encode", "type", typ, "err", err)
		return nil
	}
	return data
}

// pongFrame answers ping env.
func (c *Conn) pongFrame(env *arcp.Envelope, sessionID string) []byte {
	p, err := arcp.DecodePayload[arcp.Ping](env)
	if err != nil {
		c.ctr.MalformedFrames.Add(1)
		return nil
	}
	e, err := arcp.New(arcp.TypePong, sessionID, arcp.Pong{PingNonce: p.Nonce, ReceivedAt: time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return nil
	}
	data, err := arcp.Encode(e)
	if err != nil {
		return nil
	}
	return data
}

// queueCtrlLocked queues one of the connection's own frames for the current
// transport; at the cap it is dropped and counted.
func (c *Conn) queueCtrlLocked(f []byte) bool {
	if f == nil {
		return false
	}
	if len(c.ctrl) >= ctrlCap {
		c.ctr.ControlDrops.Add(1)
		return false
	}
	c.ctrl = append(c.ctrl, f)
	c.wakeWriter()
	return true
}
