package wsclient

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// testCtx returns a context that ends with the test (and after a generous
// bound, so a hang fails instead of stalling the run).
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ------------------------------------------------------ coder/websocket server

// coderServer serves WebSockets with coder/websocket's Accept on 127.0.0.1
// and runs handler for each connection.
func coderServer(t testing.TB, secure bool, handler func(ctx context.Context, c *websocket.Conn)) *httptest.Server {
	t.Helper()
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		closed bool
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if closed {
			mu.Unlock()
			return
		}
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		handler(r.Context(), c)
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // e.g. the refused-certificate test
	if secure {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		mu.Lock()
		closed = true
		mu.Unlock()
		srv.CloseClientConnections()
		srv.Close()
		wg.Wait()
	})
	return srv
}

// echoHandler echoes every message until the connection ends.
func echoHandler(ctx context.Context, c *websocket.Conn) {
	c.SetReadLimit(-1)
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		if err := c.Write(ctx, typ, b); err != nil {
			return
		}
	}
}

func wsURL(srv *httptest.Server) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func mustDial(t testing.TB, url string, o Options) *Conn {
	t.Helper()
	c, err := Dial(testCtx(t), url, o)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// ------------------------------------------------------ hand-rolled server

// rawPeer is the server side of a connection whose frames a test writes
// byte by byte. Client frames are parsed by a goroutine into frames.
type rawPeer struct {
	conn   net.Conn
	frames chan clientFrame // closed when the client's stream ends
	req    *http.Request
}

type clientFrame struct {
	fin     bool
	op      byte
	payload []byte
	err     error // a malformed client frame (test failure)
}

// rawOpts shapes the hand-rolled server's handshake.
type rawOpts struct {
	transport string // "tcp" (default) or "pipe"
	// response, if set, replaces the handshake response head (it gets the
	// correct accept value).
	response func(accept string) string
	// afterHead is written in the same write as the response head.
	afterHead []byte
	// noRead leaves the client's frames unread (frames stays empty).
	noRead bool
}

// rawDial starts a hand-rolled server for one connection, dials it and runs
// serve (in its own goroutine) with the server's side. It returns the
// client and a channel closed when serve has returned.
func rawDial(t testing.TB, ro rawOpts, o Options, serve func(p *rawPeer)) (*Conn, <-chan struct{}, error) {
	t.Helper()
	var url string
	accepted := make(chan net.Conn, 1)
	switch ro.transport {
	case "", "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- nc
		}()
		url = "ws://" + ln.Addr().String() + "/raw?x=1"
	case "pipe":
		cc, sc := net.Pipe()
		accepted <- sc
		o.NetDial = func(ctx context.Context, network, addr string) (net.Conn, error) { return cc, nil }
		url = "ws://pipe.test/raw?x=1"
	default:
		t.Fatalf("unknown transport %q", ro.transport)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, ok := <-accepted
		if !ok {
			return
		}
		defer nc.Close()
		p, err := rawHandshake(nc, ro)
		if err != nil {
			return
		}
		serve(p)
	}()
	c, err := Dial(testCtx(t), url, o)
	if err == nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, done, err
}

func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func rawHandshake(nc net.Conn, ro rawOpts) (*rawPeer, error) {
	br := bufio.NewReader(nc)
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	accept := acceptKey(req.Header.Get("Sec-WebSocket-Key"))
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n"
	if ro.response != nil {
		head = ro.response(accept)
	}
	if _, err := nc.Write(append([]byte(head), ro.afterHead...)); err != nil {
		return nil, err
	}
	p := &rawPeer{conn: nc, frames: make(chan clientFrame, 1024), req: req}
	if ro.noRead {
		close(p.frames)
		return p, nil
	}
	go p.readClient(br)
	return p, nil
}

// readClient parses the client's frames, which must be masked.
func (p *rawPeer) readClient(br *bufio.Reader) {
	defer close(p.frames)
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		f := clientFrame{fin: h[0]&0x80 != 0, op: h[0] & 0x0f}
		if h[0]&0x70 != 0 {
			f.err = errors.New("client set reserved bits")
		}
		if h[1]&0x80 == 0 {
			f.err = errors.New("client frame not masked")
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		var key [4]byte
		if h[1]&0x80 != 0 {
			if _, err := io.ReadFull(br, key[:]); err != nil {
				return
			}
		}
		if n > 64<<20 {
			f.err = fmt.Errorf("client frame of %d bytes", n)
			p.frames <- f
			return
		}
		f.payload = make([]byte, n)
		if _, err := io.ReadFull(br, f.payload); err != nil {
			return
		}
		for i := range f.payload {
			f.payload[i] ^= key[i%4]
		}
		p.frames <- f
	}
}

// next returns the client's next frame, failing the test on a timeout.
func (p *rawPeer) next(t testing.TB) (clientFrame, bool) {
	select {
	case f, ok := <-p.frames:
		if f.err != nil {
			t.Errorf("bad client frame: %v", f.err)
		}
		return f, ok
	case <-time.After(20 * time.Second):
		t.Errorf("no client frame within 20s")
		return clientFrame{}, false
	}
}

// nextClose skips to the client's close frame and returns its code and
// reason (code 0 for an empty close frame, -1 if none came).
func (p *rawPeer) nextClose(t testing.TB) (StatusCode, string) {
	for {
		f, ok := p.next(t)
		if !ok {
			return -1, ""
		}
		if f.op != opClose {
			continue
		}
		if len(f.payload) < 2 {
			return 0, ""
		}
		return StatusCode(binary.BigEndian.Uint16(f.payload)), string(f.payload[2:])
	}
}

// srvFrame encodes an unmasked server frame.
func srvFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var b []byte
	n := len(payload)
	switch {
	case n <= 125:
		b = []byte{b0, byte(n)}
	case n <= 0xffff:
		b = []byte{b0, 126, byte(n >> 8), byte(n)}
	default:
		b = []byte{b0, 127}
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

func closePayload(code StatusCode, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// pattern returns n bytes of a recognisable pattern.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed + byte(i>>8)
	}
	return b
}
