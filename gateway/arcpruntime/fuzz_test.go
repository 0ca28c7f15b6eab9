package arcpruntime

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// FuzzFrame sends one arbitrary frame into a live session over a real
// WebSocket: the runtime must answer it (or end the session with a
// session.error) and keep serving — never panic or hang. "$SID" in the input
// is replaced with the session id.
func FuzzFrame(f *testing.F) {
	for _, seed := range []string{
		`{"arcp":"1.1","id":"1","type":"job.submit","session_id":"$SID","payload":{"agent":"echo","input":{"x":1}}}`,
		`{"arcp":"1.1","id":"1","type":"job.submit","session_id":"$SID","payload":{"agent":"sleep","input":{"ms":5}}}`,
		`{"arcp":"1.1","id":"1","type":"job.submit","session_id":"$SID","payload":{"agent":"stream","input":{"count":3}}}`,
		`{"arcp":"1.1","id":"1","type":"job.submit","session_id":"$SID","payload":{"agent":"fail","input":null,"idempotency_key":"k"}}`,
		`{"arcp":"1.1","id":"1","type":"job.cancel","session_id":"$SID","job_id":"j"}`,
		`{"arcp":"1.1","id":"1","type":"session.list_jobs","session_id":"$SID","payload":{"limit":-1,"filter":[]}}`,
		`{"arcp":"1.1","id":"1","type":"job.subscribe","session_id":"$SID","payload":{"job_id":"j","history":true}}`,
		`{"arcp":"1.1","id":"1","type":"session.ack","session_id":"$SID","payload":{"last_processed_seq":99}}`,
		`{"arcp":"1.1","id":"1","type":"session.close","session_id":"$SID"}`,
		`{"arcp":"1.1","id":"1","type":"session.hello","session_id":"$SID","payload":{}}`,
		`{"arcp":"1.1","id":"1","type":"x.y","session_id":"$SID","payload":null}`,
		`{"arcp":"1.1","id":"","type":"session.ping","session_id":"$SID"}`,
		`[]`, `{}`, `null`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	srv := NewTestServer(f, Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		c := open(t, srv)
		c.sendRaw(bytes.ReplaceAll(data, []byte("$SID"), []byte(c.sid)))
		// The frame may have ended the session: then this write can fail.
		env, _ := arcp.New(arcp.TypePing, c.sid, arcp.Ping{Nonce: "after"})
		ping, _ := arcp.Encode(env)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = c.conn.Write(ctx, websocket.MessageText, ping)
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		for {
			select {
			case fr := <-c.frames:
				if fr.env != nil && fr.env.Type == arcp.TypePong {
					return
				}
			case <-c.done:
				// Only a session-ending frame may close the transport.
				return
			case <-timer.C:
				t.Fatalf("no pong and no close after %q", data)
			}
		}
	})
}
