package wsclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestEchoSizes(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	c := mustDial(t, wsURL(srv), Options{})
	for _, size := range []int{0, 1, 125, 126, 127, 4095, 4096, 4097, 65535, 65536, 1 << 20} {
		for _, text := range []bool{true, false} {
			msg := pattern(size, byte(size))
			if err := c.Write(text, msg); err != nil {
				t.Fatalf("Write(%d): %v", size, err)
			}
			gotText, got, err := c.Read()
			if err != nil {
				t.Fatalf("Read(%d): %v", size, err)
			}
			if gotText != text || !bytes.Equal(got, msg) {
				t.Fatalf("size %d text %v: got text=%v len=%d, want the message back", size, text, gotText, len(got))
			}
		}
	}
	if err := c.Close(StatusNormalClosure, ""); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestWriteManyMessagesInOneCall(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	c := mustDial(t, wsURL(srv), Options{})
	var msgs [][]byte
	for i := range 300 { // 300 small ones and a few that cross the pooled buffer sizes
		n := 200 + i*7
		if i%100 == 99 {
			n = 70000
		}
		msgs = append(msgs, pattern(n, byte(i)))
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Write(true, msgs...) }()
	for i, want := range msgs {
		text, got, err := c.Read()
		if err != nil {
			t.Fatalf("Read %d: %v", i, err)
		}
		if !text || !bytes.Equal(got, want) {
			t.Fatalf("message %d: got %d bytes, want %d", i, len(got), len(want))
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := c.Write(false); err != nil {
		t.Fatalf("Write of nothing: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	c := mustDial(t, wsURL(srv), Options{})
	const writers, each = 8, 50
	errc := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				msg := fmt.Appendf(nil, `{"w":%d,"i":%d,"pad":%q}`, w, i, strings.Repeat("x", (w*each+i)%700))
				if err := c.Write(true, msg); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	next := make([]int, writers)
	for range writers * each {
		_, got, err := c.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		var w, i int
		if _, err := fmt.Sscanf(string(got), `{"w":%d,"i":%d`, &w, &i); err != nil {
			t.Fatalf("garbled message %q: %v", got, err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: got message %d, want %d", w, i, next[w])
		}
		next[w]++
	}
	for range writers {
		if err := <-errc; err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
}

func TestServerPingAnswered(t *testing.T) {
	pinged := make(chan error, 1)
	srv := coderServer(t, false, func(ctx context.Context, c *websocket.Conn) {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			for range 3 {
				if err := c.Ping(ctx); err != nil {
					pinged <- err
					return
				}
			}
			pinged <- c.Write(ctx, websocket.MessageText, []byte("after pings"))
		}()
		echoHandler(ctx, c)
	})
	c := mustDial(t, wsURL(srv), Options{})
	_, got, err := c.Read() // answers the pings while waiting
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if string(got) != "after pings" {
		t.Fatalf("got %q", got)
	}
	if err := <-pinged; err != nil {
		t.Fatalf("server Ping: %v", err)
	}
}

func TestServerInitiatedClose(t *testing.T) {
	closed := make(chan error, 1)
	srv := coderServer(t, false, func(ctx context.Context, c *websocket.Conn) {
		closed <- c.Close(websocket.StatusGoingAway, "server restarting")
	})
	c := mustDial(t, wsURL(srv), Options{})
	_, _, err := c.Read()
	var ce *CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("Read: %v, want a *CloseError", err)
	}
	if ce.Code != StatusGoingAway || ce.Reason != "server restarting" {
		t.Fatalf("got %+v", ce)
	}
	if CloseStatus(err) != StatusGoingAway {
		t.Fatalf("CloseStatus = %v", CloseStatus(err))
	}
	if _, _, err2 := c.Read(); err2 != err {
		t.Fatalf("second Read: %v, want the same error", err2)
	}
	if err := c.Write(true, []byte("late")); err == nil {
		t.Fatal("Write after the close handshake succeeded")
	}
	if err := <-closed; err != nil {
		t.Fatalf("server Close: %v (our close frame did not come back?)", err)
	}
	if err := c.Close(StatusNormalClosure, ""); err != nil {
		t.Fatalf("Close after the peer's close: %v", err)
	}
}

// serverSeesClose returns a handler that reports the close status and
// reason the client sends.
func serverSeesClose(got chan<- *websocket.CloseError) func(ctx context.Context, c *websocket.Conn) {
	return func(ctx context.Context, c *websocket.Conn) {
		c.SetReadLimit(-1)
		for {
			_, _, err := c.Read(ctx)
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					got <- &ce
				} else {
					got <- nil
				}
				return
			}
		}
	}
}

func TestClientCloseWithoutReader(t *testing.T) {
	got := make(chan *websocket.CloseError, 1)
	srv := coderServer(t, false, serverSeesClose(got))
	c := mustDial(t, wsURL(srv), Options{})
	if err := c.Write(true, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(StatusGoingAway, "client done"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ce := <-got
	if ce == nil || ce.Code != websocket.StatusGoingAway || ce.Reason != "client done" {
		t.Fatalf("server saw %+v", ce)
	}
	if _, _, err := c.Read(); CloseStatus(err) != StatusGoingAway {
		t.Fatalf("Read after Close: %v, want the echoed close", err)
	}
	if err := c.CloseNow(); err != nil {
		t.Fatalf("CloseNow after Close: %v", err)
	}
}

func TestClientCloseWithReader(t *testing.T) {
	got := make(chan *websocket.CloseError, 1)
	srv := coderServer(t, false, func(ctx context.Context, c *websocket.Conn) {
		// Send some data first: the client's reader takes it while Close
		// is under way.
		_ = c.Write(ctx, websocket.MessageText, []byte("one"))
		serverSeesClose(got)(ctx, c)
	})
	c := mustDial(t, wsURL(srv), Options{})
	readErr := make(chan error, 1)
	firstMsg := make(chan struct{})
	go func() {
		for {
			_, b, err := c.Read()
			if err != nil {
				readErr <- err
				return
			}
			if string(b) == "one" {
				close(firstMsg)
			}
		}
	}()
	<-firstMsg
	start := time.Now()
	if err := c.Close(StatusNormalClosure, "bye"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if err := <-readErr; CloseStatus(err) != StatusNormalClosure {
		t.Fatalf("reader: %v, want the echoed 1000", err)
	}
	if ce := <-got; ce == nil || ce.Code != websocket.StatusNormalClosure || ce.Reason != "bye" {
		t.Fatalf("server saw %+v", ce)
	}
}

func TestCloseNowUnblocksReadAndIsIdempotent(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	c := mustDial(t, wsURL(srv), Options{})
	readErr := make(chan error, 1)
	parked := make(chan struct{})
	var once bool
	c.parkHook = func(int) {
		if !once {
			once = true
			close(parked)
		}
	}
	go func() {
		_, _, err := c.Read()
		readErr <- err
	}()
	<-parked
	if err := c.CloseNow(); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseNow(); err != nil {
		t.Fatalf("second CloseNow: %v", err)
	}
	select {
	case err := <-readErr:
		if err == nil || CloseStatus(err) != -1 {
			t.Fatalf("Read: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked after CloseNow")
	}
	if err := c.Write(true, []byte("x")); err == nil {
		t.Fatal("Write after CloseNow succeeded")
	}
}

func TestReadLimitExceeded(t *testing.T) {
	got := make(chan *websocket.CloseError, 1)
	srv := coderServer(t, false, func(ctx context.Context, c *websocket.Conn) {
		// Small enough to sit in the socket buffers at once, so the
		// server is reading when the client's close comes.
		if err := c.Write(ctx, websocket.MessageBinary, make([]byte, 3000)); err != nil {
			got <- nil
			return
		}
		serverSeesClose(got)(ctx, c)
	})
	c := mustDial(t, wsURL(srv), Options{ReadLimit: 1000})
	_, _, err := c.Read()
	if !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("Read: %v, want ErrMessageTooBig", err)
	}
	if _, _, err2 := c.Read(); err2 != err {
		t.Fatalf("second Read: %v", err2)
	}
	if ce := <-got; ce == nil || ce.Code != websocket.StatusMessageTooBig {
		t.Fatalf("server saw %+v, want 1009", ce)
	}
}

func TestReadLimitAcrossFragments(t *testing.T) {
	srv := coderServer(t, false, func(ctx context.Context, c *websocket.Conn) {
		w, err := c.Writer(ctx, websocket.MessageText)
		if err != nil {
			return
		}
		for range 10 {
			_, _ = w.Write(make([]byte, 300)) // each Write is a frame
		}
		_ = w.Close()
		_, _, _ = c.Read(ctx)
	})
	c := mustDial(t, wsURL(srv), Options{ReadLimit: 2000})
	if _, _, err := c.Read(); !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("Read: %v, want ErrMessageTooBig", err)
	}
}

func TestFragmentedFromCoder(t *testing.T) {
	srv := coderServer(t, false, func(ctx context.Context, c *websocket.Conn) {
		w, err := c.Writer(ctx, websocket.MessageBinary)
		if err != nil {
			return
		}
		for i := range 20 {
			_, _ = w.Write(pattern(1000+i, byte(i)))
		}
		_ = w.Close()
		_, _, _ = c.Read(ctx)
	})
	c := mustDial(t, wsURL(srv), Options{})
	text, got, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 20 {
		want = append(want, pattern(1000+i, byte(i))...)
	}
	if text || !bytes.Equal(got, want) {
		t.Fatalf("got text=%v %d bytes, want %d", text, len(got), len(want))
	}
}

func TestWSS(t *testing.T) {
	srv := coderServer(t, true, echoHandler)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	c := mustDial(t, url, Options{TLSConfig: &tls.Config{RootCAs: pool}})
	if c.raw != nil {
		t.Fatal("TLS connection uses raw reads")
	}
	for _, n := range []int{10, 5000, 200000} {
		msg := pattern(n, 3)
		if err := c.Write(false, msg); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("%d bytes: echo differs", n)
		}
	}
	if err := c.Close(StatusNormalClosure, ""); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// https:// is an alias; without the pool the certificate is refused.
	if _, err := Dial(testCtx(t), srv.URL, Options{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Dial without the test CA: %v, want a certificate error", err)
	}
}

func TestSubprotocol(t *testing.T) {
	srv := httptestSubprotocolServer(t)
	c := mustDial(t, wsURL(srv), Options{Subprotocols: []string{"arcp.v2", "arcp.v1"}})
	if got := c.Subprotocol(); got != "arcp.v1" {
		t.Fatalf("Subprotocol() = %q", got)
	}
	c2 := mustDial(t, wsURL(srv), Options{})
	if got := c2.Subprotocol(); got != "" {
		t.Fatalf("Subprotocol() without offering = %q", got)
	}
}
