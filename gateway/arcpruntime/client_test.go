package arcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 20 * time.Second

// frame is one message the test client read.
type frame struct {
	typ  websocket.MessageType
	data []byte
	env  *arcp.Envelope // nil if data is not a valid envelope
}

// client is a minimal raw ARCP client over a real loopback WebSocket.
type client struct {
	tb     testing.TB
	conn   *websocket.Conn
	frames chan frame
	done   chan struct{} // closed when the reader returns; then readErr is set
	mu     sync.Mutex
	err    error

	sid     string
	welcome arcp.Welcome
	wenv    *arcp.Envelope
	last    *arcp.Envelope // the answer to the last hello
}

func (c *client) wenvOrLast() *arcp.Envelope { return c.last }

// dial connects to srv; the connection lives until the test ends or close.
func dial(tb testing.TB, srv *Server) *client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	conn, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		cancel()
		tb.Fatalf("dial: %v", err)
	}
	conn.SetReadLimit(64 << 20)
	c := &client{tb: tb, conn: conn, frames: make(chan frame, 1<<16), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				return
			}
			f := frame{typ: typ, data: data}
			if env, err := arcp.Decode(data, arcp.DecodeOptions{}); err == nil {
				f.env = env
			}
			select {
			case c.frames <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	tb.Cleanup(func() {
		conn.CloseNow()
		<-c.done
		cancel()
	})
	return c
}

func (c *client) readErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// send sends an envelope of this session and returns its id.
func (c *client) send(typ, jobID string, payload any) string {
	c.tb.Helper()
	env, err := arcp.New(typ, c.sid, payload)
	if err != nil {
		c.tb.Fatalf("new %s: %v", typ, err)
	}
	env.JobID = jobID
	data, err := arcp.Encode(env)
	if err != nil {
		c.tb.Fatalf("encode: %v", err)
	}
	c.sendRaw(data)
	return env.ID
}

func (c *client) sendRaw(data []byte) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, data); err != nil {
		c.tb.Fatalf("write: %v", err)
	}
}

// hello sends session.hello and returns the answer.
func (c *client) hello(token string, features []string, resume *arcp.Resume) *arcp.Envelope {
	c.tb.Helper()
	c.sendHello(token, features, resume)
	env := c.next()
	c.last = env
	if env.Type == arcp.TypeWelcome {
		w, err := arcp.DecodePayload[arcp.Welcome](env)
		if err != nil {
			c.tb.Fatalf("welcome payload: %v", err)
		}
		c.sid, c.welcome, c.wenv = env.SessionID, w, env
	}
	return env
}

func (c *client) sendHello(token string, features []string, resume *arcp.Resume) string {
	c.tb.Helper()
	return c.send(arcp.TypeHello, "", arcp.Hello{
		Client:       arcp.ClientInfo{Name: "test", Version: "0"},
		Auth:         arcp.Auth{Scheme: "bearer", Token: token},
		Capabilities: arcp.Capabilities{Encodings: []string{"json"}, Features: features},
		Resume:       resume,
	})
}

// open dials and handshakes with all default features.
func open(tb testing.TB, srv *Server, features ...string) *client {
	tb.Helper()
	if features == nil {
		features = DefaultFeatures
	}
	c := dial(tb, srv)
	if env := c.hello("tok", features, nil); env.Type != arcp.TypeWelcome {
		tb.Fatalf("handshake: got %s %s", env.Type, env.Payload)
	}
	return c
}

// nextFrame returns the next frame, failing after d.
func (c *client) nextFrame(d time.Duration) frame {
	c.tb.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f := <-c.frames:
		return f
	case <-c.done:
		select {
		case f := <-c.frames:
			return f
		default:
		}
		c.tb.Fatalf("connection ended while waiting for a frame: %v", c.readErr())
	case <-timer.C:
		c.tb.Fatalf("no frame within %v", d)
	}
	panic("unreachable")
}

// next returns the next envelope (failing on anything else).
func (c *client) next() *arcp.Envelope {
	c.tb.Helper()
	f := c.nextFrame(10 * time.Second)
	if f.env == nil {
		c.tb.Fatalf("not an envelope: %q", f.data)
	}
	return f.env
}

// nextSkipping returns the next envelope whose type is not session.ping.
func (c *client) nextNonPing() *arcp.Envelope {
	c.tb.Helper()
	for {
		env := c.next()
		if env.Type != arcp.TypePing {
			return env
		}
	}
}

// expect returns the next envelope, which must be of type typ.
func (c *client) expect(typ string) *arcp.Envelope {
	c.tb.Helper()
	env := c.nextNonPing()
	if env.Type != typ {
		c.tb.Fatalf("got %s %s, want %s", env.Type, env.Payload, typ)
	}
	return env
}

// expectError returns the next envelope's session.error payload.
func (c *client) expectError(code string) *arcp.Error {
	c.tb.Helper()
	env := c.expect(arcp.TypeError)
	e, err := arcp.DecodePayload[arcp.Error](env)
	if err != nil {
		c.tb.Fatalf("error payload: %v", err)
	}
	if e.Code != code {
		c.tb.Fatalf("error code %s (%s), want %s", e.Code, e.Message, code)
	}
	return &e
}

// expectSilence fails if a frame arrives within d.
func (c *client) expectSilence(d time.Duration) {
	c.tb.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f := <-c.frames:
		c.tb.Fatalf("unexpected frame: %q", f.data)
	case <-timer.C:
	}
}

// expectClosed waits for the connection to end and returns the read error;
// only pings and job events may arrive before.
func (c *client) expectClosed() error {
	c.tb.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case f := <-c.frames:
			if f.env == nil || f.env.Type != arcp.TypePing && f.env.Type != arcp.TypeEvent {
				c.tb.Fatalf("unexpected frame before close: %q", f.data)
			}
		case <-c.done:
			return c.readErr()
		case <-timer.C:
			c.tb.Fatal("connection still open")
		}
	}
}

// submit sends job.submit and returns its envelope id.
func (c *client) submit(agent string, input any, mut ...func(*arcp.Submit)) string {
	c.tb.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		c.tb.Fatal(err)
	}
	p := arcp.Submit{Agent: agent, Input: raw}
	for _, m := range mut {
		m(&p)
	}
	return c.send(arcp.TypeSubmit, "", p)
}

// accepted expects job.accepted and returns the job id.
func (c *client) accepted() string {
	c.tb.Helper()
	env := c.expect(arcp.TypeAccepted)
	a, err := arcp.DecodePayload[arcp.Accepted](env)
	if err != nil || a.JobID == "" || a.JobID != env.JobID {
		c.tb.Fatalf("bad job.accepted %s (envelope job_id %q): %v", env.Payload, env.JobID, err)
	}
	if _, err := time.Parse(time.RFC3339Nano, a.AcceptedAt); err != nil {
		c.tb.Fatalf("accepted_at %q: %v", a.AcceptedAt, err)
	}
	return a.JobID
}

// run submits and waits for acceptance.
func (c *client) run(agent string, input any, mut ...func(*arcp.Submit)) string {
	c.tb.Helper()
	c.submit(agent, input, mut...)
	return c.accepted()
}

// untilTerminal collects the sequenced envelopes of job until its terminal,
// checking that event_seq continues from *seq without gaps.
func (c *client) untilTerminal(jobID string, seq *uint64) []*arcp.Envelope {
	c.tb.Helper()
	var out []*arcp.Envelope
	for {
		env := c.nextNonPing()
		if !arcp.Sequenced(env.Type) {
			c.tb.Fatalf("unexpected %s %s while waiting for job %s", env.Type, env.Payload, jobID)
		}
		if env.EventSeq != *seq+1 {
			c.tb.Fatalf("event_seq %d after %d", env.EventSeq, *seq)
		}
		*seq = env.EventSeq
		if env.JobID != jobID {
			c.tb.Fatalf("envelope of job %s while waiting for %s", env.JobID, jobID)
		}
		out = append(out, env)
		if env.Type != arcp.TypeEvent {
			return out
		}
	}
}

func jobError(tb testing.TB, env *arcp.Envelope) arcp.JobError {
	tb.Helper()
	if env.Type != arcp.TypeJobError {
		tb.Fatalf("got %s %s, want job.error", env.Type, env.Payload)
	}
	e, err := arcp.DecodePayload[arcp.JobError](env)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func jobResult(tb testing.TB, env *arcp.Envelope) arcp.Result {
	tb.Helper()
	if env.Type != arcp.TypeResult {
		tb.Fatalf("got %s %s, want job.result", env.Type, env.Payload)
	}
	r, err := arcp.DecodePayload[arcp.Result](env)
	if err != nil {
		tb.Fatal(err)
	}
	if r.FinalStatus != arcp.StatusSuccess {
		tb.Fatalf("final_status %q", r.FinalStatus)
	}
	return r
}

func eventOf(tb testing.TB, env *arcp.Envelope) (arcp.Event, map[string]any) {
	tb.Helper()
	ev, err := arcp.DecodePayload[arcp.Event](env)
	if err != nil {
		tb.Fatal(err)
	}
	var body map[string]any
	if len(ev.Body) > 0 {
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			tb.Fatalf("event body %s: %v", ev.Body, err)
		}
	}
	return ev, body
}

// waitFor polls cond until it holds, failing after a deadline.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func isClose(err error, code websocket.StatusCode) bool {
	return websocket.CloseStatus(err) == code
}

func isAbrupt(err error) bool {
	var ne net.Error
	return err != nil && websocket.CloseStatus(err) == -1 || errors.As(err, &ne)
}

// waitClosed waits for ch to be closed, failing after a deadline.
func waitClosed(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		tb.Fatalf("timed out waiting for %s", what)
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	return inputDigest(a) == inputDigest(b)
}
