package timeoutprofile

import "time"

// budget is the outcome of applying a profile to one call: how long it may
// take and who enforces that.
type budget struct {
	// timeout is the effective budget. When own is false and infinite is
	// false it is the time left on the caller's deadline.
	timeout time.Duration
	// infinite: the profile sets no limit (an explicit 0 on an
	// allow_infinite profile, or a stream policy without a total); only the
	// caller's deadline, if any, bounds the call.
	infinite bool
	// own: the budget ends before the caller's deadline (or the caller set
	// none), so the interceptor enforces deadline itself. Otherwise the
	// caller's deadline, which the parent context already carries, governs.
	own      bool
	deadline time.Time
	// callerBound: own is set because the caller's deadline, less the
	// deadline margin, is the effective budget (withMargin); the limit is
	// LimitCallerDeadline. timeout <= 0 then means the call must end
	// before its handler runs.
	callerBound bool
	// rule is the §2.2 rule that changed the request, if any.
	rule Rule
	// requested is what the caller asked for: the explicit override, or the
	// time left on its deadline when hasRequest and not explicit.
	requested  time.Duration
	hasRequest bool
	explicit   bool
}

// computeBudget applies profile p to a call starting at now.
//
// The request is the explicit override if there is one (x-timeout-ms or
// CallTimeout), else the time left on the caller's deadline, else none. A
// request is clamped (Profile.Clamp); no request gets p.Default. The caller's
// deadline always bounds the result: the budget may end earlier, never
// later. When clamping raised a request past the caller's deadline (below
// min, or 0 on a profile without allow_infinite) the caller's deadline is
// kept and the rule becomes RuleKeptCallerDeadline.
func computeBudget(p *Profile, now, callerDL time.Time, hasDL bool, override time.Duration, hasOverride bool) budget {
	var b budget
	switch {
	case hasOverride:
		b.requested, b.hasRequest, b.explicit = override, true, true
		b.timeout, b.rule = p.Clamp(override)
		b.infinite = b.timeout == 0
	case hasDL:
		rem := callerDL.Sub(now)
		b.requested, b.hasRequest = rem, true
		if rem <= 0 {
			// Already expired: the parent context is done or about to be.
			return b
		}
		b.timeout, b.rule = p.Clamp(rem)
	default:
		b.timeout = p.Default
	}
	return b.bound(now, callerDL, hasDL)
}

// computeStreamBudget is computeBudget for a streaming method with a
// policy. The total is the clamped explicit override if there is one
// (infinite when it is an allowed 0), else the policy's Total (0 =
// unlimited). The caller's deadline is not a request here: it only bounds
// the stream.
func computeStreamBudget(p *Profile, pol StreamingPolicy, now, callerDL time.Time, hasDL bool, override time.Duration, hasOverride bool) budget {
	var b budget
	switch {
	case hasOverride:
		b.requested, b.hasRequest, b.explicit = override, true, true
		b.timeout, b.rule = p.Clamp(override)
		b.infinite = b.timeout == 0
	case pol.Total > 0:
		b.timeout = pol.Total
	default:
		b.infinite = true
	}
	return b.bound(now, callerDL, hasDL)
}

// bound lets the caller's deadline bound b.
func (b budget) bound(now, callerDL time.Time, hasDL bool) budget {
	if b.infinite {
		if hasDL {
			b.timeout = callerDL.Sub(now)
		}
		return b
	}
	target := now.Add(b.timeout)
	if hasDL && !target.Before(callerDL) {
		if b.rule == RuleBelowMin || b.rule == RuleZeroNotInfinite {
			b.rule = RuleKeptCallerDeadline
		}
		b.timeout = callerDL.Sub(now)
		return b
	}
	b.own, b.deadline = true, target
	return b
}

// withMargin makes the interceptor end a call a margin before the caller's
// deadline when that deadline, less the margin, comes before the budget b
// would end at (or b has no end of its own): the status then reaches the
// caller before its own timer fires, and the budget is shortened by the
// margin. The margin scales with the time left (scaledMargin): a third of
// it, at most ceiling. The result is own and callerBound, with deadline
// callerDL less the margin and timeout the time from now to it, which is
// positive whenever any time was left: only a call already past its
// deadline gets zero or less. A budget that ends earlier, a call without a
// caller deadline and a ceiling of 0 leave b as it is.
//
// floor (WithStallMargin, stall.go; 0 when off) raises the margin to at
// least floor, at most half the time left.
func (b budget) withMargin(now, callerDL time.Time, hasDL bool, ceiling, floor time.Duration) budget {
	if ceiling <= 0 || !hasDL {
		return b
	}
	rem := callerDL.Sub(now)
	m := scaledMargin(rem, ceiling)
	if floor > m {
		m = max(m, min(floor, rem/2, MaxDeadlineMargin))
	}
	end := callerDL.Add(-m)
	if b.own && b.deadline.Before(end) {
		return b
	}
	b.own, b.callerBound, b.infinite = true, true, false
	b.deadline, b.timeout = end, end.Sub(now)
	return b
}

// marginDivisor: the margin is at most 1/marginDivisor of the time left.
// See "The deadline margin" in the package documentation for why a third.
const marginDivisor = 3

// scaledMargin is the deadline margin of a call with rem left on its
// caller's deadline: rem/marginDivisor, at most ceiling, 0 when nothing is
// left. It is always less than a positive rem, so a call with time left
// always runs.
func scaledMargin(rem, ceiling time.Duration) time.Duration {
	if rem <= 0 {
		return 0
	}
	return min(ceiling, rem/marginDivisor)
}
