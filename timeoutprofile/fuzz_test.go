package timeoutprofile

import (
	"strconv"
	"testing"
	"time"
)

// FuzzParseConfig: the configuration parser never panics, and whatever it
// accepts is a valid table. Seeds: f.Add below and testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"fallback": "tool_call"}`,
		`{"profiles": {"tool_call": {"max_timeout_ms": 7200000}}}`,
		`{"profiles": {"batch": {"default_timeout_ms": 1, "min_timeout_ms": 1, "max_timeout_ms": 1, "allow_infinite": true}}, "fallback": "batch"}`,
		`{"methods": {"/a.B/C": "heartbeat", "/a.B/*": "tool_call"}}`,
		`{"streaming": {"/a.B/C": {"initial_timeout_ms": 1, "message_gap_timeout_ms": 2, "total_timeout_ms": 0}}}`,
		`{"callers": {"x": {"tool_call": {"default_timeout_ms": 600000}}}}`,
		`{"profiles": {"tool_call": {"min_timeout_ms": -1}}}`,
		`{"profiles": {"tool_call": {"min_timeout_ms": 1e3}}}`,
		`{"a": 1, "a": 2}`,
		`[[[[[[]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		for name, e := range c.profiles {
			if err := checkProfile(e.p, name); err != nil {
				t.Fatalf("accepted an invalid profile: %v", err)
			}
		}
		if c.profiles[c.fallback] == nil {
			t.Fatalf("accepted an unknown fallback %q", c.fallback)
		}
		for pat, name := range c.methods {
			if _, _, ok := parsePattern(pat); !ok || c.profiles[name] == nil {
				t.Fatalf("accepted mapping %q → %q", pat, name)
			}
		}
		if _, err := New(WithConfig(c)); err != nil {
			t.Fatalf("New rejected a parsed config: %v", err)
		}
	})
}

// FuzzParseTimeoutMS: the x-timeout-ms parser never panics and accepts
// exactly 1 to 10 ASCII digits within uint32.
func FuzzParseTimeoutMS(f *testing.F) {
	for _, s := range []string{"0", "1", "1500", "4294967295", "4294967296", "-1", "+1", " 1", "1.5", "1e3", "", "00000000000", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseTimeoutMS(s)
		digits := len(s) >= 1 && len(s) <= 10
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				digits = false
			}
		}
		want, perr := strconv.ParseUint(s, 10, 32)
		if ok := digits && perr == nil; ok != (err == nil) {
			t.Fatalf("parseTimeoutMS(%q) err = %v, want ok=%v", s, err, ok)
		}
		if err == nil && uint64(v) != want {
			t.Fatalf("parseTimeoutMS(%q) = %d, want %d", s, v, want)
		}
		if err == nil && ms(v) > maxDuration {
			t.Fatalf("%v beyond the contract's range", ms(v))
		}
		_ = time.Duration(v)
	})
}
