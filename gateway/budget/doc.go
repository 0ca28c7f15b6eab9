// Package budget is sans-IO accounting of shared resources: a count or a
// number of bytes that all callers of the gateway draw from together, with
// a cap on the whole and a cap on each caller.
//
// A Budget is one resource ("sessions", "live_jobs", "retained_bytes"). Reserve
// takes n units for a caller, or takes nothing and returns an *ExceededError
// naming the cap that would have been passed: the gateway-wide one (Name, e.g.
// "live_jobs") or the caller's (Name+"_per_caller", e.g.
// "live_jobs_per_caller"). Release gives units back. A zero cap means no cap.
//
// Account binds a Budget to one caller, as the small interface that a
// component holding memory on a caller's behalf (an upstream connection
// retaining results and events) needs: Reserve(n) before it keeps n bytes,
// Release(n) when it lets them go. Such a component needs no knowledge of
// callers or of the other caps.
//
// # Rules
//
//   - Reserve is all or nothing: either both the total and the caller's use
//     grow by n, or neither changes.
//   - A caller's use never exceeds PerCaller and the total never exceeds
//     Total after a successful Reserve (both are checked against the same
//     locked state), so concurrent reservations cannot overshoot.
//   - Release of more than a caller holds is a bug of the releaser; it is
//     clamped to what the caller holds (so the budget never goes negative)
//     and counted (Stats.Overreleased), never a panic.
//   - Reserve(0) and Release(0) do nothing; negative n is treated as 0.
//
// # Concurrency and cost
//
// All methods are safe for concurrent use. A Budget has one mutex; Reserve
// and Release are a map lookup and two additions under it (tens of
// nanoseconds, no allocation once a caller has an entry). A caller's entry is
// removed when its use drops to zero, so the map holds only callers that hold
// something. The package starts no goroutines and reads no clock.
package budget
