package timeoutprofile_test

import (
	"sync"
	"time"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// testObserver counts events, summed over methods.
type testObserver struct {
	mu        sync.Mutex
	durations int
	timeouts  map[string]int // by profile
	clamped   map[timeoutprofile.Rule]int
}

func newTestObserver() *testObserver {
	return &testObserver{timeouts: map[string]int{}, clamped: map[timeoutprofile.Rule]int{}}
}

func (o *testObserver) ForMethod(profile, _, _ string) timeoutprofile.MethodObserver {
	return &testMethodObserver{o: o, profile: profile}
}

func (o *testObserver) clamps(r timeoutprofile.Rule) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.clamped[r]
}

func (o *testObserver) timeoutsOf(profile string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.timeouts[profile]
}

type testMethodObserver struct {
	o       *testObserver
	profile string
}

func (m *testMethodObserver) Duration(time.Duration) {
	m.o.mu.Lock()
	m.o.durations++
	m.o.mu.Unlock()
}

func (m *testMethodObserver) Timeout() {
	m.o.mu.Lock()
	m.o.timeouts[m.profile]++
	m.o.mu.Unlock()
}

func (m *testMethodObserver) Clamped(r timeoutprofile.Rule) {
	m.o.mu.Lock()
	m.o.clamped[r]++
	m.o.mu.Unlock()
}
