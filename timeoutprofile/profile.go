package timeoutprofile

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// Profile is a named timeout budget (SW4-002 §1.1). All durations are whole
// milliseconds that fit the contract's uint32 millisecond fields.
type Profile struct {
	// Name is the profile name: a lower-case letter, then up to 63 lower-case
	// letters, digits and underscores ("tool_call").
	Name string
	// Default is the timeout of a call that asks for none (> 0).
	Default time.Duration
	// Min and Max bound an explicit request: Min <= Default <= Max.
	Min, Max time.Duration
	// AllowInfinite makes an explicit request of 0 mean "no timeout".
	AllowInfinite bool
}

// StreamingPolicy bounds a streaming call (SW4-002 §4.1), measured on the
// messages the server sends. A zero field means that limit is not enforced;
// a policy whose fields are all zero is the same as no policy.
type StreamingPolicy struct {
	// Initial is the time from the start of the call to the first message.
	Initial time.Duration
	// Gap is the longest pause allowed between two consecutive messages.
	Gap time.Duration
	// Total is the longest the whole stream may last (0 = unlimited).
	Total time.Duration
}

func (p StreamingPolicy) isZero() bool { return p == StreamingPolicy{} }

// FallbackProfile is the name of the built-in profile used for methods that
// no mapping, method option or guidance entry names (SW4-002 §8: the
// universal 30 s of non-conforming services). WithFallback and the
// configuration's "fallback" field choose another.
const FallbackProfile = "default"

// The limits a TimeoutExceeded detail names.
const (
	LimitUnary   = "unary"   // a unary call's budget
	LimitInitial = "initial" // a stream's time to first message
	LimitGap     = "gap"     // a stream's pause between messages
	LimitTotal   = "total"   // a stream's total duration
	// LimitCallerDeadline: the caller's own deadline, less the deadline
	// margin (WithDeadlineMargin), was the call's effective budget.
	LimitCallerDeadline = "caller_deadline"
)

// standard is SW4-002 §1.2 plus the fallback profile. Never modified.
var standard = []Profile{
	{Name: "heartbeat", Default: 5 * time.Second, Min: 1 * time.Second, Max: 30 * time.Second},
	{Name: "registration", Default: 30 * time.Second, Min: 5 * time.Second, Max: 120 * time.Second},
	{Name: "task_submit", Default: 30 * time.Second, Min: 5 * time.Second, Max: 300 * time.Second},
	{Name: "message_route", Default: 10 * time.Second, Min: 1 * time.Second, Max: 60 * time.Second},
	{Name: "negotiation_open", Default: 60 * time.Second, Min: 10 * time.Second, Max: 600 * time.Second},
	{Name: "negotiation_vote", Default: 300 * time.Second, Min: 30 * time.Second, Max: 1800 * time.Second, AllowInfinite: true},
	{Name: "negotiation_decision", Default: 60 * time.Second, Min: 5 * time.Second, Max: 300 * time.Second},
	{Name: "handoff", Default: 60 * time.Second, Min: 10 * time.Second, Max: 300 * time.Second},
	{Name: "workflow_submit", Default: 30 * time.Second, Min: 5 * time.Second, Max: 120 * time.Second},
	{Name: "workflow_status", Default: 10 * time.Second, Min: 1 * time.Second, Max: 60 * time.Second},
	{Name: "tool_call", Default: 30 * time.Second, Min: 1 * time.Second, Max: 3600 * time.Second, AllowInfinite: true},
	{Name: "hitl_escalate", Default: 300 * time.Second, Min: 60 * time.Second, Max: 3600 * time.Second, AllowInfinite: true},
	{Name: FallbackProfile, Default: 30 * time.Second, Min: 1 * time.Second, Max: 300 * time.Second},
}

// StandardProfiles returns the twelve SW4-002 §1.2 profiles and the
// fallback profile "default" (30 s, 1 s–5 min, not infinite), sorted by name.
func StandardProfiles() []Profile {
	ps := slices.Clone(standard)
	slices.SortFunc(ps, func(a, b Profile) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// Rule says which SW4-002 §2.2 override rule changed a requested timeout.
type Rule uint8

const (
	// RuleNone: the request was used as given.
	RuleNone Rule = iota
	// RuleBelowMin: the request was below the profile's minimum and was raised to it.
	RuleBelowMin
	// RuleAboveMax: the request was above the profile's maximum and was lowered to it.
	RuleAboveMax
	// RuleZeroNotInfinite: the request was 0 on a profile without
	// allow_infinite; the profile's default was used.
	RuleZeroNotInfinite
	// RuleKeptCallerDeadline: clamping would have moved the caller's own
	// deadline later; the caller's deadline was kept instead.
	RuleKeptCallerDeadline
)

var ruleNames = [...]string{"none", "below_min", "above_max", "zero_not_infinite", "kept_caller_deadline"}

// String returns the rule's metric label, e.g. "below_min".
func (r Rule) String() string {
	if int(r) < len(ruleNames) {
		return ruleNames[r]
	}
	return fmt.Sprintf("rule(%d)", r)
}

// Clamp applies SW4-002 §2.2 to an explicit request. It returns the timeout
// to use — 0 means no timeout, which only a request of 0 on a profile with
// AllowInfinite yields — and the rule that changed the request, RuleNone if
// it was used as given:
//
//   - requested < Min: Min, RuleBelowMin (a negative request counts as below Min);
//   - requested > Max: Max, RuleAboveMax;
//   - requested == 0 without AllowInfinite: Default, RuleZeroNotInfinite;
//   - otherwise: requested, RuleNone.
//
// Clamp is pure; the interceptors log and count the rule it returns.
func (p Profile) Clamp(requested time.Duration) (time.Duration, Rule) {
	switch {
	case requested == 0 && p.AllowInfinite:
		return 0, RuleNone
	case requested == 0:
		return p.Default, RuleZeroNotInfinite
	case requested < p.Min:
		return p.Min, RuleBelowMin
	case requested > p.Max:
		return p.Max, RuleAboveMax
	}
	return requested, RuleNone
}

// proto returns p as the contract's message.
func (p *Profile) proto() *timeoutprofilev1.TimeoutProfile {
	return &timeoutprofilev1.TimeoutProfile{
		ProfileName:      p.Name,
		DefaultTimeoutMs: msOf(p.Default),
		MinTimeoutMs:     msOf(p.Min),
		MaxTimeoutMs:     msOf(p.Max),
		AllowInfinite:    p.AllowInfinite,
	}
}

func (p StreamingPolicy) proto() *timeoutprofilev1.StreamingTimeoutPolicy {
	return &timeoutprofilev1.StreamingTimeoutPolicy{
		InitialTimeoutMs:    msOf(p.Initial),
		MessageGapTimeoutMs: msOf(p.Gap),
		TotalTimeoutMs:      msOf(p.Total),
	}
}

func policyFromProto(m *timeoutprofilev1.StreamingTimeoutPolicy) StreamingPolicy {
	return StreamingPolicy{
		Initial: ms(m.GetInitialTimeoutMs()),
		Gap:     ms(m.GetMessageGapTimeoutMs()),
		Total:   ms(m.GetTotalTimeoutMs()),
	}
}

// ms converts a millisecond count to a duration.
func ms(v uint32) time.Duration { return time.Duration(v) * time.Millisecond }

// msOf converts d to whole milliseconds, saturating at the uint32 range.
func msOf(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	m := d / time.Millisecond
	if m > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(m)
}

// maxDuration is the largest duration the contract's uint32 milliseconds carry.
const maxDuration = time.Duration(math.MaxUint32) * time.Millisecond

// checkDuration reports why d cannot be a profile or policy duration.
func checkDuration(d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("must not be negative (got %v)", d)
	case d%time.Millisecond != 0:
		return fmt.Errorf("must be whole milliseconds (got %v)", d)
	case d > maxDuration:
		return fmt.Errorf("must be at most %d ms (got %v)", uint32(math.MaxUint32), d)
	}
	return nil
}

// validName reports whether s is a valid profile name.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// checkProfile validates a complete profile. where names it in the error.
func checkProfile(p Profile, where string) error {
	if !validName(p.Name) {
		return fmt.Errorf("%s: invalid profile name %q (want [a-z][a-z0-9_]{0,63})", where, p.Name)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Default", p.Default}, {"Min", p.Min}, {"Max", p.Max}} {
		if err := checkDuration(f.d); err != nil {
			return fmt.Errorf("%s: %s %w", where, f.name, err)
		}
	}
	return checkOrder(p, where+": Default", where+": Min", where+": Max")
}

// checkOrder checks 0 < default and min <= default <= max, naming each
// field by the given labels.
func checkOrder(p Profile, def, minF, maxF string) error {
	switch {
	case p.Default <= 0:
		return fmt.Errorf("%s must be greater than 0", def)
	case p.Min > p.Default:
		return fmt.Errorf("%s (%d ms) is greater than %s (%d ms)", minF, msOf(p.Min), def, msOf(p.Default))
	case p.Default > p.Max:
		return fmt.Errorf("%s (%d ms) is greater than %s (%d ms)", def, msOf(p.Default), maxF, msOf(p.Max))
	}
	return nil
}

func checkPolicy(p StreamingPolicy, where string) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Initial", p.Initial}, {"Gap", p.Gap}, {"Total", p.Total}} {
		if err := checkDuration(f.d); err != nil {
			return fmt.Errorf("%s: %s %w", where, f.name, err)
		}
	}
	return nil
}
