package main

import (
	"context"
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
