package wsclient

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

const echoServerEnv = "WSCLIENT_TEST_ECHO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(echoServerEnv) == "1" {
		runEchoServerProcess()
		return
	}
	goleak.VerifyTestMain(m)
}

// runEchoServerProcess is the body of the child process the benchmarks
// talk to, so that the server's memory and allocations are not counted
// with the client's: a coder/websocket echo server on 127.0.0.1 that prints
// its address and exits when its stdin closes.
func runEchoServerProcess() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent goes
		os.Exit(0)
	}()
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		echoHandler(context.Background(), c)
	}))
}

// startEchoProcess starts the echo server child and returns its address.
func startEchoProcess(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), echoServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("echo server: %v", err)
	}
	return strings.TrimSpace(addr)
}

// jsonMessage is a 512-byte text message shaped like the gateway's traffic.
func jsonMessage() []byte {
	head := `{"type":"job.progress","id":"01J9ZK4Q6V3N8W2R5T7Y0X1B4C","session":"s-7f3a","payload":{"note":"`
	tail := `"}}`
	return []byte(head + strings.Repeat("x", 512-len(head)-len(tail)) + tail)
}

// BenchmarkEcho measures a request/response round trip of a 512-byte text
// message with an out-of-process coder/websocket echo server, for this
// client and for coder/websocket as the client.
func BenchmarkEcho(b *testing.B) {
	addr := startEchoProcess(b)
	msg := jsonMessage()
	ctx := context.Background()
	b.Run("client=wsclient", func(b *testing.B) {
		c, err := Dial(ctx, "ws://"+addr, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.CloseNow()
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		cpu := processCPU()
		for b.Loop() {
			if err := c.Write(true, msg); err != nil {
				b.Fatal(err)
			}
			if _, got, err := c.Read(); err != nil || len(got) != len(msg) {
				b.Fatal(len(got), err)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("client=coder", func(b *testing.B) {
		c, _, err := websocket.Dial(ctx, "ws://"+addr, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.CloseNow()
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		cpu := processCPU()
		for b.Loop() {
			if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
				b.Fatal(err)
			}
			if _, got, err := c.Read(ctx); err != nil || len(got) != len(msg) {
				b.Fatal(len(got), err)
			}
		}
		reportCPU(b, cpu)
	})
}

// reportCPU reports the client process's CPU time (user+system) per
// operation since start: with the server in another process, a measure of
// the client's own cost that scheduling noise on a busy machine blurs less
// than the round-trip time.
func reportCPU(b *testing.B, start time.Duration) {
	if used := processCPU() - start; used > 0 && b.N > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// idleClient is one client connection, for the idle-memory benchmark.
type idleClient interface {
	roundTrip(msg []byte) error
	read() error
	closeNow()
}

type wsIdle struct{ c *Conn }

func (w wsIdle) roundTrip(msg []byte) error {
	if err := w.c.Write(true, msg); err != nil {
		return err
	}
	_, _, err := w.c.Read()
	return err
}
func (w wsIdle) read() error { _, _, err := w.c.Read(); return err }
func (w wsIdle) closeNow()   { _ = w.c.CloseNow() }

type coderIdle struct{ c *websocket.Conn }

func (w coderIdle) roundTrip(msg []byte) error {
	ctx := context.Background()
	if err := w.c.Write(ctx, websocket.MessageText, msg); err != nil {
		return err
	}
	_, _, err := w.c.Read(ctx)
	return err
}
func (w coderIdle) read() error { _, _, err := w.c.Read(context.Background()); return err }
func (w coderIdle) closeNow()   { _ = w.c.CloseNow() }

func heapAndStacks() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC() // the second one also empties the pools' victim caches
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// BenchmarkIdleMemory reports the client-side memory (heap in use and
// goroutine stacks, after GC) per idle connection: each of 1000
// connections makes one round trip and then has a goroutine blocked in Read.
// The server runs in a child process. b.N is ignored; run it with
// -benchtime=1x.
func BenchmarkIdleMemory(b *testing.B) {
	addr := startEchoProcess(b)
	const conns = 1000
	msg := jsonMessage()
	ctx := context.Background()
	dialers := []struct {
		name string
		dial func() (idleClient, error)
	}{
		{"client=wsclient", func() (idleClient, error) {
			c, err := Dial(ctx, "ws://"+addr, Options{})
			return wsIdle{c}, err
		}},
		{"client=coder", func() (idleClient, error) {
			c, _, err := websocket.Dial(ctx, "ws://"+addr, nil)
			return coderIdle{c}, err
		}},
	}
	for _, d := range dialers {
		b.Run(d.name, func(b *testing.B) {
			heap0, stack0 := heapAndStacks()
			clients := make([]idleClient, 0, conns)
			var started, ended sync.WaitGroup
			for range conns {
				c, err := d.dial()
				if err != nil {
					b.Fatal(err)
				}
				if err := c.roundTrip(msg); err != nil {
					b.Fatal(err)
				}
				clients = append(clients, c)
				started.Add(1)
				ended.Add(1)
				go func() {
					defer ended.Done()
					started.Done()
					_ = c.read() // parks until closeNow
				}()
			}
			started.Wait()
			for range 10 {
				runtime.Gosched()
			}
			heap1, stack1 := heapAndStacks()
			heap, stack := float64(int64(heap1-heap0))/conns, float64(int64(stack1-stack0))/conns
			b.ReportMetric(heap+stack, "B/idleconn")
			b.ReportMetric(heap, "heapB/idleconn")
			b.ReportMetric(stack, "stackB/idleconn")
			b.ReportMetric(0, "ns/op")
			for _, c := range clients {
				c.closeNow()
			}
			ended.Wait()
		})
	}
}
