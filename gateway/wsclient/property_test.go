package wsclient

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "replay TestPropertyRandomStreams with this seed (0: random seeds)")

// TestPropertyRandomStreams has the hand-rolled server send random
// sequences of messages, randomly fragmented, with pings between frames,
// in random chunk sizes; the client must read exactly the messages in
// order and answer every ping. A failure prints the seed; replay it with
// go test -run TestPropertyRandomStreams -args -seed=N.
func TestPropertyRandomStreams(t *testing.T) {
	var seeds []uint64
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	} else {
		base := uint64(time.Now().UnixNano())
		n := 60
		if testing.Short() {
			n = 10
		}
		for i := range n {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay with: go test -run TestPropertyRandomStreams ./gateway/wsclient -args -seed=%d", seed)
				}
			}()
			runRandomStream(t, seed)
		})
	}
}

type genMsg struct {
	text bool
	data []byte
}

func randomSize(r *rand.Rand) int {
	switch p := r.IntN(100); {
	case p < 5:
		return 0
	case p < 60:
		return r.IntN(300)
	case p < 85:
		return 100 + r.IntN(5000)
	case p < 97:
		return 60000 + r.IntN(10000) // around the 16-bit length boundary
	default:
		return r.IntN(300000)
	}
}

// genStream builds the server's byte stream, the messages it carries and the
// ping payloads in order.
func genStream(r *rand.Rand) (stream []byte, msgs []genMsg, pings [][]byte) {
	addPing := func() {
		p := make([]byte, r.IntN(126))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		pings = append(pings, p)
		stream = append(stream, srvFrame(true, opPing, p)...)
	}
	count := 1 + r.IntN(40)
	for range count {
		m := genMsg{text: r.IntN(2) == 0, data: make([]byte, randomSize(r))}
		for i := range m.data {
			m.data[i] = byte(r.Uint32())
		}
		msgs = append(msgs, m)
		op := byte(opBinary)
		if m.text {
			op = opText
		}
		if r.IntN(100) < 20 {
			addPing()
		}
		if r.IntN(100) < 35 { // fragmented into 2..8 frames, some empty
			parts := 2 + r.IntN(7)
			cuts := []int{0, len(m.data)}
			for range parts - 1 {
				cuts = append(cuts, r.IntN(len(m.data)+1))
			}
			slices.Sort(cuts)
			for i := 0; i+1 < len(cuts); i++ {
				fop := byte(opContinuation)
				if i == 0 {
					fop = op
				}
				stream = append(stream, srvFrame(i+2 == len(cuts), fop, m.data[cuts[i]:cuts[i+1]])...)
				if i+2 < len(cuts) && r.IntN(100) < 30 {
					addPing()
				}
				if i+2 < len(cuts) && r.IntN(100) < 10 {
					stream = append(stream, srvFrame(true, opPong, []byte("u"))...)
				}
			}
			continue
		}
		stream = append(stream, srvFrame(true, op, m.data)...)
	}
	stream = append(stream, srvFrame(true, opClose, closePayload(StatusNormalClosure, "done"))...)
	return stream, msgs, pings
}

func runRandomStream(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	stream, msgs, pings := genStream(r)
	transport := transports[r.IntN(len(transports))]
	maxChunk := []int{1, 7, 100, 1500, 5000, 70000, len(stream)}[r.IntN(7)]
	if maxChunk == 1 && len(stream) > 20000 {
		maxChunk = 3 // keep byte-sized writes affordable
	}
	chunkSeed := r.Uint64()

	type result struct {
		pongs [][]byte
		close StatusCode
	}
	resc := make(chan result, 1)
	c, done, err := rawDial(t, rawOpts{transport: transport}, Options{}, func(p *rawPeer) {
		cr := rand.New(rand.NewPCG(chunkSeed, 1))
		for s := stream; len(s) > 0; {
			k := min(1+cr.IntN(maxChunk), len(s))
			if _, err := p.conn.Write(s[:k]); err != nil {
				t.Errorf("server write: %v", err)
				break
			}
			s = s[k:]
		}
		var res result
		res.close = -1
		for f := range p.frames {
			if f.err != nil {
				t.Errorf("client frame: %v", f.err)
			}
			switch f.op {
			case opPong:
				res.pongs = append(res.pongs, f.payload)
			case opClose:
				if len(f.payload) >= 2 {
					res.close = StatusCode(binary.BigEndian.Uint16(f.payload))
				}
			default:
				t.Errorf("client sent opcode %d", f.op)
			}
		}
		resc <- res
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Logf("transport=%s messages=%d pings=%d stream=%d bytes maxChunk=%d", transport, len(msgs), len(pings), len(stream), maxChunk)
	for i, want := range msgs {
		text, got, err := c.Read()
		if err != nil {
			t.Fatalf("Read %d: %v", i, err)
		}
		if text != want.text || !bytes.Equal(got, want.data) {
			t.Fatalf("message %d: got text=%v %d bytes, want text=%v %d bytes", i, text, len(got), want.text, len(want.data))
		}
	}
	_, _, err = c.Read()
	if CloseStatus(err) != StatusNormalClosure {
		t.Fatalf("final Read: %v, want close 1000", err)
	}
	res := <-resc
	<-done
	if len(res.pongs) != len(pings) {
		t.Fatalf("%d pongs for %d pings", len(res.pongs), len(pings))
	}
	for i := range pings {
		if !bytes.Equal(res.pongs[i], pings[i]) {
			t.Fatalf("pong %d carries %x, want %x", i, res.pongs[i], pings[i])
		}
	}
	if res.close != StatusNormalClosure {
		t.Fatalf("client echoed close %d, want 1000", res.close)
	}
}
