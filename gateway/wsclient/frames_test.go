package wsclient

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"
)

var transports = []string{"tcp", "pipe"}

func TestProtocolErrors(t *testing.T) {
	cases := []struct {
		name  string
		bytes []byte
		code  StatusCode
	}{
		{"rsv1", []byte{0xC1, 0x00}, StatusProtocolError},
		{"rsv3", []byte{0x92, 0x00}, StatusProtocolError},
		{"opcode 3", []byte{0x83, 0x00}, StatusProtocolError},
		{"opcode 0xB", []byte{0x8B, 0x00}, StatusProtocolError},
		{"masked", []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}, StatusProtocolError},
		{"control too long", append([]byte{0x89, 0x7E, 0x00, 0x7E}, make([]byte, 126)...), StatusProtocolError},
		{"control 64-bit length", []byte{0x8A, 0x7F, 0, 0, 0, 0, 0, 0, 0, 1, 0}, StatusProtocolError},
		{"fragmented ping", []byte{0x09, 0x00}, StatusProtocolError},
		{"fragmented close", []byte{0x08, 0x02, 0x03, 0xE8}, StatusProtocolError},
		{"continuation without start", []byte{0x80, 0x01, 'x'}, StatusProtocolError},
		{"data inside fragmented", []byte{0x01, 0x01, 'a', 0x81, 0x01, 'b'}, StatusProtocolError},
		{"length top bit", []byte{0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0}, StatusProtocolError},
		{"close payload 1", []byte{0x88, 0x01, 0x03}, StatusProtocolError},
		{"close code 999", []byte{0x88, 0x02, 0x03, 0xE7}, StatusProtocolError},
		{"close code 1004", []byte{0x88, 0x02, 0x03, 0xEC}, StatusProtocolError},
		{"close code 1005", []byte{0x88, 0x02, 0x03, 0xED}, StatusProtocolError},
		{"close code 1006", []byte{0x88, 0x02, 0x03, 0xEE}, StatusProtocolError},
		{"close code 1015", []byte{0x88, 0x02, 0x03, 0xF7}, StatusProtocolError},
		{"close code 2999", []byte{0x88, 0x02, 0x0B, 0xB7}, StatusProtocolError},
		{"close code 5000", []byte{0x88, 0x02, 0x13, 0x88}, StatusProtocolError},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				codec := make(chan StatusCode, 1)
				c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
					// A valid message first: the error must not be sticky
					// from the start.
					_, _ = p.conn.Write(append(srvFrame(true, opText, []byte("ok")), tc.bytes...))
					code, _ := p.nextClose(t)
					codec <- code
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, b, err := c.Read(); err != nil || string(b) != "ok" {
					t.Fatalf("first Read: %q %v", b, err)
				}
				_, _, err = c.Read()
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("Read: %v, want ErrProtocol", err)
				}
				if CloseStatus(err) != -1 {
					t.Fatalf("CloseStatus(%v) = %d", err, CloseStatus(err))
				}
				if _, _, err2 := c.Read(); err2 != err {
					t.Fatalf("second Read: %v, want the same error", err2)
				}
				if got := <-codec; got != tc.code {
					t.Fatalf("server got close %d, want %d", got, tc.code)
				}
				<-done
			})
		}
	}
}

func TestPeerCloseFrames(t *testing.T) {
	cases := []struct {
		name    string
		payload []byte
		want    StatusCode
		reason  string
		echo    StatusCode // 0: empty close frame echoed
	}{
		{"empty", nil, StatusNoStatusRcvd, "", 0},
		{"1000", closePayload(1000, ""), 1000, "", 1000},
		{"4001 with reason", closePayload(4001, "auth expired"), 4001, "auth expired", 4001},
		{"1014", closePayload(1014, "upstream"), 1014, "upstream", 1014},
		{"not utf8 reason passed on", closePayload(3000, "\xff\xfe"), 3000, "\xff\xfe", 3000},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				echo := make(chan StatusCode, 1)
				c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
					_, _ = p.conn.Write(srvFrame(true, opClose, tc.payload))
					code, _ := p.nextClose(t)
					echo <- code
					// The client closes the connection after echoing.
					if _, ok := <-p.frames; ok {
						t.Error("frames after the close echo")
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				_, _, err = c.Read()
				var ce *CloseError
				if !errors.As(err, &ce) || ce.Code != tc.want || ce.Reason != tc.reason {
					t.Fatalf("Read: %v, want close %d %q", err, tc.want, tc.reason)
				}
				if got := <-echo; got != tc.echo {
					t.Fatalf("echoed %d, want %d", got, tc.echo)
				}
				<-done
			})
		}
	}
}

func TestHugeDeclaredLength(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr+"/over limit", func(t *testing.T) {
			codec := make(chan StatusCode, 1)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
				// 2^44 bytes declared (16 TiB), 5 sent.
				_, _ = p.conn.Write([]byte{0x82, 0x7F, 0, 0, 0x10, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5})
				code, _ := p.nextClose(t)
				codec <- code
			})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.Read()
			if !errors.Is(err, ErrMessageTooBig) {
				t.Fatalf("Read: %v, want ErrMessageTooBig", err)
			}
			if got := <-codec; got != StatusMessageTooBig {
				t.Fatalf("server got close %d, want 1009", got)
			}
			<-done
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
				t.Fatalf("allocated %d bytes", d)
			}
		})
		t.Run(tr+"/under limit, stalls", func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c, done, err := rawDial(t, rawOpts{transport: tr}, Options{ReadLimit: 1 << 40}, func(p *rawPeer) {
				// 512 GiB declared within the (large) limit, 5 bytes sent,
				// then the connection ends.
				_, _ = p.conn.Write([]byte{0x82, 0x7F, 0, 0, 0, 0x80, 0, 0, 0, 0, 1, 2, 3, 4, 5})
			})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.Read()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Read: %v, want unexpected EOF", err)
			}
			<-done
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
				t.Fatalf("allocated %d bytes for 5 received", d)
			}
		})
	}
}

// streamOfFrames returns a mix of frames and the messages they carry.
func streamOfFrames() ([]byte, [][]byte) {
	var b []byte
	var msgs [][]byte
	add := func(m []byte) { msgs = append(msgs, m) }
	b = append(b, srvFrame(true, opText, []byte(`{"a":1}`))...)
	add([]byte(`{"a":1}`))
	b = append(b, srvFrame(true, opPing, []byte("ping1"))...)
	b = append(b, srvFrame(true, opBinary, nil)...)
	add([]byte{})
	big := pattern(5000, 9)
	b = append(b, srvFrame(true, opBinary, big)...)
	add(big)
	// fragmented, with a ping and a pong inside, and an empty fragment
	b = append(b, srvFrame(false, opText, []byte("frag"))...)
	b = append(b, srvFrame(true, opPing, []byte("ping2"))...)
	b = append(b, srvFrame(false, opContinuation, nil)...)
	b = append(b, srvFrame(true, opPong, []byte("unsolicited"))...)
	b = append(b, srvFrame(true, opContinuation, []byte("mented"))...)
	add([]byte("fragmented"))
	med := pattern(300, 4)
	b = append(b, srvFrame(true, opText, med)...)
	add(med)
	return b, msgs
}

func TestSplitAndCoalescedFrames(t *testing.T) {
	stream, msgs := streamOfFrames()
	for _, tr := range transports {
		for _, chunk := range []int{1, 2, 3, 13, 4096, len(stream)} {
			t.Run(tr+"/"+itoa(chunk), func(t *testing.T) {
				pongs := make(chan []string, 1)
				c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
					for s := stream; len(s) > 0; {
						k := min(chunk, len(s))
						if _, err := p.conn.Write(s[:k]); err != nil {
							t.Errorf("server write: %v", err)
							return
						}
						s = s[k:]
					}
					var got []string
					for f := range p.frames {
						if f.op == opPong {
							got = append(got, string(f.payload))
						}
					}
					pongs <- got
				})
				if err != nil {
					t.Fatal(err)
				}
				for i, want := range msgs {
					_, got, err := c.Read()
					if err != nil {
						t.Fatalf("Read %d: %v", i, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("message %d: got %d bytes, want %d", i, len(got), len(want))
					}
				}
				c.CloseNow()
				if got := <-pongs; len(got) != 2 || got[0] != "ping1" || got[1] != "ping2" {
					t.Fatalf("pongs %q", got)
				}
				<-done
			})
		}
	}
}

func TestManyFramesOneWrite(t *testing.T) {
	var stream []byte
	var msgs [][]byte
	for i := range 500 {
		m := pattern(i%300, byte(i))
		msgs = append(msgs, m)
		stream = append(stream, srvFrame(true, opText, m)...)
		if i%50 == 0 {
			stream = append(stream, srvFrame(true, opPing, []byte{byte(i)})...)
		}
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
				_, _ = p.conn.Write(stream)
				for range p.frames {
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range msgs {
				_, got, err := c.Read()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("message %d: %d bytes, %v", i, len(got), err)
				}
			}
			c.CloseNow()
			<-done
		})
	}
}

func TestEOFErrors(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr+"/between messages", func(t *testing.T) {
			c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
				_, _ = p.conn.Write(srvFrame(true, opText, []byte("x")))
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Read(); err != nil {
				t.Fatal(err)
			}
			<-done
			_, _, err = c.Read()
			if !errors.Is(err, io.EOF) || CloseStatus(err) != -1 {
				t.Fatalf("Read: %v, want io.EOF", err)
			}
		})
		t.Run(tr+"/inside a frame", func(t *testing.T) {
			c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
				_, _ = p.conn.Write(srvFrame(true, opText, []byte("hello"))[:4])
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Read(); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Read: %v, want io.ErrUnexpectedEOF", err)
			}
			<-done
		})
	}
}

// TestCloseTimesOut checks the bound on Close when the peer never answers
// the close frame (shortened from 5s for the test).
func TestCloseTimesOut(t *testing.T) {
	for _, tr := range transports {
		for _, reader := range []bool{false, true} {
			name := tr + "/no reader"
			if reader {
				name = tr + "/with reader"
			}
			t.Run(name, func(t *testing.T) {
				release := make(chan struct{})
				c, done, err := rawDial(t, rawOpts{transport: tr}, Options{}, func(p *rawPeer) {
					p.nextClose(t) // and never answer
					<-release
				})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { close(release); <-done }()
				c.closeTimeout = 200 * time.Millisecond
				readErr := make(chan error, 1)
				if reader {
					go func() {
						_, _, err := c.Read()
						readErr <- err
					}()
				}
				start := time.Now()
				err = c.Close(StatusNormalClosure, "")
				if err == nil || !errors.Is(err, errCloseTimeout) {
					t.Fatalf("Close: %v, want a timeout", err)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("Close took %v", d)
				}
				if reader {
					if err := <-readErr; err == nil {
						t.Fatal("reader got no error")
					}
				}
			})
		}
	}
}

func TestCloseInvalidCodeAndLongReason(t *testing.T) {
	c, done, err := rawDial(t, rawOpts{}, Options{}, func(p *rawPeer) {
		for range p.frames {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(1005, ""); err == nil {
		t.Fatal("Close(1005) succeeded")
	}
	<-done // the connection was closed at once
	reason := make([]byte, 0, 200)
	for len(reason) < 190 {
		reason = append(reason, "é"...)
	}
	got := make(chan string, 1)
	c2, done2, err := rawDial(t, rawOpts{}, Options{}, func(p *rawPeer) {
		_, r := p.nextClose(t)
		got <- r
		_, _ = p.conn.Write(srvFrame(true, opClose, closePayload(1000, "")))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(StatusNormalClosure, string(reason)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := <-got
	if len(r) > 123 || len(r) < 120 || !bytes.HasPrefix(reason, []byte(r)) {
		t.Fatalf("reason sent: %d bytes %q", len(r), r)
	}
	<-done2
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestCloseBoundedWhenPeerDoesNotRead: a peer that reads nothing fills the
// socket buffers; a Write blocks; Close must still return within its bound
// and unblock the writer.
func TestCloseBoundedWhenPeerDoesNotRead(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			release := make(chan struct{})
			c, done, err := rawDial(t, rawOpts{transport: tr, noRead: true}, Options{}, func(p *rawPeer) {
				<-release
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { close(release); <-done }()
			c.closeTimeout = 300 * time.Millisecond
			writing := make(chan struct{})
			writeErr := make(chan error, 1)
			go func() {
				close(writing)
				writeErr <- c.Write(false, make([]byte, 64<<20))
			}()
			<-writing
			start := time.Now()
			if err := c.Close(StatusNormalClosure, ""); err == nil {
				t.Fatal("Close succeeded without the peer's close frame")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("Close took %v", d)
			}
			select {
			case err := <-writeErr:
				if err == nil {
					t.Fatal("the 64 MiB Write succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Write still blocked after Close")
			}
		})
	}
}
