package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// recordingConn keeps a copy of every byte the client writes.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// sent returns a copy of what the client has written so far.
func (c *recordingConn) sent() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// clientFrames parses what a client wrote to the gateway: the connection
// preface, then HTTP/2 frames. It returns the PINGs the client sent (acks
// of the gateway's PINGs left out) and the initial window it advertised in
// its SETTINGS (0 when it advertised none).
func clientFrames(t *testing.T, raw []byte) (pings int, window uint32) {
	t.Helper()
	if !bytes.HasPrefix(raw, []byte(http2.ClientPreface)) {
		t.Fatalf("the client's bytes do not start with the HTTP/2 preface: %.40q", raw)
	}
	fr := http2.NewFramer(nil, bytes.NewReader(raw[len(http2.ClientPreface):]))
	fr.SetMaxReadFrameSize(1 << 24)
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return pings, window // the last frame may be cut by the copy
		}
		if err != nil {
			t.Fatalf("client frame: %v", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				pings++
			}
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok && !f.IsAck() {
				window = v
			}
		}
	}
}

// TestWindowBytes: by default the client advertises a fixed 1 MiB window
// and sends no bandwidth-probe PING over twenty calls made one at a time;
// WithWindowBytes(-1) restores grpc-go's probe, which pings after answers.
func TestWindowBytes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []client.Option
		window    uint32
		wantPings bool
	}{
		{"default", nil, client.DefaultWindowBytes, false},
		{"small", []client.Option{client.WithWindowBytes(1000)}, 64 << 10, false},
		{"dynamic", []client.Option{client.WithWindowBytes(-1)}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 20*time.Second)
			var rec atomic.Pointer[recordingConn]
			dialer := func(ctx context.Context, addr string) (net.Conn, error) {
				conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					return nil, err
				}
				r := &recordingConn{Conn: conn}
				if !rec.CompareAndSwap(nil, r) {
					conn.Close()
					return nil, errors.New("the test expects one connection")
				}
				return r, nil
			}
			opts := append([]client.Option{client.WithDialOptions(grpc.WithContextDialer(dialer))}, tc.opts...)
			c, err := client.New(gw.Addr, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sess, err := c.OpenSession(ctx, &gatewayv1.OpenSessionRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				if _, err := sess.Status(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := sess.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			pings, window := clientFrames(t, rec.Load().sent())
			if window != tc.window {
				t.Errorf("advertised initial window %d, want %d", window, tc.window)
			}
			if got := pings > 0; got != tc.wantPings {
				t.Errorf("%d PINGs over 20 calls one at a time; want some: %v", pings, tc.wantPings)
			}
		})
	}
}
