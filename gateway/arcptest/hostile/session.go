package hostile

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// session is one hostile ARCP session; it outlives its transports (resume).
type session struct {
	srv  *Server // immutable
	id   string  // immutable
	mode Mode    // immutable

	mu       sync.Mutex
	cur      *wsConn           // the transport frames go to; nil between transports
	seq      uint64            // last event_seq used
	log      []logged          // sequenced frames, replayed on resume
	accepted map[string][]byte // idempotency key → the accept sent for it
	live     map[string]bool   // accepted jobs not yet ended
	batch    []*pending        // submits waiting for the rest of their batch
	held     []*pending        // submits never to be answered (Input.Hold)
	parked   []string          // ModeFlood: jobs whose result waits for a flood
	timer    *time.Timer       // the batch's quiet window
	dropped  bool              // resume modes: the first transport was dropped
	fatal    *arcp.Error       // ModeFatal: the session ended with this error
	closed   bool              // the server is closing
}

type logged struct {
	seq  uint64
	data []byte
}

type pending struct {
	env     *arcp.Envelope
	in      Input
	key     string
	arrival int
}

func (se *session) stopTimer() {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.closed = true
	if se.timer != nil {
		se.timer.Stop()
	}
}

// serve runs the handshake and then reads frames until the connection
// ends.
func (c *wsConn) serve() {
	s := c.srv
	typ, data, err := c.ws.Read(c.ctx)
	if err != nil || typ != websocket.MessageText {
		return
	}
	env, err := arcp.Decode(data, arcp.DecodeOptions{})
	if err != nil || env.Type != arcp.TypeHello {
		return
	}
	hello, err := arcp.DecodePayload[arcp.Hello](env)
	if err != nil {
		return
	}
	s.count(c.mode, func(st *Stats) {
		st.Hellos++
		if hello.Resume != nil {
			st.Resumes++
		}
	})
	switch c.mode {
	case ModeSilent:
		c.drain()
		return
	case ModeHandshakeWrongFrame:
		_ = c.write(frame(map[string]any{"type": arcp.TypeAccepted, "session_id": "sess-wrong", "job_id": "job-wrong",
			"payload": map[string]any{"job_id": "job-wrong", "accepted_at": now()}}))
		c.drain()
		return
	case ModeHandshakeUnknownType:
		_ = c.write(frame(map[string]any{"type": "session.frobnicate", "session_id": "sess-unknown", "payload": map[string]any{}}))
		c.drain()
		return
	case ModeHandshakeGarbage:
		_ = c.write([]byte(`{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"session.welcome","session_id":"sess-garbage","payload":{"runtime":`))
		c.drain()
		return
	case ModeHandshakeError:
		_ = c.write(errorFrame("", arcp.Error{Code: arcp.CodeUnauthenticated, Message: HandshakeErrorMessage}))
		c.drain()
		return
	}
	var se *session
	if hello.Resume != nil {
		switch c.mode {
		case ModeResumeRefused:
			_ = c.write(errorFrame("", arcp.Error{Code: arcp.CodeUnauthenticated, Message: ResumeRefusedMessage}))
			c.drain()
			return
		case ModeResumeOther:
			se = s.newSession(c.mode) // a session the client never had
		default:
			s.mu.Lock()
			se = s.sessions[hello.Resume.SessionID]
			s.mu.Unlock()
			if se == nil {
				_ = c.write(errorFrame("", arcp.Error{Code: arcp.CodeResumeWindowExpired, Message: "hostile: no such session"}))
				c.drain()
				return
			}
		}
	} else {
		se = s.newSession(c.mode)
	}
	se.mu.Lock()
	fatal := se.fatal
	se.mu.Unlock()
	if fatal != nil {
		_ = c.write(errorFrame(se.id, *fatal))
		c.drain()
		return
	}
	se.attach(c, hello.Resume)
	defer se.detach(c)
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{})
		if err != nil {
			continue
		}
		se.handle(c, env)
	}
}

// drain reads until the peer closes the connection, answering nothing.
func (c *wsConn) drain() {
	for {
		if _, _, err := c.ws.Read(c.ctx); err != nil {
			return
		}
	}
}

func (s *Server) newSession(m Mode) *session {
	se := &session{
		srv: s, mode: m, id: fmt.Sprintf("sess-%s-%d", m, s.sessN.Add(1)),
		accepted: map[string][]byte{}, live: map[string]bool{},
	}
	s.mu.Lock()
	s.sessions[se.id] = se
	s.mu.Unlock()
	return se
}

// attach makes c the session's transport: the welcome, then the replay of
// every sequenced frame after the resume's last_event_seq.
func (se *session) attach(c *wsConn, resume *arcp.Resume) {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.cur = c
	if err := c.write(se.welcome()); err != nil {
		se.cur = nil
		return
	}
	if resume == nil {
		return
	}
	for _, l := range se.log {
		if l.seq > resume.LastEventSeq {
			if len(l.data) > se.srv.opts.MaxFrameBytes {
				se.srv.count(se.mode, func(st *Stats) { st.Oversize++ })
			}
			if c.write(l.data) != nil {
				se.cur = nil
				return
			}
		}
	}
}

func (se *session) detach(c *wsConn) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.cur == c {
		se.cur = nil
	}
}

func (se *session) welcome() []byte {
	features := []string{}
	p := map[string]any{
		"runtime":           map[string]any{"name": "hostile", "version": string(se.mode)},
		"resume_token":      "rt-" + arcp.NewID(),
		"resume_window_sec": 60,
	}
	switch se.mode {
	case ModeHeartbeatMilli:
		p["heartbeat_interval_sec"] = json.RawMessage("0.001")
		features = append(features, arcp.FeatureHeartbeat)
	case ModeHeartbeatZero:
		p["heartbeat_interval_sec"] = json.RawMessage("0")
		features = append(features, arcp.FeatureHeartbeat)
	case ModeHeartbeatHuge:
		p["heartbeat_interval_sec"] = json.RawMessage("1000000000000")
		features = append(features, arcp.FeatureHeartbeat)
	}
	p["capabilities"] = map[string]any{"encodings": []string{"json"}, "features": features,
		"agents": []map[string]any{{"name": "echo"}}}
	return frame(map[string]any{"type": arcp.TypeWelcome, "session_id": se.id, "payload": p})
}

// sendLocked writes data to the current transport, if any.
func (se *session) sendLocked(data []byte, binary bool) {
	c := se.cur
	if c == nil {
		return
	}
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	if err := c.ws.Write(c.ctx, typ, data); err != nil {
		c.cancel()
		se.cur = nil
	}
}

// seqLocked sends a sequenced frame built for the next event_seq and keeps
// it for replay.
func (se *session) seqLocked(build func(seq uint64) []byte) {
	se.seq++
	data := build(se.seq)
	se.log = append(se.log, logged{seq: se.seq, data: data})
	if len(data) > se.srv.opts.MaxFrameBytes {
		se.srv.count(se.mode, func(st *Stats) { st.Oversize++ })
	}
	se.sendLocked(data, false)
}

func (se *session) handle(c *wsConn, env *arcp.Envelope) {
	se.mu.Lock()
	defer se.mu.Unlock()
	switch env.Type {
	case arcp.TypePing:
		p, _ := arcp.DecodePayload[arcp.Ping](env)
		se.sendLocked(frame(map[string]any{"type": arcp.TypePong, "session_id": se.id,
			"payload": map[string]any{"ping_nonce": p.Nonce, "received_at": now()}}), false)
	case arcp.TypeClose:
		se.sendLocked(frame(map[string]any{"type": arcp.TypeClosed, "session_id": se.id, "payload": map[string]any{}}), false)
		c.drop()
	case arcp.TypeListJobs:
		se.sendLocked(frame(map[string]any{"type": arcp.TypeJobs, "session_id": se.id,
			"payload": map[string]any{"request_id": env.ID, "jobs": []any{}}}), false)
	case arcp.TypeCancel:
		se.cancelLocked(env)
	case arcp.TypeSubmit:
		se.submitLocked(env)
	}
}

func (se *session) cancelLocked(env *arcp.Envelope) {
	job := env.JobID
	se.srv.mu.Lock()
	se.srv.cancels[job]++
	se.srv.mu.Unlock()
	if !se.live[job] {
		se.sendLocked(errorFrame(se.id, arcp.Error{Code: arcp.CodeJobNotFound, Message: "hostile: no such live job", RequestID: env.ID, JobID: job}), false)
		return
	}
	delete(se.live, job)
	se.parked = slices.DeleteFunc(se.parked, func(j string) bool { return j == job })
	se.sendLocked(frame(map[string]any{"type": arcp.TypeCancelled, "session_id": se.id, "job_id": job,
		"payload": map[string]any{"job_id": job}}), false)
	se.seqLocked(func(seq uint64) []byte {
		return frame(map[string]any{"type": arcp.TypeJobError, "session_id": se.id, "job_id": job, "event_seq": seq,
			"payload": arcp.JobError{FinalStatus: arcp.StatusCancelled, Code: arcp.CodeCancelled, Message: "hostile: cancelled"}})
	})
}

func (se *session) submitLocked(env *arcp.Envelope) {
	sub, err := arcp.DecodePayload[arcp.Submit](env)
	if err != nil {
		return
	}
	var in Input
	_ = json.Unmarshal(sub.Input, &in)
	s := se.srv
	s.markSeen(in.Token)
	s.count(se.mode, func(st *Stats) { st.Submits++ })
	if acc := se.accepted[sub.IdempotencyKey]; sub.IdempotencyKey != "" && acc != nil {
		se.sendLocked(acc, false) // a resend: the same accept again (§7.2)
		return
	}
	p := &pending{env: env, in: in, key: sub.IdempotencyKey}
	waiting := len(se.batch) + len(se.held) + 1 // unanswered submits, this one included
	s.count(se.mode, func(st *Stats) { st.MaxPending = max(st.MaxPending, waiting) })
	switch se.mode {
	case ModeGarbageJSON, ModeGarbageJobIDNumber, ModeGarbageNoJobID:
		s.count(se.mode, func(st *Stats) { st.Garbage++ })
		se.sendLocked(se.garbage(env), false)
		return
	case ModeRetryableReject:
		se.sendLocked(errorFrame(se.id, arcp.Error{Code: arcp.CodeInternalError, Message: RetryableMessage, Retryable: true, RequestID: env.ID}), false)
		return
	}
	switch {
	case in.Hold:
		se.held = append(se.held, p)
	case in.Batch > 1:
		p.arrival = len(se.batch)
		se.batch = append(se.batch, p)
		if len(se.batch) >= in.Batch {
			se.flushLocked()
		} else {
			se.armLocked()
		}
	default:
		se.answerLocked([]*pending{p})
	}
}

// armLocked (re)starts the quiet window after which a partial batch is
// answered anyway.
func (se *session) armLocked() {
	if se.timer != nil {
		se.timer.Stop()
	}
	se.timer = time.AfterFunc(se.srv.opts.QuietWindow, func() {
		se.mu.Lock()
		defer se.mu.Unlock()
		if !se.closed && len(se.batch) > 0 {
			se.flushLocked()
		}
	})
}

func (se *session) flushLocked() {
	if se.timer != nil {
		se.timer.Stop()
	}
	b := se.batch
	se.batch = nil
	slices.SortStableFunc(b, func(x, y *pending) int { return x.in.Rank - y.in.Rank })
	if len(b) > 1 {
		reordered := false
		for i, p := range b {
			if p.arrival != i {
				reordered = true
			}
		}
		se.srv.count(se.mode, func(st *Stats) {
			st.Batches++
			if reordered {
				st.Reordered++
			}
		})
	}
	se.answerLocked(b)
}

// answerLocked answers submits in the order given: the mode's stray
// error, then every accept, then each job's script.
func (se *session) answerLocked(ps []*pending) {
	// The stray error goes before batches only: before a lone submit
	// (the warm-up) it would be indistinguishable from a positional
	// rejection of that submit, which some runtimes send (draft §13.8).
	if (se.mode == ModeStray || se.mode == ModeStrayTraced) && ps[0].in.Batch > 1 {
		stray := fmt.Sprintf("job-stray-%d", se.srv.jobN.Add(1))
		se.srv.count(se.mode, func(st *Stats) { st.Strays++ })
		se.seqLocked(func(seq uint64) []byte {
			f := map[string]any{"type": arcp.TypeJobError, "session_id": se.id, "job_id": stray, "event_seq": seq,
				"payload": arcp.JobError{FinalStatus: arcp.StatusError, Code: arcp.CodeInternalError, Message: "hostile: stray error"}}
			if se.mode == ModeStrayTraced {
				f["trace_id"] = randomTrace()
			}
			return frame(f)
		})
	}
	jobs := make([]string, len(ps))
	for i, p := range ps {
		jobs[i] = se.acceptLocked(p)
	}
	for i, p := range ps {
		se.runLocked(p, jobs[i])
	}
}

func (se *session) acceptLocked(p *pending) string {
	job := se.srv.newJobID(se.mode, p.in.Token)
	f := map[string]any{"type": arcp.TypeAccepted, "session_id": se.id, "job_id": job}
	pl := map[string]any{"job_id": job, "accepted_at": now(), "agent": "echo"}
	if se.mode != ModeReorderNoEcho && p.env.TraceID != "" {
		f["trace_id"] = p.env.TraceID
		pl["trace_id"] = p.env.TraceID
	}
	f["payload"] = pl
	data := frame(f)
	if p.key != "" {
		se.accepted[p.key] = data
	}
	se.live[job] = true
	se.sendLocked(data, false)
	return job
}

// runLocked plays the job's script after its accept.
func (se *session) runLocked(p *pending, job string) {
	switch se.mode {
	case ModeRetryableJobError:
		se.endLocked(job, arcp.JobError{FinalStatus: arcp.StatusError, Code: arcp.CodeInternalError, Message: RetryableJobMessage, Retryable: true})
		return
	case ModeFatal:
		// The session is over for the runtime: the error, the socket
		// closed, and every resume refused with the same error.
		code := p.in.FatalCode
		if code == "" {
			code = arcp.CodePermissionDenied
		}
		se.fatal = &arcp.Error{Code: code, Message: FatalMessage}
		se.sendLocked(errorFrame(se.id, *se.fatal), false)
		if se.cur != nil {
			se.cur.drop()
			se.cur = nil
		}
		return
	case ModeResumeOther, ModeResumeRefused:
		if !se.dropped && se.cur != nil {
			se.dropped = true
			se.cur.drop()
			se.cur = nil
		}
		return // the result never comes
	case ModeMalformed:
		se.malformedLocked(p, job)
		return
	case ModeFrameCap:
		se.resultLocked(job, p.in.Token, p.in.PadTo)
		return
	case ModeFlood:
		if p.in.Park {
			se.parked = append(se.parked, job)
			return
		}
		if p.in.Flood > 0 {
			se.floodLocked(p, job)
			return
		}
	}
	se.resultLocked(job, p.in.Token, 0)
}

// resultLocked ends job with {token, job_id}, the frame padded to padTo
// bytes when padTo is set.
func (se *session) resultLocked(job, token string, padTo int) {
	delete(se.live, job)
	se.seqLocked(func(seq uint64) []byte {
		build := func(pad string) []byte {
			return frame(map[string]any{"type": arcp.TypeResult, "session_id": se.id, "job_id": job, "event_seq": seq,
				"payload": map[string]any{"final_status": arcp.StatusSuccess, "result": Result{Token: token, JobID: job, Pad: pad}}})
		}
		data := build("")
		if one := build("x"); padTo >= len(one) {
			data = build(strings.Repeat("x", padTo-len(one)+1)) // the pad adds exactly its length
		}
		return data
	})
}

func (se *session) endLocked(job string, e arcp.JobError) {
	delete(se.live, job)
	se.seqLocked(func(seq uint64) []byte {
		return frame(map[string]any{"type": arcp.TypeJobError, "session_id": se.id, "job_id": job, "event_seq": seq, "payload": e})
	})
}

// floodLocked starts the flood of p's job on a goroutine of its own, which
// takes the session's mutex frame by frame.
func (se *session) floodLocked(p *pending, job string) {
	s := se.srv
	s.conns.Add(1) // the caller's handler holds one: Close cannot be waiting yet
	go func() {
		defer s.conns.Done()
		release := func() {
			se.mu.Lock()
			defer se.mu.Unlock()
			parked := se.parked
			se.parked = nil
			for _, j := range parked {
				tok, _ := s.JobToken(j)
				se.resultLocked(j, tok, 0)
			}
		}
		mid := p.in.ReleaseAt > 0
		if p.in.Release == "before" && !mid {
			release()
		}
		size := max(p.in.EventBytes, 16)
		pad := strings.Repeat("f", size)
		for i := range p.in.Flood {
			if s.ctx.Err() != nil {
				return
			}
			if mid && i == p.in.ReleaseAt {
				release()
			}
			se.mu.Lock()
			if se.closed {
				se.mu.Unlock()
				return
			}
			se.seqLocked(func(seq uint64) []byte {
				return frame(map[string]any{"type": arcp.TypeEvent, "session_id": se.id, "job_id": job, "event_seq": seq,
					"payload": map[string]any{"kind": arcp.KindLog, "ts": now(), "body": map[string]any{"i": i, "pad": pad}}})
			})
			se.mu.Unlock()
		}
		if p.in.Release != "before" || mid {
			release() // whatever is still parked
		}
		se.mu.Lock()
		se.resultLocked(job, p.in.Token, 0)
		se.mu.Unlock()
	}()
}

// garbage is the unreadable answer of the garbage modes.
func (se *session) garbage(env *arcp.Envelope) []byte {
	switch se.mode {
	case ModeGarbageJSON:
		return []byte(`{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"job.accepted","session_id":"` + se.id + `","payload":{"job_id":`)
	case ModeGarbageJobIDNumber:
		return frame(map[string]any{"type": arcp.TypeAccepted, "session_id": se.id, "trace_id": env.TraceID,
			"payload": map[string]any{"job_id": 12345, "accepted_at": now(), "trace_id": env.TraceID}})
	default:
		return frame(map[string]any{"type": arcp.TypeAccepted, "session_id": se.id, "trace_id": env.TraceID,
			"payload": map[string]any{"accepted_at": now(), "trace_id": env.TraceID}})
	}
}

// frame encodes an envelope given as a map, adding arcp and a fresh id when
// absent.
func frame(f map[string]any) []byte {
	if _, ok := f["arcp"]; !ok {
		f["arcp"] = arcp.Version
	}
	if _, ok := f["id"]; !ok {
		f["id"] = arcp.NewID()
	}
	data, err := json.Marshal(f)
	if err != nil {
		panic("hostile: " + err.Error()) // only this package's own values are marshalled
	}
	return data
}

func errorFrame(sessionID string, e arcp.Error) []byte {
	f := map[string]any{"type": arcp.TypeError, "payload": e}
	if sessionID != "" {
		f["session_id"] = sessionID
	}
	return frame(f)
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func randomTrace() string {
	id := strings.ReplaceAll(arcp.NewID(), "-", "")
	return id[len(id)-32:]
}
