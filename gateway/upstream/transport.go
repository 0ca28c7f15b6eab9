package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// transport is one WebSocket of the session. Its reader and writer
// goroutines run until ctx is cancelled; the supervisor waits for them (wg).
type transport struct {
	gen    uint64 // immutable
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the reader and, while it runs, the writer

	// Guarded by Conn.mu.
	writing bool // a writer goroutine is running for this transport
	stopped bool // torn down: no writer may start (wg is being waited on)
}

type handshakeResult struct {
	ws        *websocket.Conn
	sessionID string
	welcome   arcp.Welcome
	heartbeat time.Duration
}

// handshake dials and exchanges hello/welcome within InitTimeout (and ctx).
// The context bounds only the handshake: coder/websocket closes the
// connection if a context expires during a call, and the calls here are the
// handshake's own.
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
	ws, _, err := websocket.Dial(hctx, c.cfg.URL, &websocket.DialOptions{HTTPClient: c.cfg.HTTPClient})
	if err != nil {
		return nil, fail("dial", err)
	}
	c.moveTo(StateHandshaking)
	ws.SetReadLimit(c.cfg.MaxFrameBytes)
	ok := false
	defer func() {
		if !ok {
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
	if err := ws.Write(hctx, websocket.MessageText, data); err != nil {
		return nil, fail("send hello", err)
	}
	for {
		typ, data, err := ws.Read(hctx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				c.ctr.OversizeFrames.Add(1)
			}
			return nil, fail("read welcome", err)
		}
		if typ != websocket.MessageText {
			c.ctr.BinaryFrames.Add(1)
			continue
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{})
		if err != nil {
			c.ctr.MalformedFrames.Add(1)
			continue
		}
		switch env.Type {
		case arcp.TypeWelcome:
			w, err := arcp.DecodePayload[arcp.Welcome](env)
			if err != nil || env.SessionID == "" || w.ResumeToken == "" {
				c.ctr.MalformedFrames.Add(1)
				return nil, fail("welcome", errorf("malformed welcome"))
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
				_ = ws.Write(hctx, websocket.MessageText, pong)
			}
		default:
			if arcp.KnownType(env.Type) {
				c.ctr.ProtocolViolations.Add(1)
			} else {
				c.ctr.UnknownTypes.Add(1)
			}
		}
	}
}

// newTransportLocked makes hs's socket the current transport of a new
// generation and starts its reader and writer.
func (c *Conn) newTransportLocked(hs *handshakeResult) *transport {
	t := &transport{gen: c.gen.Add(1), ws: hs.ws}
	t.ctx, t.cancel = context.WithCancelCause(c.ctx)
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

// readLoop reads frames with the transport's lifetime context (never a
// per-message timeout, which would close the socket) and dispatches each.
func (c *Conn) readLoop(t *transport) {
	for {
		typ, data, err := t.ws.Read(t.ctx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
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
		if typ != websocket.MessageText {
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
// reader, the supervisor and callers, and writes them in order.
func (c *Conn) writeLoop(t *transport) {
	var batch [][]byte
	for {
		batch = c.takeBatch(t, batch[:0])
		if len(batch) == 0 {
			return // takeBatch cleared t.writing under mu
		}
		for i, f := range batch {
			if err := t.ws.Write(t.ctx, websocket.MessageText, f); err != nil {
				t.cancel(fmt.Errorf("upstream: write: %w", err))
				c.mu.Lock()
				t.writing = false
				c.mu.Unlock()
				return
			}
			c.lastSend.Store(c.mono())
			batch[i] = nil
		}
	}
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
		if r := c.out.peek(); r == nil || r.kind == kindSubmit && !c.core.MayWriteSubmits() {
			break
		}
		r := c.out.pop()
		took = true
		r.state = stateSent
		r.gen = t.gen
		if r.kind == kindSubmit {
			// Only trace ids the connection minted identify a submit: a
			// caller's trace id may be shared by many jobs, old and new.
			trace := r.traceID
			if r.callerTrace {
				trace = ""
			}
			if !c.core.Written(r.cid, r.id, trace, r.key, r.callerKey) {
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
