package hostile

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// MaxFrameBytes is the frame cap of the gateway under test: the "cap"
	// mode pads results to exactly the size an input asks for, and reads
	// frames of up to twice this. Default 16 MiB (the gateway's default).
	MaxFrameBytes int
	// QuietWindow is how long a partial batch of submits waits for the rest
	// before it is answered anyway (see "Batches" in the package
	// documentation). Default 50 ms.
	QuietWindow time.Duration
	// Dribble is the delay between the bytes of the slowloris modes.
	// Default 100 ms.
	Dribble time.Duration
}

// Server is a hostile runtime on a loopback listener. Every mode is served
// at the path /<mode>. Close stops it; it is idempotent.
type Server struct {
	// Immutable after Listen.
	opts   Options
	ln     net.Listener
	srv    *http.Server
	base   string // ws://127.0.0.1:PORT
	ctx    context.Context
	cancel context.CancelFunc
	served chan struct{} // closed when the Serve goroutine returns

	conns sync.WaitGroup // every connection's handler
	jobN  atomic.Uint64
	sessN atomic.Uint64

	mu       sync.Mutex
	sessions map[string]*session      // by session id
	jobs     map[string]string        // job id → the token of the input it ran
	cancels  map[string]int           // job id → job.cancel frames received for it
	seen     map[string]chan struct{} // token → closed when a submit carrying it arrived
	stats    map[Mode]*Stats          // by mode
	open     map[Mode]int             // connections still open, per mode

	closeOnce sync.Once
}

// Stats count what a mode's connections saw. Read them with Server.Stats.
type Stats struct {
	Conns      int // connections accepted
	Hellos     int // session.hello frames read (first and resumed)
	Resumes    int // hellos that asked to resume
	Submits    int // job.submit frames read, resends included
	MaxPending int // most submits of one session waiting for an answer at once
	Batches    int // batches of two or more submits answered together
	Reordered  int // of those, answered in another order than they arrived
	Strays     int // stray job.error frames sent for jobs never accepted
	Garbage    int // unreadable answers sent to submits
	Oversize   int // frames sent above MaxFrameBytes
}

// Listen starts a hostile runtime on 127.0.0.1 at a free port.
func Listen(opts Options) (*Server, error) {
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = 16 << 20
	}
	if opts.QuietWindow <= 0 {
		opts.QuietWindow = 50 * time.Millisecond
	}
	if opts.Dribble <= 0 {
		opts.Dribble = 100 * time.Millisecond
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, ln: ln, base: "ws://" + ln.Addr().String(), ctx: ctx, cancel: cancel,
		served:   make(chan struct{}),
		sessions: map[string]*session{}, jobs: map[string]string{}, cancels: map[string]int{}, seen: map[string]chan struct{}{},
		stats: map[Mode]*Stats{}, open: map[Mode]int{},
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the WebSocket URL of mode.
func (s *Server) URL(m Mode) string { return s.base + "/" + string(m) }

// Close closes the listener and every connection, and waits for their
// goroutines.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		_ = s.srv.Close()
		<-s.served
		s.conns.Wait()
		s.mu.Lock()
		sessions := s.sessions
		s.mu.Unlock()
		for _, se := range sessions {
			se.stopTimer()
		}
	})
}

// Stats returns a copy of mode's counters.
func (s *Server) Stats(m Mode) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stats[m]; st != nil {
		return *st
	}
	return Stats{}
}

// OpenConns is the number of mode's connections still open.
func (s *Server) OpenConns(m Mode) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[m]
}

// opened counts a connection of mode m as open until the returned func runs.
func (s *Server) opened(m Mode) func() {
	s.mu.Lock()
	s.open[m]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.open[m]--
		s.mu.Unlock()
	}
}

// JobToken returns the token of the input job ran (the "token" field of
// its input), so a test can tell whose job a caller was handed.
func (s *Server) JobToken(job string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.jobs[job]
	return tok, ok
}

// Cancels returns how many job.cancel frames named job.
func (s *Server) Cancels(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels[job]
}

// Seen waits until a job.submit whose input carries token has arrived (or
// ctx ends).
func (s *Server) Seen(ctx context.Context, token string) error {
	select {
	case <-s.seenChan(token):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hostile: submit of %s not seen: %w", token, context.Cause(ctx))
	}
}

func (s *Server) seenChan(token string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.seen[token]
	if ch == nil {
		ch = make(chan struct{})
		s.seen[token] = ch
	}
	return ch
}

func (s *Server) markSeen(token string) {
	if token == "" {
		return
	}
	ch := s.seenChan(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// statsLocked returns mode's counters, creating them.
func (s *Server) statsLocked(m Mode) *Stats {
	st := s.stats[m]
	if st == nil {
		st = &Stats{}
		s.stats[m] = st
	}
	return st
}

func (s *Server) count(m Mode, f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.statsLocked(m))
}

func (s *Server) newJobID(m Mode, token string) string {
	id := fmt.Sprintf("job-%s-%d", m, s.jobN.Add(1))
	s.mu.Lock()
	s.jobs[id] = token
	s.mu.Unlock()
	return id
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	m := Mode(strings.TrimPrefix(r.URL.Path, "/"))
	if !m.valid() {
		http.Error(w, "hostile: unknown mode "+string(m), http.StatusNotFound)
		return
	}
	s.conns.Add(1)
	defer s.conns.Done()
	if s.ctx.Err() != nil {
		http.Error(w, "hostile: closed", http.StatusServiceUnavailable)
		return
	}
	s.count(m, func(st *Stats) { st.Conns++ })
	defer s.opened(m)()
	switch m {
	case ModeSlowUpgrade, ModeSlowWelcome, ModeSlowButSteady:
		s.serveRaw(w, r, m)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(int64(2*s.opts.MaxFrameBytes + 1<<20))
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	c := &wsConn{srv: s, mode: m, ws: ws, ctx: ctx, cancel: cancel}
	stop := context.AfterFunc(ctx, func() { ws.CloseNow() })
	defer stop()
	defer ws.CloseNow()
	c.serve()
}

// wsConn is one WebSocket of a hostile session. Its handler goroutine reads;
// writes are serialised by the session's mutex (or, before the handshake,
// happen on the handler goroutine alone).
type wsConn struct {
	srv    *Server
	mode   Mode
	ws     *websocket.Conn
	ctx    context.Context // ends with the connection
	cancel context.CancelFunc
}

// write sends one text message; an error ends the connection.
func (c *wsConn) write(data []byte) error {
	err := c.ws.Write(c.ctx, websocket.MessageText, data)
	if err != nil {
		c.cancel()
	}
	return err
}

// drop ends the connection abruptly (no close frame), as a crash would.
func (c *wsConn) drop() { c.cancel() }
