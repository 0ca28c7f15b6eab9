package upstream

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// offlineConn is a connection in StateReady with a transport that has no
// socket: enough to drive the dispatcher directly. It has a live job "j1", a
// sent submit and a tombstoned submit in the FIFO.
func offlineConn(tb testing.TB) (*Conn, *transport) {
	cfg := Config{URL: "ws://127.0.0.1:1/arcp", MaxBufferedEvents: 8, MaxBufferedBytes: 4096}.withDefaults()
	if err := cfg.validate(); err != nil {
		tb.Fatal(err)
	}
	c := newConn(cfg)
	c.sessionID = "s1"
	c.setFeatures(DefaultFeatures)
	c.gen.Store(1)
	// No socket, so no writer may run: marking one as running keeps frames
	// queued, where the tests can see them.
	t := &transport{gen: 1, writing: true}
	t.ctx, t.cancel = context.WithCancelCause(c.ctx)
	c.tr = t
	c.state.Store(int32(StateReady))
	tb.Cleanup(func() { c.cancel(); c.closeCancel() })

	c.mu.Lock()
	defer c.mu.Unlock()
	c.addJobLocked("j1")
	c.core.Connected()
	for i := range 2 {
		env, _ := arcp.New(arcp.TypeSubmit, "s1", arcp.Submit{Agent: "echo"})
		r := newRequest(kindSubmit, env)
		r.traceID = []string{"0000000000000000000000000000000a", "0000000000000000000000000000000b"}[i]
		r.key = fmt.Sprintf("k%d", i)
		r.state, r.gen = stateSent, 1
		c.nextCID++
		r.cid = c.nextCID
		c.subs[r.cid] = r
		c.core.Written(r.cid, r.id, r.traceID, r.key, false)
		r.written = true
		c.inflight++
		if i == 0 {
			c.abandonLocked(r) // the head's caller gave up: a tombstoned slot
		}
	}
	return c, t
}

// FuzzHandle feeds arbitrary frames (one per line) to the dispatcher: it must
// never panic, and the bookkeeping must stay consistent.
func FuzzHandle(f *testing.F) {
	for _, seed := range []string{
		`{"arcp":"1.1","id":"a","type":"job.accepted","session_id":"s1","job_id":"j2","payload":{"job_id":"j2","accepted_at":"x"}}`,
		`{"arcp":"1.1","id":"a","type":"job.event","session_id":"s1","job_id":"j1","event_seq":1,"payload":{"kind":"log","body":{"i":0}}}` + "\n" +
			`{"arcp":"1.1","id":"b","type":"job.result","session_id":"s1","job_id":"j1","event_seq":2,"payload":{"final_status":"success","output":1}}`,
		`{"arcp":"1.1","id":"a","type":"job.event","session_id":"s1","job_id":"j9","event_seq":1,"payload":{"kind":"log"}}`,
		`{"arcp":"1.1","id":"a","type":"job.event","session_id":"s1","job_id":"j1","event_seq":5,"payload":{"kind":"log"}}`,
		`{"arcp":"1.1","id":"a","type":"session.error","session_id":"s1","payload":{"code":"X","request_id":"nope"}}`,
		`{"arcp":"1.1","id":"a","type":"session.error","session_id":"s1","payload":{"code":"X"}}`,
		`{"arcp":"1.1","id":"a","type":"session.ping","session_id":"s1","payload":{"nonce":"n"}}`,
		`{"arcp":"1.1","id":"a","type":"job.cancelled","session_id":"s1","payload":{"job_id":"j1"}}`,
		`{"arcp":"1.1","id":"a","type":"session.bye","session_id":"s1"}`,
		`{"arcp":"1.1","id":"a","type":"job.accepted","session_id":"s1","trace_id":"0000000000000000000000000000000b","payload":{"job_id":"j3","trace_id":"0000000000000000000000000000000b"}}`,
		`{"arcp":"1.1","id":"a","type":"x.unknown","session_id":"s1"}`,
		`garbage`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(tt *testing.T, data []byte) {
		c, t := offlineConn(tt)
		for _, frame := range bytes.Split(data, []byte("\n")) {
			env, err := arcp.Decode(frame, arcp.DecodeOptions{RequireSession: true})
			if err != nil {
				continue
			}
			c.handle(t, env, len(frame))
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		live, items := 0, 0
		var bytes int64
		for _, j := range c.jobs {
			if j.term == nil {
				live++
			}
			items += len(j.items)
			bytes += j.bytes
			if j.bytes < 0 || len(j.items) != len(j.cum) {
				tt.Fatalf("job %s: bytes %d, %d items, %d cum", j.id, j.bytes, len(j.items), len(j.cum))
			}
		}
		if live != c.liveJobs || live != len(c.live) || int64(live) != c.active.Load() {
			tt.Fatalf("live jobs %d, counted %d / %d", live, c.liveJobs, c.active.Load())
		}
		if items != c.bufEvents || bytes != c.bufBytes {
			tt.Fatalf("buffered %d/%d, counted %d/%d", items, bytes, c.bufEvents, c.bufBytes)
		}
		if c.bufEvents > c.cfg.MaxBufferedEvents+1 {
			tt.Fatalf("buffer %d over the cap", c.bufEvents)
		}
		if c.inflight < 0 || c.core.Waiting() > 2 || c.inflight > c.core.Waiting() {
			tt.Fatalf("inflight %d, waiting in the core %d", c.inflight, c.core.Waiting())
		}
	})
}
