package wsclient

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// chunkConn is a net.Conn whose Read hands out data in chunks and then
// io.EOF; writes are discarded. It lets the fuzzer drive the frame parser
// without goroutines.
type chunkConn struct {
	data   []byte
	chunks []byte // sizes, cycled; 0 entries become 1
	i      int
	closed bool
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.chunks) > 0 {
		n = max(1, int(c.chunks[c.i%len(c.chunks)]))
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) Write(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}
func (c *chunkConn) Close() error                     { c.closed = true; return nil }
func (c *chunkConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *chunkConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *chunkConn) SetDeadline(time.Time) error      { return nil }
func (c *chunkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *chunkConn) SetWriteDeadline(time.Time) error { return nil }

const fuzzReadLimit = 70000

// FuzzFrames feeds arbitrary bytes to the frame parser (split into reads
// of fuzzed sizes, some arriving with the handshake as leftover bytes). It
// must never panic or hang, never return a message above the read limit,
// and once it fails keep returning the same error.
func FuzzFrames(f *testing.F) {
	seeds := [][]byte{
		srvFrame(true, opText, []byte("hello")),
		srvFrame(true, opBinary, pattern(300, 1)),
		// Large declared lengths with few bytes present (seeds stay small:
		// the fuzzer minimises interesting inputs byte by byte).
		srvFrame(true, opBinary, pattern(70000, 1))[:40],
		srvFrame(true, opBinary, pattern(5000, 1))[:40],
		append(srvFrame(false, opText, []byte("a")), srvFrame(true, opContinuation, []byte("b"))...),
		append(srvFrame(false, opText, []byte("a")), append(srvFrame(true, opPing, nil), srvFrame(true, opContinuation, pattern(5000, 2))[:30]...)...),
		append(srvFrame(false, opText, pattern(300, 3)), srvFrame(true, opContinuation, pattern(400, 2))...),
		srvFrame(true, opClose, closePayload(1000, "bye")),
		srvFrame(true, opClose, []byte{3}),
		{0xC1, 0x00},
		{0x81, 0x85, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0x11, 0x71},
		{0x89, 0x7E, 0, 200},
	}
	for _, s := range seeds {
		f.Add(s, []byte{}, uint8(0))
		f.Add(s, []byte{1}, uint8(3))
		f.Add(s, []byte{3, 200, 7}, uint8(200))
	}
	f.Fuzz(func(t *testing.T, data, chunks []byte, leftover uint8) {
		lo := min(int(leftover), len(data))
		nc := &chunkConn{data: bytes.Clone(data[lo:]), chunks: chunks}
		c := newConn(nc, data[:lo], "", fuzzReadLimit)
		var first error
		for range len(data) + 2 { // each message or control frame takes at least 2 bytes
			_, msg, err := c.Read()
			if err != nil {
				first = err
				break
			}
			if len(msg) > fuzzReadLimit {
				t.Fatalf("message of %d bytes, limit %d", len(msg), fuzzReadLimit)
			}
		}
		if first == nil {
			t.Fatal("Read never failed on a finite stream")
		}
		if _, _, err := c.Read(); err != first {
			t.Fatalf("second error %v differs from %v", err, first)
		}
		if !nc.closed {
			t.Fatal("connection not closed after the terminal error")
		}
		if c.rbuf != nil || c.frag != nil {
			t.Fatal("buffers kept after the terminal error")
		}
		if errors.Is(first, ErrMessageTooBig) && errors.Is(first, ErrProtocol) {
			t.Fatal("error is both too big and a protocol error")
		}
	})
}
