package directory

import (
	"sync/atomic"
	"time"
)

// Counters count what a Directory did. One value may be shared by several
// directories (Config.Counters) and read at scrape time by the gRPC edge,
// which exports them; each field is an independent atomic counter.
type Counters struct {
	// Every Redis operation (a script, a PING, a SCAN batch with its check).
	Ops          atomic.Uint64
	Errors       atomic.Uint64 // operations that failed: unreachable, timed out, error reply, caller gave up
	LatencyNanos atomic.Uint64 // sum of the latency of Ops (mean = LatencyNanos / Ops)

	// Answered operations, by kind.
	Claims       atomic.Uint64
	Updates      atomic.Uint64
	Takeovers    atomic.Uint64 // Takeover calls answered (whatever the verdict)
	Releases     atomic.Uint64
	Deletes      atomic.Uint64
	Gets         atomic.Uint64
	OwnerLookups atomic.Uint64
	OrphanScans  atomic.Uint64 // complete SCAN passes
	OrphanChecks atomic.Uint64 // Orphans calls answered without a SCAN: nothing to adopt

	// Outcomes.
	Fenced   atomic.Uint64 // Update/Release/Delete refused: owner or epoch moved
	Owned    atomic.Uint64 // Takeover refused: the owner's lease is live
	Handoffs atomic.Uint64 // Takeover of a released session
	Adopted  atomic.Uint64 // Takeover of a session whose owner's lease was gone

	// Lease.
	LeaseRefreshes atomic.Uint64
	LeaseFailures  atomic.Uint64
	LeaseConflicts atomic.Uint64 // lease held by another process with the same instance id
}

// Observer sees every Redis operation: its name (claim, update, takeover,
// release, delete, get, owner, orphans, lease, ping), latency and error (nil,
// or an error from Directory: *UnavailableError or the caller's context). A
// verdict such as ErrFenced is an answer, not an error, and is reported as
// nil. The gRPC edge implements it with a latency histogram. ObserveOp is
// called on the caller's goroutine and must not block.
type Observer interface {
	ObserveOp(op string, took time.Duration, err error)
}
