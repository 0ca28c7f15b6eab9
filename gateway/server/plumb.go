package server

import (
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// attachRetained gives an upstream connection the opening caller's account
// of the gateway's retained-bytes budget: the connection reserves before it
// keeps a result or an event in memory and releases when it lets it go (a
// result once delivered to RunJob, an event log when trimmed or expired). A
// refused reservation surfaces as a *budget.ExceededError, which toStatus
// maps to RESOURCE_EXHAUSTED naming the budget.
//
// upstream.Config has no field for it yet: until it has (see the issue 9
// plumbing note), retained bytes are bounded per session only, by
// Upstream.MaxBufferedBytes. The wiring is this one line:
//
//	uc.RetainedBytes = acct
func attachRetained(uc *upstream.Config, acct budget.Account) {
	_, _ = uc, acct
}
