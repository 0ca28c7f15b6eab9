// Package redistest starts a real redis-server for a test, the way
// net/http/httptest starts a real HTTP server: on a unix socket in a temporary
// directory (no TCP port), persistence off, stopped by t.Cleanup. Stop and
// Start simulate Redis going down and coming back on the same socket (empty:
// nothing is persisted).
//
// When redis-server is not installed the test is skipped, unless the
// environment has CI=true: then it fails, so that CI never passes by skipping.
//
// A Server starts one goroutine per redis-server process (it waits for the
// process to exit); Stop and the cleanup wait for it.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the redis-server looked up on PATH.
const Binary = "redis-server"

// readyTimeout bounds the wait for PING after a start; generous because the
// machine may be busy.
const readyTimeout = 15 * time.Second

// Option configures a Server.
type Option func(*Server)

// WithPassword sets requirepass: the default user needs AUTH password.
func WithPassword(password string) Option {
	return func(s *Server) { s.password = password }
}

// WithUser adds an ACL user with full rights and the given password.
func WithUser(name, password string) Option {
	return func(s *Server) { s.users = append(s.users, [2]string{name, password}) }
}

// Server is one redis-server under test control. Its methods may be called
// from the test goroutine; they are not meant for concurrent use.
type Server struct {
	tb       testing.TB
	dir      string
	sock     string
	password string
	users    [][2]string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a redis-server and waits until it answers PING. It registers
// a cleanup that stops it.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	if _, err := exec.LookPath(Binary); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redistest: %s not found (CI=true: install it, e.g. apt-get install -y redis-server): %v", Binary, err)
		}
		tb.Skipf("redistest: %s not found: %v", Binary, err)
	}
	s := &Server{tb: tb}
	for _, o := range opts {
		o(s)
	}
	s.dir = tb.TempDir()
	if len(s.dir) > 90 { // unix socket paths are limited to ~104 bytes
		d, err := os.MkdirTemp("", "redistest")
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		tb.Cleanup(func() { _ = os.RemoveAll(d) })
		s.dir = d
	}
	s.sock = filepath.Join(s.dir, "r.sock")
	tb.Cleanup(s.Stop)
	s.Start()
	return s
}

// Socket is the unix socket path.
func (s *Server) Socket() string { return s.sock }

// URL is a unix:// URL for the default user (with the password if one is
// set).
func (s *Server) URL() string {
	u := url.URL{Scheme: "unix", Path: s.sock}
	if s.password != "" {
		u.User = url.UserPassword("", s.password)
	}
	return u.String()
}

// UserURL is a unix:// URL that authenticates as user with password.
func (s *Server) UserURL(user, password string) string {
	u := url.URL{Scheme: "unix", Path: s.sock, User: url.UserPassword(user, password)}
	return u.String()
}

// Start (re)starts the server on the same socket path, if it is not running,
// and waits until it answers PING.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	_ = os.Remove(s.sock)
	args := []string{
		"--port", "0",
		"--unixsocket", s.sock,
		"--unixsocketperm", "700",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	for _, u := range s.users {
		args = append(args, "--user", u[0], "on", ">"+u[1], "~*", "&*", "+@all")
	}
	cmd := exec.Command(Binary, args...)
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: start %s: %v", Binary, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	if err := waitReady(s.sock, done); err != nil {
		s.stopLocked()
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.tb.Fatalf("redistest: %s not ready: %v\n%s", Binary, err, log)
	}
}

// Stop kills the server (SIGKILL: as abrupt as a crash) and waits for it to
// exit. Idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// waitReady dials the socket until PING gets an answer (+PONG, or -NOAUTH
// when a password is required: either way the server is serving).
func waitReady(sock string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ping(ctx, sock); last == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING within %v: %v", readyTimeout, last)
		case <-tick.C:
		}
	}
}

func ping(ctx context.Context, sock string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") {
		return nil
	}
	return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
}

// Freeze stops the server process (SIGSTOP): it keeps its socket open but
// answers nothing, like a hung Redis. Thaw resumes it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.tb.Fatalf("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: signal %v: %v", sig, err)
	}
}
