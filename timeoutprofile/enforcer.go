package timeoutprofile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/reflect/protoregistry"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// maxCached bounds the method cache. Interceptors only see the methods of
// registered services (server) or of the calls a program makes (client), so
// the bound is a safety net.
const maxCached = 4096

// An Enforcer selects the timeout profile of each method and enforces it:
// it provides the server and client interceptors, the
// TimeoutProfileService (NewService) and Resolve.
//
// An Enforcer is immutable after New and safe for concurrent use. It starts
// no goroutines; timers run the runtime's own timer callbacks and are
// stopped when calls end, so there is nothing to close.
type Enforcer struct {
	// Immutable after New.
	profiles   map[string]*entry
	exact      map[string]string              // full method → profile
	services   map[string]string              // service → profile
	exactPol   map[string]StreamingPolicy     // full method → policy
	servicePol map[string]StreamingPolicy     // service → policy
	callers    map[string]map[string]*Profile // profile → caller → override
	fallback   string
	margin     time.Duration   // WithDeadlineMargin; 0: off
	noMargin   map[string]bool // WithoutDeadlineMargin
	stalls     *stallGauge     // WithStallMargin; nil: off
	sub        *subKeys        // WithSubKeys and the configuration's sub_keys
	callerFn   func(context.Context) string
	files      *protoregistry.Files
	obs        Observer
	log        *slog.Logger
	warn       *warner

	mu    sync.Mutex                         // serialises cache inserts
	cache atomic.Pointer[map[string]*method] // copy on write; never modified in place
}

// method is the cached resolution of one full method name.
type method struct {
	full, service, name string
	profile             *Profile
	byCaller            map[string]*Profile     // nil: no per-caller overrides for profile
	streaming           *StreamingPolicy        // nil: none, or all zero
	noMargin            bool                    // WithoutDeadlineMargin
	subs                map[*subKeyRule]*method // WithSubKeys: a variant per sub-key rule; nil: none
	subPattern          string                  // a variant's rule pattern
	source              timeoutprofilev1.ProfileSource
	reason              string
	obs                 MethodObserver
}

// New validates the options and returns an Enforcer. The error names the
// offending option or field.
func New(opts ...Option) (*Enforcer, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt.apply(&o)
	}
	e, err := build(&o)
	if err != nil {
		return nil, fmt.Errorf("timeoutprofile: %w", err)
	}
	return e, nil
}

func build(o *options) (*Enforcer, error) {
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	cfg := o.config
	if cfg == nil {
		cfg = standardConfig()
	}
	if cfg.profiles == nil {
		return nil, errors.New("WithConfig: a Config must come from ParseConfig or LoadGlobal")
	}
	e := &Enforcer{
		profiles:   maps.Clone(cfg.profiles),
		exact:      map[string]string{},
		services:   map[string]string{},
		exactPol:   map[string]StreamingPolicy{},
		servicePol: map[string]StreamingPolicy{},
		callers:    map[string]map[string]*Profile{},
		fallback:   cfg.fallback,
		margin:     DefaultDeadlineMargin,
		callerFn:   o.callerFn,
		files:      o.files,
		obs:        o.observer,
		log:        o.logger,
		warn:       newWarner(o.logger, o.logInterval),
	}
	if cfg.hasMargin {
		e.margin = cfg.margin
	}
	if o.hasMargin {
		e.margin = o.margin
	}
	if stall := cfg.stallMargin; o.hasStall || stall {
		if o.hasStall {
			stall = o.stall
		}
		if stall {
			e.stalls = &stallGauge{}
		}
	}
	empty := map[string]*method{}
	e.cache.Store(&empty)
	e.noMargin = map[string]bool{}
	for _, m := range o.noMargin {
		e.noMargin[m] = true
	}

	// Client level: complete profiles.
	seen := map[string]bool{}
	for _, p := range o.profiles {
		where := fmt.Sprintf("WithProfile(%q)", p.Name)
		if seen[p.Name] {
			return nil, fmt.Errorf("%s: duplicate definition", where)
		}
		seen[p.Name] = true
		if err := checkProfile(p, where); err != nil {
			return nil, err
		}
		e.profiles[p.Name] = &entry{p: p, src: [3]string{where + ".Default", where + ".Min", where + ".Max"}}
	}

	switch len(o.fallbacks) {
	case 0:
	case 1:
		if _, ok := e.profiles[o.fallbacks[0]]; !ok {
			return nil, fmt.Errorf("WithFallback: unknown profile %q", o.fallbacks[0])
		}
		e.fallback = o.fallbacks[0]
	default:
		return nil, errors.New("WithFallback: duplicate definition")
	}

	// Method mappings: the configuration's, then the options'.
	methods := maps.Clone(cfg.methods)
	seen = map[string]bool{}
	for _, m := range o.methods {
		where := fmt.Sprintf("WithMethodProfile(%q)", m.pattern)
		if err := checkPatternOnce(seen, m.pattern, where); err != nil {
			return nil, err
		}
		if _, ok := e.profiles[m.profile]; !ok {
			return nil, fmt.Errorf("%s: unknown profile %q", where, m.profile)
		}
		methods[m.pattern] = m.profile
	}
	for pat, name := range methods {
		svc, meth, _ := parsePattern(pat)
		if meth == "*" {
			e.services[svc] = name
		} else {
			e.exact[pat] = name
		}
	}

	policies := maps.Clone(cfg.streaming)
	seen = map[string]bool{}
	for _, sp := range o.streaming {
		where := fmt.Sprintf("WithStreamingPolicy(%q)", sp.pattern)
		if err := checkPatternOnce(seen, sp.pattern, where); err != nil {
			return nil, err
		}
		if err := checkPolicy(sp.policy, where); err != nil {
			return nil, err
		}
		policies[sp.pattern] = sp.policy
	}
	for pat, pol := range policies {
		svc, meth, _ := parsePattern(pat)
		if meth == "*" {
			e.servicePol[svc] = pol
		} else {
			e.exactPol[pat] = pol
		}
	}

	// Per-caller overrides: the configuration's patches over the effective
	// table, then the options' complete profiles.
	add := func(caller string, p Profile) {
		if e.callers[p.Name] == nil {
			e.callers[p.Name] = map[string]*Profile{}
		}
		e.callers[p.Name][caller] = &p
	}
	for _, caller := range slices.Sorted(maps.Keys(cfg.callers)) {
		for _, name := range slices.Sorted(maps.Keys(cfg.callers[caller])) {
			pt := cfg.callers[caller][name]
			ce := pt.apply(e.profiles[name])
			if err := ce.check(); err != nil {
				return nil, fmt.Errorf("%s: %w", pt.where, err)
			}
			add(caller, ce.p)
		}
	}
	type callerKey struct{ caller, name string }
	seenCaller := map[callerKey]bool{}
	for _, c := range o.callers {
		where := fmt.Sprintf("WithCallerProfile(%q, %q)", c.caller, c.profile.Name)
		k := callerKey{c.caller, c.profile.Name}
		if seenCaller[k] {
			return nil, fmt.Errorf("%s: duplicate definition", where)
		}
		seenCaller[k] = true
		if err := checkCaller(c.caller); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if err := checkProfile(c.profile, where); err != nil {
			return nil, err
		}
		if _, ok := e.profiles[c.profile.Name]; !ok {
			return nil, fmt.Errorf("%s: unknown profile %q", where, c.profile.Name)
		}
		add(c.caller, c.profile)
	}
	sub, err := buildSubKeys(cfg.subKeys, o, e.profiles)
	if err != nil {
		return nil, err
	}
	e.sub = sub
	return e, nil
}

// Profiles returns the effective profile table (the global layer with the
// client-level options applied; per-caller overrides are not part of it),
// sorted by name.
func (e *Enforcer) Profiles() []*timeoutprofilev1.TimeoutProfile {
	return tableOf(e.profiles)
}

// Resolution is the outcome of profile selection for a method.
type Resolution struct {
	// Profile is the effective profile, including the caller's override.
	Profile Profile
	// Source says which selection rule chose it.
	Source timeoutprofilev1.ProfileSource
	// Reason explains the choice, e.g.
	// `method option (timeoutprofile.v1.profile) = "tool_call" on /sessiongate.v1.SessionGateway/RunJob`.
	Reason string
	// Streaming is the method's streaming policy, nil if it has none.
	Streaming *StreamingPolicy
	// SubKeyPattern is the sub-key mapping that chose the profile, when
	// Source is PROFILE_SOURCE_SUB_KEY (ResolveSubKey).
	SubKeyPattern string
}

// Resolve tells which profile calls of fullMethod ("/package.Service/Method")
// from caller ("" for none) get, and why. It does not add fullMethod to the
// cache the interceptors use.
func (e *Enforcer) Resolve(fullMethod, caller string) (Resolution, error) {
	if _, _, ok := splitFullMethod(fullMethod); !ok {
		return Resolution{}, fmt.Errorf("timeoutprofile: invalid full method %q: want \"/package.Service/Method\"", fullMethod)
	}
	m := (*e.cache.Load())[fullMethod]
	if m == nil {
		m = e.resolve(fullMethod)
	}
	return resolutionOf(m, caller), nil
}

// resolutionOf is the Resolution of m for caller.
func resolutionOf(m *method, caller string) Resolution {
	p := m.profile
	if caller != "" {
		if cp := m.byCaller[caller]; cp != nil {
			p = cp
		}
	}
	r := Resolution{Profile: *p, Source: m.source, Reason: m.reason, SubKeyPattern: m.subPattern}
	if m.streaming != nil {
		pol := *m.streaming
		r.Streaming = &pol
	}
	return r
}

// method returns the cached resolution of fullMethod, resolving and caching
// it on first use. The hit path is one atomic load and a map lookup.
func (e *Enforcer) method(fullMethod string) *method {
	if m := (*e.cache.Load())[fullMethod]; m != nil {
		return m
	}
	return e.methodSlow(fullMethod)
}

func (e *Enforcer) methodSlow(fullMethod string) *method {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := *e.cache.Load()
	if m := cur[fullMethod]; m != nil {
		return m
	}
	m := e.resolve(fullMethod)
	m.obs = e.obs.ForMethod(m.profile.Name, m.service, m.name)
	m.noMargin = e.noMargin[fullMethod]
	e.withSubKeyVariants(m)
	if len(cur) >= maxCached {
		return m
	}
	next := make(map[string]*method, len(cur)+1)
	maps.Copy(next, cur)
	next[fullMethod] = m
	e.cache.Store(&next)
	return m
}

// stallFloor is the least deadline margin of a call of m arriving at now
// (WithStallMargin), 0 when off.
func (e *Enforcer) stallFloor(m *method, now time.Time) time.Duration {
	if m.noMargin {
		return 0
	}
	return e.stalls.floor(now)
}

// noteLate records how late a call ended whose caller's deadline, less the
// margin, was its budget (WithStallMargin).
func (e *Enforcer) noteLate(te *TimeoutError, deadline, end time.Time) {
	if e.stalls != nil && te != nil && te.Limit == LimitCallerDeadline {
		e.stalls.note(end, end.Sub(deadline))
	}
}

// marginOf returns the deadline margin's ceiling for calls of m.
func (e *Enforcer) marginOf(m *method) time.Duration {
	if m.noMargin {
		return 0
	}
	return e.margin
}

// callerOf returns the caller identity of a call, "" when e has no
// identity function.
func (e *Enforcer) callerOf(ctx context.Context) string {
	if e.callerFn == nil {
		return ""
	}
	return e.callerFn(ctx)
}

// profileFor returns the profile of a call of m: the caller's override if
// it has one, else the method's profile.
func (e *Enforcer) profileFor(ctx context.Context, m *method) *Profile {
	if m.byCaller != nil && e.callerFn != nil {
		if p := m.byCaller[e.callerFn(ctx)]; p != nil {
			return p
		}
	}
	return m.profile
}

// checkPatternOnce validates an option's method pattern and that no earlier
// option of the same kind (recorded in seen) named it; where names the option
// in the error.
func checkPatternOnce(seen map[string]bool, pattern, where string) error {
	if seen[pattern] {
		return fmt.Errorf("%s: duplicate definition", where)
	}
	seen[pattern] = true
	if _, _, ok := parsePattern(pattern); !ok {
		return fmt.Errorf("%s: want \"/package.Service/Method\" or \"/package.Service/*\"", where)
	}
	return nil
}
