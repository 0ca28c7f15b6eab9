package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// sessionHeader is the metadata every call on a session carries (the
// balancer hashes it; the gateway checks it against the body).
const sessionHeader = "x-sessiongate-session"

// attemptCounter is a client stats handler that counts the attempts of
// each call: grpc-go's retry runs beneath the interceptors, but begins
// every attempt with a stats.Begin in the call's context.
type attemptCounter struct{}

type attemptsKey struct{}

func (*attemptCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (*attemptCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if b, ok := s.(*stats.Begin); ok && b.IsClient() {
		if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok {
			n.Add(1)
		}
	}

}
func (*attemptCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (*attemptCounter) HandleConn(context.Context, stats.ConnStats) {}

// withAttempts returns a context that counts the attempts of one call.
func withAttempts(ctx context.Context) (context.Context, *atomic.Int32) {
	n := new(atomic.Int32)
	return context.WithValue(ctx, attemptsKey{}, n), n
}

// reason is a failed call's gRPC code and the reason of its ErrorInfo;
// without one ("-": grpc-go's own errors, a balancer's), a class of its
// message.
func reason(err error) string {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			return st.Code().String() + " " + info.GetReason()
		}
	}
	return st.Code().String() + " - (" + messageClass(st.Message()) + ")"
}

// messageClass names what a status without ErrorInfo says, without the
// addresses and numbers that vary from call to call.
func messageClass(m string) string {
	for _, c := range []struct{ has, class string }{
		{"connection refused", "connection refused"},
		{"connection reset", "connection reset"},
		{"RST_STREAM", "stream reset"},
		{"GOAWAY", "GOAWAY"},
		{"status code received from server: 502", "HTTP 502 from the balancer"},
		{"status code received from server: 504", "HTTP 504 from the balancer"},
		{"status code received from server: 503", "HTTP 503 from the balancer"},
		{"status code received from server", "HTTP error status from the balancer"},
		{"stream ended without", "stream ended without the job's end"},
		{"deadline", "deadline"},
		{"EOF", "EOF"},
		{"error reading from server", "read error"},
		{"closing", "transport closing"},
		{"no children to pick from", "no ready replica"},
	} {
		if strings.Contains(m, c.has) {
			return c.class
		}
	}
	if len(m) > 60 {
		m = m[:60]
	}
	return m
}

// lostSession: the answer says the session is gone (NOT_FOUND of the
// session, or SESSION_LOST whatever the code).
func lostSession(err error) bool {
	r := reason(err)
	return strings.HasSuffix(r, " SESSION_LOST") || r == "NotFound SESSION_NOT_FOUND" ||
		(status.Code(err) == codes.NotFound && strings.Contains(r, " - ("))
}

// route is one way to the gateways: nginx, or the replicas directly.
type route struct {
	name string
	gw   sessiongatev1.SessionGatewayClient
}

// load is the mixed load: one RunJob loop per session, watchers that
// submit stream jobs and watch them to the end (resuming from the cursor),
// one GetSessionStatus prober. Everything it sees goes to the recorder.
type load struct {
	o      Options
	rec    *recorder
	routes []route
	nginx  sessiongatev1.SessionGatewayClient

	mu  sync.Mutex
	ids []string // session id of each slot (a lost session is replaced)
}

// newLoad is the load over two connections: through the balancer, and to
// the replicas directly.
func newLoad(o Options, viaNginx, direct grpc.ClientConnInterface, rec *recorder) *load {
	ng := sessiongatev1.NewSessionGatewayClient(viaNginx)
	return &load{o: o, rec: rec, nginx: ng, routes: []route{
		{"nginx", ng},
		{"direct", sessiongatev1.NewSessionGatewayClient(direct)},
	}}
}

func (l *load) id(slot int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[slot]
}

// open opens the sessions, half through nginx and half directly.
func (l *load) open(ctx context.Context) error {
	for i := range l.o.Sessions {
		id, err := l.openOne(ctx, l.routes[i%2].gw)
		if err != nil {
			return fmt.Errorf("open session %d: %w", i, err)
		}
		l.ids = append(l.ids, id)
	}
	return nil
}

func (l *load) openOne(ctx context.Context, gw sessiongatev1.SessionGatewayClient) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, l.o.CallTimeout)
	defer cancel()
	resp, err := gw.OpenSession(cctx, &sessiongatev1.OpenSessionRequest{ClientName: "gateway-chaos"}, grpc.WaitForReady(true))
	return resp.GetSessionId(), err
}

// replace notes slot's session as lost and opens a new one for the slot,
// as a caller would (retrying until ctx ends).
func (l *load) replace(ctx context.Context, slot int, old string) {
	if !l.rec.sessionLost(slot, old) {
		return // already replaced by another worker
	}
	for ctx.Err() == nil {
		id, err := l.openOne(ctx, l.nginx)
		if err == nil {
			l.mu.Lock()
			if l.ids[slot] == old {
				l.ids[slot] = id
			}
			l.mu.Unlock()
			return
		}
		l.rec.call("OpenSession", "nginx", slot, err, 1, time.Now(), 0)
		pause(ctx, 100*time.Millisecond)
	}
}

// run starts the workers; they stop when ctx ends, and run returns then.
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	for s := range l.o.Sessions {
		wg.Go(func() { l.runJobs(ctx, s) })
	}
	for w := range l.o.Watchers {
		wg.Go(func() { l.watch(ctx, w) })
	}
	wg.Go(func() { l.probe(ctx) })
	wg.Wait()
}

func sessionCtx(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, sessionHeader, id)
}

// runJobs calls RunJob(echo) on slot's session in a loop, through nginx
// and directly in turn, each call with a fresh token the result must echo.
func (l *load) runJobs(ctx context.Context, slot int) {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	prefix := fmt.Sprintf("s%d-%s-", slot, hex.EncodeToString(nonce[:]))
	for n := 0; ctx.Err() == nil; n++ {
		id := l.id(slot)
		token := prefix + strconv.Itoa(n)
		in, _ := structpb.NewValue(map[string]any{"token": token})
		cctx, cancel := context.WithTimeout(sessionCtx(ctx, id), l.o.CallTimeout)
		cctx, attempts := withAttempts(cctx)
		rt := l.routes[n%len(l.routes)]
		start := time.Now()
		var hdr, trl metadata.MD
		resp, err := rt.gw.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: in, IdempotencyKey: callKey()},
			grpc.Header(&hdr), grpc.Trailer(&trl))
		cancel()
		if ctx.Err() != nil {
			return // the run ended: not a call outcome
		}
		now := time.Now()
		if err == nil {
			got := resp.GetResult().GetStructValue().GetFields()["token"].GetStringValue()
			if got != token {
				// The whole answer: its size and fields unknown to
				// RunJobResponse too (another message's bytes would
				// show there), the owner hints, and the call's attempts.
				l.rec.misdelivered(fmt.Sprintf("RunJob on %s via %s: sent token %q, got %d bytes {%s} unknown %x; header %v, trailer %v; %d attempts in %v, at %s",
					id, rt.name, token, proto.Size(resp), prototext.MarshalOptions{EmitUnknown: true}.Format(resp),
					resp.ProtoReflect().GetUnknown(), hdr, trl, attempts.Load(), time.Since(start).Round(time.Millisecond), now.UTC().Format(time.RFC3339Nano)))
			}
		}
		l.rec.call("RunJob", rt.name, slot, err, attempts.Load(), now, now.Sub(start))
		if err != nil {
			if lostSession(err) {
				l.replace(ctx, slot, id)
			}
			pause(ctx, 50*time.Millisecond)
		} else if l.o.Think > 0 {
			pause(ctx, l.o.Think)
		}
	}
}

// probe calls GetSessionStatus on each session in turn, through nginx and
// directly in turn, and notes each session's owner.
func (l *load) probe(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		slot := n % l.o.Sessions
		id := l.id(slot)
		cctx, cancel := context.WithTimeout(sessionCtx(ctx, id), l.o.CallTimeout)
		cctx, attempts := withAttempts(cctx)
		rt := l.routes[(n/l.o.Sessions)%len(l.routes)]
		resp, err := rt.gw.GetSessionStatus(cctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			l.rec.owner(slot, resp.GetInstanceId())
		}
		l.rec.call("GetSessionStatus", rt.name, slot, err, attempts.Load(), time.Now(), 0)
		if err != nil && lostSession(err) {
			l.replace(ctx, slot, id)
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// watch runs stream jobs on the session of slot w (mod sessions) one after
// another: SubmitJob, then WatchJob until the result, a broken watch
// resumed from its last event_seq through the next route, as a client
// would. Each job's events are checked: every index exactly once, in
// order, each naming this job's count (another count = misdelivered).
func (l *load) watch(ctx context.Context, w int) {
	slot := w % l.o.Sessions
	for job := 0; ctx.Err() == nil; job++ {
		// A count of its own for each concurrent job, so that an event of
		// another job is recognised.
		count := l.o.Events + 4*w + job%4
		id := l.id(slot)
		in, _ := structpb.NewValue(map[string]any{"count": count, "interval_ms": l.o.EventInterval.Milliseconds()})
		cctx, cancel := context.WithTimeout(sessionCtx(ctx, id), l.o.CallTimeout)
		cctx, attempts := withAttempts(cctx)
		r := (w + job) % len(l.routes)
		start := time.Now()
		sub, err := l.routes[r].gw.SubmitJob(cctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "stream", Input: in, IdempotencyKey: callKey()})
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.rec.call("SubmitJob", l.routes[r].name, slot, err, attempts.Load(), time.Now(), time.Since(start))
		if err != nil {
			if lostSession(err) {
				l.replace(ctx, slot, id)
			}
			pause(ctx, 100*time.Millisecond)
			continue
		}
		l.watchJob(ctx, slot, id, sub.GetJobId(), sub.GetAfterEventSeq(), count, r)
	}
}

// jobCheck is what one watched job delivered.
type jobCheck struct {
	count      int
	seen       []int // deliveries of each index
	outOfOrder int   // an index delivered after a higher one
	misdeliver int
	high       int // highest index delivered, -1 before any
	result     bool
}

// The watch starts from the SubmitJob's after_event_seq, as the project's
// clients do: the same events as from 0, and a watch cut before its first
// event continues on a replica that took the session over.
func (l *load) watchJob(ctx context.Context, slot int, id, job string, after uint64, count, r int) {
	jc := &jobCheck{count: count, seen: make([]int, count), high: -1}
	cursor := after
	lastProgress := time.Now()
	backoff := 50 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		if !first {
			l.rec.resume()
		}
		first = false
		rt := l.routes[r%len(l.routes)]
		progressed, end, err := l.watchOnce(ctx, id, job, &cursor, jc, rt.gw)
		if ctx.Err() != nil {
			return // the run ended: the job is not judged
		}
		if progressed {
			lastProgress, backoff = time.Now(), 50*time.Millisecond
		}
		if end != "" {
			l.rec.watchEnded(jc, end)
			return
		}
		l.rec.watchCut(rt.name, err)
		if lostSession(err) {
			l.rec.watchEnded(jc, "session lost: "+reason(err))
			l.replace(ctx, slot, id)
			return
		}
		if time.Since(lastProgress) > l.o.WatchGiveUp {
			l.rec.watchEnded(jc, "abandoned after "+reason(err))
			return
		}
		r++ // resume through the other route
		pause(ctx, backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// watchOnce reads one WatchJob stream from *cursor. end is non-empty when
// the job ended (its result or error): "result" or "job error ...". err
// is why the stream broke otherwise.
func (l *load) watchOnce(ctx context.Context, id, job string, cursor *uint64, jc *jobCheck, gw sessiongatev1.SessionGatewayClient) (progressed bool, end string, err error) {
	wctx, cancel := context.WithCancel(sessionCtx(ctx, id))
	defer cancel()
	stream, err := gw.WatchJob(wctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: job, FromEventSeq: *cursor})
	if err != nil {
		return false, "", err
	}
	want := " of " + strconv.Itoa(jc.count)
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			// A stream that ends without the job's end is a broken watch
			// too (a balancer closing it cleanly).
			return progressed, "", status.Error(codes.Unavailable, "stream ended without the job's result")
		}
		if err != nil {
			return progressed, "", err
		}
		if item.GetEventSeq() <= *cursor {
			jc.outOfOrder++ // event_seq must increase past the cursor
		}
		*cursor = item.GetEventSeq()
		progressed = true
		switch {
		case item.GetEvent() != nil:
			f := item.GetEvent().GetBody().GetStructValue().GetFields()
			if _, agent := f["i"]; !agent && item.GetEvent().GetKind() == "status" && f["phase"] != nil {
				// The runtime's own status of this job (§6.5: back_pressure
				// while acks lag): the stream's, not another job's.
				l.rec.runtimeStatus()
				continue
			}
			iv, ok := f["i"]
			msg := f["message"].GetStringValue()
			i := int(iv.GetNumberValue())
			if !ok || !strings.HasSuffix(msg, want) || i < 0 || i >= jc.count {
				jc.misdeliver++
				l.rec.misdelivered(fmt.Sprintf("WatchJob %s of %s (count %d): event %v", job, id, jc.count, item.GetEvent().GetBody()))
				continue
			}
			jc.seen[i]++
			if i < jc.high && jc.seen[i] == 1 {
				jc.outOfOrder++
			}
			jc.high = max(jc.high, i)
		case item.GetResult() != nil:
			got := item.GetResult().GetResult().GetStructValue().GetFields()["count"].GetNumberValue()
			if int(got) != jc.count {
				jc.misdeliver++
				l.rec.misdelivered(fmt.Sprintf("WatchJob %s of %s: result %v, want count %d", job, id, item.GetResult().GetResult(), jc.count))
			}
			jc.result = true
			return true, "result", nil
		case item.GetError() != nil:
			return true, "job error " + item.GetError().GetCode(), nil
		}
	}
}

// callKey is a fresh idempotency key for one RunJob or SubmitJob call,
// the same for all its attempts, as the project's clients send.
func callKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "chaos-" + hex.EncodeToString(b[:])
}

// pause waits d or until ctx ends: the pace of a caller after a failure,
// not a synchronisation.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
