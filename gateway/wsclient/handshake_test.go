package wsclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func httptestSubprotocolServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"arcp.v1"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		_, _, _ = c.Read(r.Context())
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

func TestHandshakeNon101(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such agent runtime "+strings.Repeat("z", 2000), http.StatusNotFound)
	}))
	defer srv.Close()
	_, err := Dial(testCtx(t), wsURL(srv)+"/nope", Options{})
	if err == nil {
		t.Fatal("Dial succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "404 Not Found") || !strings.Contains(msg, "no such agent runtime") {
		t.Fatalf("error %q lacks the status line or body", msg)
	}
	if len(msg) > 1000 {
		t.Fatalf("error quotes %d bytes; the body should be cut at 512", len(msg))
	}
}

func TestHandshakeBadResponses(t *testing.T) {
	cases := []struct {
		name     string
		response func(accept string) string
		want     string
	}{
		{"wrong accept", func(string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acceptKey("other") + "\r\n\r\n"
		}, "Sec-WebSocket-Accept"},
		{"missing accept", func(string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		}, "Sec-WebSocket-Accept"},
		{"unexpected extension", func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
		}, "extensions"},
		{"unexpected subprotocol", func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
		}, "subprotocol"},
		{"wrong upgrade", func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + a + "\r\n\r\n"
		}, "Upgrade"},
		{"no connection upgrade", func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: keep-alive\r\nSec-WebSocket-Accept: " + a + "\r\n\r\n"
		}, "Connection"},
		{"huge head", func(a string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nX-Junk: " + strings.Repeat("j", 20000) + "\r\n\r\n"
		}, "larger than"},
		{"garbage", func(string) string { return "SSH-2.0-OpenSSH_9.6\r\n\r\n" }, "malformed HTTP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, done, err := rawDial(t, rawOpts{response: tc.response}, Options{}, func(p *rawPeer) {
				for range p.frames {
				}
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Dial: %v, want an error mentioning %q", err, tc.want)
			}
			<-done
		})
	}
}

func TestHandshakeCaseInsensitiveHeaders(t *testing.T) {
	resp := func(a string) string {
		return "HTTP/1.1 101 Switching Protocols\r\nupgrade: WebSocket\r\nconnection: keep-alive, UPGRADE\r\nsec-websocket-accept: " + a + "\r\n\r\n"
	}
	c, done, err := rawDial(t, rawOpts{response: resp}, Options{}, func(p *rawPeer) {
		_, _ = p.conn.Write(srvFrame(true, opText, []byte("ok")))
		for range p.frames {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(); err != nil || string(b) != "ok" {
		t.Fatalf("Read: %q %v", b, err)
	}
	c.CloseNow()
	<-done
}

func TestHandshakeRequest(t *testing.T) {
	for _, tr := range []string{"tcp", "pipe"} {
		t.Run(tr, func(t *testing.T) {
			reqc := make(chan *http.Request, 1)
			h := http.Header{}
			h.Set("X-Session", "abc")
			h.Add("X-Multi", "1")
			h.Add("X-Multi", "2")
			c, done, err := rawDial(t, rawOpts{transport: tr}, Options{Header: h, Subprotocols: []string{"a"}}, func(p *rawPeer) {
				reqc <- p.req
				for range p.frames {
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			r := <-reqc
			if r.Method != "GET" || r.URL.RequestURI() != "/raw?x=1" || r.Proto != "HTTP/1.1" {
				t.Errorf("request line: %s %s %s", r.Method, r.URL.RequestURI(), r.Proto)
			}
			key, _ := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key"))
			if len(key) != 16 {
				t.Errorf("key decodes to %d bytes", len(key))
			}
			for name, want := range map[string]string{
				"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
				"X-Session": "abc", "Sec-WebSocket-Protocol": "a",
			} {
				if got := r.Header.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if got := r.Header.Values("X-Multi"); len(got) != 2 {
				t.Errorf("X-Multi: %q", got)
			}
			if r.Header.Get("Sec-WebSocket-Extensions") != "" || r.Header.Get("Authorization") != "" {
				t.Errorf("unexpected headers: %v", r.Header)
			}
			if tr == "pipe" && c.raw != nil {
				t.Error("net.Pipe connection uses raw reads")
			}
			if tr == "tcp" && c.raw == nil {
				t.Error("TCP connection does not use raw reads")
			}
			c.CloseNow()
			<-done
		})
	}
}

func TestHandshakeBasicAuthAndHost(t *testing.T) {
	addr, reqc := capturedRequest(t)
	url := "ws://agent:s3cret@" + addr
	c, err := Dial(testCtx(t), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	r := <-reqc
	if u, p, ok := r.BasicAuth(); !ok || u != "agent" || p != "s3cret" {
		t.Errorf("basic auth: %q %q %v", u, p, ok)
	}
	if r.Host != addr {
		t.Errorf("Host %q", r.Host)
	}
	if r.URL.Path != "/" {
		t.Errorf("path %q, want /", r.URL.Path)
	}
}

func TestDialRejectsBadInput(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		url  string
		o    Options
		want string
	}{
		{"ftp://x/", Options{}, "scheme"},
		{"ws:///path", Options{}, "no host"},
		{"ws://a b/", Options{}, "invalid URL"},
		{"ws://x/", Options{Header: http.Header{"Sec-WebSocket-Key": {"k"}}}, "must not set"},
		{"ws://x/", Options{Header: http.Header{"connection": {"close"}}}, "must not set"},
		{"ws://x/", Options{Header: http.Header{"X-A": {"1\r\nX-Evil: 1"}}}, "CR, LF"},
		{"ws://x/", Options{Header: http.Header{"Bad Name": {"1"}}}, "invalid header name"},
		{"ws://x/", Options{Subprotocols: []string{"a,b"}}, "invalid subprotocol"},
	} {
		_, err := Dial(ctx, tc.url, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dial(%q, %+v): %v, want %q", tc.url, tc.o, err, tc.want)
		}
	}
	// The password never appears in errors.
	_, err := Dial(ctx, "ws://u:hunter2@127.0.0.1:1/", Options{})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Dial error %v leaks the password (or no error)", err)
	}
}

func TestHandshakeDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() { // accepts, then never answers
		nc, err := ln.Accept()
		if err == nil {
			held <- nc
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Dial(ctx, "ws://"+ln.Addr().String(), Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Dial returned after %v", d)
	}
	select {
	case nc := <-held:
		nc.Close()
	default:
	}
}

func TestHandshakeCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := Dial(ctx, "ws://"+ln.Addr().String(), Options{})
		errc <- err
	}()
	nc := <-accepted
	defer nc.Close()
	// Wait for the request to arrive, so the cancel hits the handshake.
	buf := make([]byte, 4096)
	for !bytes.Contains(buf, []byte("\r\n\r\n")) {
		n, err := nc.Read(buf[:cap(buf)])
		if err != nil {
			t.Fatal(err)
		}
		buf = buf[:n]
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Dial: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Dial ignores cancellation")
	}
}

func TestBytesAfterResponseHeadKept(t *testing.T) {
	for _, tr := range []string{"tcp", "pipe"} {
		t.Run(tr, func(t *testing.T) {
			var after []byte
			after = append(after, srvFrame(true, opText, []byte("first"))...)
			after = append(after, srvFrame(true, opPing, []byte("p"))...)
			after = append(after, srvFrame(true, opBinary, pattern(3000, 1))...)
			after = append(after, srvFrame(false, opText, []byte("par"))[:3]...) // a partial frame
			c, done, err := rawDial(t, rawOpts{transport: tr, afterHead: after}, Options{}, func(p *rawPeer) {
				_, _ = p.conn.Write(srvFrame(false, opText, []byte("par"))[3:])
				_, _ = p.conn.Write(srvFrame(true, opContinuation, []byte("tial")))
				if f, _ := p.next(t); f.op != opPong || string(f.payload) != "p" {
					t.Errorf("server got %+v, want pong p", f)
				}
				for range p.frames {
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"first", string(pattern(3000, 1)), "partial"} {
				_, got, err := c.Read()
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Fatalf("got %d bytes %.20q, want %.20q", len(got), got, want)
				}
			}
			c.CloseNow()
			<-done
		})
	}
}

func TestHandshakeHeaderOverrides(t *testing.T) {
	addr, reqc := capturedRequest(t)
	h := http.Header{"host": {"runtime.internal"}, "authorization": {"Bearer tok"}}
	o := Options{Header: h}
	c, err := Dial(testCtx(t), "ws://user:pw@"+addr+"/x", o)
	if err != nil {
		t.Fatal(err)
	}
	r := <-reqc
	if r.Host != "runtime.internal" {
		t.Errorf("Host %q", r.Host)
	}
	if got := r.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer tok" {
		t.Errorf("Authorization %q, want only the header's", got)
	}
	c.CloseNow()
}

// capturedRequest serves one handshake on a loopback listener and hands
// over the client's request; the server reads frames until the client goes.
// The listener closes, and the server goroutine is awaited, at the end of
// the test.
func capturedRequest(t *testing.T) (addr string, reqc <-chan *http.Request) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reqs, served := make(chan *http.Request, 1), make(chan struct{})
	go func() {
		defer close(served)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		p, err := rawHandshake(nc, rawOpts{})
		if err != nil {
			return
		}
		reqs <- p.req
		for range p.frames {
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-served
	})
	return ln.Addr().String(), reqs
}

// TestContextOnlyBoundsDial: cancelling Dial's context afterwards does not
// touch the connection.
func TestContextOnlyBoundsDial(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err := Dial(ctx, wsURL(srv), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	cancel()
	if err := c.Write(true, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(); err != nil || string(b) != "still here" {
		t.Fatalf("Read: %q %v", b, err)
	}
}
