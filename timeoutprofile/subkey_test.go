package timeoutprofile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// agentKeys is a SubKeyFunc like sessiongate's: the agent of a RunJob or
// the job id of a WatchJob, most specific first ("name@version", "name").
func agentKeys(_ context.Context, _ string, req any) []string {
	switch r := req.(type) {
	case *sessiongatev1.RunJobRequest:
		if r.GetAgentVersion() != "" {
			return []string{r.GetAgent() + "@" + r.GetAgentVersion(), r.GetAgent()}
		}
		return []string{r.GetAgent()}
	case *sessiongatev1.WatchJobRequest:
		return []string{r.GetJobId()}
	}
	return nil
}

const subKeyDoc = `{
  "profiles": {
    "slow_tool": {"default_timeout_ms": 400, "min_timeout_ms": 10, "max_timeout_ms": 7200000},
    "quick_tool": {"default_timeout_ms": 150, "min_timeout_ms": 10, "max_timeout_ms": 150},
    "pinned": {"default_timeout_ms": 250, "min_timeout_ms": 10, "max_timeout_ms": 250}
  },
  "sub_keys": {
    "review": {"profile": "slow_tool"},
    "review@2.*": {"profile": "pinned"},
    "echo*": {"profile": "quick_tool"},
    "watched": {"profile": "quick_tool", "streaming": {"initial_timeout_ms": 100}}
  },
  "callers": {"batch": {"quick_tool": {"default_timeout_ms": 100}}}
}`

func subKeyEnforcer(t *testing.T, obs timeoutprofile.Observer, env map[string]string) *timeoutprofile.Enforcer {
	t.Helper()
	file := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(file, []byte(subKeyDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"TIMEOUTPROFILE_FILE": file}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := timeoutprofile.LoadGlobal(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	opts := []timeoutprofile.Option{timeoutprofile.WithConfig(cfg), timeoutprofile.WithSubKeys(agentKeys, runJob, watchJob),
		timeoutprofile.WithCallerIdentity(func(ctx context.Context) string {
			if v := incomingValue(ctx, "x-caller"); v != "" {
				return v
			}
			return ""
		})}
	if obs != nil {
		opts = append(opts, timeoutprofile.WithObserver(obs))
	}
	return mustNew(t, opts...)
}

// TestSubKeyResolve: exact mappings beat globs, the most specific key
// ("name@version") is tried first, a longer glob beats a shorter one, no
// match keeps the method's profile, and callers' overrides apply to the
// profile a sub-key chose.
func TestSubKeyResolve(t *testing.T) {
	e := subKeyEnforcer(t, nil, nil)
	for _, c := range []struct {
		method, caller, key string
		profile             string
		pattern             string
		defaultMS           time.Duration
	}{
		{runJob, "", "review", "slow_tool", "review", 400},
		{runJob, "", "review@2.1.0", "pinned", "review@2.*", 250},
		{runJob, "", "echo", "quick_tool", "echo*", 150},
		{runJob, "", "echo-fast", "quick_tool", "echo*", 150},
		{runJob, "batch", "echo", "quick_tool", "echo*", 100},
		{runJob, "", "other", "tool_call", "", 30000},
		{runJob, "", "", "tool_call", "", 30000},
		{sessiongatev1.SessionGateway_SubmitJob_FullMethodName, "", "review", "task_submit", "", 0}, // not a sub-keyed method
	} {
		r, err := e.ResolveSubKey(c.method, c.caller, c.key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Profile.Name != c.profile || r.SubKeyPattern != c.pattern {
			t.Errorf("%s %q: profile %q via %q, want %q via %q", c.method, c.key, r.Profile.Name, r.SubKeyPattern, c.profile, c.pattern)
		}
		if c.pattern != "" && r.Source != timeoutprofilev1.ProfileSource_PROFILE_SOURCE_SUB_KEY {
			t.Errorf("%q: source %v", c.key, r.Source)
		}
		if c.defaultMS != 0 && r.Profile.Default != c.defaultMS*time.Millisecond {
			t.Errorf("%q as %q: default %v, want %v ms", c.key, c.caller, r.Profile.Default, c.defaultMS)
		}
	}
	maps, methods := e.SubKeyMappings()
	var got []string
	for _, m := range maps {
		got = append(got, m.GetPattern()+"→"+m.GetProfileName())
	}
	if want := "echo*→quick_tool review→slow_tool review@2.*→pinned watched→quick_tool"; strings.Join(got, " ") != want {
		t.Errorf("mappings %q, want %q", strings.Join(got, " "), want)
	}
	if strings.Join(methods, " ") != runJob+" "+watchJob {
		t.Errorf("methods %q", methods)
	}
}

// TestSubKeyEnforced: a call's sub-key chooses the profile that bounds it
// (its max clamps the caller's 10 s deadline here),
// names it in the timeout details and counts the timeout under it; a
// stream's sub-key, from its first message, chooses its streaming policy.
func TestSubKeyEnforced(t *testing.T) {
	obs := newTestObserver()
	e := subKeyEnforcer(t, obs, nil)
	conn := serve(t, e, &gateway{
		runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
			return nil, waitForBudget(ctx)
		},
		watchJob: func(_ *sessiongatev1.WatchJobRequest, s watchStream) error {
			return waitForBudget(s.Context())
		},
	})
	client := sessiongatev1.NewSessionGatewayClient(conn)
	_, err := client.RunJob(testCtx(t), &sessiongatev1.RunJobRequest{Agent: "echo"})
	checkTimeout(t, err, "quick_tool", "RunJob", "unary", 150)
	_, err = client.RunJob(testCtx(t), &sessiongatev1.RunJobRequest{Agent: "review", AgentVersion: "2.0.1"})
	checkTimeout(t, err, "pinned", "RunJob", "unary", 250)
	if obs.timeoutsOf("quick_tool") != 1 || obs.timeoutsOf("pinned") != 1 || obs.timeoutsOf("tool_call") != 0 {
		t.Errorf("timeouts by profile: quick_tool %d, pinned %d, tool_call %d; want 1, 1, 0",
			obs.timeoutsOf("quick_tool"), obs.timeoutsOf("pinned"), obs.timeoutsOf("tool_call"))
	}
	stream, err := client.WatchJob(testCtx(t), &sessiongatev1.WatchJobRequest{JobId: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = recvAll(stream)
	checkTimeout(t, err, "quick_tool", "WatchJob", "initial", 100)
}

// TestSubKeyConfigErrors: a mapping to an unknown profile, a bad pattern
// and an unknown field are refused, naming the field; the environment
// overrides a pattern's profile.
func TestSubKeyConfigErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"sub_keys": {"echo": {"profile": "nope"}}}`, `sub_keys.echo.profile: unknown profile "nope"`},
		{`{"sub_keys": {"echo": {}}}`, `sub_keys.echo.profile: required`},
		{`{"sub_keys": {"[echo": {"profile": "tool_call"}}}`, `sub_keys.[echo: invalid pattern`},
		{`{"sub_keys": {"echo": {"profile": "tool_call", "budget": 1}}}`, `sub_keys.echo.budget: unknown field "budget"`},
		{`{"sub_keys": {"echo": {"profile": "tool_call", "streaming": {"initial_timeout_ms": -1}}}}`, `sub_keys.echo.streaming.initial_timeout_ms`},
	} {
		_, err := timeoutprofile.ParseConfig([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.doc, err, c.want)
		}
	}
	_, err := timeoutprofile.LoadGlobal(func(k string) string { return map[string]string{"TIMEOUTPROFILE_SUB_KEYS": "echo=nope"}[k] })
	if err == nil || !strings.Contains(err.Error(), `TIMEOUTPROFILE_SUB_KEYS: "echo": unknown profile "nope"`) {
		t.Errorf("env to an unknown profile: %v", err)
	}
	e := subKeyEnforcer(t, nil, map[string]string{"TIMEOUTPROFILE_SUB_KEYS": "review=quick_tool, new=pinned"})
	for key, want := range map[string]string{"review": "quick_tool", "new": "pinned", "echo": "quick_tool"} {
		if r, _ := e.ResolveSubKey(runJob, "", key); r.Profile.Name != want {
			t.Errorf("with the environment, %q → %q, want %q", key, r.Profile.Name, want)
		}
	}
	if _, err := timeoutprofile.New(timeoutprofile.WithSubKeys(nil, runJob)); err == nil {
		t.Error("WithSubKeys(nil) accepted")
	}
}

// TestSubKeyService: ResolveProfile takes a sub_key and reports the
// mapping; ListProfiles lists the mappings.
func TestSubKeyService(t *testing.T) {
	e := subKeyEnforcer(t, nil, nil)
	conn := serve(t, e, &gateway{})
	svc := timeoutprofilev1.NewTimeoutProfileServiceClient(conn)
	r, err := svc.ResolveProfile(testCtx(t), &timeoutprofilev1.ResolveProfileRequest{FullMethod: runJob, SubKey: "review"})
	if err != nil || r.GetProfile().GetProfileName() != "slow_tool" || r.GetSource() != timeoutprofilev1.ProfileSource_PROFILE_SOURCE_SUB_KEY ||
		r.GetSubKeyPattern() != "review" || !strings.Contains(r.GetReason(), `"review"`) {
		t.Errorf("ResolveProfile(review): %v, %v", r, err)
	}
	l, err := svc.ListProfiles(testCtx(t), &timeoutprofilev1.ListProfilesRequest{})
	if err != nil || len(l.GetSubKeys()) != 4 || len(l.GetSubKeyMethods()) != 2 || l.GetSubKeys()[3].GetStreaming().GetInitialTimeoutMs() != 100 {
		t.Errorf("ListProfiles: %v, %v", l, err)
	}
}

// incomingValue is the first value of key in ctx's incoming metadata.
func incomingValue(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}
