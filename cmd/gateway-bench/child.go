package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
)

// serveRuntimeArg, as the first argument, makes the bench binary (or the
// test binary, through TestMain) serve the reference runtime instead of
// benchmarking: the runtime child. It is not a documented flag.
const serveRuntimeArg = "-serve-runtime"

// isRuntimeChild reports whether args (os.Args) ask for the runtime child.
func isRuntimeChild(args []string) bool {
	return len(args) > 1 && args[1] == serveRuntimeArg
}

// serveRuntimeChild is the whole of the runtime child: it serves the
// reference runtime with its default options (as cmd/gateway embeds it) on
// 127.0.0.1 — on as many listeners as the argument after serveRuntimeArg
// asks (default 1), each its own runtime — prints their URLs, separated by
// spaces, as the first line of stdout, and serves until
// stdin reaches EOF (the parent closed it, or died) or SIGTERM/SIGINT. It
// then closes the runtime, which waits for all of the runtime's goroutines.
// The goroutine reading stdin is the one left running when the child
// returns to exit: a blocked read of a pipe cannot be interrupted.
func serveRuntimeChild(args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	raiseFileLimit(wantFiles)
	n := 1
	if len(args) > 0 {
		if n, err = strconv.Atoi(args[0]); err != nil || n < 1 || n > 64 {
			return fmt.Errorf("listeners %q: want 1 to 64", args[0])
		}
	}
	var srvs []*arcpruntime.Server
	defer func() {
		for _, s := range srvs {
			err = errors.Join(err, s.Close())
		}
	}()
	urls := make([]string, 0, n)
	for range n {
		srv, err := arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{
			Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "runtime-child"),
		})
		if err != nil {
			return err
		}
		srvs = append(srvs, srv)
		urls = append(urls, srv.URL())
	}
	if _, err := fmt.Fprintln(stdout, strings.Join(urls, " ")); err != nil {
		return err
	}
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-sig.Done():
	case <-eof:
	}
	return nil
}

// runtimeChild is the parent's handle on the runtime child process.
type runtimeChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	url    string        // the first of urls
	urls   []string      // one per listener
	exited chan struct{} // closed when cmd.Wait has returned
	err    error         // cmd.Wait's result, set before exited closes

	stopOnce sync.Once
	stopErr  error
}

// startRuntimeChild starts exe with args (which begin with serveRuntimeArg)
// and waits, at most 15 s, for the URL it prints. The child's stderr is the
// parent's; if the parent dies, the child's stdin reaches EOF and it exits.
// On any failure the child is killed and waited for.
func startRuntimeChild(ctx context.Context, exe string, args []string) (*runtimeChild, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	// Its own process group: a Ctrl-C on the terminal reaches only the
	// parent, which then stops the child in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	first := &firstLine{ch: make(chan string, 1)}
	cmd.Stdout = first
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("runtime child: %w", err)
	}
	c := &runtimeChild{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(15 * time.Second)
	defer timer.Stop()
	select {
	case line := <-first.ch:
		c.urls = strings.Fields(line)
		for _, u := range c.urls {
			if !strings.HasPrefix(u, "ws://127.0.0.1:") {
				c.kill()
				return nil, fmt.Errorf("runtime child printed %q, want ws://127.0.0.1 URLs", line)
			}
		}
		if len(c.urls) == 0 {
			c.kill()
			return nil, errors.New("runtime child printed an empty line, want its URLs")
		}
		c.url = c.urls[0]
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("runtime child exited before printing its URL: %v", c.err)
	case <-timer.C:
		c.kill()
		return nil, errors.New("runtime child printed no URL within 15 s")
	case <-ctx.Done():
		c.kill()
		return nil, context.Cause(ctx)
	}
}

// PID returns the child's process id.
func (c *runtimeChild) PID() int { return c.cmd.Process.Pid }

// stop closes the child's stdin, which makes it close the runtime and exit,
// and waits up to 30 s (it may have 10k sessions to close) before killing
// it. It is idempotent.
func (c *runtimeChild) stop() error {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-c.exited:
			c.stopErr = c.err
		case <-timer.C:
			c.kill()
			c.stopErr = errors.New("runtime child did not exit within 30 s of its stdin closing; killed")
		}
	})
	return c.stopErr
}

// kill kills the child and waits for it.
func (c *runtimeChild) kill() {
	_ = c.cmd.Process.Kill()
	c.stdin.Close()
	<-c.exited
}

// firstLine is the child's stdout: it hands over the first line and
// discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
	ch   chan string // capacity 1
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf.Write(p)
	if line, _, ok := bytes.Cut(w.buf.Bytes(), []byte("\n")); ok {
		w.sent = true
		w.ch <- strings.TrimSpace(string(line))
	}
	return len(p), nil
}
