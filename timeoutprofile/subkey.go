package timeoutprofile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// Sub-keys choose a profile within one method. A server whose methods do
// very different work depending on the request — a gateway whose RunJob
// runs a 2 s tool or a 2 h code review — gives the Enforcer a SubKeyFunc
// (WithSubKeys) that names the work of a call, e.g. the agent, and the
// configuration maps sub-key patterns to profiles ("sub_keys"). This
// package knows nothing of what a sub-key means.

// SubKeyFunc returns the sub-keys of a call of fullMethod with request req,
// most specific first (e.g. "code-review@2.0.0", then "code-review"), or
// none. It runs on every call of the methods given to WithSubKeys and must
// be fast and safe for concurrent use. For streaming methods req is the
// first message the handler receives.
type SubKeyFunc func(ctx context.Context, fullMethod string, req any) []string

// SubKeyQuery is the request a SubKeyFunc gets from ResolveProfile (and
// ResolveSubKey): the sub_key a caller asked about, which the function may
// expand as it expands a real request's (e.g. "name@version" to
// "name@version" and "name"). A function that returns none for it leaves
// the query as the one key.
type SubKeyQuery string

// envSubKeys maps sub-key patterns to profiles from the environment:
// "pattern=profile,pattern=profile", overriding the file's profile for a
// pattern (keeping its streaming policy) or adding the pattern.
const envSubKeys = "TIMEOUTPROFILE_SUB_KEYS"

// maxSubKeyLen bounds a sub-key pattern.
const maxSubKeyLen = 256

// subKeyRule is one sub-key mapping.
type subKeyRule struct {
	pattern   string
	profile   string
	streaming *StreamingPolicy // nil: the method's
	glob      bool
	literal   int // characters other than glob metacharacters, for ordering
}

// newSubKeyRule validates pattern and returns its rule.
func newSubKeyRule(pattern, profile string, streaming *StreamingPolicy) (*subKeyRule, error) {
	if pattern == "" || len(pattern) > maxSubKeyLen || !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("invalid pattern: want 1 to %d bytes of UTF-8", maxSubKeyLen)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	r := &subKeyRule{pattern: pattern, profile: profile, streaming: streaming}
	r.glob = strings.ContainsAny(pattern, `*?[\`)
	for _, c := range pattern {
		if !strings.ContainsRune(`*?[]\`, c) {
			r.literal++
		}
	}
	return r, nil
}

// subKeys is the Enforcer's immutable sub-key table.
type subKeys struct {
	fn      SubKeyFunc
	methods map[string]bool        // full methods whose calls carry sub-keys
	exact   map[string]*subKeyRule // pattern without metacharacters → rule
	globs   []*subKeyRule          // most literal characters first, then by pattern
}

// match returns the rule of the first key, in order (most specific first),
// that any rule matches: an exact rule, else the glob with the most literal
// characters (then the first by pattern); nil if none.
func (t *subKeys) match(keys []string) *subKeyRule {
	for _, k := range keys {
		if r := t.exact[k]; r != nil {
			return r
		}
		for _, r := range t.globs {
			if ok, _ := path.Match(r.pattern, k); ok {
				return r
			}
		}
	}
	return nil
}

// buildSubKeys builds the table from the configuration's rules and the
// WithSubKeys option, checking that every rule names a known profile.
func buildSubKeys(rules map[string]*subKeyRule, o *options, profiles map[string]*entry) (*subKeys, error) {
	t := &subKeys{fn: o.subKeyFn, methods: map[string]bool{}, exact: map[string]*subKeyRule{}}
	for _, m := range o.subKeyMethods {
		t.methods[m] = true
	}
	for _, p := range slices.Sorted(maps.Keys(rules)) {
		r := rules[p]
		if _, ok := profiles[r.profile]; !ok {
			return nil, fmt.Errorf("sub_keys.%s: unknown profile %q", p, r.profile)
		}
		if r.glob {
			t.globs = append(t.globs, r)
		} else {
			t.exact[p] = r
		}
	}
	slices.SortStableFunc(t.globs, func(a, b *subKeyRule) int { return b.literal - a.literal }) // stable: by pattern within a length
	return t, nil
}

// WithSubKeys makes calls of fullMethods choose their profile by sub-key:
// fn names a call's sub-keys, and the configuration's "sub_keys" (or
// TIMEOUTPROFILE_SUB_KEYS) map sub-key patterns to profiles. A call whose
// sub-key matches no mapping keeps its method's profile. Per-caller
// overrides ("callers") apply to the profile a sub-key chose as to any
// other. The profile and the rule that chose it appear in the timeout
// details, the metrics' profile label, Resolve and ResolveSubKey.
func WithSubKeys(fn SubKeyFunc, fullMethods ...string) Option {
	return optionFunc(func(o *options) {
		if fn == nil {
			o.errs = append(o.errs, errors.New("WithSubKeys: nil function"))
		}
		for _, m := range fullMethods {
			if _, _, ok := splitFullMethod(m); !ok {
				o.errs = append(o.errs, fmt.Errorf("WithSubKeys(%q): want \"/package.Service/Method\"", m))
			}
		}
		o.subKeyFn, o.subKeyMethods = fn, append(o.subKeyMethods, fullMethods...)
	})
}

// withSubKeyVariants gives a method whose calls carry sub-keys one variant
// per sub-key rule: the method with the rule's profile, per-caller
// overrides, streaming policy and observer. Called once per method, under
// e.mu.
func (e *Enforcer) withSubKeyVariants(m *method) {
	if e.sub == nil || e.sub.fn == nil || !e.sub.methods[m.full] {
		return
	}
	rules := slices.Collect(maps.Values(e.sub.exact))
	rules = append(rules, e.sub.globs...)
	m.subs = make(map[*subKeyRule]*method, len(rules))
	for _, r := range rules {
		v := *m
		v.subs = nil
		v.profile = &e.profiles[r.profile].p
		v.byCaller = e.callers[r.profile]
		if r.streaming != nil {
			pol := *r.streaming
			v.streaming = &pol
			if pol == (StreamingPolicy{}) {
				v.streaming = nil
			}
		}
		v.source = timeoutprofilev1.ProfileSource_PROFILE_SOURCE_SUB_KEY
		v.reason = fmt.Sprintf("sub-key mapping %q → %q for %s", r.pattern, r.profile, m.full)
		v.subPattern = r.pattern
		v.obs = e.obs.ForMethod(r.profile, m.service, m.name)
		m.subs[r] = &v
	}
}

// forRequest returns the variant of m for a call with request req: the
// method with its sub-key's profile, or m itself.
func (e *Enforcer) forRequest(ctx context.Context, m *method, req any) *method {
	if m.subs == nil {
		return m
	}
	if r := e.sub.match(e.sub.fn(ctx, m.full, req)); r != nil {
		return m.subs[r]
	}
	return m
}

// ResolveSubKey is Resolve for a call whose sub-key is subKey ("" for none;
// the SubKeyFunc gets it as a SubKeyQuery):
// the profile the sub-key mapping gives it, if fullMethod carries sub-keys
// (WithSubKeys) and a mapping matches, else the method's.
func (e *Enforcer) ResolveSubKey(fullMethod, caller, subKey string) (Resolution, error) {
	if subKey == "" || e.sub == nil || !e.sub.methods[fullMethod] {
		return e.Resolve(fullMethod, caller)
	}
	keys := e.sub.fn(context.Background(), fullMethod, SubKeyQuery(subKey))
	if len(keys) == 0 {
		keys = []string{subKey}
	}
	r := e.sub.match(keys)
	if r == nil {
		return e.Resolve(fullMethod, caller)
	}
	base := e.method(fullMethod)
	v := base.subs[r]
	if v == nil {
		return e.Resolve(fullMethod, caller)
	}
	return resolutionOf(v, caller), nil
}

// SubKeyMappings returns the sub-key table for ListProfiles: the mappings
// sorted by pattern and the methods that carry sub-keys, sorted.
func (e *Enforcer) SubKeyMappings() ([]*timeoutprofilev1.SubKeyMapping, []string) {
	if e.sub == nil {
		return nil, nil
	}
	var out []*timeoutprofilev1.SubKeyMapping
	rules := slices.Collect(maps.Values(e.sub.exact))
	rules = append(rules, e.sub.globs...)
	slices.SortFunc(rules, func(a, b *subKeyRule) int { return strings.Compare(a.pattern, b.pattern) })
	for _, r := range rules {
		m := &timeoutprofilev1.SubKeyMapping{Pattern: r.pattern, ProfileName: r.profile}
		if r.streaming != nil {
			m.Streaming = r.streaming.proto()
		}
		out = append(out, m)
	}
	return out, slices.Sorted(maps.Keys(e.sub.methods))
}

// parseSubKeysEnv applies TIMEOUTPROFILE_SUB_KEYS to c.
func (c *Config) parseSubKeysEnv(v string) error {
	for _, pair := range strings.Split(v, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		pat, name, ok := strings.Cut(pair, "=")
		pat, name = strings.TrimSpace(pat), strings.TrimSpace(name)
		if !ok || name == "" {
			return fmt.Errorf("%s: %q: want pattern=profile", envSubKeys, pair)
		}
		if _, known := c.profiles[name]; !known {
			return fmt.Errorf("%s: %q: unknown profile %q", envSubKeys, pat, name)
		}
		var pol *StreamingPolicy
		if old := c.subKeys[pat]; old != nil {
			pol = old.streaming
		}
		r, err := newSubKeyRule(pat, name, pol)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", envSubKeys, pat, err)
		}
		c.subKeys[pat] = r
	}
	return nil
}
