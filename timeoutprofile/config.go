package timeoutprofile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// Environment variables read by LoadGlobal.
const (
	envFile     = "TIMEOUTPROFILE_FILE"
	envFallback = "TIMEOUTPROFILE_FALLBACK"
	envMargin   = "TIMEOUTPROFILE_DEADLINE_MARGIN_MS"
	envStall    = "TIMEOUTPROFILE_STALL_MARGIN"
	envPrefix   = "TIMEOUTPROFILE_"
)

// DefaultDeadlineMargin is how long before the caller's own deadline the
// server interceptors end a call whose effective budget is that deadline,
// unless WithDeadlineMargin, the configuration's deadline_margin_ms or
// TIMEOUTPROFILE_DEADLINE_MARGIN_MS says otherwise. It was chosen from
// measurements over loopback TCP under load (TestMeasureDeadlineMargin);
// see "The deadline margin" in the package documentation.
const DefaultDeadlineMargin = 100 * time.Millisecond

// MaxDeadlineMargin bounds the deadline margin: a larger one would not be a
// margin but a second, hidden budget.
const MaxDeadlineMargin = time.Second

// maxFileSize bounds the configuration file.
const maxFileSize = 1 << 20

// Config is the global layer of the profile table (SW4-002 §2.3): the
// standard profiles with the configuration file and the environment applied,
// plus method mappings, streaming policies, per-caller overrides and the
// fallback. It is built and validated by ParseConfig or LoadGlobal, is
// immutable afterwards, and is safe for concurrent use. Pass it to New with
// WithConfig.
type Config struct {
	profiles    map[string]*entry
	methods     map[string]string           // pattern → profile name
	streaming   map[string]StreamingPolicy  // pattern → policy
	callers     map[string]map[string]patch // caller → profile name → override
	fallback    string
	subKeys     map[string]*subKeyRule // pattern → rule
	margin      time.Duration          // deadline margin, if hasMargin
	stallMargin bool                   // TIMEOUTPROFILE_STALL_MARGIN (WithStallMargin)
	hasMargin   bool
}

// entry is a profile and where each of its durations was last set, for
// error messages.
type entry struct {
	p   Profile
	src [3]string // default, min, max; "" = standard
}

var fieldNames = [3]string{"default_timeout_ms", "min_timeout_ms", "max_timeout_ms"}

func (e *entry) label(i int) string {
	if e.src[i] == "" {
		return "standard " + fieldNames[i]
	}
	return e.src[i]
}

func (e *entry) check() error {
	if err := checkOrder(e.p, e.label(0), e.label(1), e.label(2)); err != nil {
		return fmt.Errorf("profile %q: %w", e.p.Name, err)
	}
	return nil
}

// patch is a partial override of a profile: the configuration file's
// entries for known profiles and its per-caller overrides.
type patch struct {
	where      string // "callers.batch.tool_call"
	d          [3]time.Duration
	has        [3]bool
	inf, hasIn bool
}

func (pt *patch) apply(e *entry) *entry {
	out := &entry{p: e.p, src: e.src}
	for i := range 3 {
		if pt.has[i] {
			*durField(&out.p, i) = pt.d[i]
			out.src[i] = pt.where + "." + fieldNames[i]
		}
	}
	if pt.hasIn {
		out.p.AllowInfinite = pt.inf
	}
	return out
}

func durField(p *Profile, i int) *time.Duration {
	switch i {
	case 0:
		return &p.Default
	case 1:
		return &p.Min
	}
	return &p.Max
}

func standardConfig() *Config {
	c := &Config{
		profiles:  make(map[string]*entry, len(standard)),
		methods:   map[string]string{},
		streaming: map[string]StreamingPolicy{},
		callers:   map[string]map[string]patch{},
		subKeys:   map[string]*subKeyRule{},
		fallback:  FallbackProfile,
	}
	for _, p := range standard {
		c.profiles[p.Name] = &entry{p: p}
	}
	return c
}

// ParseConfig returns the standard profiles with the JSON configuration
// document data applied (see the package documentation for its format).
// The error names the offending field.
func ParseConfig(data []byte) (*Config, error) {
	c := standardConfig()
	if err := c.applyFile(data); err != nil {
		return nil, fmt.Errorf("timeoutprofile: config: %w", err)
	}
	return c, nil
}

// LoadGlobal builds the global layer from the process environment (pass
// os.Getenv): the standard profiles, then the JSON file named by
// TIMEOUTPROFILE_FILE if set, then the TIMEOUTPROFILE_<PROFILE>_DEFAULT_MS,
// _MIN_MS, _MAX_MS and _ALLOW_INFINITE variables of every known profile
// (standard or defined in the file) and TIMEOUTPROFILE_FALLBACK. The
// environment overrides the file field by field. An empty variable counts as
// unset. The error names the offending field or variable.
func LoadGlobal(env func(string) string) (*Config, error) {
	c := standardConfig()
	if path := env(envFile); path != "" {
		data, err := readLimited(path)
		if err != nil {
			return nil, fmt.Errorf("timeoutprofile: %s: %w", envFile, err)
		}
		if err := c.applyFile(data); err != nil {
			return nil, fmt.Errorf("timeoutprofile: %s (%s): %w", envFile, path, err)
		}
	}
	if err := c.applyEnv(env); err != nil {
		return nil, fmt.Errorf("timeoutprofile: environment: %w", err)
	}
	return c, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return data, nil
}

// Profiles returns the global profile table, sorted by name.
func (c *Config) Profiles() []*timeoutprofilev1.TimeoutProfile {
	return tableOf(c.profiles)
}

func tableOf(m map[string]*entry) []*timeoutprofilev1.TimeoutProfile {
	out := make([]*timeoutprofilev1.TimeoutProfile, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[name].p.proto())
	}
	return out
}

// MarshalProfiles renders a profile table as an indented JSON array of
// objects with the TimeoutProfile field names (profile_name,
// default_timeout_ms, min_timeout_ms, max_timeout_ms, allow_infinite),
// every field present, in the order given, ending in a newline. The output
// is deterministic (unlike protojson's).
func MarshalProfiles(ps []*timeoutprofilev1.TimeoutProfile) ([]byte, error) {
	type row struct {
		ProfileName      string `json:"profile_name"`
		DefaultTimeoutMs uint32 `json:"default_timeout_ms"`
		MinTimeoutMs     uint32 `json:"min_timeout_ms"`
		MaxTimeoutMs     uint32 `json:"max_timeout_ms"`
		AllowInfinite    bool   `json:"allow_infinite"`
	}
	rows := make([]row, 0, len(ps))
	for _, p := range ps {
		rows = append(rows, row{p.GetProfileName(), p.GetDefaultTimeoutMs(), p.GetMinTimeoutMs(), p.GetMaxTimeoutMs(), p.GetAllowInfinite()})
	}
	out, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// The configuration file, as decoded. Numbers are kept raw and checked by
// msValue so that errors name the field.
type fileDoc struct {
	Fallback       *string                           `json:"fallback"`
	DeadlineMargin jsonMS                            `json:"deadline_margin_ms"`
	Profiles       map[string]fileProfile            `json:"profiles"`
	Methods        map[string]string                 `json:"methods"`
	Streaming      map[string]filePolicy             `json:"streaming"`
	Callers        map[string]map[string]fileProfile `json:"callers"`
	SubKeys        map[string]fileSubKey             `json:"sub_keys"`
}

// fileSubKey is a "sub_keys" entry.
type fileSubKey struct {
	Profile   string      `json:"profile"`
	Streaming *filePolicy `json:"streaming"`
}

type fileProfile struct {
	Default       jsonMS `json:"default_timeout_ms"`
	Min           jsonMS `json:"min_timeout_ms"`
	Max           jsonMS `json:"max_timeout_ms"`
	AllowInfinite *bool  `json:"allow_infinite"`
}

type filePolicy struct {
	Initial jsonMS `json:"initial_timeout_ms"`
	Gap     jsonMS `json:"message_gap_timeout_ms"`
	Total   jsonMS `json:"total_timeout_ms"`
}

// jsonMS is a raw JSON value meant to be a millisecond count.
type jsonMS struct {
	set bool
	raw string
}

func (m *jsonMS) UnmarshalJSON(b []byte) error {
	m.set, m.raw = true, string(b)
	return nil
}

// value parses m: a JSON integer literal, not negative, within uint32.
func (m jsonMS) value(field string) (time.Duration, error) {
	v, err := parseTimeoutMS(m.raw)
	if err != nil {
		shown := m.raw
		if len(shown) > 32 {
			shown = shown[:32] + "…"
		}
		return 0, fmt.Errorf("%s: must be a non-negative integer number of milliseconds, at most 4294967295 (got %s)", field, shown)
	}
	return ms(v), nil
}

// policy parses a streaming policy; where names it in errors.
func (fp filePolicy) policy(where string) (StreamingPolicy, error) {
	var pol StreamingPolicy
	for _, f := range []struct {
		v    jsonMS
		name string
		dst  *time.Duration
	}{{fp.Initial, "initial_timeout_ms", &pol.Initial}, {fp.Gap, "message_gap_timeout_ms", &pol.Gap}, {fp.Total, "total_timeout_ms", &pol.Total}} {
		if !f.v.set {
			continue
		}
		d, err := f.v.value(where + "." + f.name)
		if err != nil {
			return pol, err
		}
		*f.dst = d
	}
	return pol, nil
}

func (fp *fileProfile) patch(where string) (patch, error) {
	pt := patch{where: where}
	for i, f := range [3]jsonMS{fp.Default, fp.Min, fp.Max} {
		if !f.set {
			continue
		}
		d, err := f.value(where + "." + fieldNames[i])
		if err != nil {
			return pt, err
		}
		pt.d[i], pt.has[i] = d, true
	}
	if fp.AllowInfinite != nil {
		pt.inf, pt.hasIn = *fp.AllowInfinite, true
	}
	return pt, nil
}

func (c *Config) applyFile(data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty document")
	}
	if err := checkKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc fileDoc
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the top-level object")
	}

	for _, name := range slices.Sorted(maps.Keys(doc.Profiles)) {
		where := "profiles." + name
		if !validName(name) {
			return fmt.Errorf("%s: invalid profile name (want [a-z][a-z0-9_]{0,63})", where)
		}
		fp := doc.Profiles[name]
		pt, err := fp.patch(where)
		if err != nil {
			return err
		}
		e, known := c.profiles[name]
		if !known {
			if !pt.has[0] || !pt.has[1] || !pt.has[2] {
				return fmt.Errorf("%s: a new profile needs default_timeout_ms, min_timeout_ms and max_timeout_ms", where)
			}
			e = &entry{p: Profile{Name: name}}
		}
		e = pt.apply(e)
		if err := e.check(); err != nil {
			return err
		}
		c.profiles[name] = e
	}
	if doc.DeadlineMargin.set {
		d, err := doc.DeadlineMargin.value("deadline_margin_ms")
		if err != nil {
			return err
		}
		if err := checkMargin(d); err != nil {
			return fmt.Errorf("deadline_margin_ms: %w", err)
		}
		c.margin, c.hasMargin = d, true
	}
	if doc.Fallback != nil {
		if _, ok := c.profiles[*doc.Fallback]; !ok {
			return fmt.Errorf("fallback: unknown profile %q", *doc.Fallback)
		}
		c.fallback = *doc.Fallback
	}
	for _, pat := range slices.Sorted(maps.Keys(doc.Methods)) {
		where := "methods." + pat
		if _, _, ok := parsePattern(pat); !ok {
			return fmt.Errorf("%s: invalid key: want \"/package.Service/Method\" or \"/package.Service/*\"", where)
		}
		name := doc.Methods[pat]
		if _, ok := c.profiles[name]; !ok {
			return fmt.Errorf("%s: unknown profile %q", where, name)
		}
		c.methods[pat] = name
	}
	for _, pat := range slices.Sorted(maps.Keys(doc.Streaming)) {
		where := "streaming." + pat
		if _, _, ok := parsePattern(pat); !ok {
			return fmt.Errorf("%s: invalid key: want \"/package.Service/Method\" or \"/package.Service/*\"", where)
		}
		pol, err := doc.Streaming[pat].policy(where)
		if err != nil {
			return err
		}
		c.streaming[pat] = pol
	}
	for _, pat := range slices.Sorted(maps.Keys(doc.SubKeys)) {
		where := "sub_keys." + pat
		fs := doc.SubKeys[pat]
		if fs.Profile == "" {
			return fmt.Errorf("%s.profile: required", where)
		}
		if _, ok := c.profiles[fs.Profile]; !ok {
			return fmt.Errorf("%s.profile: unknown profile %q", where, fs.Profile)
		}
		var pol *StreamingPolicy
		if fs.Streaming != nil {
			p, err := fs.Streaming.policy(where + ".streaming")
			if err != nil {
				return err
			}
			pol = &p
		}
		r, err := newSubKeyRule(pat, fs.Profile, pol)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		c.subKeys[pat] = r
	}
	for _, caller := range slices.Sorted(maps.Keys(doc.Callers)) {
		if err := checkCaller(caller); err != nil {
			return fmt.Errorf("callers: %w", err)
		}
		byName := doc.Callers[caller]
		out := make(map[string]patch, len(byName))
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			where := "callers." + caller + "." + name
			e, ok := c.profiles[name]
			if !ok {
				return fmt.Errorf("%s: unknown profile %q", where, name)
			}
			fp := byName[name]
			pt, err := fp.patch(where)
			if err != nil {
				return err
			}
			if err := pt.apply(e).check(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			out[name] = pt
		}
		c.callers[caller] = out
	}
	return nil
}

func checkCaller(caller string) error {
	if caller == "" || len(caller) > 256 {
		return fmt.Errorf("caller identity %q: want 1 to 256 bytes", caller)
	}
	return nil
}

// applyEnv applies the TIMEOUTPROFILE_* variables over c.
func (c *Config) applyEnv(env func(string) string) error {
	suffixes := [3]string{"_DEFAULT_MS", "_MIN_MS", "_MAX_MS"}
	for _, name := range slices.Sorted(maps.Keys(c.profiles)) {
		base := envPrefix + strings.ToUpper(name)
		e := &entry{p: c.profiles[name].p, src: c.profiles[name].src}
		changed := false
		for i, suf := range suffixes {
			key := base + suf
			v := env(key)
			if v == "" {
				continue
			}
			n, err := parseTimeoutMS(v)
			if err != nil {
				return fmt.Errorf("%s=%q: must be a non-negative integer number of milliseconds, at most 4294967295", key, v)
			}
			*durField(&e.p, i) = ms(n)
			e.src[i] = key
			changed = true
		}
		if key := base + "_ALLOW_INFINITE"; env(key) != "" {
			b, err := strconv.ParseBool(env(key))
			if err != nil {
				return fmt.Errorf("%s=%q: want true or false", key, env(key))
			}
			e.p.AllowInfinite = b
			changed = true
		}
		if !changed {
			continue
		}
		if err := e.check(); err != nil {
			return err
		}
		c.profiles[name] = e
	}
	if v := env(envMargin); v != "" {
		n, err := parseTimeoutMS(v)
		if err != nil {
			return fmt.Errorf("%s=%q: must be a non-negative integer number of milliseconds", envMargin, v)
		}
		if err := checkMargin(ms(n)); err != nil {
			return fmt.Errorf("%s=%q: %w", envMargin, v, err)
		}
		c.margin, c.hasMargin = ms(n), true
	}
	if v := env(envStall); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%q: want true or false", envStall, v)
		}
		c.stallMargin = b
	}
	if v := env(envFallback); v != "" {
		if _, ok := c.profiles[v]; !ok {
			return fmt.Errorf("%s=%q: unknown profile", envFallback, v)
		}
		c.fallback = v
	}
	if v := env(envSubKeys); v != "" {
		if err := c.parseSubKeysEnv(v); err != nil {
			return err
		}
	}
	// Per-caller overrides must still make sense over the new values.
	return c.checkCallers()
}

func (c *Config) checkCallers() error {
	for _, caller := range slices.Sorted(maps.Keys(c.callers)) {
		for _, name := range slices.Sorted(maps.Keys(c.callers[caller])) {
			pt := c.callers[caller][name]
			if err := pt.apply(c.profiles[name]).check(); err != nil {
				return fmt.Errorf("%s: %w", pt.where, err)
			}
		}
	}
	return nil
}

// parsePattern parses a mapping key: "/package.Service/Method" names one
// method, "/package.Service/*" every method of a service (method "*").
func parsePattern(s string) (service, method string, ok bool) {
	service, method, ok = splitFullMethod(s)
	if !ok && len(s) > 3 && len(s) <= 1024 && strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/*") {
		service, method = s[1:len(s)-2], "*"
		ok = protoreflect.FullName(service).IsValid()
	}
	return service, method, ok
}

// splitFullMethod splits a valid "/package.Service/Method".
func splitFullMethod(s string) (service, method string, ok bool) {
	if len(s) < 4 || len(s) > 1024 || s[0] != '/' {
		return "", "", false
	}
	i := strings.LastIndexByte(s, '/')
	if i <= 1 {
		return "", "", false
	}
	service, method = s[1:i], s[i+1:]
	if !protoreflect.FullName(service).IsValid() || !protoreflect.Name(method).IsValid() {
		return "", "", false
	}
	return service, method, true
}

// schema is the shape of the configuration file, for checkKeys: a struct
// object lists its fields (exact case), a map object gives its values'
// schema. A nil schema accepts anything.
type schema struct {
	fields map[string]*schema
	elem   *schema
}

var (
	profileSchema = &schema{fields: map[string]*schema{
		"default_timeout_ms": nil, "min_timeout_ms": nil, "max_timeout_ms": nil, "allow_infinite": nil,
	}}
	policySchema = &schema{fields: map[string]*schema{
		"initial_timeout_ms": nil, "message_gap_timeout_ms": nil, "total_timeout_ms": nil,
	}}
	docSchema = &schema{fields: map[string]*schema{
		"fallback":           nil,
		"deadline_margin_ms": nil,
		"profiles":           {elem: profileSchema},
		"methods":            {elem: nil},
		"streaming":          {elem: policySchema},
		"callers":            {elem: &schema{elem: profileSchema}},
		"sub_keys":           {elem: &schema{fields: map[string]*schema{"profile": nil, "streaming": policySchema}}},
	}}
)

// checkKeys reports the first object key that appears twice in the same
// JSON object, or that is not a field of the document (encoding/json would
// silently accept the first and match field names ignoring case).
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkJSON(dec, "", docSchema, 0)
}

func walkJSON(dec *json.Decoder, path string, sch *schema, depth int) error {
	if depth > 32 {
		return fmt.Errorf("%s: nested too deeply", strings.TrimPrefix(path, "."))
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			at := strings.TrimPrefix(path+"."+key, ".")
			if seen[key] {
				return fmt.Errorf("%s: duplicate definition of %q", at, key)
			}
			seen[key] = true
			var child *schema
			switch {
			case sch == nil:
			case sch.fields != nil:
				c, known := sch.fields[key]
				if !known {
					return fmt.Errorf("%s: unknown field %q", at, key)
				}
				child = c
			default:
				child = sch.elem
			}
			if err := walkJSON(dec, path+"."+key, child, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkJSON(dec, fmt.Sprintf("%s[%d]", path, i), nil, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
