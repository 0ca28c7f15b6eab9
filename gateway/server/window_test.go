package server

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sessiongate/sessiongate/client"
)

// TestWindowBytes: with a fixed flow-control window (the default) the
// gateway's server advertises it and sends no PING per call; with the
// dynamic window (WindowBytes < 0) grpc-go's bandwidth estimator pings after
// the calls' data, which shows that the probe below sees pings when they
// come. A raw HTTP/2 client makes health checks and counts the frames.
func TestWindowBytes(t *testing.T) {
	for _, c := range []struct {
		name      string
		window    int32
		advertise uint32 // SETTINGS_INITIAL_WINDOW_SIZE; 0: not sent
		pings     bool
	}{
		{"default", 0, DefaultWindowBytes, false},
		{"dynamic", -1, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{config: func(cfg *Config) { cfg.WindowBytes = c.window }})
			window, pings := rawHealthChecks(t, h.addr, 3)
			if window != c.advertise {
				t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE = %d, want %d", window, c.advertise)
			}
			if got := pings > 0; got != c.pings {
				t.Errorf("server sent %d PINGs over 3 calls; want pings: %v", pings, c.pings)
			}
		})
	}
}

// TestClientWindowMatches: the Go client grants the gateway the window the
// gateway grants its callers by default; the client cannot import this
// package for the constant, so this pins the two together.
func TestClientWindowMatches(t *testing.T) {
	if client.DefaultWindowBytes != DefaultWindowBytes {
		t.Fatalf("client.DefaultWindowBytes = %d, server DefaultWindowBytes = %d", client.DefaultWindowBytes, DefaultWindowBytes)
	}
}

func TestWindowBytesTooSmall(t *testing.T) {
	cfg := Config{Runtimes: []Runtime{{Name: "default", URL: "ws://127.0.0.1:1"}}, WindowBytes: 1000}
	if err := cfg.validate(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("window bytes 1000")) {
		t.Fatalf("validate = %v, want the window named", err)
	}
}

// rawHealthChecks makes n grpc.health.v1.Health/Check calls, one at a time,
// over one raw HTTP/2 connection, then a PING of its own, and returns the
// server's initial window setting and the PINGs it sent before answering
// that one.
func rawHealthChecks(t *testing.T, addr string, n int) (window uint32, pings int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	// read handles frames until done says stop.
	read := func(done func(http2.Frame) bool) {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("reading frames: %v", err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if f.IsAck() {
					continue
				}
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					window = v
				}
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					pings++
					if err := fr.WritePing(true, f.Data); err != nil {
						t.Fatal(err)
					}
				}
			case *http2.GoAwayFrame:
				t.Fatalf("GOAWAY %v: %s", f.ErrCode, f.DebugData())
			}
			if done(f) {
				return
			}
		}
	}
	for i := range n {
		stream := uint32(2*i + 1)
		hdr.Reset()
		for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			if err := enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		// An empty HealthCheckRequest: the 5-byte gRPC message prefix.
		if err := fr.WriteData(stream, true, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
		read(func(f http2.Frame) bool {
			h, ok := f.(*http2.HeadersFrame)
			return ok && h.StreamID == stream && h.StreamEnded()
		})
	}
	// Our own PING: the server answers it after everything it queued while
	// reading the calls, its own pings included.
	mine := [8]byte{'w', 'i', 'n', 'd', 'o', 'w', 0, 1}
	if err := fr.WritePing(false, mine); err != nil {
		t.Fatal(err)
	}
	read(func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == mine
	})
	return window, pings
}
