// Package redistest starts a real redis-server for a test, the way
// net/http/httptest starts a real HTTP server: on a unix socket in a temporary
// directory (no TCP port), persistence off, stopped by t.Cleanup. Stop and
// Start simulate Redis going down and coming back on the same socket (empty:
// nothing is persisted).
//
// With WithTLS the server listens instead on a TLS port of 127.0.0.1 (no
// unix socket, no plain TCP port), with a certificate signed by a throwaway
// CA made for the test: URL is then a rediss:// URL and TLSConfig trusts
// that CA.
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
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// startAttempts bounds the starts on freshly picked TLS ports: another
// process may take a port between our probe and redis-server's bind.
const startAttempts = 3

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

// WithTLS serves TLS on a free port of 127.0.0.1 instead of the unix socket,
// with a certificate for 127.0.0.1 signed by a CA generated for the test
// (see TLSConfig and RootCAs). Clients are not asked for certificates.
func WithTLS() Option {
	return func(s *Server) { s.tls = true }
}

// Server is one redis-server under test control. Its methods may be called
// from the test goroutine; they are not meant for concurrent use.
type Server struct {
	tb       testing.TB
	dir      string
	sock     string // unix socket (without TLS)
	password string
	users    [][2]string

	tls      bool
	port     int            // TLS port, kept across Stop and Start
	roots    *x509.CertPool // the test CA
	certArgs []string       // redis-server's --tls-*-file arguments

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
	if s.tls {
		f, roots, err := writeCerts(s.dir)
		if err != nil {
			tb.Fatalf("redistest: certificates: %v", err)
		}
		s.roots = roots
		s.certArgs = []string{"--tls-cert-file", f.cert, "--tls-key-file", f.key, "--tls-ca-cert-file", f.ca}
	} else {
		if len(s.dir) > 90 { // unix socket paths are limited to ~104 bytes
			d, err := os.MkdirTemp("", "redistest")
			if err != nil {
				tb.Fatalf("redistest: %v", err)
			}
			tb.Cleanup(func() { _ = os.RemoveAll(d) })
			s.dir = d
		}
		s.sock = filepath.Join(s.dir, "r.sock")
	}
	tb.Cleanup(s.Stop)
	s.Start()
	return s
}

// Socket is the unix socket path ("" with WithTLS).
func (s *Server) Socket() string { return s.sock }

// Addr is the TLS host:port ("" without WithTLS).
func (s *Server) Addr() string {
	if !s.tls {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// URL is a unix:// URL, or with WithTLS rediss://127.0.0.1:port/0, for the
// default user (with the password if one is set).
func (s *Server) URL() string {
	var user *url.Userinfo
	if s.password != "" {
		user = url.UserPassword("", s.password)
	}
	return s.url(user)
}

// UserURL is a URL like URL's that authenticates as user with password.
func (s *Server) UserURL(user, password string) string {
	return s.url(url.UserPassword(user, password))
}

func (s *Server) url(user *url.Userinfo) string {
	if s.tls {
		u := url.URL{Scheme: "rediss", User: user, Host: s.Addr(), Path: "/0"}
		return u.String()
	}
	u := url.URL{Scheme: "unix", User: user, Path: s.sock}
	return u.String()
}

// RootCAs is a pool holding only the test CA (nil without WithTLS).
func (s *Server) RootCAs() *x509.CertPool { return s.roots }

// TLSConfig is a new client configuration that trusts the test CA and
// nothing else (nil without WithTLS).
func (s *Server) TLSConfig() *tls.Config {
	if !s.tls {
		return nil
	}
	return &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
}

// Start (re)starts the server on the same socket path or TLS port, if it is
// not running, and waits until it answers PING.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	fresh := s.tls && s.port == 0 // first TLS start: pick the port, retry on another
	for attempt := 1; ; attempt++ {
		if fresh {
			port, err := freePort()
			if err != nil {
				s.tb.Fatalf("redistest: %v", err)
			}
			s.port = port
		}
		err := s.launch()
		if err == nil {
			return
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		if !fresh || attempt == startAttempts {
			s.tb.Fatalf("redistest: %s not ready: %v\n%s", Binary, err, log)
		}
		s.tb.Logf("redistest: %s on port %d not ready (%v); trying another port", Binary, s.port, err)
	}
}

// launch starts redis-server and waits until it answers PING. On error the
// process has been stopped.
func (s *Server) launch() error {
	args := []string{
		"--port", "0",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}
	if s.tls {
		args = append(args, "--bind", "127.0.0.1", "--tls-port", strconv.Itoa(s.port), "--tls-auth-clients", "no")
		args = append(args, s.certArgs...)
	} else {
		_ = os.Remove(s.sock)
		args = append(args, "--unixsocket", s.sock, "--unixsocketperm", "700")
	}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	for _, u := range s.users {
		args = append(args, "--user", u[0], "on", ">"+u[1], "~*", "&*", "+@all")
	}
	cmd := exec.Command(Binary, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	if err := waitReady(s.dial, done); err != nil {
		s.stopLocked()
		return err
	}
	return nil
}

// dial connects to the unix socket, or over TLS verifying the server's
// certificate against the test CA.
func (s *Server) dial(ctx context.Context) (net.Conn, error) {
	if s.tls {
		d := tls.Dialer{Config: s.TLSConfig()}
		return d.DialContext(ctx, "tcp", s.Addr())
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", s.sock)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
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

// waitReady dials until PING gets an answer (+PONG, or -NOAUTH when a
// password is required: either way the server is serving).
func waitReady(dial func(context.Context) (net.Conn, error), exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ping(ctx, dial); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited (last PING: %v)", last)
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING within %v: %v", readyTimeout, last)
		case <-tick.C:
		}
	}
}

func ping(ctx context.Context, dial func(context.Context) (net.Conn, error)) error {
	c, err := dial(ctx)
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
