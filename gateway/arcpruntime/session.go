package arcpruntime

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// session is an ARCP session: it outlives its transports until it is closed,
// discarded or its resume window runs out. All fields but the immutable ones
// are guarded by Runtime.mu.
type session struct {
	// Immutable.
	id        string
	principal string

	token    string          // the current single-use resume token
	features map[string]bool // negotiated by the latest handshake
	cur      *transport      // the attached transport, or nil
	gone     bool

	// Replay buffer: sequenced envelopes with contiguous seqs, oldest first.
	seq      uint64 // last event_seq assigned
	acked    uint64 // highest seq the client acknowledged
	buf      []entry
	head     int
	bufBytes int
	total    uint64 // bytes of every sequenced envelope ever buffered
	bpActive bool   // a back-pressure status was emitted and the lag has not cleared

	jobs    map[string]*job
	jobList []*job // acceptance order, retained terminal jobs included
	idem    map[string]*job
	live    int
	subs    map[*job]struct{} // jobs of other sessions this session subscribes to

	expiry    *time.Timer // armed while detached
	expiryGen uint64

	// Submits left unanswered by a transport that ended, for the next one
	// (Dialect.LateAcceptAcrossResume).
	late []*arcp.Envelope
}

// entry is one buffered sequenced envelope.
type entry struct {
	seq     uint64
	jobID   string
	typ     string
	payload []byte // the payload, for re-stamping to subscribers
	data    []byte // the encoded envelope
	cum     uint64 // session.total after this entry
}

const maxRetainedJobs = 10_000

func newSession(principal string) *session {
	return &session{
		id:        "rs_" + randomHex(16),
		principal: principal,
		jobs:      make(map[string]*job),
		idem:      make(map[string]*job),
		subs:      make(map[*job]struct{}),
	}
}

// firstSeqLocked is the seq of the oldest buffered entry, or seq+1 when the
// buffer is empty.
func (s *session) firstSeqLocked() uint64 {
	if s.head < len(s.buf) {
		return s.buf[s.head].seq
	}
	return s.seq + 1
}

// entryLocked returns the buffered entry of seq.
func (s *session) entryLocked(seq uint64) (entry, bool) {
	first := s.firstSeqLocked()
	if seq < first || seq > s.seq {
		return entry{}, false
	}
	return s.buf[s.head+int(seq-first)], true
}

// cumThroughLocked returns session.total as it was right after entry seq
// (for seq 0, or an evicted seq just before the oldest entry, the bytes
// before the oldest entry).
func (s *session) cumThroughLocked(seq uint64) uint64 {
	if e, ok := s.entryLocked(seq); ok {
		return e.cum
	}
	if e, ok := s.entryLocked(seq + 1); ok {
		return e.cum - uint64(len(e.data))
	}
	return s.total
}

// appendLocked stamps the next event_seq on a sequenced envelope, buffers it
// and wakes the writer. It evicts the oldest entries beyond the caps and
// never blocks. When this envelope takes the un-acked lag past the
// back-pressure threshold (ack negotiated), a status event of the same job
// goes first, so it never follows the job's terminal.
func (r *Runtime) appendLocked(s *session, typ, jobID, traceID string, payload []byte) {
	r.appendExtLocked(s, typ, jobID, traceID, payload, nil)
}

// appendExtLocked is appendLocked with envelope extensions (a JSON object,
// or nil) on the envelope.
func (r *Runtime) appendExtLocked(s *session, typ, jobID, traceID string, payload, ext []byte) {
	if s.gone {
		return
	}
	if !s.bpActive && s.features[arcp.FeatureAck] && jobID != "" && s.seq+1-s.acked > uint64(r.opts.BackPressureThreshold) {
		s.bpActive = true
		body, _ := json.Marshal(map[string]any{
			"phase":     "back_pressure",
			"unacked":   s.seq + 1 - s.acked,
			"threshold": r.opts.BackPressureThreshold,
		})
		p, _ := json.Marshal(arcp.Event{Kind: arcp.KindStatus, TS: now3339(), Body: body})
		r.bufferLocked(s, arcp.TypeEvent, jobID, traceID, p, nil)
	}
	r.bufferLocked(s, typ, jobID, traceID, payload, ext)
}

func (r *Runtime) bufferLocked(s *session, typ, jobID, traceID string, payload, ext []byte) {
	s.seq++
	data := encodeSequenced(s.id, typ, jobID, traceID, s.seq, payload, ext)
	s.total += uint64(len(data))
	s.buf = append(s.buf, entry{seq: s.seq, jobID: jobID, typ: typ, payload: payload, data: data, cum: s.total})
	s.bufBytes += len(data)
	for n := len(s.buf) - s.head; n > 1 && (n > r.opts.MaxBufferedEvents || s.bufBytes > r.opts.MaxBufferedBytes); n-- {
		if t := s.cur; t != nil && s.buf[s.head].seq > t.sent && t.ctx.Err() == nil {
			// The attached client has not been sent what is evicted now:
			// it can no longer be served gap-free.
			r.stats.slowConsumers.Add(1)
			t.abort(errSlowConsumer)
		}
		s.popLocked()
		r.stats.eventsEvicted.Add(1)
	}
	if s.cur != nil {
		s.cur.wakeLocked()
	}
}

func (s *session) popLocked() {
	s.bufBytes -= len(s.buf[s.head].data)
	s.buf[s.head] = entry{}
	s.head++
	if s.head == len(s.buf) {
		s.buf = s.buf[:0]
		s.head = 0
	} else if s.head > 1024 && s.head*2 > len(s.buf) {
		s.buf = append([]entry(nil), s.buf[s.head:]...)
		s.head = 0
	}
}

// ackLocked frees entries up to seq.
func (r *Runtime) ackLocked(s *session, seq uint64) {
	if seq <= s.acked {
		return
	}
	s.acked = seq
	for !r.opts.Dialect.AckKeepsLog && s.head < len(s.buf) && s.buf[s.head].seq <= seq {
		s.popLocked()
	}
	if s.bpActive && s.seq-s.acked <= uint64(r.opts.BackPressureThreshold) {
		s.bpActive = false
	}
}

// detachLocked unbinds t from its session when t ends; the session stays
// resumable for the resume window.
func (r *Runtime) detachLocked(t *transport) {
	s := t.sess
	if s == nil || s.cur != t {
		return
	}
	s.cur = nil
	if s.gone || r.closed {
		return
	}
	r.loseJobsLocked(s)
	r.armExpiryLocked(s)
}

// loseJobsLocked marks the live jobs of s as lost when its transport ends
// (Dialect.LoseRunningJobsOnResume): they emit nothing more.
func (r *Runtime) loseJobsLocked(s *session) {
	if r.opts.Dialect.SubscriptionsEndWithTransport {
		for j := range s.subs {
			delete(j.subs, s)
		}
		clear(s.subs)
	}
	if !r.opts.Dialect.LoseRunningJobsOnResume {
		return
	}
	for _, j := range s.jobList {
		if !j.terminal {
			j.lost = true
		}
	}
}

func (r *Runtime) armExpiryLocked(s *session) {
	r.disarmExpiryLocked(s)
	s.expiryGen++
	gen := s.expiryGen
	r.wg.Add(1)
	s.expiry = time.AfterFunc(r.opts.ResumeWindow, func() {
		defer r.wg.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		if s.gone || s.cur != nil || s.expiryGen != gen {
			return
		}
		s.expiry = nil
		r.log.Debug("session expired", "session_id", s.id)
		r.discardLocked(s, errSessionExpired, true)
	})
}

func (r *Runtime) disarmExpiryLocked(s *session) {
	if s.expiry != nil {
		if s.expiry.Stop() {
			r.wg.Done()
		}
		s.expiry = nil
	}
}

// discardLocked ends a session: no resume, jobs stopped, subscriptions
// dropped, the attached transport aborted (if abort) or left to close
// gracefully. It returns the jobs that were stopped.
func (r *Runtime) discardLocked(s *session, cause error, abort bool) []*job {
	if s.gone {
		return nil
	}
	s.gone = true
	delete(r.sessions, s.id)
	r.disarmExpiryLocked(s)
	var stopped []*job
	for _, j := range s.jobList {
		if !j.terminal {
			j.cancel(errSessionGone)
			stopped = append(stopped, j)
		}
	}
	for j := range s.subs {
		delete(j.subs, s)
	}
	s.subs = nil
	s.late = nil
	for k, j := range s.idem {
		r.forgetKeyLocked(s, k, j)
	}
	s.buf, s.head, s.bufBytes = nil, 0, 0
	if s.cur != nil && abort {
		s.cur.abort(cause)
	}
	return stopped
}

// authenticate maps a hello's auth to a principal.
func (r *Runtime) authenticate(a arcp.Auth) (string, bool) {
	if r.opts.Tokens == nil {
		return "anonymous", true
	}
	if a.Scheme != "" && !strings.EqualFold(a.Scheme, "bearer") {
		return "", false
	}
	var principal string
	found := false
	for tok, p := range r.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(a.Token)) == 1 {
			principal, found = p, true
		}
	}
	return principal, found
}

// handshake handles a frame before the session is established. It reports
// whether the transport now carries a session.
func (t *transport) handshake(data []byte) bool {
	r := t.r
	if t.isClosing() {
		return false
	}
	env, err := arcp.Decode(data, arcp.DecodeOptions{})
	if err != nil {
		r.stats.invalidFrames.Add(1)
		t.failHandshake(&arcp.Error{Code: arcp.CodeInvalidRequest, Message: "invalid envelope: " + reasonOf(err)})
		return false
	}
	if env.Type != arcp.TypeHello {
		t.failHandshake(&arcp.Error{Code: arcp.CodeInvalidRequest, Message: "the first message must be session.hello"})
		return false
	}
	if r.silence.Load() {
		r.log.Debug("session.hello ignored (handshake silence)", "remote", t.remote)
		return false
	}
	hello, err := arcp.DecodePayload[arcp.Hello](env)
	if err != nil {
		r.stats.invalidFrames.Add(1)
		t.failHandshake(&arcp.Error{Code: arcp.CodeInvalidRequest, Message: "invalid session.hello payload"})
		return false
	}
	principal, ok := r.authenticate(hello.Auth)
	if !ok {
		r.stats.authFailures.Add(1)
		if hello.Resume != nil {
			r.stats.resumeFailures.Add(1)
		}
		t.failHandshake(&arcp.Error{Code: arcp.CodeUnauthenticated, Message: "invalid bearer token"})
		return false
	}
	features := arcp.Intersect(hello.Capabilities.Features, r.opts.Features)
	if hello.Resume != nil {
		return t.resume(hello.Resume, principal, features)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || t.ctx.Err() != nil {
		return false
	}
	s := newSession(principal)
	r.sessions[s.id] = s
	r.attachLocked(s, t, features, 0)
	r.log.Debug("session opened", "session_id", s.id, "principal", principal, "features", features)
	return true
}

func (t *transport) isClosing() bool {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.closing
}

// failHandshake answers with a session.error and closes the transport.
func (t *transport) failHandshake(e *arcp.Error) {
	t.r.stats.handshakeFailures.Add(1)
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.sendErrorLocked(e, true)
}

// resume handles a hello carrying resume.
func (t *transport) resume(res *arcp.Resume, principal string, features []string) bool {
	r := t.r
	d := &r.opts.Dialect
	r.mu.Lock()
	defer r.mu.Unlock()
	fail := func(code, msg string) bool {
		r.stats.resumeFailures.Add(1)
		r.stats.handshakeFailures.Add(1)
		if code == arcp.CodeUnauthenticated {
			r.stats.authFailures.Add(1)
		}
		t.sendErrorLocked(&arcp.Error{Code: code, Message: msg}, true)
		return false
	}
again:
	if r.closed || t.ctx.Err() != nil {
		return false
	}
	s := r.sessions[res.SessionID]
	switch {
	case s == nil:
		return fail(arcp.CodeResumeWindowExpired, "unknown or expired session")
	case s.principal != principal:
		return fail(arcp.CodeUnauthenticated, "session belongs to another principal")
	case subtle.ConstantTimeCompare([]byte(s.token), []byte(res.ResumeToken)) != 1:
		return fail(arcp.CodeUnauthenticated, "invalid or already used resume token")
	case res.LastEventSeq > s.seq:
		return fail(arcp.CodeInvalidRequest, "last_event_seq is ahead of the session")
	case res.LastEventSeq < s.seq && s.firstSeqLocked() > res.LastEventSeq+1:
		r.discardLocked(s, errSessionExpired, true)
		return fail(arcp.CodeResumeWindowExpired, "replay buffer no longer reaches back to last_event_seq")
	case d.RefuseCaughtUpResume && res.LastEventSeq == s.seq && s.seq > 0:
		// The session and its token are kept.
		return fail(arcp.CodeResumeWindowExpired, "nothing buffered after last_event_seq")
	}
	if old := s.cur; old != nil {
		old.abort(errReplaced)
		if d.LateAcceptAcrossResume {
			// Let it end first, so that the submits it leaves unanswered
			// are the session's before this transport takes them.
			r.mu.Unlock()
			<-old.done
			r.mu.Lock()
			goto again
		}
		s.cur = nil
		r.loseJobsLocked(s)
	}
	r.disarmExpiryLocked(s)
	r.ackLocked(s, res.LastEventSeq)
	r.attachLocked(s, t, features, res.LastEventSeq)
	r.stats.resumes.Add(1)
	r.log.Debug("session resumed", "session_id", s.id, "last_event_seq", res.LastEventSeq, "seq", s.seq)
	return true
}

// attachLocked binds t to s, rotates the resume token and queues the
// welcome; the writer then replays the buffer after cursor.
func (r *Runtime) attachLocked(s *session, t *transport, features []string, cursor uint64) {
	s.token = "rt_" + randomHex(32)
	s.features = make(map[string]bool, len(features))
	for _, f := range features {
		s.features[f] = true
	}
	s.cur = t
	t.sess = s
	t.sent = cursor
	t.sentBytes = s.cumThroughLocked(cursor)
	if len(s.late) > 0 {
		t.late, s.late = s.late, nil
		t.replayTo = s.seq
		t.replayed = make(chan struct{})
		t.markReplayedLocked()
	}
	w := arcp.Welcome{
		Runtime:         arcp.RuntimeInfo{Name: r.opts.Name, Version: r.opts.Version},
		ResumeToken:     s.token,
		ResumeWindowSec: float64(ceilSeconds(r.opts.ResumeWindow)),
		Capabilities: arcp.Capabilities{
			Encodings: []string{"json"},
			Features:  features,
			Agents:    agentList(r.agents),
		},
	}
	var ext map[string]json.RawMessage
	if s.features[arcp.FeatureHeartbeat] {
		t.heartbeat = r.opts.HeartbeatInterval
		t.startWatchdog(t.heartbeat)
		w.HeartbeatIntervalSec = float64(ceilSeconds(r.opts.HeartbeatInterval))
		ext = map[string]json.RawMessage{
			HeartbeatIntervalMSExtension: json.RawMessage(strconv.FormatInt(r.opts.HeartbeatInterval.Milliseconds(), 10)),
		}
	}
	t.enqueueLocked(outFrame{data: r.encodeControl(arcp.TypeWelcome, s.id, "", w, ext)})
}

// HeartbeatIntervalMSExtension is the welcome extension carrying the exact
// heartbeat interval in milliseconds.
const HeartbeatIntervalMSExtension = "x-vendor.sessiongate.heartbeat_interval_ms"

// ceilSeconds rounds d up to whole seconds, at least 1.
func ceilSeconds(d time.Duration) int {
	s := math.Ceil(d.Seconds())
	if s < 1 {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(s)
}

// encodeControl encodes a non-sequenced envelope. It returns nil (and logs)
// if the payload cannot be marshalled, which would be a bug.
func (r *Runtime) encodeControl(typ, sessionID, jobID string, payload any, ext map[string]json.RawMessage) []byte {
	return r.encodeControlTraced(typ, sessionID, jobID, "", payload, ext)
}

// encodeControlTraced is encodeControl with a trace_id on the envelope.
func (r *Runtime) encodeControlTraced(typ, sessionID, jobID, traceID string, payload any, ext map[string]json.RawMessage) []byte {
	env, err := arcp.New(typ, sessionID, payload)
	if err != nil {
		r.log.Error("encode", "type", typ, "err", err)
		return nil
	}
	env.JobID = jobID
	env.TraceID = traceID
	env.Extensions = ext
	data, err := arcp.Encode(env)
	if err != nil {
		r.log.Error("encode", "type", typ, "err", err)
		return nil
	}
	return data
}

// encodeSequenced encodes a sequenced envelope without re-validating the
// payload, which the caller marshalled. Every string is runtime-generated
// (ids, types) or validated hex (trace_id), so none needs escaping.
func encodeSequenced(sessionID, typ, jobID, traceID string, seq uint64, payload, ext []byte) []byte {
	b := make([]byte, 0, len(payload)+len(ext)+192+len(jobID)+len(traceID))
	b = append(b, `{"arcp":"1.1","id":"`...)
	b = append(b, arcp.NewID()...)
	b = append(b, `","type":"`...)
	b = append(b, typ...)
	b = append(b, `","session_id":"`...)
	b = append(b, sessionID...)
	b = append(b, '"')
	if jobID != "" {
		b = append(b, `,"job_id":"`...)
		b = append(b, jobID...)
		b = append(b, '"')
	}
	if traceID != "" {
		b = append(b, `,"trace_id":"`...)
		b = append(b, traceID...)
		b = append(b, '"')
	}
	b = append(b, `,"event_seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	if len(payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, payload...)
	}
	if len(ext) > 0 {
		b = append(b, `,"extensions":`...)
		b = append(b, ext...)
	}
	return append(b, '}')
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b)
}

func now3339() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// reasonOf returns a short, client-safe description of a decode error.
func reasonOf(err error) string {
	if de, ok := err.(*arcp.DecodeError); ok {
		return string(de.Reason)
	}
	return "malformed"
}

// sniffID extracts the "id" of a frame that failed validation, so the error
// answer can name it. Ids that are absurdly long are not echoed.
func sniffID(data []byte) string {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &probe) != nil && len(probe.ID) == 0 {
		return ""
	}
	var id string
	if json.Unmarshal(probe.ID, &id) != nil || len(id) > 256 {
		return ""
	}
	return id
}
