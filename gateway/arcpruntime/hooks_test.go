package arcpruntime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

func TestHeartbeat(t *testing.T) {
	const hb = 250 * time.Millisecond
	srv := NewTestServer(t, Options{HeartbeatInterval: hb})
	rt := srv.Runtime()
	c := open(t, srv)

	// Idle: the runtime pings.
	env := c.next()
	if env.Type != arcp.TypePing {
		t.Fatalf("got %s, want session.ping", env.Type)
	}
	if p, _ := arcp.DecodePayload[arcp.Ping](env); p.Nonce == "" || p.SentAt == "" {
		t.Errorf("ping %s", env.Payload)
	}
	// Our pings are answered.
	c.send(arcp.TypePing, "", arcp.Ping{Nonce: "abc", SentAt: time.Now().UTC().Format(time.RFC3339Nano)})
	p, _ := arcp.DecodePayload[arcp.Pong](c.expect(arcp.TypePong))
	if p.PingNonce != "abc" || p.ReceivedAt == "" {
		t.Errorf("pong %+v", p)
	}
	// A client that keeps answering stays connected for many intervals.
	deadline := time.Now().Add(5 * hb)
	for time.Now().Before(deadline) {
		env := c.next()
		if env.Type == arcp.TypePing {
			n, _ := arcp.DecodePayload[arcp.Ping](env)
			c.send(arcp.TypePong, "", arcp.Pong{PingNonce: n.Nonce})
		}
	}
	// A silent client is dropped after two intervals; the session survives.
	c.expectClosedAbruptly(t)
	if st := rt.Stats(); st.HeartbeatLosses != 1 || st.Sessions != 1 {
		t.Errorf("stats %+v", st)
	}
	if _, env := resumeWith(t, srv, c, c.welcome.ResumeToken, 0); env.Type != arcp.TypeWelcome {
		t.Errorf("resume after heartbeat loss: %s", env.Type)
	}

	// Without the feature there are no pings and no heartbeat enforcement.
	q := open(t, srv, "ack")
	q.expectSilence(3 * hb)
}

func TestStall(t *testing.T) {
	srv := NewTestServer(t, Options{HeartbeatInterval: 100 * time.Millisecond})
	rt := srv.Runtime()
	c := open(t, srv, "ack")
	var seq uint64
	id := c.run("stream", map[string]int{"count": 20, "interval_ms": 10})
	c.expect(arcp.TypeEvent)
	seq++
	rt.Stall(true)
	// Held: a submit and a ping get no answer; the stream goes to the buffer.
	c.submit("echo", "held")
	c.send(arcp.TypePing, "", arcp.Ping{Nonce: "p"})
	// Drain whatever was already on the wire when Stall returned.
	for {
		timer := time.NewTimer(300 * time.Millisecond)
		select {
		case f := <-c.frames:
			timer.Stop()
			if f.env == nil || f.env.Type != arcp.TypeEvent || f.env.EventSeq != seq+1 {
				t.Fatalf("frame after Stall: %q", f.data)
			}
			seq++
			continue
		case <-timer.C:
		}
		break
	}
	waitFor(t, "the stream to finish while stalled", func() bool { return rt.Stats().LiveJobs == 0 })
	c.expectSilence(200 * time.Millisecond)
	rt.Stall(false)
	// Everything arrives, in order, gap-free: the pong and the accept are
	// control frames and may precede the held events.
	var echoID string
	var gotPong, echoDone, streamDone bool
	for !(gotPong && echoDone && streamDone) {
		env := c.nextNonPing()
		switch {
		case env.Type == arcp.TypePong:
			gotPong = true
		case env.Type == arcp.TypeAccepted:
			echoID = env.JobID
		case arcp.Sequenced(env.Type):
			if env.EventSeq != seq+1 {
				t.Fatalf("seq %d after %d", env.EventSeq, seq)
			}
			seq = env.EventSeq
			if env.Type == arcp.TypeResult {
				if env.JobID == id {
					streamDone = true
				} else if env.JobID == echoID {
					echoDone = true
				}
			}
		default:
			t.Fatalf("unexpected %s", env.Type)
		}
	}
	if seq != 22 {
		t.Errorf("last seq %d, want 22", seq)
	}
}

func TestAcceptDelayKeepsOrder(t *testing.T) {
	const delay = 200 * time.Millisecond
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	rt.SetAcceptDelay(delay)
	c := open(t, srv)
	start := time.Now()
	ids := []string{
		c.submit("echo", 1),
		c.submit("echo", 2),
		c.submit("nope", 3),
		c.submit("echo", 4),
	}
	// A ping is not delayed behind the submits.
	c.send(arcp.TypePing, "", arcp.Ping{Nonce: "fast"})
	if env := c.next(); env.Type != arcp.TypePong {
		t.Fatalf("first answer %s, want the pong", env.Type)
	}
	var answers []string
	for len(answers) < 4 {
		env := c.nextNonPing()
		switch env.Type {
		case arcp.TypeAccepted:
			answers = append(answers, "accepted")
		case arcp.TypeError:
			e, _ := arcp.DecodePayload[arcp.Error](env)
			if e.RequestID != ids[2] {
				t.Errorf("error for %q, want %q", e.RequestID, ids[2])
			}
			answers = append(answers, "error")
		}
	}
	if got := strings.Join(answers, ","); got != "accepted,accepted,error,accepted" {
		t.Errorf("answers %s", got)
	}
	if d := time.Since(start); d < 4*delay {
		t.Errorf("4 delayed answers in %v", d)
	}
	rt.SetAcceptDelay(0)
}

func TestInjectFrame(t *testing.T) {
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	if err := rt.InjectFrame(c.sid, []byte{0, 1, 2}, true); err != nil {
		t.Fatal(err)
	}
	if err := rt.InjectFrame(c.sid, []byte(`{"arcp":"9"`), false); err != nil {
		t.Fatal(err)
	}
	if f := c.nextFrame(5 * time.Second); f.typ != websocket.MessageBinary || string(f.data) != "\x00\x01\x02" {
		t.Errorf("binary frame %v %q", f.typ, f.data)
	}
	if f := c.nextFrame(5 * time.Second); f.typ != websocket.MessageText || string(f.data) != `{"arcp":"9"` {
		t.Errorf("text frame %v %q", f.typ, f.data)
	}
	if err := rt.InjectFrame("rs_unknown", []byte("x"), false); err == nil {
		t.Error("inject into an unknown session")
	}
	rt.DropTransports()
	if err := rt.InjectFrame(c.sid, []byte("x"), false); err == nil {
		t.Error("inject without a transport")
	}
}

func TestInvalidFrames(t *testing.T) {
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	sid := c.sid
	cases := []struct{ name, data, id string }{
		{"bad version", `{"arcp":"1.0","id":"v1","type":"job.submit","session_id":"` + sid + `"}`, "v1"},
		{"no session", `{"arcp":"1.1","id":"s1","type":"job.submit","payload":{"agent":"echo"}}`, "s1"},
		{"wrong session", `{"arcp":"1.1","id":"w1","type":"job.submit","session_id":"rs_x","payload":{"agent":"echo"}}`, "w1"},
		{"bad trace", `{"arcp":"1.1","id":"t1","type":"job.submit","session_id":"` + sid + `","trace_id":"XYZ"}`, "t1"},
		{"payload not object", `{"arcp":"1.1","id":"p1","type":"job.submit","session_id":"` + sid + `","payload":[1]}`, "p1"},
		{"cancel without job", `{"arcp":"1.1","id":"c1","type":"job.cancel","session_id":"` + sid + `"}`, "c1"},
		{"wrong types", `{"arcp":1,"id":"x1","type":7}`, "x1"},
	}
	for _, tc := range cases {
		c.sendRaw([]byte(tc.data))
		if e := c.expectError(arcp.CodeInvalidRequest); e.RequestID != tc.id {
			t.Errorf("%s: request_id %q, want %q", tc.name, e.RequestID, tc.id)
		}
	}
	// Unknown and runtime-only types are refused but not counted invalid.
	for _, typ := range []string{"x.custom", arcp.TypeWelcome, arcp.TypeHello, arcp.TypeAccepted} {
		id := c.send(typ, "job_1", map[string]any{})
		if e := c.expectError(arcp.CodeInvalidRequest); e.RequestID != id {
			t.Errorf("%s: request_id %q", typ, e.RequestID)
		}
	}
	// Binary frames are ignored.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageBinary, []byte("bin")); err != nil {
		t.Fatal(err)
	}
	// The session still works.
	var seq uint64
	c.untilTerminal(c.run("echo", 1), &seq)
	st := rt.Stats()
	if st.InvalidFrames != int64(len(cases))+1 || st.UnknownTypes != 4 {
		t.Errorf("stats %+v", st)
	}
	// Garbage that names nothing is session-fatal.
	c.sendRaw([]byte(`}{`))
	if e := c.expectError(arcp.CodeInvalidRequest); e.RequestID != "" {
		t.Errorf("request_id %q", e.RequestID)
	}
	if err := c.expectClosed(); !isClose(err, websocket.StatusPolicyViolation) {
		t.Errorf("close: %v", err)
	}
	waitFor(t, "the session to end", func() bool { return rt.Stats().Sessions == 0 })
}

func TestFrameLimit(t *testing.T) {
	srv := NewTestServer(t, Options{MaxFrameBytes: 1024})
	c := open(t, srv)
	c.submit("echo", strings.Repeat("x", 2048))
	if err := c.expectClosed(); !isClose(err, websocket.StatusMessageTooBig) {
		t.Errorf("close: %v", err)
	}
	// The read limit is not the 32 KiB default.
	big := NewTestServer(t, Options{})
	b := open(t, big)
	var seq uint64
	payload := strings.Repeat("y", 1<<20)
	res := jobResult(t, b.untilTerminal(b.run("echo", payload), &seq)[0])
	if len(res.Result) != len(payload)+2 {
		t.Errorf("echo of 1 MiB returned %d bytes", len(res.Result))
	}
}

func TestListJobs(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	var ids []string
	for i := range 3 {
		id := c.run("echo", i)
		c.untilTerminal(id, &seq)
		ids = append(ids, id)
	}
	running := c.run("sleep", map[string]int{"ms": 60_000})
	c.expect(arcp.TypeEvent)

	list := func(p arcp.ListJobs) arcp.Jobs {
		t.Helper()
		rid := c.send(arcp.TypeListJobs, "", p)
		for {
			env := c.nextNonPing()
			if env.Type == arcp.TypeEvent {
				continue
			}
			if env.Type != arcp.TypeJobs {
				t.Fatalf("got %s %s", env.Type, env.Payload)
			}
			jobs, err := arcp.DecodePayload[arcp.Jobs](env)
			if err != nil || jobs.RequestID != rid {
				t.Fatalf("session.jobs %s: %v", env.Payload, err)
			}
			return jobs
		}
	}
	page := list(arcp.ListJobs{Limit: 2})
	if len(page.Jobs) != 2 || page.Jobs[0].JobID != ids[0] || page.Jobs[1].JobID != ids[1] || page.NextCursor == "" {
		t.Fatalf("page 1 %+v", page)
	}
	if j := page.Jobs[0]; j.Agent != "echo@1.0.0" || j.Status != arcp.StatusSuccess || j.AcceptedAt == "" {
		t.Errorf("job %+v", j)
	}
	page = list(arcp.ListJobs{Limit: 2, Cursor: page.NextCursor})
	if len(page.Jobs) != 2 || page.Jobs[0].JobID != ids[2] || page.Jobs[1].JobID != running || page.NextCursor != "" {
		t.Fatalf("page 2 %+v", page)
	}
	if page.Jobs[1].Status != "running" {
		t.Errorf("status %q", page.Jobs[1].Status)
	}
	page = list(arcp.ListJobs{Filter: json.RawMessage(`{"status":"running"}`)})
	if len(page.Jobs) != 1 || page.Jobs[0].JobID != running {
		t.Errorf("filtered %+v", page)
	}
	c.send(arcp.TypeListJobs, "", arcp.ListJobs{Cursor: "zzz"})
	c.expectErrorSkippingEvents(t, arcp.CodeInvalidRequest)

	// Without the feature.
	n := open(t, srv, "ack")
	rid := n.send(arcp.TypeListJobs, "", arcp.ListJobs{})
	if e := n.expectError(arcp.CodeInvalidRequest); e.RequestID != rid {
		t.Errorf("request_id %q", e.RequestID)
	}
}

func (c *client) expectErrorSkippingEvents(t *testing.T, code string) *arcp.Error {
	t.Helper()
	for {
		env := c.nextNonPing()
		if env.Type == arcp.TypeEvent {
			continue
		}
		e, _ := arcp.DecodePayload[arcp.Error](env)
		if env.Type != arcp.TypeError || e.Code != code {
			t.Fatalf("got %s %s, want %s", env.Type, env.Payload, code)
		}
		return &e
	}
}

func TestSubscribe(t *testing.T) {
	srv := NewTestServer(t, Options{Tokens: map[string]string{"tok": "alice", "bob": "bob"}})
	owner := open(t, srv)
	id := owner.run("stream", map[string]int{"count": 10, "interval_ms": 20})
	owner.expect(arcp.TypeEvent)
	owner.expect(arcp.TypeEvent)

	// A session of another principal cannot see it.
	other := dial(t, srv)
	other.hello("bob", DefaultFeatures, nil)
	other.send(arcp.TypeSubscribe, "", arcp.Subscribe{JobID: id, History: true})
	other.expectError(arcp.CodeJobNotFound)

	// One of the same principal gets history and live events, re-stamped.
	sub := open(t, srv)
	var warm uint64
	sub.untilTerminal(sub.run("echo", 0), &warm) // this session's seq is now 1
	sub.send(arcp.TypeSubscribe, "", arcp.Subscribe{JobID: id, History: true})
	if p, _ := arcp.DecodePayload[arcp.Subscribed](sub.expect(arcp.TypeSubscribed)); p.JobID != id {
		t.Errorf("subscribed %+v", p)
	}
	seq := warm
	evs := sub.untilTerminal(id, &seq)
	if len(evs) != 11 {
		t.Fatalf("subscriber got %d envelopes", len(evs))
	}
	for i, env := range evs[:10] {
		if env.SessionID != sub.sid {
			t.Errorf("session_id %q", env.SessionID)
		}
		if _, body := eventOf(t, env); body["i"] != float64(i) {
			t.Errorf("event %d: %s", i, env.Payload)
		}
	}
	// The owner saw its own numbering, unaffected.
	var oseq uint64 = 2
	owner.untilTerminal(id, &oseq)

	// Without the feature; unknown job.
	sub.send(arcp.TypeSubscribe, "", arcp.Subscribe{JobID: "job_nope"})
	sub.expectError(arcp.CodeJobNotFound)
	n := open(t, srv, "ack")
	n.send(arcp.TypeSubscribe, "", arcp.Subscribe{JobID: id})
	n.expectError(arcp.CodeInvalidRequest)
}

func TestUnsubscribe(t *testing.T) {
	srv := NewTestServer(t, Options{})
	owner := open(t, srv)
	id := owner.run("stream", map[string]int{"count": 1000, "interval_ms": 5})
	sub := open(t, srv)
	sub.send(arcp.TypeSubscribe, "", arcp.Subscribe{JobID: id})
	sub.expect(arcp.TypeSubscribed)
	sub.expect(arcp.TypeEvent)
	sub.send(arcp.TypeUnsubscribe, "", arcp.Unsubscribe{JobID: id})
	// Once the unsubscribe is processed (the ping after it is answered),
	// at most the events already on the wire arrive.
	sub.send(arcp.TypePing, "", arcp.Ping{Nonce: "u"})
	for env := sub.next(); env.Type != arcp.TypePong; env = sub.next() {
		if env.Type != arcp.TypeEvent {
			t.Fatalf("got %s", env.Type)
		}
	}
	sub.expectSilence(100 * time.Millisecond)
}

func TestBackPressure(t *testing.T) {
	srv := NewTestServer(t, Options{BackPressureThreshold: 5})
	c := open(t, srv)
	var seq uint64
	count := func(evs []*arcp.Envelope) int {
		n := 0
		for _, env := range evs {
			if ev, body := eventOf(t, env); ev.Kind == arcp.KindStatus && body["phase"] == "back_pressure" {
				n++
			}
		}
		return n
	}
	evs := c.untilTerminal(c.run("stream", map[string]int{"count": 20}), &seq)
	if n := count(evs); n != 1 {
		t.Errorf("%d back_pressure events in the first run", n)
	}
	c.send(arcp.TypeAck, "", arcp.Ack{LastProcessedSeq: seq})
	evs = c.untilTerminal(c.run("stream", map[string]int{"count": 20}), &seq)
	if n := count(evs); n != 1 {
		t.Errorf("%d back_pressure events after an ack", n)
	}
	// Without ack negotiated there is none.
	q := open(t, srv, "progress")
	seq = 0
	if n := count(q.untilTerminal(q.run("stream", map[string]int{"count": 20}), &seq)); n != 0 {
		t.Errorf("%d back_pressure events without ack", n)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, srv)
	c.run("sleep", map[string]int{"ms": 60_000})
	c2 := open(t, srv)
	c2.run("stream", map[string]int{"count": 100000, "interval_ms": 1})
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	c.expectClosed()
	c2.expectClosed()
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if st := srv.Runtime().Stats(); st.Sessions != 0 || st.LiveTransports != 0 || st.LiveJobs != 0 {
		t.Errorf("after Close: %+v", st)
	}
	// New connections are refused.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if conn, _, err := websocket.Dial(ctx, srv.URL(), nil); err == nil {
		conn.CloseNow()
		t.Error("dial after Close succeeded")
	}
}

func TestListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.1:0", "nohost"} {
		if s, err := Listen(addr, Options{}); err == nil {
			s.Close()
			t.Errorf("Listen(%q) succeeded", addr)
		}
	}
	s, err := Listen("localhost:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "ws://") || !strings.HasSuffix(s.URL(), "/arcp") {
		t.Errorf("URL %q", s.URL())
	}
}

func TestSlowConsumerIsDropped(t *testing.T) {
	// Default caps: the stream paces itself to the client for a while, then
	// gives up on a client that makes no progress.
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	// A client that never reads: only the socket buffers absorb the stream,
	// then the replay buffer evicts what was not sent yet.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	write := func(env *arcp.Envelope) {
		data, _ := arcp.Encode(env)
		if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
			t.Fatal(err)
		}
	}
	hello, _ := arcp.New(arcp.TypeHello, "", arcp.Hello{Auth: arcp.Auth{Scheme: "bearer", Token: "x"}})
	write(hello)
	waitFor(t, "the session", func() bool { return rt.Stats().Sessions == 1 })
	sid := rt.sessionIDs()[0]
	submit, _ := arcp.New(arcp.TypeSubmit, sid, arcp.Submit{Agent: "stream", Input: json.RawMessage(`{"count":100000}`)})
	write(submit)
	waitFor(t, "the slow transport to be dropped", func() bool { return rt.Stats().SlowConsumers > 0 })
	waitFor(t, "the transport to end", func() bool { return rt.Stats().LiveTransports == 0 })
	waitFor(t, "the job to finish", func() bool { return rt.Stats().LiveJobs == 0 })
}

func TestHeartbeatInterruptsBlockedWriter(t *testing.T) {
	const hb = 100 * time.Millisecond
	srv := NewTestServer(t, Options{HeartbeatInterval: hb, MaxBufferedEvents: 1 << 20, MaxBufferedBytes: 1 << 30})
	rt := srv.Runtime()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	hello, _ := arcp.New(arcp.TypeHello, "", arcp.Hello{Capabilities: arcp.Capabilities{Features: []string{"heartbeat"}}})
	data, _ := arcp.Encode(hello)
	if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session", func() bool { return rt.Stats().Sessions == 1 })
	sid := rt.sessionIDs()[0]
	submit, _ := arcp.New(arcp.TypeSubmit, sid, arcp.Submit{Agent: "stream", Input: json.RawMessage(`{"count":100000}`)})
	data, _ = arcp.Encode(submit)
	if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
	// 100000 events (about 20 MB) block the writer on a client that does not
	// read; the silent client is still dropped after two heartbeat intervals.
	waitFor(t, "the heartbeat loss", func() bool { return rt.Stats().HeartbeatLosses == 1 })
	waitFor(t, "the transport to end", func() bool { return rt.Stats().LiveTransports == 0 })
}
