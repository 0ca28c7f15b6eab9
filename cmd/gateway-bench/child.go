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
	"runtime"
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
	return serveUntilDone(strings.Join(urls, " "), stdin, stdout)
}

// serveUntilDone is the rest of a child's life: it prints first (what the
// child serves) as the first line of stdout, then serves until stdin
// reaches EOF or SIGTERM/SIGINT, collecting its garbage on each SIGUSR1
// (childProc.settle).
func serveUntilDone(first string, stdin io.Reader, stdout io.Writer) error {
	// Before the first line, which tells the parent it may settle this
	// process: a SIGUSR1 that came before Notify would be dropped.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	if _, err := fmt.Fprintln(stdout, first); err != nil {
		return err
	}
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	for {
		select {
		case <-sig.Done():
			return nil
		case <-eof:
			return nil
		case <-usr1:
			// The parent settles this process as it settles its own
			// (childProc.settle): a collection now, not one that falls
			// into the next measured point.
			runtime.GC()
			if _, err := fmt.Fprintln(stdout, settledLine); err != nil {
				return err
			}
		}
	}
}

// settledLine is what the runtime child prints when a settle has run.
const settledLine = "settled"

// childProc is the parent's handle on a child process: the runtime child,
// or a gateway child (section 6).
type childProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	url    string        // the first of urls
	urls   []string      // what its first line named: one URL per listener, or the gateway's address
	exited chan struct{} // closed when cmd.Wait has returned
	err    error         // cmd.Wait's result, set before exited closes
	out    *childOut     // its stdout
	what   string        // "runtime child" or "gateway child", for errors

	stopOnce sync.Once
	stopErr  error
}

// startRuntimeChild starts exe with args (which begin with serveRuntimeArg)
// and waits for the URLs it prints (startChild).
func startRuntimeChild(ctx context.Context, exe string, args []string) (*childProc, error) {
	return startChild(ctx, exe, args, "runtime child", func(urls []string) error {
		for _, u := range urls {
			if !strings.HasPrefix(u, "ws://127.0.0.1:") {
				return fmt.Errorf("printed %q, want ws://127.0.0.1 URLs", u)
			}
		}
		return nil
	})
}

// startChild starts exe with args and waits, at most 15 s, for the first
// line it prints, which check vets (split into fields). The child's stderr
// is the parent's; if the parent dies, the child's stdin reaches EOF and it
// exits. On any failure the child is killed and waited for.
func startChild(ctx context.Context, exe string, args []string, what string, check func([]string) error) (*childProc, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	// Its own process group: a Ctrl-C on the terminal reaches only the
	// parent, which then stops the child in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	first := &childOut{ch: make(chan string, 1), settled: make(chan struct{}, 1)}
	cmd.Stdout = first
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c := &childProc{cmd: cmd, stdin: stdin, exited: make(chan struct{}), out: first, what: what}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(15 * time.Second)
	defer timer.Stop()
	select {
	case line := <-first.ch:
		c.urls = strings.Fields(line)
		if len(c.urls) == 0 {
			c.kill()
			return nil, fmt.Errorf("%s printed an empty first line", what)
		}
		if err := check(c.urls); err != nil {
			c.kill()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		c.url = c.urls[0]
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before printing its first line: %v", what, c.err)
	case <-timer.C:
		c.kill()
		return nil, fmt.Errorf("%s printed nothing within 15 s", what)
	case <-ctx.Done():
		c.kill()
		return nil, context.Cause(ctx)
	}
}

// settle has the child collect its garbage (SIGUSR1) and waits, at most
// 30 s, for it to say so. The sessions a section has just opened grow the
// child's heap, and its collector would otherwise run during the next
// measured point: in one run, a 394 ms collection of the child's 488 MiB
// fell into the point with 19k sessions open.
func (c *childProc) settle(ctx context.Context) error {
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("%s: settle: %w", c.what, err)
	}
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-c.out.settled:
		return nil
	case <-c.exited:
		return fmt.Errorf("%s exited while settling: %v", c.what, c.err)
	case <-timer.C:
		return fmt.Errorf("%s did not settle within 30 s", c.what)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// PID returns the child's process id.
func (c *childProc) PID() int { return c.cmd.Process.Pid }

// childStopWait is how long stop waits for a child to exit: a gateway
// child shuts down within gatewayChildShutdown, closing up to 100k sessions.
const childStopWait = gatewayChildShutdown + 15*time.Second

// stop closes the child's stdin, which makes it close what it serves and
// exit, and waits up to childStopWait before killing it. It is idempotent.
func (c *childProc) stop() error {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		timer := time.NewTimer(childStopWait)
		defer timer.Stop()
		select {
		case <-c.exited:
			c.stopErr = c.err
		case <-timer.C:
			c.kill()
			c.stopErr = fmt.Errorf("%s did not exit within %v of its stdin closing; killed", c.what, childStopWait)
		}
	})
	return c.stopErr
}

// kill kills the child and waits for it.
func (c *childProc) kill() {
	_ = c.cmd.Process.Kill()
	c.stdin.Close()
	<-c.exited
}

// childOut is the child's stdout: it hands over the first line (the URLs),
// signals each settledLine after it, and discards the rest.
type childOut struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	sent    bool
	ch      chan string   // capacity 1: the first line
	settled chan struct{} // capacity 1: a settledLine
}

func (w *childOut) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, _, ok := bytes.Cut(w.buf.Bytes(), []byte("\n"))
		if !ok {
			break
		}
		w.buf.Next(len(line) + 1)
		l := strings.TrimSpace(string(line))
		switch {
		case !w.sent:
			w.sent = true
			w.ch <- l
		case l == settledLine:
			select {
			case w.settled <- struct{}{}:
			default:
			}
		}
	}
	if w.buf.Len() > 64<<10 {
		w.buf.Reset() // no line this long is one of ours
	}
	return len(p), nil
}
