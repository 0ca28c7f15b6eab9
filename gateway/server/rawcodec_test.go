package server

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestCodec: protobuf messages go through grpc-go's codec; a *rawMessage
// is carried as its bytes both ways, and owns a copy of what it read.
func TestCodec(t *testing.T) {
	c := newCodec()
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

	raw := &rawMessage{}
	src := append([]byte(nil), wire...)
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(src)}, raw); err != nil {
		t.Fatal(err)
	}
	clear(src) // the transport reuses its buffers
	if !bytes.Equal(raw.b, wire) {
		t.Fatalf("raw message holds %x, want %x", raw.b, wire)
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

// TestScanIDs: the session and job ids read from the bytes are the ones
// protobuf decodes, the last occurrence winning; bytes that are not a
// message fail.
func TestScanIDs(t *testing.T) {
	mi := methodOf(sessiongatev1.SessionGateway_CancelJob_FullMethodName)
	if mi == nil || mi.sessionField == nil || mi.jobField == nil {
		t.Fatal("CancelJob has no session_id and job_id")
	}
	req := &sessiongatev1.CancelJobRequest{SessionId: "ses-1", JobId: "job-1"}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// A second session_id, appended: decoders keep the last.
	tail, err := proto.Marshal(&sessiongatev1.CancelJobRequest{SessionId: "ses-2"})
	if err != nil {
		t.Fatal(err)
	}
	b2 := append(append([]byte(nil), b...), tail...)
	var dec sessiongatev1.CancelJobRequest
	if err := proto.Unmarshal(b2, &dec); err != nil || dec.GetSessionId() != "ses-2" {
		t.Fatalf("decoding the twice-set message: %v, %v", dec.GetSessionId(), err)
	}
	for _, c := range []struct {
		name     string
		b        []byte
		sid, jid string
		bad      bool
	}{
		{"both", b, "ses-1", "job-1", false},
		{"last wins", b2, "ses-2", "job-1", false},
		{"empty", nil, "", "", false},
		{"truncated", b[:len(b)-1], "", "", true},
		{"not a message", []byte{0xff, 0xff}, "", "", true},
	} {
		sid, jid, err := requestIDs(&rawMessage{b: c.b}, mi)
		if (err != nil) != c.bad || sid != c.sid || jid != c.jid {
			t.Errorf("%s: %q, %q, %v; want %q, %q, error %v", c.name, sid, jid, err, c.sid, c.jid, c.bad)
		}
		if c.bad && status.Code(err) != codes.Internal {
			t.Errorf("%s: %v, want INTERNAL as grpc-go answers a request it cannot decode", c.name, err)
		}
	}
	// A decoded request gives the same ids.
	if sid, jid, err := requestIDs(req, mi); err != nil || sid != "ses-1" || jid != "job-1" {
		t.Errorf("decoded: %q, %q, %v", sid, jid, err)
	}
}
