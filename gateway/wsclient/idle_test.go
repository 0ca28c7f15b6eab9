package wsclient

import (
	"testing"
	"time"
)

type parkEvent struct {
	held int // bytes of pooled read buffer pinned when parking
	read int // messages the reader had returned by then
}

// startParkReporter runs a reader goroutine on c that counts messages and
// reports, each time it is about to park in the poller, what it holds.
func startParkReporter(c *Conn) (<-chan parkEvent, <-chan []byte) {
	events := make(chan parkEvent, 64)
	msgs := make(chan []byte, 16)
	read := 0 // owned by the reader goroutine, which also runs the hook
	c.parkHook = func(held int) {
		select {
		case events <- parkEvent{held: held, read: read}:
		default:
		}
	}
	go func() {
		defer close(msgs)
		for {
			_, b, err := c.Read()
			if err != nil {
				return
			}
			read++
			msgs <- b
		}
	}()
	return events, msgs
}

// waitPark returns the first park event of the reader after it returned n
// messages.
func waitPark(t *testing.T, events <-chan parkEvent, n int) parkEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-events:
			if e.read >= n {
				return e
			}
		case <-timeout:
			t.Fatalf("the reader did not park after message %d", n)
		}
	}
}

// TestIdleHoldsNoReadBuffer is the point of the package: a reader parked
// waiting for the next message pins no pooled buffer.
func TestIdleHoldsNoReadBuffer(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	c := mustDial(t, wsURL(srv), Options{})
	if c.raw == nil {
		t.Fatal("TCP connection does not use raw reads")
	}
	events, msgs := startParkReporter(c)
	for i, size := range []int{500, 2000, 100000} {
		if err := c.Write(true, pattern(size, 1)); err != nil {
			t.Fatal(err)
		}
		if b := <-msgs; len(b) != size {
			t.Fatalf("echo of %d bytes came back as %d", size, len(b))
		}
		if e := waitPark(t, events, i+1); e.held != 0 {
			t.Fatalf("after message %d the parked reader holds %d bytes of read buffer", i+1, e.held)
		}
	}
}

// TestIdleHoldsBufferWithPartialFrame checks the other side: unconsumed
// bytes (half a header) keep the buffer, and the message completes.
func TestIdleHoldsBufferWithPartialFrame(t *testing.T) {
	frame := srvFrame(true, opText, []byte("hello, world"))
	proceed := make(chan struct{})
	c, done, err := rawDial(t, rawOpts{}, Options{}, func(p *rawPeer) {
		_, _ = p.conn.Write(frame[:1]) // half a header: unconsumed
		<-proceed
		_, _ = p.conn.Write(frame[1:])
		for range p.frames {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	events, msgs := startParkReporter(c)
	for {
		// The first parks may come before the byte arrives.
		e := waitPark(t, events, 0)
		if e.held != 0 {
			if e.held != smallBuf {
				t.Fatalf("holds %d bytes, want one %d-byte buffer", e.held, smallBuf)
			}
			break
		}
	}
	close(proceed)
	if b := <-msgs; string(b) != "hello, world" {
		t.Fatalf("got %q", b)
	}
	if e := waitPark(t, events, 1); e.held != 0 {
		t.Fatalf("after the message the reader holds %d bytes", e.held)
	}
	c.CloseNow()
	<-done
}
