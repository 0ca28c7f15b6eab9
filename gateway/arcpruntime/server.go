package arcpruntime

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Server is a Runtime served over HTTP on a loopback listener.
type Server struct {
	rt   *Runtime
	ln   net.Listener
	srv  *http.Server
	url  string
	done chan struct{} // closed when the Serve goroutine returns

	closeOnce sync.Once
	closeErr  error
}

// Listen starts a runtime on addr, which must name a loopback address such as
// "127.0.0.1:0" or "localhost:0". It serves the WebSocket at any path; URL
// names the conventional /arcp.
func Listen(addr string, opts Options) (*Server, error) {
	if err := opts.Dialect.Validate(); err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("arcpruntime: listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("arcpruntime: listen %q: only loopback addresses are allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("arcpruntime: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("arcpruntime: listen %q: bound a non-loopback address %s", addr, ln.Addr())
	}
	rt := New(opts)
	s := &Server{
		rt: rt,
		ln: ln,
		srv: &http.Server{
			Handler:           rt,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(rt.log.Handler(), slog.LevelDebug),
		},
		url:  "ws://" + ln.Addr().String() + "/arcp",
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			rt.log.Error("runtime server stopped", "err", err)
		}
	}()
	return s, nil
}

// URL returns the WebSocket URL, "ws://127.0.0.1:PORT/arcp".
func (s *Server) URL() string { return s.url }

// Runtime returns the served runtime, for its test hooks.
func (s *Server) Runtime() *Runtime { return s.rt }

// Close stops the listener, then the runtime (every session, job and
// WebSocket), and waits for all of their goroutines. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		// http.Server.Close does not touch hijacked connections (the
		// WebSockets); Runtime.Close ends those.
		s.closeErr = s.srv.Close()
		if err := s.rt.Close(); s.closeErr == nil {
			s.closeErr = err
		}
		<-s.done
	})
	return s.closeErr
}

// NewTestServer starts a runtime on 127.0.0.1:0 and closes it when the test
// ends. It fails the test if the listener cannot be created.
func NewTestServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		tb.Fatalf("arcpruntime: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
