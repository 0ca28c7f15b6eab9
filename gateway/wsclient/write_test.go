package wsclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

func TestMaskCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		key := r.Uint32()
		var kb [4]byte
		binary.LittleEndian.PutUint32(kb[:], key)
		want := make([]byte, n)
		for i := range src {
			want[i] = src[i] ^ kb[i%4]
		}
		// In one go, and in two pieces continuing the key.
		got := make([]byte, n)
		maskCopy(got, src, key)
		if !bytes.Equal(got, want) {
			t.Fatalf("n=%d: mask differs", n)
		}
		cut := r.IntN(n + 1)
		got2 := make([]byte, n)
		k2 := maskCopy(got2[:cut], src[:cut], key)
		maskCopy(got2[cut:], src[cut:], k2)
		if !bytes.Equal(got2, want) {
			t.Fatalf("n=%d cut=%d: continued mask differs", n, cut)
		}
	}
}

func TestWriteStreamsLargeMessagesMaskedCorrectly(t *testing.T) {
	// Messages larger than the 64 KiB buffer are masked in pieces whose
	// sizes are not multiples of 4 (the header shifts them).
	got := make(chan []byte, 2)
	c, done, err := rawDial(t, rawOpts{}, Options{}, func(p *rawPeer) {
		for f := range p.frames {
			got <- f.payload
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := pattern(3*largeBuf+123, 5)
	if err := c.Write(false, []byte("x"), msg); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "x" {
		t.Fatalf("first frame %q", b)
	}
	if b := <-got; !bytes.Equal(b, msg) {
		t.Fatalf("second frame: %d bytes differ from the %d sent", len(b), len(msg))
	}
	c.CloseNow()
	<-done
}

// TestWriteAllocs: a Write of a small message allocates nothing. The peer
// drains the bytes into io.Discard's pooled buffer instead of parsing them
// into frames: AllocsPerRun counts every goroutine's allocations, and the
// parser's payload per frame made the test fail whenever the peer ran
// inside the measured window (as it does with other processes busy).
func TestWriteAllocs(t *testing.T) {
	c, done, err := rawDial(t, rawOpts{noRead: true}, Options{}, func(p *rawPeer) {
		_, _ = io.Copy(io.Discard, p.conn)
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := pattern(512, 1)
	allocs := testing.AllocsPerRun(200, func() {
		if err := c.Write(true, msg); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("Write allocates %.1f times per call", allocs)
	}
	c.CloseNow()
	<-done
}

// countingConn counts the writes made to a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func TestWriteBatchIsOneWrite(t *testing.T) {
	srv := coderServer(t, false, echoHandler)
	var cc *countingConn
	o := Options{NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc = &countingConn{Conn: nc}
		return cc, nil
	}}
	c := mustDial(t, wsURL(srv), o)
	cases := []struct {
		msgs      int
		size      int
		maxWrites int64
	}{
		{1, 512, 1},
		{20, 600, 1},   // 12 KiB: the 16 KiB buffer
		{60, 1000, 1},  // 60 KiB: the 64 KiB buffer
		{3, 100000, 6}, // 300 KiB streams through 64 KiB
	}
	for _, tc := range cases {
		msgs := make([][]byte, tc.msgs)
		for i := range msgs {
			msgs[i] = pattern(tc.size, byte(i))
		}
		before := cc.writes.Load()
		if err := c.Write(true, msgs...); err != nil {
			t.Fatal(err)
		}
		if n := cc.writes.Load() - before; n < 1 || n > tc.maxWrites {
			t.Errorf("%d messages of %d bytes: %d writes, want at most %d", tc.msgs, tc.size, n, tc.maxWrites)
		}
		for i := range msgs {
			if _, got, err := c.Read(); err != nil || !bytes.Equal(got, msgs[i]) {
				t.Fatalf("echo %d: %d bytes, %v", i, len(got), err)
			}
		}
	}
}

// BenchmarkWriteFrame is the client's cost of framing and masking a
// 512-byte message (the connection discards it).
func BenchmarkWriteFrame(b *testing.B) {
	c := newConn(&chunkConn{data: []byte{1}}, nil, "", 0)
	msg := jsonMessage()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := c.Write(true, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFrame is the client's cost of parsing a 512-byte message
// from a stream (plain reads, a read buffer's worth at a time).
func BenchmarkReadFrame(b *testing.B) {
	frame := srvFrame(true, opText, jsonMessage())
	stream := bytes.Repeat(frame, 10000)
	var c *Conn
	reset := func() {
		c = newConn(&chunkConn{data: stream}, nil, "", 0)
	}
	reset()
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	i := 0
	for b.Loop() {
		if i == 10000 {
			b.StopTimer()
			reset()
			i = 0
			b.StartTimer()
		}
		if _, _, err := c.Read(); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func TestTruncateReason(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes; 123 falls inside a rune
	if got := truncateReason(long); len(got) != 122 || !utf8.ValidString(got) {
		t.Errorf("cut to %d bytes, valid=%v", len(got), utf8.ValidString(got))
	}
	bad := "\xff" + strings.Repeat("a", 200) // invalid UTF-8 early is not a reason to drop it all
	if got := truncateReason(bad); len(got) != 123 {
		t.Errorf("cut to %d bytes, want 123", len(got))
	}
	if got := truncateReason("short"); got != "short" {
		t.Errorf("short reason changed: %q", got)
	}
}
