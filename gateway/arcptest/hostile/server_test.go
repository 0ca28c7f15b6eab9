package hostile_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcptest/hostile"
	"github.com/sessiongate/sessiongate/gateway/wsclient"
)

// TestFrameCapExact checks the runtime itself: ModeFrameCap's result frame
// is exactly Input.PadTo bytes (the gateway's tests rely on it).
func TestFrameCapExact(t *testing.T) {
	hs, err := hostile.Listen(hostile.Options{MaxFrameBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ctx := testCtx(t, 10*time.Second)
	ws, err := wsclient.Dial(ctx, hs.URL(hostile.ModeFrameCap), wsclient.Options{ReadLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(typ, sid string, payload any) {
		t.Helper()
		env, err := arcp.New(typ, sid, payload)
		if err != nil {
			t.Fatal(err)
		}
		b, err := arcp.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.Write(true, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *arcp.Envelope {
		t.Helper()
		_, data, err := ws.Read()
		if err != nil {
			t.Fatal(err)
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		env.EventSeq = uint64(len(data)) // the frame's size, for the check below
		return env
	}
	send(arcp.TypeHello, "", arcp.Hello{Auth: arcp.Auth{Scheme: "bearer"}})
	welcome := read()
	for _, size := range []int{1 << 16, 1<<16 + 1, 5000} {
		in, _ := json.Marshal(hostile.Input{Token: "t", PadTo: size})
		send(arcp.TypeSubmit, welcome.SessionID, arcp.Submit{Agent: "echo", Input: in})
		if acc := read(); acc.Type != arcp.TypeAccepted {
			t.Fatalf("got %s, want job.accepted", acc.Type)
		}
		res := read()
		if res.Type != arcp.TypeResult || int(res.EventSeq) != size {
			t.Fatalf("PadTo %d: got a %s frame of %d bytes", size, res.Type, res.EventSeq)
		}
	}
}
