package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

type caller struct{ name, token string }

// slot is one session of one caller. When the gateway loses or closes it,
// the next worker to use the slot opens a new one.
type slot struct {
	caller *caller
	mu     sync.Mutex // held while (re)opening
	id     atomic.Pointer[string]
}

// Budgets: what the gateway is asked for (x-timeout-ms) and so must answer
// within. A call's own context gets Slack + clientGrace more, so that the
// gateway's answer, not the client's timer, ends every call that ends in
// time.
const (
	clientGrace     = 3 * time.Second
	budgetOpen      = 8 * time.Second
	budgetClose     = 5 * time.Second
	budgetStatus    = 2 * time.Second
	budgetSubmit    = 5 * time.Second
	budgetCancel    = 5 * time.Second
	budgetWatch     = 25 * time.Second
	nonReadingCount = 5000
	drainLimit      = 5 * time.Second
	maxNonReading   = 2
)

// load drives the mixed load and keeps every tally.
type load struct {
	o          Options
	conns      []sessiongatev1.SessionGatewayClient
	small      sessiongatev1.SessionGatewayClient // small windows: non-reading watchers
	callers    []caller
	slots      []*slot
	logf       func(string, ...any)
	seq        atomic.Uint64 // tokens, stream counts
	nonReading chan struct{} // semaphore

	mu sync.Mutex // guards everything below
	t  tally
}

// tally is what the report is made of.
type tally struct {
	calls        map[string]map[string]int // rpc → code → n
	reasons      map[string]int            // "rpc code reason" → n, for codes other than OK
	streamEnds   map[string]int            // "code reason limit" → n: watch streams that ended with an error
	watchers     map[string]int            // watcher kind → streams
	nonReading   map[string]int            // how non-reading watchers ended
	actions      map[string]int
	opened, lost int
	streams      int // watch streams checked
	events       int // log events checked
	misdelivered int
	lostEvents   int
	dupEvents    int
	noEnd        int
	samples      map[string][]string // violation kind → first few descriptions
}

func newLoad(o Options, conns []*grpc.ClientConn, small *grpc.ClientConn, callers []caller, logf func(string, ...any)) *load {
	l := &load{o: o, small: sessiongatev1.NewSessionGatewayClient(small), callers: callers, logf: logf,
		nonReading: make(chan struct{}, maxNonReading)}
	for _, cc := range conns {
		l.conns = append(l.conns, sessiongatev1.NewSessionGatewayClient(cc))
	}
	for i := range callers {
		for range o.SessionsPerCaller {
			l.slots = append(l.slots, &slot{caller: &l.callers[i]})
		}
	}
	l.t = tally{
		calls: map[string]map[string]int{}, reasons: map[string]int{}, streamEnds: map[string]int{},
		watchers: map[string]int{}, nonReading: map[string]int{}, actions: map[string]int{}, samples: map[string][]string{},
	}
	return l
}

// actions and their weights.
var actions = []struct {
	name   string
	weight int
}{
	{"run", 30}, {"give_up", 10}, {"watch", 22}, {"slow_watch", 6}, {"non_reading", 3},
	{"cancel", 8}, {"status", 15}, {"churn", 3},
}

// run starts the workers and returns when each has finished the action it
// was in at the deadline.
func (l *load) run(ctx context.Context, until time.Time) {
	var wg sync.WaitGroup
	for w := range l.o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(l.o.Seed, uint64(w)+1))
			for ctx.Err() == nil && time.Now().Before(until) {
				l.act(ctx, rng)
			}
		}()
	}
	wg.Wait()
}

func (l *load) act(ctx context.Context, rng *rand.Rand) {
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	pick, name := rng.IntN(total), ""
	for _, a := range actions {
		if pick -= a.weight; pick < 0 {
			name = a.name
			break
		}
	}
	s := l.slots[rng.IntN(len(l.slots))]
	id, ok := l.session(ctx, s)
	if !ok {
		return
	}
	l.count(func(t *tally) { t.actions[name]++ })
	c := l.conns[rng.IntN(len(l.conns))]
	switch name {
	case "run":
		l.runEcho(ctx, c, s, id, rng)
	case "give_up":
		l.giveUp(ctx, c, s, id, rng)
	case "watch":
		l.submitAndWatch(ctx, c, s, id, rng, rng.IntN(3) == 0)
	case "slow_watch":
		l.slowWatch(ctx, c, s, id, rng)
	case "non_reading":
		select {
		case l.nonReading <- struct{}{}:
			l.nonReadingWatch(ctx, c, s, id, rng)
			<-l.nonReading
		default:
			l.runEcho(ctx, c, s, id, rng)
		}
	case "cancel":
		l.cancelWatched(ctx, c, s, id, rng)
	case "status":
		l.probe(ctx, c, s, id, rng)
	case "churn":
		l.churn(ctx, c, s, id)
	}
}

// withAuth returns the outgoing context of a call by s's caller with budget
// sent as x-timeout-ms (none if 0), and its client deadline.
func (l *load) callCtx(ctx context.Context, who *caller, budget, deadline time.Duration) (context.Context, context.CancelFunc) {
	md := []string{"authorization", "Bearer " + who.token}
	if budget > 0 {
		md = append(md, timeoutprofile.MetadataKey, strconv.FormatInt(budget.Milliseconds(), 10))
	}
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	return context.WithTimeout(ctx, deadline)
}

// call runs one unary call with a budget, and records its outcome.
func (l *load) call(ctx context.Context, who *caller, rpc string, budget time.Duration, f func(context.Context) error) *status.Status {
	cctx, cancel := l.callCtx(ctx, who, budget, budget+l.o.Slack+clientGrace)
	defer cancel()
	start := time.Now()
	err := f(cctx)
	return l.ended(ctx, rpc, start, budget, err)
}

// ended records the end of a call whose budget was budget: its code, and
// NO DEFINITE END when it ended later than budget + Slack.
func (l *load) ended(ctx context.Context, rpc string, start time.Time, budget time.Duration, err error) *status.Status {
	return l.endedAs(ctx, rpc, rpc, start, budget, err)
}

// endedAs is ended with what names the call in a violation's sample.
func (l *load) endedAs(ctx context.Context, rpc, what string, start time.Time, budget time.Duration, err error) *status.Status {
	elapsed := time.Since(start)
	st := status.Convert(err)
	if ctx.Err() != nil {
		return st // the soak itself was interrupted
	}
	l.count(func(t *tally) {
		if t.calls[rpc] == nil {
			t.calls[rpc] = map[string]int{}
		}
		t.calls[rpc][st.Code().String()]++
		if st.Code() != codes.OK {
			t.reasons[rpc+" "+st.Code().String()+" "+reasonOf(st)]++
		}
		if elapsed > budget+l.o.Slack {
			t.noEnd++
			t.sample("no_definite_end", fmt.Sprintf("%s ended %s after %v, budget %v", what, st.Code(), elapsed.Round(time.Millisecond), budget))
		}
	})
	return st
}

func (l *load) count(f func(*tally)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.t)
}

func (t *tally) sample(kind, msg string) {
	if len(t.samples[kind]) < 10 {
		t.samples[kind] = append(t.samples[kind], msg)
	}
}

// reasonOf is the ErrorInfo reason of st, with a TimeoutExceeded's limit.
func reasonOf(st *status.Status) string {
	reason, limit := "", ""
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *timeoutprofilev1.TimeoutExceeded:
			limit = d.GetLimit()
		}
	}
	if limit != "" {
		reason += ":" + limit
	}
	if reason == "" {
		reason = "-"
	}
	return reason
}

// session returns s's session id, opening one if it has none.
func (l *load) session(ctx context.Context, s *slot) (string, bool) {
	if id := s.id.Load(); id != nil {
		return *id, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := s.id.Load(); id != nil {
		return *id, true
	}
	var resp *sessiongatev1.OpenSessionResponse
	st := l.call(ctx, s.caller, "OpenSession", budgetOpen, func(cctx context.Context) (err error) {
		resp, err = l.conns[0].OpenSession(cctx, &sessiongatev1.OpenSessionRequest{ClientName: "gateway-soak"})
		return err
	})
	if st.Code() != codes.OK {
		// The proxy may be down: wait a little before the next try.
		sleepCtx(ctx, 200*time.Millisecond)
		return "", false
	}
	id := resp.GetSessionId()
	s.id.Store(&id)
	l.count(func(t *tally) { t.opened++ })
	return id, true
}

// suspect checks, after an error that can mean the session is gone, whether
// it is; a gone session is dropped from its slot.
func (l *load) suspect(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, st *status.Status) {
	switch st.Code() {
	case codes.Unavailable, codes.Unauthenticated, codes.NotFound:
	default:
		return
	}
	var resp *sessiongatev1.GetSessionStatusResponse
	pst := l.call(ctx, s.caller, "GetSessionStatus", budgetStatus, func(cctx context.Context) (err error) {
		resp, err = c.GetSessionStatus(cctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
		return err
	})
	if pst.Code() == codes.OK && resp.GetStatus() == sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		l.drop(s, id, true)
	}
}

// drop forgets s's session id if it is still id.
func (l *load) drop(s *slot, id string, lost bool) {
	if cur := s.id.Load(); cur != nil && *cur == id && s.id.CompareAndSwap(cur, nil) && lost {
		l.count(func(t *tally) { t.lost++ })
	}
}

// runEcho: RunJob(echo) with a unique token, which the result must carry.
func (l *load) runEcho(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand) {
	token := fmt.Sprintf("%s/%d/%016x", s.caller.name, l.seq.Add(1), rng.Uint64())
	in, _ := structpb.NewValue(map[string]any{"token": token, "pad": rng.IntN(1000)})
	budget := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
	var resp *sessiongatev1.RunJobResponse
	st := l.call(ctx, s.caller, "RunJob", budget, func(cctx context.Context) (err error) {
		resp, err = c.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: in})
		return err
	})
	if st.Code() != codes.OK {
		l.suspect(ctx, c, s, id, st)
		return
	}
	got := resp.GetResult().GetStructValue().GetFields()["token"].GetStringValue()
	if got != token {
		l.count(func(t *tally) {
			t.misdelivered++
			t.sample("misdelivery", fmt.Sprintf("RunJob %s (session %s): sent token %q, result %v", resp.GetJobId(), id, token, resp.GetResult()))
		})
	}
}

// giveUp: a RunJob of a sleeping job whose caller gives up early, by its
// deadline or by cancelling.
func (l *load) giveUp(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand) {
	in, _ := structpb.NewValue(map[string]any{"ms": 1500 + rng.IntN(1500)})
	after := time.Duration(150+rng.IntN(750)) * time.Millisecond
	cctx, cancel := l.callCtx(ctx, s.caller, 0, after)
	defer cancel()
	rpc := "RunJob(give up: deadline)"
	if rng.IntN(2) == 0 {
		rpc = "RunJob(give up: cancel)"
		t := time.AfterFunc(after/2, cancel)
		defer t.Stop()
	}
	start := time.Now()
	_, err := c.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "sleep", Input: in})
	l.ended(ctx, rpc, start, after, err)
}

// job is a stream job that was accepted.
type job struct {
	id    string
	count int
}

// submitStream submits a stream job of count events interval apart. Each
// job of the run gets a count of its own among many, so that an event or
// result of another job is recognised.
func (l *load) submitStream(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, count, interval int) (job, bool) {
	in, _ := structpb.NewValue(map[string]any{"count": count, "interval_ms": interval})
	var resp *sessiongatev1.SubmitJobResponse
	st := l.call(ctx, s.caller, "SubmitJob", budgetSubmit, func(cctx context.Context) (err error) {
		resp, err = c.SubmitJob(cctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "stream", Input: in})
		return err
	})
	if st.Code() != codes.OK {
		l.suspect(ctx, c, s, id, st)
		return job{}, false
	}
	return job{id: resp.GetJobId(), count: count}, true
}

// nextCount gives stream counts that differ between any two of 271
// consecutive jobs.
func (l *load) nextCount(base int) int { return base + int(l.seq.Add(1)*37%271) }

func (l *load) submitAndWatch(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand, twice bool) {
	j, ok := l.submitStream(ctx, c, s, id, l.nextCount(20), 5+rng.IntN(25))
	if !ok {
		return
	}
	if !twice {
		l.watch(ctx, c, s, id, j, "fast", nil)
		return
	}
	var wg sync.WaitGroup
	for _, kind := range []string{"fast", "slow"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pause func(int) time.Duration
			if kind == "slow" {
				pause = func(int) time.Duration { return 30 * time.Millisecond }
			}
			l.watch(ctx, c, s, id, j, kind, pause)
		}()
	}
	wg.Wait()
}

func (l *load) slowWatch(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand) {
	j, ok := l.submitStream(ctx, c, s, id, l.nextCount(20), 2+rng.IntN(10))
	if !ok {
		return
	}
	delay := time.Duration(20+rng.IntN(80)) * time.Millisecond
	l.watch(ctx, c, s, id, j, "slow", func(int) time.Duration { return delay })
}

// nonReadingWatch: a watcher on the small-window connection that reads a
// few items, stops reading for longer than the gap limit, then drains. The
// gateway must have ended the stream by its limits meanwhile: draining then
// ends within drainLimit.
func (l *load) nonReadingWatch(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand) {
	j, ok := l.submitStream(ctx, c, s, id, nonReadingCount+l.nextCount(0), 0)
	if !ok {
		return
	}
	stopAfter := 3 + rng.IntN(20)
	stall := l.o.Gap + l.o.Slack + time.Second
	l.watchOn(ctx, l.small, c, s, id, j, "non_reading", func(n int) time.Duration {
		if n == stopAfter {
			return stall
		}
		return 0
	})
}

// cancelWatched: a stream job watched and cancelled while it runs.
func (l *load) cancelWatched(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand) {
	j, ok := l.submitStream(ctx, c, s, id, l.nextCount(200), 10)
	if !ok {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.watch(ctx, c, s, id, j, "cancelled", nil)
	}()
	sleepCtx(ctx, time.Duration(100+rng.IntN(900))*time.Millisecond)
	st := l.call(ctx, s.caller, "CancelJob", budgetCancel, func(cctx context.Context) error {
		_, err := c.CancelJob(cctx, &sessiongatev1.CancelJobRequest{SessionId: id, JobId: j.id, Reason: "soak"})
		return err
	})
	if st.Code() != codes.OK {
		l.suspect(ctx, c, s, id, st)
	}
	wg.Wait()
}

// probe: GetSessionStatus of the caller's own session, and of another
// caller's session, which must not exist for this caller.
func (l *load) probe(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, rng *rand.Rand) {
	var resp *sessiongatev1.GetSessionStatusResponse
	st := l.call(ctx, s.caller, "GetSessionStatus", budgetStatus, func(cctx context.Context) (err error) {
		resp, err = c.GetSessionStatus(cctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
		return err
	})
	if st.Code() == codes.OK && resp.GetStatus() == sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		l.drop(s, id, true)
	}
	other := l.slots[rng.IntN(len(l.slots))]
	oid := other.id.Load()
	if other.caller == s.caller || oid == nil {
		return
	}
	st = l.call(ctx, s.caller, "GetSessionStatus(other caller's)", budgetStatus, func(cctx context.Context) (err error) {
		resp, err = c.GetSessionStatus(cctx, &sessiongatev1.GetSessionStatusRequest{SessionId: *oid})
		return err
	})
	if st.Code() == codes.OK && resp.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		l.count(func(t *tally) {
			t.misdelivered++
			t.sample("misdelivery", fmt.Sprintf("%s sees %s's session %s as %v", s.caller.name, other.caller.name, *oid, resp.GetStatus()))
		})
	}
}

// churn closes the slot's session; the next action opens a new one.
func (l *load) churn(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string) {
	l.drop(s, id, false)
	l.call(ctx, s.caller, "CloseSession", budgetClose, func(cctx context.Context) error {
		_, err := c.CloseSession(cctx, &sessiongatev1.CloseSessionRequest{SessionId: id, Reason: "soak churn"})
		return err
	})
}

// closeAll closes every session the soak holds.
func (l *load) closeAll(ctx context.Context) {
	for _, s := range l.slots {
		if id := s.id.Load(); id != nil {
			l.churn(ctx, l.conns[0], s, *id)
		}
	}
}

func (l *load) watch(ctx context.Context, c sessiongatev1.SessionGatewayClient, s *slot, id string, j job, kind string, pause func(int) time.Duration) {
	l.watchOn(ctx, c, c, s, id, j, kind, pause)
}

// watchOn watches job j from the start on client w and checks the stream:
// event_seq strictly increasing, log events i = 0, 1, 2, … each once and
// each naming the job's count, a result naming the job's count, and, for a
// stream that ends OK, a terminal item and (after a result) every event.
// pause(n) is how long to stop reading after the n-th item.
func (l *load) watchOn(ctx context.Context, w, c sessiongatev1.SessionGatewayClient, s *slot, id string, j job, kind string, pause func(int) time.Duration) {
	cctx, cancel := l.callCtx(ctx, s.caller, budgetWatch, budgetWatch+l.o.Slack+clientGrace)
	defer cancel()
	start := time.Now()
	chk := streamCheck{count: j.count}
	var stalled time.Time // when reading resumed after a long pause
	stream, err := w.WatchJob(cctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: j.id})
	for err == nil {
		var msg *sessiongatev1.WatchJobResponse
		if msg, err = stream.Recv(); err != nil {
			break
		}
		chk.item(msg)
		if pause != nil {
			// A slow reader stops being slow at its budget: the gateway must
			// have ended the stream by then, and what it sent before must
			// not count as late.
			if d := min(pause(chk.items), budgetWatch-time.Since(start)); d > 0 {
				sleepCtx(cctx, d)
				stalled = time.Now()
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	st := l.endedAs(ctx, "WatchJob", kind+" watcher of job "+j.id, start, budgetWatch, err)
	if ctx.Err() != nil {
		return
	}
	chk.end(st.Code())
	lost, dup, misdeliver, n, eventsTaken := chk.lost, chk.dup, chk.misdelivered, chk.items, chk.events
	l.count(func(t *tally) {
		t.streams++
		t.events += eventsTaken
		t.watchers[kind]++
		if st.Code() != codes.OK {
			t.streamEnds[st.Code().String()+" "+reasonOf(st)]++
		}
		where := fmt.Sprintf("%s watcher of job %s (session %s, count %d), %d items, ended %s %s", kind, j.id, id, j.count, n, st.Code(), reasonOf(st))
		if lost > 0 {
			t.lostEvents += lost
			t.sample("lost", fmt.Sprintf("%d lost: %s", lost, where))
		}
		if dup > 0 {
			t.dupEvents += dup
			t.sample("duplicated", fmt.Sprintf("%d duplicated: %s", dup, where))
		}
		if len(misdeliver) > 0 {
			t.misdelivered += len(misdeliver)
			t.sample("misdelivery", fmt.Sprintf("%s: %s", where, misdeliver[0]))
		}
		if kind == "non_reading" {
			switch {
			case stalled.IsZero():
				t.nonReading["ended before the stall"]++
			case st.Code() != codes.OK:
				t.nonReading["ended by the gateway: "+st.Code().String()+" "+reasonOf(st)]++
				if d := time.Since(stalled); d > drainLimit {
					t.noEnd++
					t.sample("no_definite_end", fmt.Sprintf("%s: drained for %v after the stall", where, d.Round(time.Millisecond)))
				}
			default:
				// The gateway kept the stream open through a stall longer
				// than its gap limit: its limits did not bite. That holds
				// only if the whole stream fit in the flow-control windows.
				t.nonReading["completed OK after the stall"]++
			}
		}
	})
	if st.Code() != codes.OK {
		l.suspect(ctx, c, s, id, st)
	}
}

// fill copies the tallies into rep.
func (l *load) fill(rep *Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &l.t
	rep.Calls, rep.Reasons, rep.StreamEnds = t.calls, t.reasons, t.streamEnds
	rep.Watchers, rep.NonReading, rep.Actions = t.watchers, t.nonReading, t.actions
	rep.Sessions = SessionFigures{Slots: len(l.slots), Opened: t.opened, Lost: t.lost}
	rep.Streams, rep.Events = t.streams, t.events
	rep.Misdeliveries, rep.EventsLost, rep.EventsDuplicated, rep.NoDefiniteEnd = t.misdelivered, t.lostEvents, t.dupEvents, t.noEnd
	rep.Samples = t.samples
}

// streamCheck checks one WatchJob stream of a stream job of count events,
// item by item: event_seq strictly increasing; log events with i = 0, 1,
// 2, … each exactly once, each naming the job's count; nothing after the
// terminal; a result naming the job's count. At the end, a stream that
// ended OK must have had its terminal, and after a result every event.
type streamCheck struct {
	count        int
	items        int      // items received
	events       int      // log events that passed the misdelivery check
	next         int      // the next i expected
	lastSeq      uint64   // event_seq of the previous item
	terminal     string   // "", "result" or "error CODE"
	lost, dup    int      // events lost (skipped, or missing at an OK end) and repeated
	misdelivered []string // items that belong to another job
}

func (c *streamCheck) item(msg *sessiongatev1.WatchJobResponse) {
	c.items++
	if msg.GetEventSeq() <= c.lastSeq {
		c.dup++
	}
	c.lastSeq = max(c.lastSeq, msg.GetEventSeq())
	switch {
	case c.terminal != "":
		c.misdelivered = append(c.misdelivered, fmt.Sprintf("item after the terminal: seq %d", msg.GetEventSeq()))
	case msg.GetEvent() != nil:
		ev := msg.GetEvent()
		if ev.GetKind() != "log" {
			return // e.g. the runtime's back_pressure status events
		}
		f := ev.GetBody().GetStructValue().GetFields()
		i := int(f["i"].GetNumberValue())
		if want := fmt.Sprintf("line %d of %d", i+1, c.count); f["message"].GetStringValue() != want {
			c.misdelivered = append(c.misdelivered, fmt.Sprintf("event seq %d %q, want %q", msg.GetEventSeq(), f["message"].GetStringValue(), want))
			return
		}
		c.events++
		switch {
		case i == c.next:
			c.next++
		case i < c.next:
			c.dup++
		default:
			c.lost += i - c.next // the stream went on past a gap
			c.next = i + 1
		}
	case msg.GetResult() != nil:
		c.terminal = "result"
		if got := int(msg.GetResult().GetResult().GetStructValue().GetFields()["count"].GetNumberValue()); got != c.count {
			c.misdelivered = append(c.misdelivered, fmt.Sprintf("result count %d, want %d", got, c.count))
		}
	case msg.GetError() != nil:
		c.terminal = "error " + msg.GetError().GetCode()
	}
}

// end applies the rules for a stream that ended with code. A stream that
// ended with an error ended definitely: what it did not deliver is not
// lost, only a gap in what it did deliver is.
func (c *streamCheck) end(code codes.Code) {
	if code != codes.OK {
		return
	}
	switch {
	case c.terminal == "":
		c.lost++ // ended OK without its terminal item
	case c.terminal == "result" && c.next < c.count:
		c.lost += c.count - c.next
	}
}
