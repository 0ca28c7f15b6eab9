package hostile_test

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/arcptest/hostile"
)

// FuzzReadClientFrame: the raw modes' frame reader never panics, never
// returns more than 1 MiB, and unmasks a well-formed frame exactly.
func FuzzReadClientFrame(f *testing.F) {
	f.Add([]byte{0x81, 0x85, 1, 2, 3, 4, 'h' ^ 1, 'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1})
	f.Add([]byte{0x81, 0xfe, 0x00, 0x02, 0, 0, 0, 0, 'h', 'i'})
	f.Add([]byte{0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x88, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		op, data, err := hostile.ReadClientFrame(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		if len(data) > 1<<20 {
			t.Fatalf("returned %d bytes", len(data))
		}
		if op != raw[0]&0x0f {
			t.Fatalf("opcode %d, want %d", op, raw[0]&0x0f)
		}
		// Re-encode what was read with a zero mask and a 64-bit length:
		// reading it again gives the same.
		n := len(data)
		enc := []byte{raw[0], 0xff, 0, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, 0, 0, 0}
		enc = append(enc, data...)
		op2, data2, err := hostile.ReadClientFrame(bufio.NewReader(bytes.NewReader(enc)))
		if err != nil || op2 != op || !bytes.Equal(data2, data) {
			t.Fatalf("round trip: %d %q %v, want %d %q", op2, data2, err, op, data)
		}
	})
}
