package upstream_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// The wiring property test drives a real upstream.Conn, over real
// WebSockets, against a scripted runtime whose answers follow a random,
// seeded schedule: accepts in any order (echoing trace ids or not), stray
// job.errors for jobs that never existed, submits left unanswered, garbage
// instead of an answer, rejections by request id, and dropped transports.
// Callers submit the way the gateway's gRPC edge does (SubmitWith with a
// trace id always set: the caller's, or a fresh one), so a rule of the
// correlation core that the wiring hides from it is caught here. After every
// schedule it checks:
//
//  1. no caller is handed a job created for another caller's submit, nor
//     another's result (inputs carry a unique token the runtime echoes);
//  2. every caller returns by its deadline plus a bound;
//  3. once quiet, every job the runtime created is either its own caller's
//     or cancelled by the gateway.
//
// Timing makes a schedule's interleaving vary from run to run; the seed fixes
// the runtime's choices. Replay with -wiring.seed=N -wiring.mode=NAME.

var (
	flagWiringSeeds = flag.Int("wiring.seeds", 0, "schedules per mode (0: 12, 3 with -short)")
	flagWiringSeed  = flag.Uint64("wiring.seed", 0, "replay one seed")
	flagWiringMode  = flag.String("wiring.mode", "", "run one mode")
)

type wiringMode struct {
	name       string
	echo       bool    // accepts carry the submit's trace id
	reorder    bool    // submits read together are answered in any order
	stray      float64 // chance of a stray job.error before an answer
	garbage    float64 // chance a submit is answered with garbage (each time it is written)
	unanswered float64 // chance a submit is never answered
	reject     float64 // chance a submit is rejected (session.error with request_id)
	drop       float64 // chance the transport is dropped after an answer
	shared     bool    // callers share trace ids in pairs
}

var wiringModes = []wiringMode{
	{name: "reverse-echo", echo: true, reorder: true},
	{name: "reverse-no-echo", reorder: true},
	{name: "stray-errors", echo: true, stray: 0.3},
	{name: "unanswered-head", echo: true, reorder: true, unanswered: 0.25},
	{name: "garbage", echo: true, garbage: 0.3},
	{name: "mixed", echo: true, reorder: true, stray: 0.1, garbage: 0.1, unanswered: 0.1, reject: 0.1, drop: 0.05, shared: true},
	{name: "mixed-no-echo", reorder: true, stray: 0.1, garbage: 0.1, unanswered: 0.1, reject: 0.1, drop: 0.05},
}

func TestWiringProperties(t *testing.T) {
	seeds := *flagWiringSeeds
	if seeds == 0 {
		seeds = 12
		if testing.Short() {
			seeds = 3
		}
	}
	for _, m := range wiringModes {
		if *flagWiringMode != "" && m.name != *flagWiringMode {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			first, last := uint64(1), uint64(seeds)
			if *flagWiringSeed != 0 {
				first, last = *flagWiringSeed, *flagWiringSeed
			}
			for seed := first; seed <= last; seed++ {
				if err := runWiringSchedule(t, m, seed); err != nil {
					t.Fatalf("seed %d (replay: go test ./gateway/upstream -run TestWiringProperties -wiring.mode=%s -wiring.seed=%d): %v",
						seed, m.name, seed, err)
				}
			}
		})
	}
}

// scriptRT is the scripted runtime: one ARCP session, resumable, whose
// answers to submits a driver goroutine decides.
type scriptRT struct {
	t    testing.TB
	m    wiringMode
	rng  *rand.Rand // driver only
	srv  *httptest.Server
	subs chan rtSubmit

	mu      sync.Mutex
	ws      *websocket.Conn // current transport
	gen     int
	seq     uint64
	log     []rtLogged         // sequenced frames, for replay on resume
	jobs    map[string]*rtJob  // job id → its submit
	byKey   map[string]string  // idempotency key → job id
	verdict map[string]verdict // idempotency key → what the schedule decided for it
	nJob    int
}

type rtLogged struct {
	seq   uint64
	frame []byte
}

type rtJob struct {
	key, trace string
	input      string
	cancelled  bool
}

type rtSubmit struct {
	gen   int
	req   string
	trace string
	sub   arcp.Submit
}

type verdict uint8

const (
	vAccept verdict = iota
	vUnanswered
	vReject
	vGarbage
)

func newScriptRT(t testing.TB, m wiringMode, seed uint64) *scriptRT {
	rt := &scriptRT{
		t: t, m: m, rng: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15)),
		subs: make(chan rtSubmit, 1024), jobs: map[string]*rtJob{}, byKey: map[string]string{}, verdict: map[string]verdict{},
	}
	rt.srv = httptest.NewServer(http.HandlerFunc(rt.serve))
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *scriptRT) url() string { return "ws" + strings.TrimPrefix(rt.srv.URL, "http") + "/arcp" }

func (rt *scriptRT) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	ctx := r.Context()
	defer ws.CloseNow()
	_, data, err := ws.Read(ctx)
	if err != nil {
		return
	}
	env, err := arcp.Decode(data, arcp.DecodeOptions{})
	if err != nil || env.Type != arcp.TypeHello {
		return
	}
	hello, _ := arcp.DecodePayload[arcp.Hello](env)
	var from uint64
	if hello.Resume != nil {
		from = hello.Resume.LastEventSeq
	}
	welcome, _ := arcp.New(arcp.TypeWelcome, "sess-wiring", arcp.Welcome{
		Runtime: arcp.RuntimeInfo{Name: "script"}, ResumeToken: "tok", ResumeWindowSec: 60, HeartbeatIntervalSec: 30,
		Capabilities: arcp.Capabilities{Encodings: []string{"json"}, Features: []string{arcp.FeatureListJobs}},
	})
	rt.mu.Lock()
	if rt.ws != nil {
		rt.ws.CloseNow()
	}
	rt.ws, rt.gen = ws, rt.gen+1
	gen := rt.gen
	rt.writeLocked(welcome)
	for _, l := range rt.log {
		if l.seq > from {
			_ = ws.Write(ctx, websocket.MessageText, l.frame)
		}
	}
	rt.mu.Unlock()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{})
		if err != nil {
			rt.t.Errorf("runtime: undecodable frame from the gateway: %v", err)
			return
		}
		switch env.Type {
		case arcp.TypeSubmit:
			sub, _ := arcp.DecodePayload[arcp.Submit](env)
			rt.subs <- rtSubmit{gen: gen, req: env.ID, trace: env.TraceID, sub: sub}
		case arcp.TypeListJobs:
			rt.mu.Lock()
			var list []arcp.JobInfo
			for id, j := range rt.jobs {
				list = append(list, arcp.JobInfo{JobID: id, Agent: "echo", Status: "success", TraceID: rt.echoed(j.trace)})
			}
			slices.SortFunc(list, func(a, b arcp.JobInfo) int { return strings.Compare(a.JobID, b.JobID) })
			e, _ := arcp.New(arcp.TypeJobs, "sess-wiring", arcp.Jobs{RequestID: env.ID, Jobs: list})
			rt.writeLocked(e)
			rt.mu.Unlock()
		case arcp.TypeCancel:
			rt.mu.Lock()
			if j := rt.jobs[env.JobID]; j != nil {
				j.cancelled = true
				e, _ := arcp.New(arcp.TypeCancelled, "sess-wiring", arcp.Cancelled{JobID: env.JobID})
				e.JobID = env.JobID
				rt.writeLocked(e)
			} else {
				e, _ := arcp.New(arcp.TypeError, "sess-wiring", arcp.Error{Code: arcp.CodeJobNotFound, Message: "no such job", RequestID: env.ID})
				rt.writeLocked(e)
			}
			rt.mu.Unlock()
		case arcp.TypePing:
			p, _ := arcp.DecodePayload[arcp.Ping](env)
			e, _ := arcp.New(arcp.TypePong, "sess-wiring", arcp.Pong{PingNonce: p.Nonce})
			rt.mu.Lock()
			rt.writeLocked(e)
			rt.mu.Unlock()
		}
	}
}

func (rt *scriptRT) echoed(trace string) string {
	if rt.m.echo {
		return trace
	}
	return ""
}

// writeLocked writes env on the current transport; sequenced envelopes get
// the next event_seq and are kept for replay.
func (rt *scriptRT) writeLocked(env *arcp.Envelope) {
	if arcp.Sequenced(env.Type) {
		rt.seq++
		env.EventSeq = rt.seq
	}
	data, err := arcp.Encode(env)
	if err != nil {
		rt.t.Errorf("runtime: encode: %v", err)
		return
	}
	if env.EventSeq != 0 {
		rt.log = append(rt.log, rtLogged{env.EventSeq, data})
	}
	if rt.ws != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = rt.ws.Write(ctx, websocket.MessageText, data)
		cancel()
	}
}

func (rt *scriptRT) writeRawLocked(data []byte) {
	if rt.ws != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = rt.ws.Write(ctx, websocket.MessageText, data)
		cancel()
	}
}

// drive answers submits until ctx ends: it gathers what the gateway wrote
// (briefly waiting for more, so that several can be reordered), then
// answers each as the schedule says.
func (rt *scriptRT) drive(ctx context.Context) {
	var pending []rtSubmit
	for {
		if len(pending) == 0 {
			select {
			case s := <-rt.subs:
				pending = append(pending, s)
			case <-ctx.Done():
				return
			}
		}
		// Gather whatever else is written in a short window.
		gather := time.NewTimer(3 * time.Millisecond)
	collect:
		for {
			select {
			case s := <-rt.subs:
				pending = append(pending, s)
			case <-gather.C:
				break collect
			case <-ctx.Done():
				gather.Stop()
				return
			}
		}
		i := 0
		if rt.m.reorder && len(pending) > 1 {
			i = rt.rng.IntN(len(pending))
		}
		s := pending[i]
		pending = slices.Delete(pending, i, i+1)
		rt.answer(s)
		if rt.m.drop > 0 && rt.rng.Float64() < rt.m.drop {
			rt.mu.Lock()
			if rt.ws != nil {
				rt.ws.CloseNow()
				rt.ws = nil
			}
			rt.mu.Unlock()
			pending = pending[:0] // read, unanswered: lost with the transport
		}
	}
}

func (rt *scriptRT) answer(s rtSubmit) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if s.gen != rt.gen {
		return // written on a transport that is gone
	}
	if rt.m.stray > 0 && rt.rng.Float64() < rt.m.stray {
		rt.nJob++
		e, _ := arcp.New(arcp.TypeJobError, "sess-wiring", arcp.JobError{FinalStatus: "error", Code: arcp.CodeInvalidRequest, Message: "stray"})
		e.JobID = fmt.Sprintf("stray-%d", rt.nJob)
		rt.writeLocked(e)
	}
	key := s.sub.IdempotencyKey
	v, decided := rt.verdict[key]
	if !decided {
		switch r := rt.rng.Float64(); {
		case r < rt.m.unanswered:
			v = vUnanswered
		case r < rt.m.unanswered+rt.m.reject:
			v = vReject
		default:
			v = vAccept
		}
		rt.verdict[key] = v
	}
	if v == vAccept && rt.m.garbage > 0 && rt.rng.Float64() < rt.m.garbage {
		v = vGarbage
	}
	switch v {
	case vUnanswered:
		return
	case vGarbage:
		garbage := [][]byte{
			[]byte(`{"arcp":"1.1","id":"g1","type":"job.accepted","session_id":"sess-wiring","payload":{"job_id":42}}`),
			[]byte(`{"arcp":"1.1","id":"g2","type":"job.accepted","session_id":"sess-wiring","payload":{}}`),
			[]byte(`{not json`),
		}
		rt.writeRawLocked(garbage[rt.rng.IntN(len(garbage))])
		return
	case vReject:
		e, _ := arcp.New(arcp.TypeError, "sess-wiring", arcp.Error{Code: arcp.CodeInvalidRequest, Message: "rejected by the schedule", RequestID: s.req})
		rt.writeLocked(e)
		return
	}
	id, replay := rt.byKey[key]
	if !replay {
		rt.nJob++
		id = fmt.Sprintf("job-%d", rt.nJob)
		var in string
		_ = json.Unmarshal(s.sub.Input, &in)
		rt.jobs[id] = &rtJob{key: key, trace: s.trace, input: in}
		rt.byKey[key] = id
	}
	j := rt.jobs[id]
	acc, _ := arcp.New(arcp.TypeAccepted, "sess-wiring", arcp.Accepted{JobID: id, AcceptedAt: time.Now().UTC().Format(time.RFC3339), TraceID: rt.echoed(j.trace)})
	acc.JobID = id
	rt.writeLocked(acc)
	if !replay {
		res, _ := arcp.New(arcp.TypeResult, "sess-wiring", arcp.Result{FinalStatus: "success", Result: mustMarshal(j.input)})
		res.JobID = id
		rt.writeLocked(res)
	}
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (rt *scriptRT) snapshot() map[string]rtJob {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make(map[string]rtJob, len(rt.jobs))
	for id, j := range rt.jobs {
		out[id] = *j
	}
	return out
}

func runWiringSchedule(t *testing.T, m wiringMode, seed uint64) error {
	rt := newScriptRT(t, m, seed)
	rng := rand.New(rand.NewPCG(seed^0x5151, seed))
	cfg := baseConfig(rt.url())
	cfg.RequestTimeout = 400 * time.Millisecond
	cfg.InitTimeout = time.Second
	cfg.BackoffMax = 20 * time.Millisecond
	upstream.SetKnobs(&cfg, upstream.Knobs{TombstoneSlack: 1, Housekeeping: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := upstream.Dial(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close(context.Background())
	driveCtx, stopDrive := context.WithCancel(ctx)
	var drv sync.WaitGroup
	drv.Go(func() { rt.drive(driveCtx) })
	defer func() { stopDrive(); drv.Wait() }()

	type outcome struct {
		token    string
		deadline time.Duration
		job      string
		result   string
		err      error
		took     time.Duration
	}
	n := 4 + rng.IntN(8)
	res := make([]outcome, n)
	shared := randomTrace(rng)
	traces := make([]string, n)
	for i := range res {
		res[i].token = fmt.Sprintf("seed%d-caller%d", seed, i)
		res[i].deadline = time.Duration(150+rng.IntN(700)) * time.Millisecond
		traces[i] = randomTrace(rng)
		if m.shared && i%2 == 1 {
			traces[i] = shared
		}
	}
	var wg sync.WaitGroup
	for i := range res {
		wg.Go(func() {
			o := &res[i]
			start := time.Now()
			cctx, ccancel := context.WithTimeout(ctx, o.deadline)
			defer ccancel()
			acc, err := c.SubmitWith(cctx, arcp.Submit{Agent: "echo", Input: mustMarshal(o.token)}, upstream.SubmitOptions{TraceID: traces[i]})
			if err == nil {
				o.job = acc.JobID
				var term upstream.Terminal
				term, err = c.Wait(cctx, acc.JobID)
				if err == nil && term.Result != nil {
					_ = json.Unmarshal(term.Result.Result, &o.result)
				}
			}
			o.err, o.took = err, time.Since(start)
		})
	}
	wg.Wait()

	jobs := rt.snapshot()
	for i, o := range res {
		if o.job != "" {
			j, ok := jobs[o.job]
			if !ok {
				return fmt.Errorf("caller %d was handed job %s, which the runtime never created", i, o.job)
			}
			if j.input != o.token {
				return fmt.Errorf("MISDELIVERY: caller %d (token %s) was handed job %s created for token %s", i, o.token, o.job, j.input)
			}
			if o.err == nil && o.result != o.token {
				return fmt.Errorf("MISDELIVERY: caller %d (token %s) got result %q", i, o.token, o.result)
			}
		}
		if o.took > o.deadline+time.Second {
			return fmt.Errorf("caller %d returned %v after its %v deadline (%v)", i, o.took-o.deadline, o.deadline, o.err)
		}
		if o.err != nil && !expectedWiringErr(o.err) {
			return fmt.Errorf("caller %d: unexpected error %v", i, o.err)
		}
	}
	// Quiet: every job the runtime created is its own caller's or is
	// cancelled (late accepts of abandoned submits become orphans).
	stopDrive()
	drv.Wait()
	mine := map[string]bool{}
	for _, o := range res {
		if o.job != "" {
			mine[o.job] = true // its caller's, whether or not its Wait ended in time
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	settle := time.NewTimer(5 * time.Second)
	defer settle.Stop()
	for {
		var open []string
		for id, j := range rt.snapshot() {
			if !mine[id] && !j.cancelled {
				open = append(open, id)
			}
		}
		if len(open) == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-settle.C:
			slices.Sort(open)
			return fmt.Errorf("jobs neither handed to their caller nor cancelled: %v", open)
		}
	}
}

func expectedWiringErr(err error) bool {
	var ae *arcp.Error
	var fault *upstream.RuntimeFaultError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &fault), errors.As(err, &ae),
		errors.Is(err, upstream.ErrOutcomeUnknown):
		return true
	}
	var je *arcp.JobError
	return errors.As(err, &je)
}

func randomTrace(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	b[0] |= 1
	return hex.EncodeToString(b[:])
}
