package timeoutprofile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{
	  "fallback": "batch",
	  "profiles": {
	    "tool_call": {"max_timeout_ms": 7200000},
	    "heartbeat": {"default_timeout_ms": 2000, "allow_infinite": true},
	    "batch": {"default_timeout_ms": 600000, "min_timeout_ms": 1000, "max_timeout_ms": 7200000, "allow_infinite": true}
	  },
	  "methods": {"/acme.v1.Search/Query": "workflow_status", "/acme.v1.Batch/*": "batch"},
	  "streaming": {"/acme.v1.Batch/Watch": {"initial_timeout_ms": 100, "total_timeout_ms": 0}},
	  "callers": {"batch-runner": {"tool_call": {"default_timeout_ms": 600000}}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) Profile { return c.profiles[name].p }
	if p := get("tool_call"); p.Max != 2*time.Hour || p.Default != 30*time.Second || p.Min != time.Second || !p.AllowInfinite {
		t.Errorf("tool_call = %+v", p)
	}
	if p := get("heartbeat"); p.Default != 2*time.Second || p.Min != time.Second || !p.AllowInfinite {
		t.Errorf("heartbeat = %+v", p)
	}
	if p := get("batch"); p.Default != 10*time.Minute || p.Max != 2*time.Hour {
		t.Errorf("batch = %+v", p)
	}
	if c.fallback != "batch" || c.methods["/acme.v1.Batch/*"] != "batch" || c.methods["/acme.v1.Search/Query"] != "workflow_status" {
		t.Errorf("fallback %q methods %v", c.fallback, c.methods)
	}
	if pol := c.streaming["/acme.v1.Batch/Watch"]; pol != (StreamingPolicy{Initial: 100 * time.Millisecond}) {
		t.Errorf("streaming = %+v", pol)
	}
	if pt := c.callers["batch-runner"]["tool_call"]; !pt.has[0] || pt.d[0] != 10*time.Minute || pt.has[1] {
		t.Errorf("callers = %+v", pt)
	}
	if n := len(c.Profiles()); n != 14 {
		t.Errorf("%d profiles, want 14", n)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"empty", ``, "empty document"},
		{"not an object", `[]`, "cannot unmarshal array"},
		{"unknown top-level field", `{"profile": {}}`, `profile: unknown field "profile"`},
		{"unknown profile field", `{"profiles": {"tool_call": {"default_ms": 1}}}`, `profiles.tool_call.default_ms: unknown field "default_ms"`},
		{"field in the wrong case", `{"profiles": {"tool_call": {"MAX_timeout_ms": 1}}}`, `profiles.tool_call.MAX_timeout_ms: unknown field`},
		{"top-level field in the wrong case", `{"Fallback": "default"}`, `Fallback: unknown field`},
		{"unknown caller field", `{"callers": {"x": {"tool_call": {"max": 1}}}}`, `callers.x.tool_call.max: unknown field`},
		{"method pattern /*", `{"methods": {"/*": "tool_call"}}`, `methods./*: invalid key`},
		{"trailing data", `{} {}`, "after the top-level object"},
		{"syntax", `{"profiles": }`, "invalid character"},
		{"duplicate top-level key", `{"fallback": "default", "fallback": "tool_call"}`, `fallback: duplicate definition of "fallback"`},
		{"duplicate profile", `{"profiles": {"x": {"default_timeout_ms": 1, "min_timeout_ms": 1, "max_timeout_ms": 1}, "x": {}}}`, `profiles.x: duplicate definition`},
		{"duplicate field", `{"profiles": {"tool_call": {"max_timeout_ms": 1, "max_timeout_ms": 2}}}`, `profiles.tool_call.max_timeout_ms: duplicate definition`},
		{"duplicate method", `{"methods": {"/a.B/C": "tool_call", "/a.B/C": "heartbeat"}}`, `methods./a.B/C: duplicate definition`},
		{"negative", `{"profiles": {"tool_call": {"min_timeout_ms": -1}}}`, "profiles.tool_call.min_timeout_ms: must be a non-negative integer"},
		{"fraction", `{"profiles": {"tool_call": {"min_timeout_ms": 1.5}}}`, "profiles.tool_call.min_timeout_ms: must be a non-negative integer"},
		{"exponent", `{"profiles": {"tool_call": {"min_timeout_ms": 1e3}}}`, "profiles.tool_call.min_timeout_ms: must be a non-negative integer"},
		{"string number", `{"profiles": {"tool_call": {"min_timeout_ms": "100"}}}`, "profiles.tool_call.min_timeout_ms: must be a non-negative integer"},
		{"null number", `{"profiles": {"tool_call": {"min_timeout_ms": null}}}`, "profiles.tool_call.min_timeout_ms: must be a non-negative integer"},
		{"overflow", `{"profiles": {"tool_call": {"max_timeout_ms": 4294967296}}}`, "profiles.tool_call.max_timeout_ms: must be a non-negative integer"},
		{"min > default", `{"profiles": {"heartbeat": {"min_timeout_ms": 6000}}}`, `profile "heartbeat": profiles.heartbeat.min_timeout_ms (6000 ms) is greater than standard default_timeout_ms (5000 ms)`},
		{"default > max", `{"profiles": {"heartbeat": {"default_timeout_ms": 40000}}}`, `profile "heartbeat": profiles.heartbeat.default_timeout_ms (40000 ms) is greater than standard max_timeout_ms (30000 ms)`},
		{"zero default", `{"profiles": {"heartbeat": {"default_timeout_ms": 0, "min_timeout_ms": 0}}}`, `profiles.heartbeat.default_timeout_ms must be greater than 0`},
		{"new profile incomplete", `{"profiles": {"batch": {"default_timeout_ms": 1000}}}`, "profiles.batch: a new profile needs"},
		{"bad profile name", `{"profiles": {"Batch": {"default_timeout_ms": 1, "min_timeout_ms": 1, "max_timeout_ms": 1}}}`, "profiles.Batch: invalid profile name"},
		{"unknown fallback", `{"fallback": "nope"}`, `fallback: unknown profile "nope"`},
		{"unknown method profile", `{"methods": {"/a.B/C": "nope"}}`, `methods./a.B/C: unknown profile "nope"`},
		{"bad method key", `{"methods": {"a.B/C": "tool_call"}}`, `methods.a.B/C: invalid key`},
		{"bad method key 2", `{"methods": {"/a.B/": "tool_call"}}`, `methods./a.B/: invalid key`},
		{"bad streaming key", `{"streaming": {"/a.B": {}}}`, `streaming./a.B: invalid key`},
		{"bad streaming value", `{"streaming": {"/a.B/C": {"message_gap_timeout_ms": -5}}}`, `streaming./a.B/C.message_gap_timeout_ms: must be`},
		{"unknown streaming field", `{"streaming": {"/a.B/C": {"gap_ms": 5}}}`, `streaming./a.B/C.gap_ms: unknown field "gap_ms"`},
		{"unknown caller profile", `{"callers": {"x": {"nope": {}}}}`, `callers.x.nope: unknown profile "nope"`},
		{"empty caller", `{"callers": {"": {"tool_call": {}}}}`, `callers: caller identity ""`},
		{"caller breaks order", `{"callers": {"x": {"tool_call": {"min_timeout_ms": 40000}}}}`, `callers.x.tool_call: profile "tool_call": callers.x.tool_call.min_timeout_ms (40000 ms) is greater than standard default_timeout_ms (30000 ms)`},
		{"bool type", `{"profiles": {"tool_call": {"allow_infinite": "yes"}}}`, "allow_infinite"},
		{"too deep", `{"methods": {"/a.B/C":` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `}}`, "nested too deeply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestLoadGlobalPrecedence: environment > file > standard, field by field.
func TestLoadGlobalPrecedence(t *testing.T) {
	file := writeFile(t, `{"profiles": {"tool_call": {"default_timeout_ms": 40000, "max_timeout_ms": 100000}}, "fallback": "task_submit"}`)
	cases := []struct {
		name        string
		env         map[string]string
		wantDefault time.Duration
		wantMax     time.Duration
		wantInf     bool
		wantFB      string
	}{
		{"standard", map[string]string{}, 30 * time.Second, time.Hour, true, "default"},
		{"file", map[string]string{"TIMEOUTPROFILE_FILE": file}, 40 * time.Second, 100 * time.Second, true, "task_submit"},
		{"env", map[string]string{"TIMEOUTPROFILE_TOOL_CALL_DEFAULT_MS": "50000"}, 50 * time.Second, time.Hour, true, "default"},
		{"env over file", map[string]string{"TIMEOUTPROFILE_FILE": file, "TIMEOUTPROFILE_TOOL_CALL_DEFAULT_MS": "50000"}, 50 * time.Second, 100 * time.Second, true, "task_submit"},
		{"env and file on different fields", map[string]string{"TIMEOUTPROFILE_FILE": file, "TIMEOUTPROFILE_TOOL_CALL_MAX_MS": "200000", "TIMEOUTPROFILE_TOOL_CALL_ALLOW_INFINITE": "false"}, 40 * time.Second, 200 * time.Second, false, "task_submit"},
		{"env fallback over file", map[string]string{"TIMEOUTPROFILE_FILE": file, "TIMEOUTPROFILE_FALLBACK": "heartbeat"}, 40 * time.Second, 100 * time.Second, true, "heartbeat"},
		{"empty env is unset", map[string]string{"TIMEOUTPROFILE_FILE": "", "TIMEOUTPROFILE_TOOL_CALL_DEFAULT_MS": ""}, 30 * time.Second, time.Hour, true, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadGlobal(envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			p := c.profiles["tool_call"].p
			if p.Default != tc.wantDefault || p.Max != tc.wantMax || p.AllowInfinite != tc.wantInf || c.fallback != tc.wantFB {
				t.Errorf("tool_call = %+v, fallback %q; want default %v max %v inf %v fallback %q", p, c.fallback, tc.wantDefault, tc.wantMax, tc.wantInf, tc.wantFB)
			}
		})
	}
}

func TestLoadGlobalEnvForFileProfile(t *testing.T) {
	file := writeFile(t, `{"profiles": {"batch": {"default_timeout_ms": 1000, "min_timeout_ms": 10, "max_timeout_ms": 5000}}}`)
	c, err := LoadGlobal(envOf(map[string]string{"TIMEOUTPROFILE_FILE": file, "TIMEOUTPROFILE_BATCH_MAX_MS": "9000"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.profiles["batch"].p; p.Max != 9*time.Second || p.Default != time.Second {
		t.Errorf("batch = %+v", p)
	}
}

func TestLoadGlobalErrors(t *testing.T) {
	good := writeFile(t, `{"profiles": {"heartbeat": {"default_timeout_ms": 1500}}, "callers": {"x": {"heartbeat": {"min_timeout_ms": 1200}}}}`)
	bad := writeFile(t, `{"profiles": {"heartbeat": {"bogus": 1}}}`)
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"missing file", map[string]string{"TIMEOUTPROFILE_FILE": "/nonexistent/x.json"}, "TIMEOUTPROFILE_FILE: open /nonexistent/x.json"},
		{"bad file", map[string]string{"TIMEOUTPROFILE_FILE": bad}, `unknown field "bogus"`},
		{"bad number", map[string]string{"TIMEOUTPROFILE_HEARTBEAT_MIN_MS": "-5"}, `TIMEOUTPROFILE_HEARTBEAT_MIN_MS="-5": must be a non-negative integer`},
		{"bad number 2", map[string]string{"TIMEOUTPROFILE_HEARTBEAT_MIN_MS": "5s"}, `TIMEOUTPROFILE_HEARTBEAT_MIN_MS="5s"`},
		{"bad bool", map[string]string{"TIMEOUTPROFILE_HEARTBEAT_ALLOW_INFINITE": "maybe"}, `TIMEOUTPROFILE_HEARTBEAT_ALLOW_INFINITE="maybe": want true or false`},
		{"env breaks order", map[string]string{"TIMEOUTPROFILE_HEARTBEAT_MIN_MS": "6000"}, `profile "heartbeat": TIMEOUTPROFILE_HEARTBEAT_MIN_MS (6000 ms) is greater than standard default_timeout_ms (5000 ms)`},
		{"env against file", map[string]string{"TIMEOUTPROFILE_FILE": good, "TIMEOUTPROFILE_HEARTBEAT_MIN_MS": "1600"}, `TIMEOUTPROFILE_HEARTBEAT_MIN_MS (1600 ms) is greater than profiles.heartbeat.default_timeout_ms (1500 ms)`},
		{"env against caller override", map[string]string{"TIMEOUTPROFILE_FILE": good, "TIMEOUTPROFILE_HEARTBEAT_DEFAULT_MS": "1100"}, `callers.x.heartbeat: profile "heartbeat": callers.x.heartbeat.min_timeout_ms (1200 ms) is greater than TIMEOUTPROFILE_HEARTBEAT_DEFAULT_MS (1100 ms)`},
		{"unknown fallback", map[string]string{"TIMEOUTPROFILE_FALLBACK": "nope"}, `TIMEOUTPROFILE_FALLBACK="nope": unknown profile`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadGlobal(envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadGlobalFileTooLarge(t *testing.T) {
	path := writeFile(t, `{"fallback": "default"}`+strings.Repeat(" ", maxFileSize))
	_, err := LoadGlobal(envOf(map[string]string{"TIMEOUTPROFILE_FILE": path}))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err = %v", err)
	}
}

func TestMarshalProfiles(t *testing.T) {
	c, err := ParseConfig([]byte(`{"profiles": {"heartbeat": {"default_timeout_ms": 2000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalProfiles(c.Profiles()[:2])
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "profile_name": "default",
    "default_timeout_ms": 30000,
    "min_timeout_ms": 1000,
    "max_timeout_ms": 300000,
    "allow_infinite": false
  },
  {
    "profile_name": "handoff",
    "default_timeout_ms": 60000,
    "min_timeout_ms": 10000,
    "max_timeout_ms": 300000,
    "allow_infinite": false
  }
]
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	all, _ := MarshalProfiles(c.Profiles())
	if !strings.Contains(string(all), `"profile_name": "heartbeat",
    "default_timeout_ms": 2000,`) {
		t.Errorf("heartbeat override missing:\n%s", all)
	}
}
