package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// wantFiles is the open-file limit the bench asks for: every idle session is
// one WebSocket in the gateway (this process) and one in the runtime child.
// Raising the hard limit needs CAP_SYS_RESOURCE (root); without it the
// session counts that do not fit are left out, and the report says so.
const wantFiles = 1 << 18

// sessionsPerListener is how many sessions share one runtime listener: a
// loopback connection to one address takes one of the ~28k ephemeral ports
// (32768-60999 by default), so 100k sessions need several listeners (all on
// 127.0.0.1), which the gateway sees as several runtimes.
const sessionsPerListener = 20_000

// listenersFor returns how many runtime listeners n sessions need.
func listenersFor(n int) int { return max(1, (n+sessionsPerListener-1)/sessionsPerListener) }

// raiseFileLimit raises RLIMIT_NOFILE to want, raising the hard limit too
// when the process may (root); otherwise it raises the soft limit as far as
// the hard limit allows. Children inherit the result. It returns the soft
// limit in force.
func raiseFileLimit(want uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur >= want {
		return lim.Cur
	}
	raised := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		fallback := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &fallback)
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// machineInfo describes where the figures were taken.
type machineInfo struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	CPUModel   string `json:"cpu_model,omitempty"`
	FileLimit  uint64 `json:"file_limit"`
	Date       string `json:"date"`
}

func currentMachine(fileLimit uint64) machineInfo {
	return machineInfo{
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		CPUModel:   cpuModel(),
		FileLimit:  fileLimit,
		Date:       time.Now().UTC().Format(time.RFC3339),
	}
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "" when it
// cannot be read.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// cpuSample is a reading of the machine's CPU time and of the CPU time of
// the bench's own processes, in seconds, and of those processes' system
// calls and context switches.
type cpuSample struct {
	busy float64 // user + nice + system + steal of every CPU (/proc/stat)
	ours float64 // user + system of the given processes (/proc/PID/stat)
	last float64 // user + system of the last of them
	ok   bool
	// sys is the given processes' read and write system calls (/proc/PID/io:
	// syscr + syscw, which count read, write and their vector forms, the
	// calls loopback sockets are served by); switches their threads' context
	// switches, voluntary and not (/proc/PID/task/*/status); lastSys and
	// lastSwitches the last process's. counted is false when either could
	// not be read.
	sys, switches         float64
	lastSys, lastSwitches float64
	counted               bool
}

// to returns b − a, field by field: what happened between the two samples,
// in a form that add sums over several stretches.
func (a cpuSample) to(b cpuSample) cpuSample {
	return cpuSample{
		busy: b.busy - a.busy, ours: b.ours - a.ours, last: b.last - a.last, ok: a.ok && b.ok,
		sys: b.sys - a.sys, switches: b.switches - a.switches,
		lastSys: b.lastSys - a.lastSys, lastSwitches: b.lastSwitches - a.lastSwitches,
		counted: a.counted && b.counted,
	}
}

// add adds the difference d (from to) to s.
func (s *cpuSample) add(d cpuSample) {
	s.busy += d.busy
	s.ours += d.ours
	s.last += d.last
	s.ok = s.ok && d.ok
	s.sys += d.sys
	s.switches += d.switches
	s.lastSys += d.lastSys
	s.lastSwitches += d.lastSwitches
	s.counted = s.counted && d.counted
}

// setPerCall sets pt's CPU, system-call and context-switch figures per call
// from d, the difference of two samples taken around pt.Calls calls. A
// figure that could not be read stays 0.
func (d cpuSample) setPerCall(pt *point) {
	if pt.Calls <= 0 {
		return
	}
	n := float64(pt.Calls)
	if d.ok {
		pt.CPUNsPerCall = int64(math.Round(d.ours * 1e9 / n))
		pt.RuntimeCPUNsPerCall = int64(math.Round(d.last * 1e9 / n))
	}
	if d.counted {
		round := func(v float64) float64 { return math.Round(v/n*100) / 100 }
		pt.SyscallsPerCall, pt.RuntimeSyscallsPerCall = round(d.sys), round(d.lastSys)
		pt.SwitchesPerCall, pt.RuntimeSwitchesPerCall = round(d.switches), round(d.lastSwitches)
	}
}

// sampleCPU reads /proc (Linux); ok is false when it cannot.
func sampleCPU(pids ...int) cpuSample {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}
	}
	var s cpuSample
	for _, i := range []int{1, 2, 3, 8} { // user nice system steal
		s.busy += ticks(f[i])
	}
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return cpuSample{}
		}
		// The fields after the command name, which may contain spaces.
		_, rest, ok := strings.Cut(string(data), ") ")
		pf := strings.Fields(rest)
		if !ok || len(pf) < 13 {
			return cpuSample{}
		}
		s.last = ticks(pf[11]) + ticks(pf[12]) // utime stime
		s.ours += s.last
	}
	s.ok = true
	s.counted = true
	for _, pid := range pids {
		sys, sw, ok := countsOf(pid)
		if !ok {
			s.counted = false
			break
		}
		s.sys, s.switches = s.sys+sys, s.switches+sw
		s.lastSys, s.lastSwitches = sys, sw
	}
	return s
}

// countsOf returns pid's read and write system calls and its threads'
// context switches so far (see cpuSample). A thread that has exited takes
// its switches with it; the Go runtime keeps its threads.
func countsOf(pid int) (sys, switches float64, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, false
	}
	found := 0
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		if k == "syscr" || k == "syscw" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, 0, false
			}
			sys += float64(n)
			found++
		}
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || found != 2 {
		return 0, 0, false
	}
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread exited between the listing and the read
		}
		for line := range strings.Lines(string(data)) {
			k, v, _ := strings.Cut(line, ":")
			if k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches" {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, 0, false
				}
				switches += float64(n)
			}
		}
	}
	return sys, switches, true
}

func ticks(s string) float64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return float64(v) / clockTicks
}

// otherCPU is the share of the machine's CPU capacity that other processes
// used (or the hypervisor stole) between a and b: 0 on a quiet machine, up
// to 1 when others kept every CPU busy. It is -1 when unknown. Interrupt
// time is left out, since loopback traffic is accounted there.
func otherCPU(a, b cpuSample, wall time.Duration) float64 {
	if !a.ok || !b.ok || wall <= 0 {
		return -1
	}
	other := (b.busy - a.busy) - (b.ours - a.ours)
	share := max(other, 0) / (wall.Seconds() * float64(runtime.NumCPU()))
	return math.Round(share*1e4) / 1e4 // /proc has 10 ms resolution
}

// callCountsText is a point's system calls and context switches per call,
// with the runtime child's part, for progress lines.
func callCountsText(pt point) string {
	return "syscalls/call " + withRuntime(pt.SyscallsPerCall, pt.RuntimeSyscallsPerCall) +
		"  switches/call " + withRuntime(pt.SwitchesPerCall, pt.RuntimeSwitchesPerCall)
}
