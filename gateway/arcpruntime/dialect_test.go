package arcpruntime

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

const (
	traceA = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceB = "0af7651916cd43dd8448eb211c80319c"
)

// submitEnv sends job.submit with an envelope trace_id (may be empty) and an
// idempotency key (may be empty); it returns the envelope id.
func (c *client) submitEnv(agent string, input any, trace, key string) string {
	c.tb.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		c.tb.Fatal(err)
	}
	env, err := arcp.New(arcp.TypeSubmit, c.sid, arcp.Submit{Agent: agent, Input: raw, IdempotencyKey: key})
	if err != nil {
		c.tb.Fatal(err)
	}
	env.TraceID = trace
	data, err := arcp.Encode(env)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.sendRaw(data)
	return env.ID
}

// alive checks that the session still answers, and that nothing but
// sequenced envelopes was queued before the answer.
func (c *client) alive() {
	c.tb.Helper()
	c.send(arcp.TypePing, "", arcp.Ping{Nonce: "alive"})
	for {
		env := c.nextNonPing()
		if env.Type == arcp.TypePong {
			return
		}
		if !arcp.Sequenced(env.Type) {
			c.tb.Fatalf("got %s %s, want session.pong", env.Type, env.Payload)
		}
	}
}

func accepted(tb testing.TB, env *arcp.Envelope) arcp.Accepted {
	tb.Helper()
	if env.Type != arcp.TypeAccepted {
		tb.Fatalf("got %s %s, want job.accepted", env.Type, env.Payload)
	}
	a, err := arcp.DecodePayload[arcp.Accepted](env)
	if err != nil || a.JobID != env.JobID {
		tb.Fatalf("job.accepted %s (envelope job_id %q): %v", env.Payload, env.JobID, err)
	}
	return a
}

func dialectServer(tb testing.TB, d Dialect, opts Options) *Server {
	tb.Helper()
	opts.Dialect = d
	return withHoldAgent(NewTestServer(tb, opts))
}

func TestDialectValidate(t *testing.T) {
	for _, nd := range Dialects {
		if err := nd.Dialect.Validate(); err != nil {
			t.Errorf("%s: %v", nd.Name, err)
		}
	}
	if names := []string{Dialects[0].Name, Dialects[1].Name, Dialects[2].Name}; !slices.Equal(names, []string{"reference", "go-sdk", "ts-sdk"}) || Dialects[0].Dialect != (Dialect{}) {
		t.Errorf("Dialects %v", Dialects)
	}
	for name, d := range map[string]Dialect{
		"negative window": {ReorderWindow: -1},
		"huge window":     {ReorderWindow: maxReorderWindow + 1},
		"bye and close":   {ByeOnly: true, CloseOnly: true},
		"reject style":    {RejectAs: 7},
		"trace mode":      {Trace: -1},
		"scope":           {IdempotencyScope: 2},
		"stream":          {Stream: 3},
	} {
		if err := d.Validate(); err == nil || !strings.HasPrefix(err.Error(), "arcpruntime: invalid dialect: ") {
			t.Errorf("%s: Validate = %v", name, err)
		}
		if s, err := Listen("127.0.0.1:0", Options{Dialect: d}); err == nil {
			s.Close()
			t.Errorf("%s: Listen succeeded", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New did not panic on an invalid dialect")
		}
	}()
	New(Options{Dialect: Dialect{ReorderWindow: -1}})
}

// TestDialectPresetsServeJobs runs one job and one idempotent retry against
// every preset.
func TestDialectPresetsServeJobs(t *testing.T) {
	for _, nd := range Dialects {
		t.Run(nd.Name, func(t *testing.T) {
			srv := dialectServer(t, nd.Dialect, Options{})
			c := open(t, srv)
			c.submitEnv("echo", "hi", traceA, "k1")
			id := accepted(t, c.expect(arcp.TypeAccepted)).JobID
			var seq uint64
			if res := jobResult(t, c.untilTerminal(id, &seq)[0]); string(res.Result) != `"hi"` {
				t.Errorf("result %s", res.Result)
			}
			c.submitEnv("echo", "hi", traceB, "k1")
			if a := accepted(t, c.expect(arcp.TypeAccepted)); a.JobID != id || a.TraceID != traceA {
				t.Errorf("replayed accept %+v, want job %s trace %s", a, id, traceA)
			}
			c.alive()
		})
	}
}

func TestDialectCancelledSeq(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"reference", DialectReference},
		{"seq", Dialect{CancelledSeq: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			rt := srv.Runtime()
			c := open(t, srv)
			c.submitEnv("hold", nil, traceA, "")
			id := c.accepted()
			if ev := c.expect(arcp.TypeEvent); ev.EventSeq != 1 {
				t.Fatalf("event_seq %d", ev.EventSeq)
			}
			c.send(arcp.TypeCancel, id, arcp.Cancel{Reason: "enough"})
			env := c.expect(arcp.TypeCancelled)
			p, err := arcp.DecodePayload[arcp.Cancelled](env)
			if err != nil || p.JobID != id || p.Reason != "enough" || env.JobID != id {
				t.Fatalf("job.cancelled %s (job_id %q): %v", env.Payload, env.JobID, err)
			}
			wantSeq, wantTrace, errSeq := uint64(0), "", uint64(2)
			if tc.d.CancelledSeq {
				wantSeq, wantTrace, errSeq = 2, traceA, 3
			}
			if env.EventSeq != wantSeq || env.TraceID != wantTrace {
				t.Errorf("job.cancelled event_seq %d trace_id %q, want %d %q", env.EventSeq, env.TraceID, wantSeq, wantTrace)
			}
			end := c.expect(arcp.TypeJobError)
			if e := jobError(t, end); e.Code != arcp.CodeCancelled || end.EventSeq != errSeq {
				t.Errorf("terminal %s at seq %d, want CANCELLED at %d", end.Payload, end.EventSeq, errSeq)
			}
			// A sequenced job.cancelled is replayed like any job event.
			rt.DropTransports()
			c2, w := resumeWith(t, srv, c, c.welcome.ResumeToken, 1)
			if w.Type != arcp.TypeWelcome {
				t.Fatalf("resume: %s %s", w.Type, w.Payload)
			}
			var replayed []string
			for seq := uint64(2); seq <= errSeq; seq++ {
				env := c2.next()
				if env.EventSeq != seq {
					t.Fatalf("replayed %s at seq %d, want %d", env.Type, env.EventSeq, seq)
				}
				replayed = append(replayed, env.Type)
			}
			want := []string{arcp.TypeJobError}
			if tc.d.CancelledSeq {
				want = []string{arcp.TypeCancelled, arcp.TypeJobError}
			}
			if !slices.Equal(replayed, want) {
				t.Errorf("replayed %v, want %v", replayed, want)
			}
		})
	}
}

func TestDialectIdempotentReplayTrace(t *testing.T) {
	for _, tc := range []struct {
		name              string
		d                 Dialect
		payload, envelope string // trace ids of the replayed job.accepted
	}{
		{"reference", DialectReference, traceA, ""},
		{"retry trace", Dialect{ReplayRetryTrace: true}, traceB, ""},
		{"echo or mint", Dialect{Trace: TraceEchoOrMint}, traceA, traceA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			c := open(t, srv)
			c.submitEnv("echo", 1, traceA, "key")
			first := c.expect(arcp.TypeAccepted)
			a1 := accepted(t, first)
			var seq uint64
			c.untilTerminal(a1.JobID, &seq)
			c.submitEnv("echo", 1, traceB, "key")
			again := c.expect(arcp.TypeAccepted)
			a2 := accepted(t, again)
			if a2.JobID != a1.JobID || a2.AcceptedAt != a1.AcceptedAt || a2.Agent != a1.Agent {
				t.Errorf("replay %+v of %+v", a2, a1)
			}
			if a2.TraceID != tc.payload || again.TraceID != tc.envelope {
				t.Errorf("replayed trace_id payload %q envelope %q, want %q %q", a2.TraceID, again.TraceID, tc.payload, tc.envelope)
			}
			if first.TraceID != tc.envelope {
				t.Errorf("first accept envelope trace_id %q", first.TraceID)
			}
			c.alive()
		})
	}
}

func TestDialectTrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   TraceMode
		submit string
		// want: accept payload, accept envelope, job envelopes; "mint"
		// means one minted id for all three.
		payload, envelope, job string
	}{
		{"echo", TraceEcho, traceA, traceA, "", traceA},
		{"echo none", TraceEcho, "", "", "", ""},
		{"echo or mint", TraceEchoOrMint, traceA, traceA, traceA, traceA},
		{"mint", TraceEchoOrMint, "", "mint", "mint", "mint"},
		{"none", TraceNone, traceA, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, Dialect{Trace: tc.mode}, Options{})
			c := open(t, srv)
			c.submitEnv("sleep", map[string]int{"ms": 0}, tc.submit, "")
			env := c.expect(arcp.TypeAccepted)
			a := accepted(t, env)
			var seq uint64
			evs := c.untilTerminal(a.JobID, &seq)
			if tc.payload == "mint" {
				if !arcp.ValidTraceID(a.TraceID) || a.TraceID == traceA {
					t.Fatalf("minted trace_id %q", a.TraceID)
				}
				tc.payload, tc.envelope, tc.job = a.TraceID, a.TraceID, a.TraceID
			}
			if a.TraceID != tc.payload || env.TraceID != tc.envelope {
				t.Errorf("job.accepted trace_id payload %q envelope %q, want %q %q", a.TraceID, env.TraceID, tc.payload, tc.envelope)
			}
			for _, e := range evs {
				if e.TraceID != tc.job {
					t.Errorf("%s trace_id %q, want %q", e.Type, e.TraceID, tc.job)
				}
			}
		})
	}
}

func TestDialectRejectAs(t *testing.T) {
	type provoked struct {
		reqID string
		jobID string // the job a job.error answer names; "" for a fresh id
		seq   uint64 // the session's last event_seq before the answer
	}
	cases := []struct {
		name    string
		opts    Options
		provoke func(t *testing.T, c *client) provoked
		// Reference: session.error{code, retryable, request_id}.
		code      string
		retryable bool
		// TS: a job.error, or a session.error without request_id.
		tsCode         string
		tsSessionError bool
		tsRetryable    bool
	}{
		{
			name: "unknown agent",
			provoke: func(t *testing.T, c *client) provoked {
				return provoked{reqID: c.submit("nope", nil)}
			},
			code: arcp.CodeAgentNotAvailable, tsCode: arcp.CodeAgentNotAvailable,
		},
		{
			name: "bad input",
			provoke: func(t *testing.T, c *client) provoked {
				return provoked{reqID: c.submit("sleep", map[string]int{"ms": -1})}
			},
			code: arcp.CodeInvalidRequest, tsCode: arcp.CodeInvalidRequest,
		},
		{
			name: "bad payload",
			provoke: func(t *testing.T, c *client) provoked {
				return provoked{reqID: c.submit("", nil)}
			},
			code: arcp.CodeInvalidRequest, tsCode: arcp.CodeInvalidRequest, tsSessionError: true,
		},
		{
			name: "cap",
			opts: Options{MaxConcurrentJobs: 1},
			provoke: func(t *testing.T, c *client) provoked {
				c.run("hold", nil)
				c.expect(arcp.TypeEvent)
				return provoked{reqID: c.submit("echo", 1), seq: 1}
			},
			code: arcp.CodeResourceExhausted, retryable: true,
			tsCode: arcp.CodeInternalError, tsSessionError: true, tsRetryable: true,
		},
		{
			name: "duplicate key",
			provoke: func(t *testing.T, c *client) provoked {
				id := c.run("echo", 1, func(p *arcp.Submit) { p.IdempotencyKey = "k" })
				var seq uint64
				c.untilTerminal(id, &seq)
				return provoked{reqID: c.submit("echo", 2, func(p *arcp.Submit) { p.IdempotencyKey = "k" }), jobID: id, seq: seq}
			},
			code: arcp.CodeDuplicateKey, tsCode: arcp.CodeDuplicateKey,
		},
		{
			name: "cancel unknown job",
			provoke: func(t *testing.T, c *client) provoked {
				return provoked{reqID: c.send(arcp.TypeCancel, "job_nope", arcp.Cancel{}), jobID: "job_nope"}
			},
			code: arcp.CodeJobNotFound, tsCode: arcp.CodeJobNotFound,
		},
	}
	for _, style := range []RejectStyle{RejectSessionError, RejectJobError} {
		for _, tc := range cases {
			name := map[RejectStyle]string{RejectSessionError: "session error/", RejectJobError: "job error/"}[style] + tc.name
			t.Run(name, func(t *testing.T) {
				srv := dialectServer(t, Dialect{RejectAs: style}, tc.opts)
				c := open(t, srv)
				pr := tc.provoke(t, c)
				switch {
				case style == RejectSessionError:
					e := c.expectError(tc.code)
					if e.RequestID != pr.reqID || e.Retryable != tc.retryable {
						t.Errorf("session.error %+v, want request_id %s retryable %v", e, pr.reqID, tc.retryable)
					}
				case tc.tsSessionError:
					e := c.expectError(tc.tsCode)
					if e.RequestID != "" || e.JobID != "" || e.Retryable != tc.tsRetryable {
						t.Errorf("session.error %+v, want no request_id, retryable %v", e, tc.tsRetryable)
					}
				default:
					env := c.nextNonPing()
					je := jobError(t, env)
					if je.Code != tc.tsCode || je.FinalStatus != arcp.StatusError || je.Retryable {
						t.Errorf("job.error %s", env.Payload)
					}
					if env.EventSeq != pr.seq+1 || env.TraceID != "" {
						t.Errorf("job.error event_seq %d trace_id %q, want %d and none", env.EventSeq, env.TraceID, pr.seq+1)
					}
					switch {
					case pr.jobID != "" && env.JobID != pr.jobID:
						t.Errorf("job.error on %s, want %s", env.JobID, pr.jobID)
					case pr.jobID == "" && (!strings.HasPrefix(env.JobID, "job_") || len(env.JobID) != 4+32):
						t.Errorf("job.error on %q, want a fresh job id", env.JobID)
					}
					if tc.tsCode == arcp.CodeDuplicateKey && string(je.Details) != `{"existing_job_id":"`+pr.jobID+`"}` {
						t.Errorf("details %s", je.Details)
					}
				}
				c.alive()
			})
		}
	}
}

// TestDialectRejectJobErrorKeepsOrder: a sequenced rejection is sent after
// the answers before it and before the answers after it.
func TestDialectRejectJobErrorKeepsOrder(t *testing.T) {
	srv := dialectServer(t, Dialect{RejectAs: RejectJobError}, Options{})
	rt := srv.Runtime()
	c := open(t, srv)
	for round := range 20 {
		rt.Stall(true)
		c.submit("echo", 1)
		c.submit("nope", nil)
		c.submit("echo", 2)
		rt.Stall(false)
		var answers []string
		var results int
		var rejected string
		for results < 2 || len(answers) < 3 {
			env := c.nextNonPing()
			switch env.Type {
			case arcp.TypeAccepted:
				answers = append(answers, "accepted")
			case arcp.TypeJobError:
				answers = append(answers, "job.error")
				rejected = env.JobID
			case arcp.TypeResult:
				results++
			default:
				t.Fatalf("got %s %s", env.Type, env.Payload)
			}
		}
		if got := strings.Join(answers, ","); got != "accepted,job.error,accepted" {
			t.Fatalf("round %d: answers %s", round, got)
		}
		if _, ok := rt.JobInput(rejected); ok {
			t.Fatalf("the rejection names a job that exists: %s", rejected)
		}
	}
}

func TestDialectVersionError(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"reference", DialectReference},
		{"no request_id", Dialect{VersionErrorNoRequestID: true}},
		{"no request_id over job errors", Dialect{VersionErrorNoRequestID: true, RejectAs: RejectJobError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			c := open(t, srv)
			id := c.submit("echo@9.9.9", 1)
			e := c.expectError(arcp.CodeAgentVersionNotAvailable)
			want := id
			if tc.d.VersionErrorNoRequestID {
				want = ""
			}
			if e.RequestID != want || e.Retryable || e.JobID != "" {
				t.Errorf("session.error %+v, want request_id %q", e, want)
			}
			// The session lives on.
			var seq uint64
			c.untilTerminal(c.run("echo@1.0.0", 1), &seq)
		})
	}
}

func TestDialectHeartbeatLost(t *testing.T) {
	const hb = 100 * time.Millisecond
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"reference", DialectReference},
		{"go-sdk", Dialect{HeartbeatLostNotice: true, HeartbeatLostRetryable: true}},
		{"ts-sdk", Dialect{HeartbeatLostNotice: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{HeartbeatInterval: hb})
			rt := srv.Runtime()
			c := open(t, srv)
			id := c.run("hold", nil)
			// The client answers nothing from here on.
			if !tc.d.HeartbeatLostNotice {
				c.expectClosedAbruptly(t)
			} else {
				var env *arcp.Envelope
				for env = c.nextNonPing(); env.Type == arcp.TypeEvent; env = c.nextNonPing() {
				}
				if env.Type != arcp.TypeError || env.SessionID != c.sid {
					t.Fatalf("got %s %s", env.Type, env.Payload)
				}
				e, _ := arcp.DecodePayload[arcp.Error](env)
				if e.Code != arcp.CodeHeartbeatLost || e.Retryable != tc.d.HeartbeatLostRetryable || e.RequestID != "" {
					t.Errorf("notice %s", env.Payload)
				}
				if err := c.expectClosed(); !isClose(err, websocket.StatusNormalClosure) {
					t.Errorf("close: %v", err)
				}
			}
			waitFor(t, "the transport to end", func() bool { return rt.Stats().LiveTransports == 0 })
			if st := rt.Stats(); st.HeartbeatLosses != 1 || st.Sessions != 1 || st.LiveJobs != 1 {
				t.Errorf("stats %+v", st)
			}
			// §6.4: the session and its jobs live on for the resume window.
			c2 := dial(t, srv)
			w := c2.hello("tok", []string{"ack"}, &arcp.Resume{SessionID: c.sid, ResumeToken: c.welcome.ResumeToken, LastEventSeq: rt.sessionSeq(t, c.sid)})
			if w.Type != arcp.TypeWelcome {
				t.Fatalf("resume: %s %s", w.Type, w.Payload)
			}
			c2.send(arcp.TypeCancel, id, arcp.Cancel{})
			c2.expect(arcp.TypeCancelled)
			if e := jobError(t, c2.expect(arcp.TypeJobError)); e.Code != arcp.CodeCancelled {
				t.Errorf("terminal %+v", e)
			}
		})
	}
}

func TestDialectReorderWindow(t *testing.T) {
	t.Run("replay", func(t *testing.T) {
		srv := dialectServer(t, Dialect{ReorderWindow: 3}, Options{})
		rt := srv.Runtime()
		c := open(t, srv)
		id := c.run("stream", map[string]int{"count": 10})
		rt.DropTransports()
		waitFor(t, "the stream to end", func() bool { return rt.Stats().LiveJobs == 0 })
		c2, w := resumeWith(t, srv, c, c.welcome.ResumeToken, 0)
		if w.Type != arcp.TypeWelcome {
			t.Fatalf("resume: %s %s", w.Type, w.Payload)
		}
		var got []uint64
		for range 11 {
			env := c2.next()
			if env.JobID != id || !arcp.Sequenced(env.Type) {
				t.Fatalf("got %s %s", env.Type, env.Payload)
			}
			got = append(got, env.EventSeq)
		}
		if want := []uint64{3, 2, 1, 6, 5, 4, 9, 8, 7, 11, 10}; !slices.Equal(got, want) {
			t.Errorf("replay order %v, want %v", got, want)
		}
		// Alone, an envelope goes out at once.
		var seq uint64 = 11
		c2.untilTerminal(c2.run("echo", 1), &seq)
	})
	t.Run("live", func(t *testing.T) {
		const window, jobs, count = 2, 3, 300
		srv := dialectServer(t, Dialect{ReorderWindow: window}, Options{})
		c := open(t, srv)
		for range jobs {
			c.submit("stream", map[string]int{"count": count})
		}
		seen := make(map[uint64]bool)
		var low uint64 = 1 // the lowest seq not yet seen
		var reordered, terminals, acks int
		for low <= jobs*(count+1) {
			env := c.nextNonPing()
			if env.Type == arcp.TypeAccepted {
				acks++
				continue
			}
			q := env.EventSeq
			if q == 0 || seen[q] || q >= low+window {
				t.Fatalf("seq %d with %d the lowest missing (window %d)", q, low, window)
			}
			if q != low {
				reordered++
			}
			seen[q] = true
			for seen[low] {
				low++
			}
			if env.Type != arcp.TypeEvent {
				terminals++
			}
		}
		if acks != jobs || terminals != jobs {
			t.Errorf("%d accepts, %d terminals", acks, terminals)
		}
		t.Logf("%d of %d envelopes out of order", reordered, jobs*(count+1))
	})
}

func TestDialectRefuseCaughtUpResume(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"reference", DialectReference},
		{"ts-sdk", Dialect{RefuseCaughtUpResume: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			rt := srv.Runtime()
			// Nothing sequenced yet: a resume from 0 is not refused.
			fresh := open(t, srv)
			rt.DropTransports()
			if _, w := resumeWith(t, srv, fresh, fresh.welcome.ResumeToken, 0); w.Type != arcp.TypeWelcome {
				t.Fatalf("resume of an empty session: %s %s", w.Type, w.Payload)
			}

			c := open(t, srv)
			var seq uint64
			c.untilTerminal(c.run("echo", 1), &seq)
			rt.DropTransports()
			c2, w := resumeWith(t, srv, c, c.welcome.ResumeToken, seq)
			if !tc.d.RefuseCaughtUpResume {
				if w.Type != arcp.TypeWelcome {
					t.Fatalf("caught-up resume: %s %s", w.Type, w.Payload)
				}
				c2.alive()
				return
			}
			c2.expectErrorIn(t, arcp.CodeResumeWindowExpired)
			if e, _ := arcp.DecodePayload[arcp.Error](w); e.RequestID != "" || e.Retryable {
				t.Errorf("refusal %s", w.Payload)
			}
			// The session and its token are kept: a resume from an earlier
			// seq replays.
			if st := rt.Stats(); st.Sessions != 2 {
				t.Errorf("sessions %d", st.Sessions)
			}
			c3, w := resumeWith(t, srv, c, c.welcome.ResumeToken, seq-1)
			if w.Type != arcp.TypeWelcome {
				t.Fatalf("resume from %d: %s %s", seq-1, w.Type, w.Payload)
			}
			if env := c3.next(); env.EventSeq != seq || env.Type != arcp.TypeResult {
				t.Errorf("replayed %s at %d", env.Type, env.EventSeq)
			}
		})
	}
}

func TestDialectLoseRunningJobsOnResume(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"reference", DialectReference},
		{"ts-sdk", Dialect{LoseRunningJobsOnResume: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			rt := srv.Runtime()
			c := open(t, srv)
			id := c.run("stream", map[string]int{"count": 50, "interval_ms": 1})
			if ev := c.expect(arcp.TypeEvent); ev.EventSeq != 1 {
				t.Fatalf("event_seq %d", ev.EventSeq)
			}
			rt.DropTransports()
			// Either way the job ends: lost ones stop at their next event.
			waitFor(t, "the stream to end", func() bool { return rt.Stats().LiveJobs == 0 })
			last := rt.sessionSeq(t, c.sid)
			c2, w := resumeWith(t, srv, c, c.welcome.ResumeToken, 1)
			if w.Type != arcp.TypeWelcome {
				t.Fatalf("resume: %s %s", w.Type, w.Payload)
			}
			var replayed []*arcp.Envelope
			for seq := uint64(2); seq <= last; seq++ {
				env := c2.next()
				if env.EventSeq != seq || env.JobID != id {
					t.Fatalf("replayed %s of %s at %d, want %d", env.Type, env.JobID, env.EventSeq, seq)
				}
				replayed = append(replayed, env)
			}
			if tc.d.LoseRunningJobsOnResume {
				for _, env := range replayed {
					if env.Type != arcp.TypeEvent {
						t.Errorf("a lost job sent %s", env.Type)
					}
				}
			} else if last != 51 || replayed[len(replayed)-1].Type != arcp.TypeResult {
				t.Errorf("the job ended at %d", last)
			}
			// Nothing more of it, ever: the next envelopes are a new job's.
			seq := last
			c2.untilTerminal(c2.run("echo", 1), &seq)
		})
	}
}

func TestDialectClose(t *testing.T) {
	type outcome int
	const (
		closed  outcome = iota // session.closed (for close) and a normal close
		refused                // session.error INVALID_REQUEST; the session lives on
	)
	for _, tc := range []struct {
		name string
		d    Dialect
		typ  string
		want outcome
	}{
		{"reference close", DialectReference, arcp.TypeClose, closed},
		{"reference bye", DialectReference, arcp.TypeBye, closed},
		{"reference closed", DialectReference, arcp.TypeClosed, closed},
		{"bye-only close", Dialect{ByeOnly: true}, arcp.TypeClose, refused},
		{"bye-only closed", Dialect{ByeOnly: true}, arcp.TypeClosed, refused},
		{"bye-only bye", Dialect{ByeOnly: true}, arcp.TypeBye, closed},
		{"close-only bye", Dialect{CloseOnly: true}, arcp.TypeBye, refused},
		{"close-only closed", Dialect{CloseOnly: true}, arcp.TypeClosed, refused},
		{"close-only close", Dialect{CloseOnly: true}, arcp.TypeClose, closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			rt := srv.Runtime()
			c := open(t, srv)
			rid := c.send(tc.typ, "", arcp.Close{Reason: "done here"})
			if tc.want == refused {
				e := c.expectError(arcp.CodeInvalidRequest)
				switch {
				case tc.d.ByeOnly && (e.RequestID != "" || string(e.Details) != `{"type":"`+tc.typ+`"}`):
					t.Errorf("refusal %+v", e)
				case tc.d.CloseOnly && e.RequestID != rid:
					t.Errorf("refusal %+v, want request_id %s", e, rid)
				}
				var seq uint64
				c.untilTerminal(c.run("echo", 1), &seq)
				if st := rt.Stats(); st.Sessions != 1 {
					t.Errorf("sessions %d", st.Sessions)
				}
				return
			}
			if tc.typ == arcp.TypeClose {
				p, _ := arcp.DecodePayload[arcp.Close](c.expect(arcp.TypeClosed))
				want := "closed by client"
				if tc.d.CloseOnly {
					want = "done here"
				}
				if p.Reason != want {
					t.Errorf("session.closed reason %q, want %q", p.Reason, want)
				}
			}
			if err := c.expectClosed(); !isClose(err, websocket.StatusNormalClosure) {
				t.Errorf("close: %v", err)
			}
			waitFor(t, "the session to end", func() bool { return rt.Stats().Sessions == 0 })
		})
	}
}

func TestDialectLateAcceptAcrossResume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		d        Dialect
		replaced bool // resume while the old transport is still attached
	}{
		{"reference", DialectReference, false},
		{"late", Dialect{LateAcceptAcrossResume: true}, false},
		{"late, replacing", Dialect{LateAcceptAcrossResume: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			rt := srv.Runtime()
			c := open(t, srv)
			var seq uint64
			c.untilTerminal(c.run("echo", 1), &seq)
			rt.SetAcceptDelay(time.Hour)
			c.submit("echo", 2)
			c.submit("echo", 3)
			waitFor(t, "the submits to be read", func() bool { return rt.Stats().JobsSubmitted == 3 })
			if !tc.replaced {
				rt.DropTransports()
			}
			rt.SetAcceptDelay(0)
			c2, w := resumeWith(t, srv, c, c.welcome.ResumeToken, 0)
			if w.Type != arcp.TypeWelcome {
				t.Fatalf("resume: %s %s", w.Type, w.Payload)
			}
			if env := c2.next(); env.EventSeq != 1 || env.Type != arcp.TypeResult {
				t.Fatalf("first after the welcome: %s %s, want the replay", env.Type, env.Payload)
			}
			if !tc.d.LateAcceptAcrossResume {
				// Abandoned, as a crash would.
				c2.alive()
				if st := rt.Stats(); st.JobsAccepted != 1 {
					t.Errorf("accepted %d jobs", st.JobsAccepted)
				}
				return
			}
			var ids []string
			results := 0
			for len(ids) < 2 || results < 2 {
				env := c2.nextNonPing()
				switch env.Type {
				case arcp.TypeAccepted:
					ids = append(ids, accepted(t, env).JobID)
				case arcp.TypeResult:
					if env.EventSeq != seq+1 || !slices.Contains(ids, env.JobID) {
						t.Fatalf("result of %s at %d after %d", env.JobID, env.EventSeq, seq)
					}
					seq++
					results++
				default:
					t.Fatalf("got %s %s", env.Type, env.Payload)
				}
			}
			for i, want := range []string{"2", "3"} {
				if in, ok := rt.JobInput(ids[i]); !ok || string(in) != want {
					t.Errorf("job %d input %s, want %s", i, in, want)
				}
			}
		})
	}
}

func TestDialectReuseLiveJobID(t *testing.T) {
	t.Run("hook", func(t *testing.T) {
		srv := dialectServer(t, DialectReference, Options{})
		rt := srv.Runtime()
		c := open(t, srv)
		live := c.run("hold", nil)
		c.expect(arcp.TypeEvent)
		rt.ReuseJobIDOnce(live)
		if id := c.run("echo", 1); id != live {
			t.Fatalf("job id %s, want the live %s", id, live)
		}
		if res := c.expect(arcp.TypeResult); res.JobID != live || res.EventSeq != 2 {
			t.Errorf("result %s at %d", res.JobID, res.EventSeq)
		}
		if id := c.run("echo", 2); id == live {
			t.Error("the hook applied twice")
		}
	})
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"reference", DialectReference},
		{"reuse", Dialect{ReuseLiveJobID: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{})
			c := open(t, srv)
			live := c.run("hold", nil)
			c.expect(arcp.TypeEvent)
			id := c.run("echo", 1)
			if (id == live) != tc.d.ReuseLiveJobID {
				t.Errorf("job id %s, live job %s", id, live)
			}
			c.expect(arcp.TypeResult)
			// A keyed submit always gets a fresh id.
			if keyed := c.run("echo", 2, func(p *arcp.Submit) { p.IdempotencyKey = "k" }); keyed == live {
				t.Error("a keyed submit got the live job's id")
			}
		})
	}
}

func TestDialectIdempotencyScope(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialect
	}{
		{"session", DialectReference},
		{"principal", Dialect{IdempotencyScope: ScopePrincipal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := dialectServer(t, tc.d, Options{Tokens: map[string]string{"tok": "alice", "bob": "bob"}})
			s1 := open(t, srv)
			keyed := func(p *arcp.Submit) { p.IdempotencyKey = "k" }
			s1.submit("echo", 1, keyed)
			a1 := accepted(t, s1.expect(arcp.TypeAccepted))
			var seq uint64
			s1.untilTerminal(a1.JobID, &seq)

			s2 := open(t, srv)
			s2.submit("echo", 1, keyed)
			a2 := accepted(t, s2.expect(arcp.TypeAccepted))
			if tc.d.IdempotencyScope == ScopePrincipal {
				if a2.JobID != a1.JobID || a2.AcceptedAt != a1.AcceptedAt || a2.Agent != a1.Agent {
					t.Errorf("second session got %+v, want %+v", a2, a1)
				}
				s2.alive() // and none of the job's events
				rid := s2.submit("echo", 2, keyed)
				if e := s2.expectError(arcp.CodeDuplicateKey); e.RequestID != rid {
					t.Errorf("DUPLICATE_KEY %+v", e)
				}
			} else {
				if a2.JobID == a1.JobID {
					t.Error("second session got the first session's job")
				}
				var seq2 uint64
				s2.untilTerminal(a2.JobID, &seq2)
			}
			// Another principal never shares keys.
			bob := dial(t, srv)
			bob.hello("bob", DefaultFeatures, nil)
			bob.submit("echo", 1, keyed)
			if a := accepted(t, bob.expect(arcp.TypeAccepted)); a.JobID == a1.JobID {
				t.Error("another principal got alice's job")
			}
			// A key lives as long as its session retains the job.
			s1.send(arcp.TypeClose, "", arcp.Close{})
			s1.expect(arcp.TypeClosed)
			s1.expectClosed()
			waitFor(t, "the first session to end", func() bool { return srv.Runtime().Stats().Sessions == 2 })
			s3 := open(t, srv)
			s3.submit("echo", 1, keyed)
			if a := accepted(t, s3.expect(arcp.TypeAccepted)); a.JobID == a1.JobID {
				t.Error("a closed session's key outlived it")
			}
		})
	}
}

// chunks collects the result_chunk events of job up to its terminal.
func chunks(t *testing.T, c *client, jobID string, seq *uint64) ([]resultChunk, *arcp.Envelope) {
	t.Helper()
	var out []resultChunk
	for _, env := range c.untilTerminal(jobID, seq) {
		if env.Type != arcp.TypeEvent {
			return out, env
		}
		ev, err := arcp.DecodePayload[arcp.Event](env)
		if err != nil || ev.Kind != arcp.KindResultChunk {
			t.Fatalf("event %s: %v", env.Payload, err)
		}
		var b resultChunk
		if err := json.Unmarshal(ev.Body, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	panic("unreachable")
}

func expectedBytes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = ChunkedByte(int64(i))
	}
	return string(b)
}

func TestChunkedResult(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	var seq uint64
	if !slices.Contains(c.welcome.Capabilities.Features, arcp.FeatureResultChunk) {
		t.Fatalf("result_chunk not negotiated by default: %v", c.welcome.Capabilities.Features)
	}
	for _, tc := range []struct {
		name        string
		size, chunk int
		encoding    string
		wantChunks  int
		wantSummary string
	}{
		{name: "utf8", size: 1000, chunk: 300, encoding: "utf8", wantChunks: 4, wantSummary: "1000 bytes in 4 chunks"},
		{name: "base64", size: 1000, chunk: 300, encoding: "base64", wantChunks: 4, wantSummary: "1000 bytes in 4 chunks"},
		{name: "exact", size: 600, chunk: 300, encoding: "utf8", wantChunks: 2, wantSummary: "600 bytes in 2 chunks"},
		{name: "empty", size: 0, chunk: 300, encoding: "utf8", wantChunks: 1, wantSummary: "0 bytes in 1 chunks"},
		{name: "default chunk", size: 100_000, encoding: "", wantChunks: 2, wantSummary: "100000 bytes in 2 chunks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string]any{"size": tc.size}
			if tc.chunk > 0 {
				in["chunk_bytes"] = tc.chunk
			}
			if tc.encoding != "" {
				in["encoding"] = tc.encoding
			}
			id := c.run("chunked", in)
			got, end := chunks(t, c, id, &seq)
			assembleAndCheck(t, got, tc.size, tc.wantChunks, false)
			checkStreamedResult(t, end, got[0].ResultID, tc.size, tc.wantSummary)
		})
	}
	for _, bad := range []map[string]any{{}, {"size": -1}, {"size": 10, "chunk_bytes": 0}, {"size": 10, "encoding": "hex"}, {"size": maxChunkedSize + 1}} {
		c.submit("chunked", bad)
		c.expectError(arcp.CodeInvalidRequest)
	}
}

func assembleAndCheck(t *testing.T, got []resultChunk, size, wantChunks int, finalEmpty bool) {
	t.Helper()
	if len(got) != wantChunks {
		t.Fatalf("%d chunks, want %d", len(got), wantChunks)
	}
	var sb strings.Builder
	for i, ch := range got {
		if ch.ResultID != got[0].ResultID || !strings.HasPrefix(ch.ResultID, "res_") || ch.ChunkSeq != int64(i) {
			t.Errorf("chunk %d: %+v", i, ch)
		}
		if wantMore := i < len(got)-1; ch.More != wantMore {
			t.Errorf("chunk %d more %v", i, ch.More)
		}
		data := ch.Data
		if ch.Encoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				t.Fatalf("chunk %d: %v", i, err)
			}
			data = string(b)
		} else if ch.Encoding != "utf8" {
			t.Errorf("chunk %d encoding %q", i, ch.Encoding)
		}
		if finalEmpty && i == len(got)-1 && data != "" {
			t.Errorf("final chunk carries %d bytes", len(data))
		}
		sb.WriteString(data)
	}
	if sb.String() != expectedBytes(size) {
		t.Errorf("assembled %d bytes, not the expected %d", sb.Len(), size)
	}
}

func checkStreamedResult(t *testing.T, end *arcp.Envelope, resultID string, size int, summary string) {
	t.Helper()
	var p map[string]any
	if end.Type != arcp.TypeResult || json.Unmarshal(end.Payload, &p) != nil {
		t.Fatalf("terminal %s %s", end.Type, end.Payload)
	}
	want := map[string]any{"final_status": "success", "result_id": resultID, "result_size": float64(size)}
	if summary != "" {
		want["summary"] = summary
	}
	if len(p) != len(want) {
		t.Errorf("job.result %s, want %v", end.Payload, want)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("job.result %s: %s = %v, want %v", end.Payload, k, p[k], v)
		}
	}
}

func TestDialectStream(t *testing.T) {
	noChunk := []string{"heartbeat", "ack", "progress"}
	t.Run("final empty chunk", func(t *testing.T) {
		srv := NewTestServer(t, Options{Dialect: Dialect{ChunkFinalEmpty: true}})
		c := open(t, srv)
		var seq uint64
		id := c.run("chunked", map[string]any{"size": 600, "chunk_bytes": 300, "encoding": "base64"})
		got, end := chunks(t, c, id, &seq)
		assembleAndCheck(t, got, 600, 3, true)
		checkStreamedResult(t, end, got[0].ResultID, 600, "")
	})
	for _, tc := range []struct {
		name string
		mode StreamFallback
	}{
		{"inline", StreamInline},
		{"refuse", StreamRefuse},
		{"anyway", StreamAnyway},
	} {
		t.Run("not negotiated/"+tc.name, func(t *testing.T) {
			srv := NewTestServer(t, Options{Dialect: Dialect{Stream: tc.mode}})
			c := open(t, srv, noChunk...)
			var seq uint64
			for _, enc := range []string{"utf8", "base64"} {
				id := c.run("chunked", map[string]any{"size": 100, "chunk_bytes": 40, "encoding": enc})
				switch tc.mode {
				case StreamInline:
					res := jobResult(t, c.untilTerminal(id, &seq)[0])
					var s string
					if err := json.Unmarshal(res.Result, &s); err != nil {
						t.Fatalf("inline result %s: %v", res.Result, err)
					}
					if enc == "base64" {
						b, err := base64.StdEncoding.DecodeString(s)
						if err != nil {
							t.Fatal(err)
						}
						s = string(b)
					}
					if s != expectedBytes(100) || res.ResultID != "" {
						t.Errorf("inline result %s", res.Result)
					}
				case StreamRefuse:
					e := jobError(t, c.untilTerminal(id, &seq)[0])
					if e.Code != arcp.CodeInvalidRequest || e.FinalStatus != arcp.StatusError || e.Retryable {
						t.Errorf("job.error %+v", e)
					}
				case StreamAnyway:
					got, end := chunks(t, c, id, &seq)
					assembleAndCheck(t, got, 100, 3, false)
					checkStreamedResult(t, end, got[0].ResultID, 100, "100 bytes in 3 chunks")
				}
			}
		})
	}
}
