package budget

import (
	"fmt"
	"sync"
)

// Scope says which cap an ExceededError is about.
type Scope string

// Scopes.
const (
	ScopeGateway Scope = "gateway" // the total of all callers
	ScopeCaller  Scope = "caller"  // one caller's share
)

// ExceededError says a reservation was refused. It names the budget as
// operators configure it: Name for the gateway-wide cap, Name+"_per_caller"
// for a caller's.
type ExceededError struct {
	Budget    string // e.g. "live_jobs" or "live_jobs_per_caller"
	Scope     Scope
	Caller    string
	Limit     int64 // the cap
	InUse     int64 // what was held when the reservation was refused
	Requested int64
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("budget %s exhausted: %d in use, %d requested, limit %d", e.Budget, e.InUse, e.Requested, e.Limit)
}

// Budget accounts one resource for all callers. The zero value is not
// usable; call New.
type Budget struct {
	// Immutable after New.
	name, perName    string
	total, perCaller int64

	mu       sync.Mutex
	used     int64            // guarded by mu
	byCaller map[string]int64 // guarded by mu; only callers holding > 0
	refused  [2]uint64        // guarded by mu: refusals by the gateway cap, by a caller cap
	over     uint64           // guarded by mu: releases beyond what a caller held
}

// New returns a budget named name with a gateway-wide cap total and a cap
// perCaller on each caller; 0 means no cap. Negative caps are an error.
func New(name string, total, perCaller int64) (*Budget, error) {
	if name == "" {
		return nil, fmt.Errorf("budget: empty name")
	}
	if total < 0 || perCaller < 0 {
		return nil, fmt.Errorf("budget %s: negative cap (total %d, per caller %d)", name, total, perCaller)
	}
	return &Budget{name: name, perName: name + "_per_caller", total: total, perCaller: perCaller, byCaller: make(map[string]int64)}, nil
}

// Name returns the budget's name (the gateway-wide cap's).
func (b *Budget) Name() string { return b.name }

// Limits returns the caps (0 = none).
func (b *Budget) Limits() (total, perCaller int64) { return b.total, b.perCaller }

// Reserve takes n units for caller, or returns an *ExceededError and takes
// nothing.
func (b *Budget) Reserve(caller string, n int64) error {
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.byCaller[caller]
	if b.perCaller > 0 && mine+n > b.perCaller {
		b.refused[1]++
		return &ExceededError{Budget: b.perName, Scope: ScopeCaller, Caller: caller, Limit: b.perCaller, InUse: mine, Requested: n}
	}
	if b.total > 0 && b.used+n > b.total {
		b.refused[0]++
		return &ExceededError{Budget: b.name, Scope: ScopeGateway, Caller: caller, Limit: b.total, InUse: b.used, Requested: n}
	}
	b.byCaller[caller] = mine + n
	b.used += n
	return nil
}

// Fits reports which cap, if any, would refuse n more units for caller
// right now ("" when none would), without taking anything or counting a
// refusal. It lets a holder free what it no longer needs before it
// reserves, and only when that matters.
func (b *Budget) Fits(caller string, n int64) Scope {
	if n <= 0 {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.perCaller > 0 && b.byCaller[caller]+n > b.perCaller {
		return ScopeCaller
	}
	if b.total > 0 && b.used+n > b.total {
		return ScopeGateway
	}
	return ""
}

// Release gives back n units caller holds. Releasing more than the caller
// holds releases what it holds and is counted in Stats.Overreleased.
func (b *Budget) Release(caller string, n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.byCaller[caller]
	if n > mine {
		b.over++
		n = mine
	}
	if mine-n == 0 {
		delete(b.byCaller, caller)
	} else {
		b.byCaller[caller] = mine - n
	}
	b.used -= n
}

// Stats is a snapshot of a budget.
type Stats struct {
	InUse          int64  // units held by all callers
	Callers        int    // callers holding anything
	RefusedGateway uint64 // reservations refused by the gateway-wide cap
	RefusedCaller  uint64 // reservations refused by a caller's cap
	Overreleased   uint64 // releases of more than the caller held (a releaser's bug)
}

// Stats returns a snapshot.
func (b *Budget) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{InUse: b.used, Callers: len(b.byCaller), RefusedGateway: b.refused[0], RefusedCaller: b.refused[1], Overreleased: b.over}
}

// InUse returns what caller holds.
func (b *Budget) InUse(caller string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byCaller[caller]
}

// Account is a budget seen by one caller: what a component that holds
// resources on that caller's behalf calls. Implementations are safe for
// concurrent use.
type Account interface {
	// Reserve takes n units, or returns an *ExceededError and takes none.
	Reserve(n int64) error
	// Release gives back n units taken by Reserve.
	Release(n int64)
}

// Account returns caller's Account of b.
func (b *Budget) Account(caller string) Account { return account{b, caller} }

type account struct {
	b      *Budget
	caller string
}

func (a account) Reserve(n int64) error { return a.b.Reserve(a.caller, n) }
func (a account) Release(n int64)       { a.b.Release(a.caller, n) }

// Unlimited is an Account that never refuses.
var Unlimited Account = unlimited{}

type unlimited struct{}

func (unlimited) Reserve(int64) error { return nil }
func (unlimited) Release(int64)       {}

var (
	_ Account = account{}
	_ error   = (*ExceededError)(nil)
)
