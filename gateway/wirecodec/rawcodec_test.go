package wirecodec

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestCodec: protobuf messages go through grpc-go's codec; a *RawMessage
// is carried as its bytes both ways, and owns a copy of what it read.
func TestCodec(t *testing.T) {
	c := NewCodec()
	if c.Name() != "proto" {
		t.Fatalf("Name() = %q: every call's content subtype is proto", c.Name())
	}
	in := &sessiongatev1.RunJobRequest{SessionId: "ses-1", Agent: "echo", Input: mustValueTB(t, map[string]any{"hello": "world"})}
	enc, err := c.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	wire := enc.Materialize()
	want, _ := proto.Marshal(in)
	if !bytes.Equal(wire, want) {
		t.Fatalf("proto message encoded as %x, want %x", wire, want)
	}

	raw := &RawMessage{}
	src := append([]byte(nil), wire...)
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(src)}, raw); err != nil {
		t.Fatal(err)
	}
	clear(src) // the transport reuses its buffers
	if !bytes.Equal(raw.Bytes, wire) {
		t.Fatalf("raw message holds %x, want %x", raw.Bytes, wire)
	}
	out, err := c.Marshal(raw)
	if err != nil || !bytes.Equal(out.Materialize(), wire) {
		t.Fatalf("raw message re-encoded as %x (%v), want its bytes %x", out.Materialize(), err, wire)
	}

	var back sessiongatev1.RunJobRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &back); err != nil || !proto.Equal(&back, in) {
		t.Fatalf("decoded %v (%v), want %v", &back, err, in)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &back); err == nil {
		t.Fatal("a malformed message decoded without error")
	}
}
