package arcpruntime

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

func TestHandshake(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := dial(t, srv)
	env := c.hello("any", []string{"cost.budget", "subscribe", "heartbeat", "ack", "nonsense"}, nil)
	if env.Type != arcp.TypeWelcome {
		t.Fatalf("got %s", env.Type)
	}
	w := c.welcome
	if !strings.HasPrefix(env.SessionID, "rs_") || len(env.SessionID) != 3+32 {
		t.Errorf("session_id %q", env.SessionID)
	}
	if w.Runtime.Name != DefaultName || w.Runtime.Version != DefaultVersion {
		t.Errorf("runtime %+v", w.Runtime)
	}
	if w.ResumeToken == "" || w.ResumeWindowSec != 600 {
		t.Errorf("resume_token %q, window %v", w.ResumeToken, w.ResumeWindowSec)
	}
	if want := []string{"cost.budget", "subscribe", "heartbeat", "ack"}; !slices.Equal(w.Capabilities.Features, want) {
		t.Errorf("features %v, want %v", w.Capabilities.Features, want)
	}
	if w.HeartbeatIntervalSec != 30 || string(c.wenv.Extensions[HeartbeatIntervalMSExtension]) != "30000" {
		t.Errorf("heartbeat %v, extension %s", w.HeartbeatIntervalSec, c.wenv.Extensions[HeartbeatIntervalMSExtension])
	}
	var names []string
	for _, a := range w.Capabilities.Agents {
		names = append(names, a.Name)
		if !slices.Equal(a.Versions, []string{"1.0.0"}) || a.Default != "1.0.0" {
			t.Errorf("agent %+v", a)
		}
	}
	if want := []string{"echo", "sleep", "stream", "fail", "chunked", "nest"}; !slices.Equal(names, want) {
		t.Errorf("agents %v, want %v", names, want)
	}
	// The agent list travels as objects.
	var raw struct {
		Capabilities struct {
			Agents []json.RawMessage `json:"agents"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(env.Payload, &raw); err != nil || len(raw.Capabilities.Agents) == 0 || raw.Capabilities.Agents[0][0] != '{' {
		t.Errorf("agents on the wire: %s (%v)", env.Payload, err)
	}

	// Without heartbeat: no interval.
	c2 := dial(t, srv)
	c2.hello("any", []string{"ack"}, nil)
	if c2.welcome.HeartbeatIntervalSec != 0 || c2.wenv.Extensions[HeartbeatIntervalMSExtension] != nil {
		t.Errorf("heartbeat advertised without negotiation: %s", c2.wenv.Payload)
	}
	if c2.sid == c.sid || c2.welcome.ResumeToken == w.ResumeToken {
		t.Error("sessions share an id or a token")
	}
	if got := srv.Runtime().Stats().Sessions; got != 2 {
		t.Errorf("Sessions = %d", got)
	}
}

func TestHandshakeSubSecondHeartbeat(t *testing.T) {
	srv := NewTestServer(t, Options{HeartbeatInterval: 200 * time.Millisecond})
	c := dial(t, srv)
	c.hello("", []string{"heartbeat"}, nil)
	if c.welcome.HeartbeatIntervalSec != 1 || string(c.wenv.Extensions[HeartbeatIntervalMSExtension]) != "200" {
		t.Errorf("heartbeat_interval_sec %v, extension %s", c.welcome.HeartbeatIntervalSec, c.wenv.Extensions[HeartbeatIntervalMSExtension])
	}
}

func TestHandshakeAuth(t *testing.T) {
	srv := NewTestServer(t, Options{Tokens: map[string]string{"good": "alice"}})
	bad := dial(t, srv)
	bad.sendHello("bad", nil, nil)
	e := bad.expectError(arcp.CodeUnauthenticated)
	if e.Retryable {
		t.Error("UNAUTHENTICATED is retryable")
	}
	if err := bad.expectClosed(); !isClose(err, websocket.StatusPolicyViolation) {
		t.Errorf("close: %v", err)
	}
	good := dial(t, srv)
	if env := good.hello("good", nil, nil); env.Type != arcp.TypeWelcome {
		t.Fatalf("good token: %s %s", env.Type, env.Payload)
	}
	if st := srv.Runtime().Stats(); st.AuthFailures != 1 || st.HandshakeFailures != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestHandshakeRejects(t *testing.T) {
	srv := NewTestServer(t, Options{})
	for name, data := range map[string]string{
		"not json":      `hello`,
		"bad version":   `{"arcp":"1.0","id":"1","type":"session.hello","payload":{}}`,
		"not hello":     `{"arcp":"1.1","id":"1","type":"job.submit","payload":{"agent":"echo"}}`,
		"payload array": `{"arcp":"1.1","id":"1","type":"session.hello","payload":{"client":7}}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, srv)
			c.sendRaw([]byte(data))
			c.expectError(arcp.CodeInvalidRequest)
			if err := c.expectClosed(); !isClose(err, websocket.StatusPolicyViolation) {
				t.Errorf("close: %v", err)
			}
		})
	}
}

func TestHandshakeTimeoutAndSilence(t *testing.T) {
	srv := NewTestServer(t, Options{HandshakeTimeout: 300 * time.Millisecond})
	rt := srv.Runtime()
	rt.SetHandshakeSilence(true)
	c := dial(t, srv)
	c.sendHello("", nil, nil)
	c.expectSilence(100 * time.Millisecond)
	if err := c.expectClosed(); !isAbrupt(err) {
		t.Errorf("close after handshake timeout: %v", err)
	}
	rt.SetHandshakeSilence(false)
	open(t, srv)
	// A connection that says nothing is closed too.
	quiet := dial(t, srv)
	quiet.expectClosed()
}

func TestEcho(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	for _, input := range []string{`{"a":[1,2,{"b":null}]}`, `"text"`, `42`, `null`} {
		id := c.run("echo", json.RawMessage(input))
		evs := c.untilTerminal(id, &seq)
		if len(evs) != 1 {
			t.Fatalf("echo emitted %d envelopes", len(evs))
		}
		if got := jobResult(t, evs[0]).Result; !sameJSON(got, json.RawMessage(input)) {
			t.Errorf("echo %s = %s", input, got)
		}
		if in, ok := srv.Runtime().JobInput(id); !ok || !sameJSON(in, json.RawMessage(input)) {
			t.Errorf("JobInput = %s, %v", in, ok)
		}
	}
	// No input at all is null; a pinned version works.
	c.send(arcp.TypeSubmit, "", map[string]any{"agent": "echo@1.0.0"})
	id := c.accepted()
	if got := jobResult(t, c.untilTerminal(id, &seq)[0]).Result; string(got) != "null" {
		t.Errorf("echo without input = %s", got)
	}
}

func TestSubmitRejects(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	cases := []struct {
		agent string
		input string
		code  string
	}{
		{"nope", `{}`, arcp.CodeAgentNotAvailable},
		{"echo@2.0.0", `{}`, arcp.CodeAgentVersionNotAvailable},
		{"", `{}`, arcp.CodeInvalidRequest},
		{"sleep", `{"ms":-1}`, arcp.CodeInvalidRequest},
		{"sleep", `{"ms":3600001}`, arcp.CodeInvalidRequest},
		{"sleep", `{"ms":1.5}`, arcp.CodeInvalidRequest},
		{"sleep", `{"ms":"5"}`, arcp.CodeInvalidRequest},
		{"sleep", `{}`, arcp.CodeInvalidRequest},
		{"sleep", `[1]`, arcp.CodeInvalidRequest},
		{"stream", `{"count":100001}`, arcp.CodeInvalidRequest},
		{"stream", `{"count":1,"interval_ms":60001}`, arcp.CodeInvalidRequest},
		{"fail", `{"code":5}`, arcp.CodeInvalidRequest},
	}
	for _, tc := range cases {
		id := c.submit(tc.agent, json.RawMessage(tc.input))
		e := c.expectError(tc.code)
		if e.RequestID != id {
			t.Errorf("%s %s: request_id %q, want %q", tc.agent, tc.input, e.RequestID, id)
		}
	}
	// A bad payload shape and a negative max_runtime_sec.
	id := c.send(arcp.TypeSubmit, "", map[string]any{"agent": 7})
	if e := c.expectError(arcp.CodeInvalidRequest); e.RequestID != id {
		t.Errorf("request_id %q", e.RequestID)
	}
	c.submit("echo", 1, func(s *arcp.Submit) { s.MaxRuntimeSec = -1 })
	c.expectError(arcp.CodeInvalidRequest)
	if st := srv.Runtime().Stats(); st.JobsRejected != int64(len(cases))+2 || st.JobsAccepted != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestSleep(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	id := c.run("sleep", map[string]int{"ms": 250})
	evs := c.untilTerminal(id, &seq)
	if got := jobResult(t, evs[len(evs)-1]).Result; !sameJSON(got, json.RawMessage(`{"slept_ms":250}`)) {
		t.Errorf("result %s", got)
	}
	progress := evs[:len(evs)-1]
	if len(progress) < 2 { // start and end; ticks in between depend on scheduling
		t.Fatalf("%d progress events", len(progress))
	}
	var last float64 = -1
	for _, env := range progress {
		ev, body := eventOf(t, env)
		if ev.Kind != arcp.KindProgress || body["total_ms"] != float64(250) {
			t.Errorf("event %s", env.Payload)
		}
		if el := body["elapsed_ms"].(float64); el < last {
			t.Errorf("elapsed_ms went back: %v after %v", el, last)
		} else {
			last = el
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.TS); err != nil {
			t.Errorf("ts %q", ev.TS)
		}
	}
	if last != 250 {
		t.Errorf("last elapsed_ms %v", last)
	}

	// Without the progress feature the events are status events.
	c2 := open(t, srv, "ack")
	seq = 0
	id = c2.run("sleep", map[string]int{"ms": 0})
	evs = c2.untilTerminal(id, &seq)
	if ev, body := eventOf(t, evs[0]); ev.Kind != arcp.KindStatus || body["phase"] != "sleeping" {
		t.Errorf("event without progress: %s", evs[0].Payload)
	}
}

func TestStream(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	id := c.run("stream", map[string]int{"count": 50})
	evs := c.untilTerminal(id, &seq)
	if len(evs) != 51 || seq != 51 {
		t.Fatalf("%d envelopes, last seq %d", len(evs), seq)
	}
	for i, env := range evs[:50] {
		ev, body := eventOf(t, env)
		if ev.Kind != arcp.KindLog || body["i"] != float64(i) || body["message"] == "" {
			t.Errorf("event %d: %s", i, env.Payload)
		}
	}
	if got := jobResult(t, evs[50]).Result; !sameJSON(got, json.RawMessage(`{"count":50}`)) {
		t.Errorf("result %s", got)
	}
	// Paced, and interleaved with another job on the one counter.
	c.submit("stream", map[string]int{"count": 5, "interval_ms": 20})
	c.submit("stream", map[string]int{"count": 5, "interval_ms": 20})
	var accepted []string
	seen := map[string]int{}
	for done := 0; done < 2; {
		env := c.nextNonPing()
		if env.Type == arcp.TypeAccepted {
			if seen[env.JobID] != 0 {
				t.Fatalf("job.accepted after events of %s", env.JobID)
			}
			accepted = append(accepted, env.JobID)
			continue
		}
		if env.EventSeq != seq+1 {
			t.Fatalf("event_seq %d after %d", env.EventSeq, seq)
		}
		seq = env.EventSeq
		seen[env.JobID]++
		if env.Type == arcp.TypeResult {
			done++
		}
	}
	if len(accepted) != 2 || seen[accepted[0]] != 6 || seen[accepted[1]] != 6 {
		t.Errorf("per job %v", seen)
	}
}

func TestFail(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	for code, want := range map[string]string{
		arcp.CodePermissionDenied: arcp.CodePermissionDenied,
		"SOMETHING_ELSE":          arcp.CodeInternalError,
		"":                        arcp.CodeInternalError,
	} {
		id := c.run("fail", map[string]any{"code": code, "message": "boom", "retryable": true})
		e := jobError(t, c.untilTerminal(id, &seq)[0])
		if e.Code != want || e.FinalStatus != arcp.StatusError || e.Message != "boom" || !e.Retryable {
			t.Errorf("fail %q: %+v", code, e)
		}
	}
}

func TestCancel(t *testing.T) {
	const grace = 300 * time.Millisecond
	srv := NewTestServer(t, Options{CancelGrace: grace})
	rt := srv.Runtime()
	c := open(t, srv)
	var seq uint64
	id := c.run("sleep", map[string]int{"ms": 60_000})
	if env := c.nextNonPing(); env.Type != arcp.TypeEvent {
		t.Fatalf("got %s", env.Type)
	}
	seq++
	start := time.Now()
	c.send(arcp.TypeCancel, id, arcp.Cancel{Reason: "user"})
	env := c.expect(arcp.TypeCancelled)
	if p, _ := arcp.DecodePayload[arcp.Cancelled](env); p.JobID != id || p.Reason != "user" || env.JobID != id {
		t.Errorf("job.cancelled %s", env.Payload)
	}
	evs := c.untilTerminal(id, &seq)
	e := jobError(t, evs[len(evs)-1])
	if e.Code != arcp.CodeCancelled || e.FinalStatus != arcp.StatusCancelled {
		t.Errorf("terminal %+v", e)
	}
	if d := time.Since(start); d > grace+time.Second {
		t.Errorf("cancel took %v", d)
	}
	if !rt.Cancelled(id) || rt.Cancelled("job_other") {
		t.Error("Cancelled()")
	}
	// Unknown and finished jobs.
	rid := c.send(arcp.TypeCancel, "job_unknown", arcp.Cancel{})
	if e := c.expectError(arcp.CodeJobNotFound); e.RequestID != rid {
		t.Errorf("request_id %q", e.RequestID)
	}
	c.send(arcp.TypeCancel, id, arcp.Cancel{})
	c.expectError(arcp.CodeJobNotFound)
	if st := rt.Stats(); st.JobsCancelled != 1 || st.LiveJobs != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestMaxRuntime(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	id := c.run("sleep", map[string]int{"ms": 60_000}, func(s *arcp.Submit) { s.MaxRuntimeSec = 1 })
	evs := c.untilTerminal(id, &seq)
	if e := jobError(t, evs[len(evs)-1]); e.Code != arcp.CodeTimeout || e.FinalStatus != arcp.StatusTimedOut {
		t.Errorf("terminal %+v", e)
	}
}

func TestIdempotency(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	key := func(s *arcp.Submit) { s.IdempotencyKey = "k1" }
	var seq uint64
	id := c.run("echo", map[string]int{"a": 1, "b": 2}, key)
	c.untilTerminal(id, &seq)
	// Same agent and (equivalent) input: the same job.accepted, no new job.
	c.send(arcp.TypeSubmit, "", arcp.Submit{Agent: "echo@1.0.0", Input: json.RawMessage(`{ "b": 2, "a": 1 }`), IdempotencyKey: "k1"})
	if again := c.accepted(); again != id {
		t.Errorf("repeat got job %s, want %s", again, id)
	}
	rid := c.submit("echo", map[string]int{"a": 2}, key)
	if e := c.expectError(arcp.CodeDuplicateKey); e.RequestID != rid {
		t.Errorf("request_id %q", e.RequestID)
	}
	c.submit("sleep", map[string]int{"ms": 1}, key)
	c.expectError(arcp.CodeDuplicateKey)
	if st := srv.Runtime().Stats(); st.JobsAccepted != 1 || st.JobsSubmitted != 4 {
		t.Errorf("stats %+v", st)
	}
	// Keys are per session.
	c2 := open(t, srv)
	if id2 := c2.run("echo", map[string]int{"a": 2}, key); id2 == id {
		t.Error("key shared across sessions")
	}
}

func TestMaxConcurrentJobs(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var ids []string
	for range DefaultMaxConcurrentJobs {
		c.submit("sleep", map[string]int{"ms": 60_000})
	}
	for range DefaultMaxConcurrentJobs {
		env := c.nextNonPing()
		switch env.Type {
		case arcp.TypeAccepted:
			ids = append(ids, env.JobID)
		case arcp.TypeEvent:
		default:
			t.Fatalf("got %s %s", env.Type, env.Payload)
		}
	}
	rid := c.submit("echo", 1)
	var e arcp.Error
	for {
		env := c.nextNonPing()
		if env.Type == arcp.TypeAccepted {
			ids = append(ids, env.JobID)
			continue
		}
		if env.Type == arcp.TypeError {
			e, _ = arcp.DecodePayload[arcp.Error](env)
			break
		}
	}
	if len(ids) != DefaultMaxConcurrentJobs || e.Code != arcp.CodeResourceExhausted || e.RequestID != rid || !e.Retryable {
		t.Fatalf("%d accepted, then %+v", len(ids), e)
	}
	if got := srv.Runtime().Stats().LiveJobs; got != DefaultMaxConcurrentJobs {
		t.Errorf("LiveJobs %d", got)
	}
	// Freeing one slot admits one more.
	c.send(arcp.TypeCancel, ids[0], nil)
	waitFor(t, "a free slot", func() bool { return srv.Runtime().Stats().LiveJobs < DefaultMaxConcurrentJobs })
	c.submit("echo", 1)
	for {
		env := c.nextNonPing()
		if env.Type == arcp.TypeAccepted {
			break
		}
		if env.Type == arcp.TypeError {
			t.Fatalf("after freeing a slot: %s", env.Payload)
		}
	}
}

func TestStreamPacesToLiveClient(t *testing.T) {
	// 15000 events at interval 0 are fifteen times the replay buffer: the
	// stream paces itself to the reading client instead of outrunning it
	// into a slow-consumer drop.
	srv := NewTestServer(t, Options{MaxBufferedEvents: 1000})
	c := open(t, srv)
	var seq uint64
	evs := c.untilTerminal(c.run("stream", map[string]int{"count": 15000}), &seq)
	if len(evs) != 15001+1 { // one back_pressure status (ack negotiated, never acked)
		t.Errorf("%d envelopes", len(evs))
	}
	if st := srv.Runtime().Stats(); st.SlowConsumers != 0 || st.EventsEvicted == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestCancelGraceBoundsStubbornAgent(t *testing.T) {
	const grace = 150 * time.Millisecond
	release := make(chan struct{})
	srv := newStubbornServer(t, Options{CancelGrace: grace}, release)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before the server's cleanup waits for the agent
	c := open(t, srv)
	id := c.run("stubborn", nil)
	c.expect(arcp.TypeEvent)
	seq := uint64(1)
	start := time.Now()
	c.send(arcp.TypeCancel, id, arcp.Cancel{})
	c.expect(arcp.TypeCancelled)
	e := jobError(t, c.untilTerminal(id, &seq)[0])
	d := time.Since(start)
	if e.Code != arcp.CodeCancelled || e.FinalStatus != arcp.StatusCancelled {
		t.Errorf("terminal %+v", e)
	}
	if d < grace || d > grace+2*time.Second {
		t.Errorf("CANCELLED after %v, want about %v", d, grace)
	}
	// The agent's late result is not emitted: nothing follows the terminal.
	done := srv.Runtime().jobDone(t, id)
	free()
	waitClosed(t, done, "the agent to return")
	c.send(arcp.TypePing, "", arcp.Ping{Nonce: "end"})
	c.expect(arcp.TypePong)
}
