package arcpruntime

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// resumeWith dials and sends a resume hello; it returns the new client and
// the answer.
func resumeWith(t *testing.T, srv *Server, old *client, token string, last uint64) (*client, *arcp.Envelope) {
	t.Helper()
	c := dial(t, srv)
	env := c.hello("tok", DefaultFeatures, &arcp.Resume{SessionID: old.sid, ResumeToken: token, LastEventSeq: last})
	return c, env
}

func TestResumeReplaysExactlyTheMissingEvents(t *testing.T) {
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	id := c.run("stream", map[string]int{"count": 30, "interval_ms": 5})
	var seq uint64
	for seq < 7 {
		env := c.expect(arcp.TypeEvent)
		if env.EventSeq != seq+1 {
			t.Fatalf("seq %d after %d", env.EventSeq, seq)
		}
		seq = env.EventSeq
	}
	// Frames the client read but did not "process" are lost with the drop.
	if n := rt.DropTransports(); n != 1 {
		t.Fatalf("DropTransports = %d", n)
	}
	c.expectClosedAbruptly(t)
	if st := rt.Stats(); st.LiveTransports != 0 || st.Sessions != 1 {
		t.Fatalf("after drop: %+v", st)
	}
	// The job keeps running while the client is away.
	waitFor(t, "the job to finish", func() bool { return rt.Stats().LiveJobs == 0 })

	c2, env := resumeWith(t, srv, c, c.welcome.ResumeToken, seq)
	if env.Type != arcp.TypeWelcome || env.SessionID != c.sid {
		t.Fatalf("resume: %s %s (session %q)", env.Type, env.Payload, env.SessionID)
	}
	if c2.welcome.ResumeToken == c.welcome.ResumeToken || c2.welcome.ResumeToken == "" {
		t.Error("resume token not rotated")
	}
	evs := c2.untilTerminal(id, &seq)
	if len(evs) != 30-7+1 || seq != 31 {
		t.Fatalf("replayed %d envelopes up to seq %d", len(evs), seq)
	}
	// Nothing after the replay but live traffic: a ping is answered next.
	c2.send(arcp.TypePing, "", arcp.Ping{Nonce: "n1"})
	if p, _ := arcp.DecodePayload[arcp.Pong](c2.expect(arcp.TypePong)); p.PingNonce != "n1" {
		t.Errorf("pong %+v", p)
	}
	// Live events continue on the same counter.
	id2 := c2.run("echo", 1)
	c2.untilTerminal(id2, &seq)
	if st := rt.Stats(); st.Resumes != 1 || st.ResumeFailures != 0 {
		t.Errorf("stats %+v", st)
	}
}

func (c *client) expectClosedAbruptly(t *testing.T) {
	t.Helper()
	if err := c.expectClosed(); !isAbrupt(err) {
		t.Errorf("expected an abrupt close, got %v", err)
	}
}

func TestResumeWhileAttachedReplacesTransport(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	c2, env := resumeWith(t, srv, c, c.welcome.ResumeToken, 0)
	if env.Type != arcp.TypeWelcome {
		t.Fatalf("resume: %s %s", env.Type, env.Payload)
	}
	c.expectClosedAbruptly(t)
	var seq uint64
	c2.untilTerminal(c2.run("echo", 1), &seq)
}

func TestResumeTokenIsSingleUse(t *testing.T) {
	srv := NewTestServer(t, Options{Tokens: map[string]string{"tok": "alice", "other": "bob"}})
	rt := srv.Runtime()
	c := open(t, srv)
	first := c.welcome.ResumeToken
	rt.DropTransports()
	c2, env := resumeWith(t, srv, c, first, 0)
	if env.Type != arcp.TypeWelcome {
		t.Fatalf("resume: %s %s", env.Type, env.Payload)
	}
	c2.sid = c.sid
	rt.DropTransports()
	// The used token is refused; the session is not harmed.
	bad, _ := resumeWith(t, srv, c, first, 0)
	bad.expectErrorIn(t, arcp.CodeUnauthenticated)
	// Another principal with the current token is refused too.
	thief := dial(t, srv)
	thief.sendHello("other", nil, &arcp.Resume{SessionID: c.sid, ResumeToken: c2.welcome.ResumeToken})
	thief.expectError(arcp.CodeUnauthenticated)
	thief.expectClosed()
	// The current token still works.
	if _, env := resumeWith(t, srv, c, c2.welcome.ResumeToken, 0); env.Type != arcp.TypeWelcome {
		t.Fatalf("current token: %s %s", env.Type, env.Payload)
	}
	if st := rt.Stats(); st.Resumes != 2 || st.ResumeFailures != 2 {
		t.Errorf("stats %+v", st)
	}
}

// expectErrorIn checks an answer already read by hello.
func (c *client) expectErrorIn(t *testing.T, code string) {
	t.Helper()
	env := c.wenvOrLast()
	e, _ := arcp.DecodePayload[arcp.Error](env)
	if env.Type != arcp.TypeError || e.Code != code {
		t.Fatalf("got %s %s, want session.error %s", env.Type, env.Payload, code)
	}
	if err := c.expectClosed(); !isClose(err, websocket.StatusPolicyViolation) {
		t.Errorf("close: %v", err)
	}
}

func TestResumeAfterResetExpires(t *testing.T) {
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	id := c.run("sleep", map[string]int{"ms": 60_000})
	rt.Reset()
	c.expectClosedAbruptly(t)
	if st := rt.Stats(); st.Sessions != 0 || st.LiveJobs != 0 || st.LiveTransports != 0 {
		t.Fatalf("after Reset: %+v", st)
	}
	if _, ok := rt.JobInput(id); ok {
		t.Error("JobInput survived Reset")
	}
	c2, _ := resumeWith(t, srv, c, c.welcome.ResumeToken, 0)
	c2.expectErrorIn(t, arcp.CodeResumeWindowExpired)
}

func TestResumeBufferNoLongerReachesBack(t *testing.T) {
	srv := NewTestServer(t, Options{MaxBufferedEvents: 10})
	rt := srv.Runtime()
	c := open(t, srv)
	c.submit("stream", map[string]int{"count": 40, "interval_ms": 5})
	c.accepted()
	c.expect(arcp.TypeEvent)
	rt.DropTransports()
	waitFor(t, "the job to finish", func() bool { return rt.Stats().LiveJobs == 0 })
	if ev := rt.Stats().EventsEvicted; ev == 0 {
		t.Fatal("nothing evicted")
	}
	c3, _ := resumeWith(t, srv, c, c.welcome.ResumeToken, 1)
	c3.expectErrorIn(t, arcp.CodeResumeWindowExpired)
	if got := rt.Stats().Sessions; got != 0 {
		t.Errorf("session kept after RESUME_WINDOW_EXPIRED: %d", got)
	}
}

func TestResumeWindowExpires(t *testing.T) {
	srv := NewTestServer(t, Options{ResumeWindow: 150 * time.Millisecond})
	rt := srv.Runtime()
	c := open(t, srv)
	if c.welcome.ResumeWindowSec != 1 {
		t.Errorf("resume_window_sec %v", c.welcome.ResumeWindowSec)
	}
	c.run("sleep", map[string]int{"ms": 60_000})
	rt.DropTransports()
	waitFor(t, "the session to expire", func() bool { st := rt.Stats(); return st.Sessions == 0 && st.LiveJobs == 0 })
	c2, _ := resumeWith(t, srv, c, c.welcome.ResumeToken, 0)
	c2.expectErrorIn(t, arcp.CodeResumeWindowExpired)
}

func TestAckFreesReplayBuffer(t *testing.T) {
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	var seq uint64
	c.untilTerminal(c.run("stream", map[string]int{"count": 9}), &seq)
	c.send(arcp.TypeAck, "", arcp.Ack{LastProcessedSeq: 5})
	// The ack is applied in order with the ping.
	c.send(arcp.TypePing, "", arcp.Ping{Nonce: "x"})
	c.expect(arcp.TypePong)
	rt.DropTransports()
	// 6.. are still there; 3.. are not.
	c2, env := resumeWith(t, srv, c, c.welcome.ResumeToken, 5)
	if env.Type != arcp.TypeWelcome {
		t.Fatalf("resume at 5: %s %s", env.Type, env.Payload)
	}
	seq = 5
	for seq < 10 {
		if e := c2.next(); e.EventSeq != seq+1 {
			t.Fatalf("replay seq %d after %d", e.EventSeq, seq)
		}
		seq++
	}
	c2.sid = c.sid
	rt.DropTransports()
	c3, _ := resumeWith(t, srv, c, c2.welcome.ResumeToken, 2)
	c3.expectErrorIn(t, arcp.CodeResumeWindowExpired)
}

func TestGracefulCloseEndsSession(t *testing.T) {
	srv := NewTestServer(t, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	c.run("sleep", map[string]int{"ms": 60_000})
	c.send(arcp.TypeClose, "", arcp.Close{Reason: "done"})
	for env := c.nextNonPing(); env.Type != arcp.TypeClosed; env = c.nextNonPing() {
		if env.Type != arcp.TypeEvent {
			t.Fatalf("got %s before session.closed", env.Type)
		}
	}
	if err := c.expectClosed(); !isClose(err, websocket.StatusNormalClosure) {
		t.Errorf("close: %v", err)
	}
	waitFor(t, "the session to end", func() bool { st := rt.Stats(); return st.Sessions == 0 && st.LiveJobs == 0 })
	c2, _ := resumeWith(t, srv, c, c.welcome.ResumeToken, 0)
	c2.expectErrorIn(t, arcp.CodeResumeWindowExpired)

	// session.bye closes without an answer.
	b := open(t, srv)
	b.send(arcp.TypeBye, "", arcp.Close{})
	if err := b.expectClosed(); !isClose(err, websocket.StatusNormalClosure) {
		t.Errorf("close after bye: %v", err)
	}
}

func TestReplayBufferByteCap(t *testing.T) {
	srv := NewTestServer(t, Options{MaxBufferedBytes: 4096})
	rt := srv.Runtime()
	c := open(t, srv)
	var seq uint64
	c.untilTerminal(c.run("stream", map[string]int{"count": 100}), &seq)
	if rt.Stats().EventsEvicted == 0 {
		t.Fatal("nothing evicted by the byte cap")
	}
	rt.DropTransports()
	// The newest events are still there; the first ones are not.
	c2, env := resumeWith(t, srv, c, c.welcome.ResumeToken, seq-3)
	if env.Type != arcp.TypeWelcome {
		t.Fatalf("resume near the end: %s %s", env.Type, env.Payload)
	}
	for want := seq - 2; want <= seq; want++ {
		if e := c2.next(); e.EventSeq != want {
			t.Fatalf("replayed seq %d, want %d", e.EventSeq, want)
		}
	}
	rt.DropTransports()
	c3, _ := resumeWith(t, srv, c, c2.welcome.ResumeToken, 1)
	c3.expectErrorIn(t, arcp.CodeResumeWindowExpired)
}
