package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// proxy passes WebSocket messages between the gateway and the runtime,
// writing each to a log; cut ends every transport open through it (the
// gateway then resumes through it again).
type proxy struct {
	target string
	start  time.Time
	ctx    context.Context // ends every transport at close

	mu     sync.Mutex
	log    io.Writer
	frames int
	cuts   []context.CancelFunc
	wg     sync.WaitGroup

	sessions map[string]context.CancelFunc // the latest transport of each ARCP session (from its welcome)
	subs     map[string]string             // job id → the session that sent job.subscribe for it
}

// note learns from a frame which transport a session is on and which
// session subscribed to which job.
func (p *proxy) note(b []byte, cancel context.CancelFunc) {
	var env struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
		Payload   struct {
			JobID string `json:"job_id"`
		} `json:"payload"`
	}
	if json.Unmarshal(b, &env) != nil || env.SessionID == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch env.Type {
	case "session.welcome":
		if p.sessions == nil {
			p.sessions = make(map[string]context.CancelFunc)
		}
		p.sessions[env.SessionID] = cancel
	case "job.subscribe":
		if p.subs == nil {
			p.subs = make(map[string]string)
		}
		if _, ok := p.subs[env.Payload.JobID]; !ok {
			p.subs[env.Payload.JobID] = env.SessionID
		}
	}
}

// cutSubscriber ends the transport of the session that subscribed to job,
// and reports whether there was one.
func (p *proxy) cutSubscriber(job string) bool {
	p.mu.Lock()
	cancel := p.sessions[p.subs[job]]
	sid := p.subs[job]
	p.mu.Unlock()
	if cancel == nil {
		return false
	}
	p.line("--- CUT the transport of session %s (subscribed to %s)", sid, job)
	cancel()
	return true
}

func (p *proxy) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.log, "%8.3f "+format+"\n", append([]any{time.Since(p.start).Seconds()}, args...)...)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.wg.Add(1)
	defer p.wg.Done()
	down, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer down.CloseNow()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	up, _, err := websocket.Dial(ctx, p.target, nil)
	if err != nil {
		down.Close(websocket.StatusInternalError, "runtime unreachable")
		return
	}
	defer up.CloseNow()
	down.SetReadLimit(64 << 20)
	up.SetReadLimit(64 << 20)
	p.mu.Lock()
	p.cuts = append(p.cuts, cancel)
	p.mu.Unlock()
	p.line("--- transport open")
	var wg sync.WaitGroup
	pump := func(from, to *websocket.Conn, dir string) {
		defer wg.Done()
		defer cancel()
		for {
			typ, b, err := from.Read(ctx)
			if err != nil {
				return
			}
			p.mu.Lock()
			p.frames++
			p.mu.Unlock()
			s := string(b)
			if len(s) > 600 {
				s = s[:600] + "…"
			}
			p.line("%s %s", dir, s)
			p.note(b, cancel)
			if to.Write(ctx, typ, b) != nil {
				return
			}
		}
	}
	wg.Add(2)
	go pump(up, down, "RT>GW")
	go pump(down, up, "GW>RT")
	wg.Wait()
}

// cut ends every transport open now.
func (p *proxy) cut() int {
	p.mu.Lock()
	cuts := p.cuts
	p.cuts = nil
	p.mu.Unlock()
	p.line("--- CUT (%d transports)", len(cuts))
	for _, c := range cuts {
		c()
	}
	return len(cuts)
}
