package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAlternateRounds: each side runs its slices in turn, the side that
// goes first rotating every round, and each side's point sums its own
// slices' calls only.
func TestAlternateRounds(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{rt: &childProc{cmd: &exec.Cmd{Process: self}}}
	var (
		mu    sync.Mutex
		order []int
	)
	side := func(i int) []callFunc {
		call := func(context.Context) error {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return nil
		}
		return []callFunc{call, call} // two workers
	}
	// A slice far longer than the test: each slice ends at its share of
	// the calls, 6 ÷ 3 rounds = 2.
	p, err := b.alternateRounds(context.Background(), [][]callFunc{side(0), side(1)}, time.Minute, 3, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1}
	if !slices.Equal(order, want) {
		t.Errorf("calls ran in the order %v, want %v", order, want)
	}
	for i, pt := range p {
		if pt.Calls != 6 || pt.Concurrency != 2 {
			t.Errorf("side %d: %d calls at concurrency %d, want 6 at 2", i, pt.Calls, pt.Concurrency)
		}
	}

	errCall := errors.New("call failed")
	failing := []callFunc{func(context.Context) error { return errCall }}
	if _, err := b.alternateRounds(context.Background(), [][]callFunc{side(0), failing}, time.Minute, 2, 4); !errors.Is(err, errCall) {
		t.Errorf("err = %v, want the failed call's", err)
	}
}

// TestGatewayChildArgs: what the parent passes, the child reads back; and
// a malformed argument list is refused with the argument named.
func TestGatewayChildArgs(t *testing.T) {
	args := gatewayChildArgs(config{GCMinHeapMiB: 64, ProcsTuner: true}, 20, []string{"ws://127.0.0.1:1/arcp", "ws://127.0.0.1:2/arcp"})
	if want := []string{serveGatewayArg, "64", "true", "false", "20", "ws://127.0.0.1:1/arcp", "ws://127.0.0.1:2/arcp"}; !slices.Equal(args, want) {
		t.Errorf("args %q, want %q", args, want)
	}
	if !isGatewayChild(append([]string{"exe"}, args...)) || isRuntimeChild(append([]string{"exe"}, args...)) {
		t.Error("the arguments do not select the gateway child alone")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"64", "true", "false", "20"}, "want:"},
		{[]string{"-1", "true", "false", "20", "ws://x"}, "gc-min-heap-mib"},
		{[]string{"64", "maybe", "false", "20", "ws://x"}, "procs-tuner"},
		{[]string{"64", "true", "false", "0", "ws://x"}, "max-sessions"},
	} {
		err := serveGatewayChild(c.args, strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serveGatewayChild(%q) = %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
