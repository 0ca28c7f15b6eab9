package wsclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

const (
	defaultReadLimit    = 32 << 20
	defaultCloseTimeout = 5 * time.Second
	// eagerAlloc is how many payload bytes of a large frame are allocated
	// before they arrive; beyond it the message buffer grows (doubling) as
	// bytes come in, so a peer that declares a huge length and then stalls
	// pins at most this much.
	eagerAlloc = 1 << 20
	// maxCloseReason is the room for the reason in a close frame's payload
	// (125 bytes minus the 2-byte code).
	maxCloseReason = maxControlPayload - 2
)

// Conn is a client WebSocket connection made by Dial.
//
// One goroutine at a time may call Read (calls are serialised); Write,
// Close and CloseNow may be called from any goroutine, concurrently with
// Read and with each other.
type Conn struct {
	nc           net.Conn
	raw          syscall.RawConn    // set for *net.TCPConn and *net.UnixConn: raw reads
	rawFn        func(uintptr) bool // c.rawRead, bound once so reads do not allocate
	subprotocol  string
	readLimit    int64
	closeTimeout time.Duration

	// Read side. rsem is a one-slot semaphore held by Read (and by Close
	// when it reads for lack of a reader); everything below up to
	// readDone is owned by its holder.
	rsem     chan struct{}
	rbuf     *[]byte // pooled buffer, nil when the reader holds none
	rr, rw   int     // unconsumed bytes are (*rbuf)[rr:rw]
	rdst     []byte  // raw reads: when non-nil, read straight into it
	rn       int     // raw reads: bytes read by the last callback
	rerr     error   // raw reads: error of the last callback
	pendErr  error   // plain reads: an error that came with data
	frag     []byte  // the fragmented message being reassembled
	fragText bool
	inFrag   bool
	readErr  error               // terminal; returned by every later Read
	ended    bool                // readDone is closed
	parkHook func(heldBytes int) // tests: called before the reader parks in the poller

	readDone   chan struct{} // closed when the reader reaches a terminal state
	peerClosed atomic.Bool   // the peer's close frame was received

	// Write side, owned by the holder of wsem (one-slot semaphore).
	wsem      chan struct{}
	closeSent bool
	writeErr  error

	closeOnce sync.Once
	closeErr  error
}

func newConn(nc net.Conn, leftover []byte, subprotocol string, readLimit int64) *Conn {
	if readLimit <= 0 {
		readLimit = defaultReadLimit
	}
	if readLimit > math.MaxInt {
		readLimit = math.MaxInt
	}
	c := &Conn{
		nc:           nc,
		subprotocol:  subprotocol,
		readLimit:    readLimit,
		closeTimeout: defaultCloseTimeout,
		rsem:         make(chan struct{}, 1),
		wsem:         make(chan struct{}, 1),
		readDone:     make(chan struct{}),
	}
	if len(leftover) > 0 {
		c.rbuf = getReadBuf()
		c.rw = copy(*c.rbuf, leftover)
	}
	c.setupRaw()
	return c
}

// Subprotocol returns the subprotocol the server selected, or "" if none
// was offered (Options.Subprotocols) or selected.
func (c *Conn) Subprotocol() string { return c.subprotocol }

// heldReadBuffer reports the bytes of pooled read buffer the reader pins.
// Only the reader (or a parkHook it calls) may call it.
func (c *Conn) heldReadBuffer() int {
	if c.rbuf == nil {
		return 0
	}
	return cap(*c.rbuf)
}

func (c *Conn) releaseReadBuf() {
	if c.rbuf != nil {
		putBuf(c.rbuf)
		c.rbuf = nil
	}
	c.rr, c.rw = 0, 0
}

// ---------------------------------------------------------------- reading

// Read returns the next data message: text reports whether it was a text
// message (otherwise binary), data is a fresh slice the caller owns.
// Fragmented messages are reassembled. Pings are answered with pongs,
// pongs are ignored. When the peer sends a close frame, Read replies with a
// close frame echoing its code, closes the connection and returns a
// *CloseError. After any error the connection is closed and Read keeps
// returning the same error.
func (c *Conn) Read() (text bool, data []byte, err error) {
	c.rsem <- struct{}{}
	text, data, err = c.readMessage()
	<-c.rsem
	return text, data, err
}

// readMessage is Read with rsem held.
func (c *Conn) readMessage() (bool, []byte, error) {
	if c.readErr != nil {
		return false, nil, c.readErr
	}
	text, data, err := c.nextMessage()
	if err != nil {
		c.failRead(err)
		return false, nil, c.readErr
	}
	if c.rr == c.rw {
		c.releaseReadBuf() // the message is a copy: nothing left to keep
	}
	return text, data, nil
}

// failRead makes err the reader's terminal error: it sends the close frame
// the error calls for, closes the connection and drops the buffers.
func (c *Conn) failRead(err error) {
	switch e := err.(type) {
	case *CloseError:
		c.peerClosed.Store(true)
		code := e.Code
		if code == StatusNoStatusRcvd {
			code = 0 // echo an empty close frame
		}
		_ = c.sendClose(code, "", time.Now().Add(c.closeTimeout))
		c.readErr = e
	case *failure:
		_ = c.sendClose(e.code, e.reason, time.Now().Add(c.closeTimeout))
		c.readErr = e.err // already "wsclient: ...", wrapping ErrProtocol or ErrMessageTooBig
	default:
		c.readErr = fmt.Errorf("wsclient: read: %w", err)
	}
	c.closeNow()
	c.releaseReadBuf()
	c.frag, c.inFrag = nil, false
	if !c.ended {
		c.ended = true
		close(c.readDone)
	}
}

// nextMessage reads frames until a data message is complete.
func (c *Conn) nextMessage() (bool, []byte, error) {
	for {
		h, err := c.readHeader()
		if err != nil {
			return false, nil, err
		}
		if h.op >= opClose {
			if err := c.handleControl(h); err != nil {
				return false, nil, err
			}
			continue
		}
		if h.op == opContinuation {
			if !c.inFrag {
				return false, nil, protocolError("continuation frame without a fragmented message to continue")
			}
		} else if c.inFrag {
			return false, nil, protocolError("new data frame inside a fragmented message")
		}
		have := int64(len(c.frag))
		if h.length > c.readLimit-have {
			return false, nil, tooBig(have, h.length, c.readLimit)
		}
		if h.op != opContinuation && h.fin { // an unfragmented message
			data, err := c.readPayload(nil, h.length)
			return h.op == opText, data, err
		}
		if h.op != opContinuation {
			c.inFrag, c.fragText = true, h.op == opText
		}
		c.frag, err = c.readPayload(c.frag, h.length)
		if err != nil {
			return false, nil, err
		}
		if h.fin {
			data, text := c.frag, c.fragText
			c.frag, c.inFrag = nil, false
			if data == nil {
				data = []byte{}
			}
			return text, data, nil
		}
	}
}

// readHeader parses the next frame header and validates everything that
// can be checked from it alone.
func (c *Conn) readHeader() (header, error) {
	if err := c.ensure(2); err != nil {
		return header{}, c.eofError(err, c.rw == c.rr && !c.inFrag)
	}
	b := (*c.rbuf)[c.rr:c.rw]
	b0, b1 := b[0], b[1]
	if rsv := b0 & 0x70; rsv != 0 {
		return header{}, protocolError("reserved bits set (RSV1=%d RSV2=%d RSV3=%d) but no extension was negotiated", rsv>>6, rsv>>5&1, rsv>>4&1)
	}
	op := b0 & 0x0f
	switch op {
	case opContinuation, opText, opBinary, opClose, opPing, opPong:
	default:
		return header{}, protocolError("unknown opcode %#x", op)
	}
	if b1&0x80 != 0 {
		return header{}, protocolError("masked frame (servers must not mask)")
	}
	fin := b0&0x80 != 0
	l7 := b1 & 0x7f
	if op >= opClose {
		if !fin {
			return header{}, protocolError("fragmented control frame (opcode %#x)", op)
		}
		if l7 > maxControlPayload {
			return header{}, protocolError("control frame (opcode %#x) longer than %d bytes", op, maxControlPayload)
		}
	}
	hl := 2
	switch l7 {
	case 126:
		hl = 4
	case 127:
		hl = 10
	}
	if err := c.ensure(hl); err != nil {
		return header{}, c.eofError(err, false)
	}
	b = (*c.rbuf)[c.rr:c.rw]
	n := int64(l7)
	switch l7 {
	case 126:
		n = int64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		u := binary.BigEndian.Uint64(b[2:10])
		if u>>63 != 0 {
			return header{}, protocolError("64-bit payload length %#x has its most significant bit set", u)
		}
		n = int64(u)
	}
	c.rr += hl
	return header{fin: fin, op: op, length: n}, nil
}

// handleControl reads a control frame's payload (at most 125 bytes, which
// always fit in the read buffer) and acts on it.
func (c *Conn) handleControl(h header) error {
	n := int(h.length)
	var p []byte
	if n > 0 {
		if err := c.ensure(n); err != nil {
			return c.eofError(err, false)
		}
		p = (*c.rbuf)[c.rr : c.rr+n]
		c.rr += n
	}
	switch h.op {
	case opPing:
		// A failed pong closes the connection (see writeLocked); the next
		// read then reports it.
		_ = c.writeControl(opPong, p)
		return nil
	case opPong:
		return nil
	}
	// opClose
	switch {
	case n == 0:
		return &CloseError{Code: StatusNoStatusRcvd}
	case n == 1:
		return protocolError("close frame with a 1-byte payload")
	}
	code := StatusCode(binary.BigEndian.Uint16(p))
	if !validWireCode(code) {
		return protocolError("invalid close status code %d", code)
	}
	return &CloseError{Code: code, Reason: string(p[2:])}
}

// eofError turns a read failure into the reader's error; a clean EOF
// between messages differs from one inside a frame or message.
func (c *Conn) eofError(err error, atBoundary bool) error {
	if err == io.EOF {
		if atBoundary {
			return fmt.Errorf("connection ended without a close frame: %w", io.EOF)
		}
		return fmt.Errorf("connection ended inside a frame: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// readPayload appends n payload bytes to dst. n has been checked against
// the read limit, so len(dst)+n <= readLimit.
func (c *Conn) readPayload(dst []byte, n int64) ([]byte, error) {
	if n == 0 {
		if dst == nil {
			dst = []byte{}
		}
		return dst, nil
	}
	if dst == nil && n <= int64(c.rw-c.rr) { // the common case: all buffered
		out := make([]byte, n)
		c.rr += copy(out, (*c.rbuf)[c.rr:c.rw])
		return out, nil
	}
	for n > 0 {
		if avail := c.rw - c.rr; avail > 0 {
			k := int(min(int64(avail), n))
			dst = c.grow(dst, k, n)
			dst = append(dst, (*c.rbuf)[c.rr:c.rr+k]...)
			c.rr += k
			n -= int64(k)
			continue
		}
		if n < smallBuf {
			if err := c.fill(); err != nil {
				return dst, c.eofError(err, false)
			}
			continue
		}
		// A large remainder is read straight into the message, without
		// passing through (or holding) the read buffer.
		c.releaseReadBuf()
		dst = c.grow(dst, 1, n)
		room := int(min(int64(cap(dst)-len(dst)), n))
		got, err := c.readDirect(dst[len(dst) : len(dst)+room])
		dst = dst[:len(dst)+got]
		n -= int64(got)
		if err != nil {
			return dst, c.eofError(err, false)
		}
	}
	return dst, nil
}

// grow makes room in dst for at least k more bytes, when remaining more
// bytes of the current frame are still to come (k <= remaining). Small
// frames get exactly what they need; large ones grow with the bytes that
// actually arrive (at most eagerAlloc ahead); reassembly doubles so many
// fragments do not copy quadratically. Nothing exceeds the read limit.
func (c *Conn) grow(dst []byte, k int, remaining int64) []byte {
	if cap(dst)-len(dst) >= k {
		return dst
	}
	l := int64(len(dst))
	want := l + min(remaining, max(l, eagerAlloc))
	if d := min(2*int64(cap(dst)), c.readLimit); d > want {
		want = d
	}
	nb := make([]byte, len(dst), want)
	copy(nb, dst)
	return nb
}

// ensure makes at least n (<= smallBuf) bytes available in (*rbuf)[rr:rw].
func (c *Conn) ensure(n int) error {
	for c.rw-c.rr < n {
		if c.rbuf != nil && len(*c.rbuf)-c.rr < n {
			c.rw = copy(*c.rbuf, (*c.rbuf)[c.rr:c.rw])
			c.rr = 0
		}
		if err := c.fill(); err != nil {
			return err
		}
	}
	return nil
}

// fill appends at least one byte from the connection to the read buffer.
func (c *Conn) fill() error {
	if c.rbuf != nil {
		if c.rr == c.rw {
			c.rr, c.rw = 0, 0
		} else if c.rw == len(*c.rbuf) {
			c.rw = copy(*c.rbuf, (*c.rbuf)[c.rr:c.rw])
			c.rr = 0
		}
	}
	if c.rbuf != nil && c.rw == len(*c.rbuf) {
		// Callers only fill with room to spare; a full buffer here would
		// make a zero-length read that looks like EOF.
		return errors.New("wsclient: internal error: read buffer full")
	}
	if c.raw != nil {
		c.rdst = nil
		if err := c.raw.Read(c.rawFn); err != nil {
			return err
		}
		return c.rerr
	}
	if c.rbuf == nil {
		c.rbuf = getReadBuf()
		c.rr, c.rw = 0, 0
	}
	n, err := c.plainRead((*c.rbuf)[c.rw:])
	c.rw += n
	return err
}

// readDirect reads once from the connection into p.
func (c *Conn) readDirect(p []byte) (int, error) {
	if c.raw != nil {
		c.rdst = p
		err := c.raw.Read(c.rawFn)
		c.rdst = nil
		if err != nil {
			return 0, err
		}
		return c.rn, c.rerr
	}
	return c.plainRead(p)
}

// plainRead reads at least one byte with net.Conn.Read, keeping an error
// that came with data for the next call.
func (c *Conn) plainRead(p []byte) (int, error) {
	if err := c.pendErr; err != nil {
		return 0, err
	}
	for range 100 {
		n, err := c.nc.Read(p)
		if n > 0 {
			c.pendErr = err
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return 0, io.ErrNoProgress
}

// ---------------------------------------------------------------- writing

var errWriteAfterClose = fmt.Errorf("a close frame was sent: %w", net.ErrClosed)

// Write sends each of msgs as one message (a single final frame, masked
// with a fresh key), text or binary. All of them go out in one write to
// the connection when their frames fit in one pooled buffer (64 KiB);
// larger batches stream through that buffer. Write may be called
// concurrently with Read and with other Write and Close calls; a write
// error closes the connection.
func (c *Conn) Write(text bool, msgs ...[]byte) error {
	if len(msgs) == 0 {
		return nil
	}
	op := byte(opBinary)
	if text {
		op = opText
	}
	total := 0
	for _, m := range msgs {
		total += clientHeaderLen(len(m)) + len(m)
	}
	bp := getWriteBuf(total)
	c.wsem <- struct{}{}
	err := c.writeFrames(op, msgs, (*bp)[:0])
	<-c.wsem
	putBuf(bp)
	return err
}

// writeFrames builds the frames of msgs in buf and writes them; wsem held.
func (c *Conn) writeFrames(op byte, msgs [][]byte, buf []byte) error {
	if c.writeErr != nil {
		return c.writeErr
	}
	if c.closeSent {
		return fmt.Errorf("wsclient: write: %w", errWriteAfterClose)
	}
	for _, m := range msgs {
		if cap(buf)-len(buf) < maxClientHeader {
			if err := c.writeLocked(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		// The global source of math/rand/v2 is a ChaCha8 generator seeded
		// from the operating system's entropy, so masking keys are
		// unpredictable, as RFC 6455 section 5.3 requires.
		key := rand.Uint32()
		buf = appendClientHeader(buf, op, len(m), key)
		for len(m) > 0 {
			if len(buf) == cap(buf) {
				if err := c.writeLocked(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			k := min(cap(buf)-len(buf), len(m))
			key = maskCopy(buf[len(buf):len(buf)+k], m[:k], key)
			buf = buf[:len(buf)+k]
			m = m[k:]
		}
	}
	return c.writeLocked(buf)
}

// writeLocked writes b to the connection; wsem held. A failed write may
// have left a partial frame on the wire, so it closes the connection and
// every later write fails the same way.
func (c *Conn) writeLocked(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := c.nc.Write(b); err != nil {
		c.writeErr = fmt.Errorf("wsclient: write: %w", err)
		c.closeNow()
		return c.writeErr
	}
	return nil
}

// writeControl sends a ping or pong frame. Nothing is sent after a close
// frame.
func (c *Conn) writeControl(op byte, payload []byte) error {
	bp := getWriteBuf(0)
	c.wsem <- struct{}{}
	var err error
	switch {
	case c.writeErr != nil:
		err = c.writeErr
	case c.closeSent:
		err = fmt.Errorf("wsclient: write: %w", errWriteAfterClose)
	default:
		b := appendControl((*bp)[:0], op, payload)
		err = c.writeLocked(b)
	}
	<-c.wsem
	putBuf(bp)
	return err
}

func appendControl(b []byte, op byte, payload []byte) []byte {
	key := rand.Uint32()
	b = appendClientHeader(b, op, len(payload), key)
	n := len(b)
	b = b[:n+len(payload)]
	maskCopy(b[n:], payload, key)
	return b
}

// sendClose sends the close frame once; code 0 sends an empty payload.
// Waiting for the writer lock (a writer may be stuck on a peer that does
// not read) and the write itself end at deadline.
func (c *Conn) sendClose(code StatusCode, reason string, deadline time.Time) error {
	select {
	case c.wsem <- struct{}{}:
	default:
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case c.wsem <- struct{}{}:
		case <-t.C:
			return fmt.Errorf("no chance to send a close frame within %v: a write is blocked: %w", c.closeTimeout, errCloseTimeout)
		}
	}
	defer func() { <-c.wsem }()
	if c.closeSent {
		return nil
	}
	if c.writeErr != nil {
		return c.writeErr
	}
	c.closeSent = true
	var payload [maxControlPayload]byte
	p := payload[:0]
	if code != 0 {
		p = binary.BigEndian.AppendUint16(p, uint16(code))
		p = append(p, truncateReason(reason)...)
	}
	// The connection is closed soon after the close frame in every case, so
	// a deadline here bounds a write stuck on a peer that does not read.
	_ = c.nc.SetWriteDeadline(deadline)
	bp := getWriteBuf(0)
	defer putBuf(bp)
	return c.writeLocked(appendControl((*bp)[:0], opClose, p))
}

// ---------------------------------------------------------------- closing

// truncateReason cuts a close reason to the 123 bytes a close frame has
// room for, at a UTF-8 boundary.
func truncateReason(reason string) string {
	if len(reason) <= maxCloseReason {
		return reason
	}
	i := maxCloseReason
	for i > 0 && !utf8.RuneStart(reason[i]) {
		i--
	}
	return reason[:i]
}

var errCloseTimeout = errors.New("close handshake timed out")

// Close performs the closing handshake: it sends a close frame with code
// and reason (cut to 123 bytes at a UTF-8 boundary), waits for the peer's
// close frame, then closes the connection. The wait ends when the reading
// goroutine sees the peer's close frame or the connection ends; if no
// goroutine is reading, Close reads itself, discarding data messages. The
// whole of Close takes at most 5 seconds. It returns nil if the peer's
// close frame was received (whoever closed first). An invalid code (one not
// allowed on the wire) closes the connection at once and returns an error.
func (c *Conn) Close(code StatusCode, reason string) error {
	if !validWireCode(code) {
		c.closeNow()
		return fmt.Errorf("wsclient: close: status code %d may not be sent", code)
	}
	deadline := time.Now().Add(c.closeTimeout)
	if err := c.sendClose(code, reason, deadline); err != nil {
		c.closeNow()
		if c.peerClosed.Load() {
			return nil
		}
		return fmt.Errorf("wsclient: close: %w", err)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var waitErr error
	select {
	case <-c.readDone:
		// The reader saw the peer's close frame, or the connection ended.
		waitErr = c.readErr
	case c.rsem <- struct{}{}:
		// No goroutine is reading: read until the peer's close frame.
		if c.readErr == nil {
			_ = c.nc.SetReadDeadline(deadline)
			for {
				if _, _, err := c.readMessage(); err != nil {
					break
				}
			}
		}
		waitErr = c.readErr
		<-c.rsem
	case <-t.C:
		waitErr = fmt.Errorf("no close frame from the peer within %v: %w", c.closeTimeout, errCloseTimeout)
	}
	c.closeNow()
	if c.peerClosed.Load() {
		return nil
	}
	if errors.Is(waitErr, os.ErrDeadlineExceeded) { // Close's own read timed out
		waitErr = fmt.Errorf("no close frame from the peer within %v: %w (%w)", c.closeTimeout, errCloseTimeout, waitErr)
	} else if !errors.Is(waitErr, errCloseTimeout) {
		waitErr = fmt.Errorf("the connection ended before the peer's close frame: %w", waitErr)
	}
	return fmt.Errorf("wsclient: close: %w", waitErr)
}

// CloseNow closes the connection at once, without a closing handshake. A
// blocked Read or Write returns an error. It is idempotent: every call
// returns the result of the first close.
func (c *Conn) CloseNow() error {
	c.closeNow()
	if c.closeErr != nil {
		return fmt.Errorf("wsclient: close: %w", c.closeErr)
	}
	return nil
}

func (c *Conn) closeNow() {
	c.closeOnce.Do(func() { c.closeErr = c.nc.Close() })
}
