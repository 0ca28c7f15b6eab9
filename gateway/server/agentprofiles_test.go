package server

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// profileFile writes doc as a timeout profile file and loads it as the
// gateway does (TIMEOUTPROFILE_FILE).
func profileFile(t *testing.T, doc string) *timeoutprofile.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := timeoutprofile.LoadGlobal(func(k string) string {
		if k == "TIMEOUTPROFILE_FILE" {
			return path
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAgentProfileEndToEnd: a configuration file maps the sleep agent to a
// 300 ms profile: RunJob of sleep times out at 300 ms (not tool_call's
// 30 s) with that profile in the details and in sw4rm_rpc_timeout_total,
// SubmitJob then WatchJob of a sleep job is bounded by the mapping's
// streaming limit, and another agent keeps RunJob's tool_call.
func TestAgentProfileEndToEnd(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := profileFile(t, `{
  "profiles": {"sleepy": {"default_timeout_ms": 300, "min_timeout_ms": 100, "max_timeout_ms": 300}},
  "sub_keys": {"sleep": {"profile": "sleepy", "streaming": {"initial_timeout_ms": 200, "total_timeout_ms": 400}}}
}`)
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.TimeoutProfiles, c.Registry = cfg, reg }})
	ctx := ctxT(t, 30*time.Second)
	id := h.open(t, ctx)

	start := time.Now()
	_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 5000.0})})
	took := time.Since(start)
	te, ok := timeoutprofile.FromError(err)
	if !ok || te.GetProfileName() != "sleepy" || te.GetConfiguredTimeoutMs() != 300 || te.GetLimit() != "unary" {
		t.Fatalf("RunJob sleep: %v (details %v); want the sleepy profile's 300 ms", err, te)
	}
	if took < 300*time.Millisecond || took > 4*time.Second {
		t.Errorf("RunJob sleep ended after %v, want about 300 ms", took)
	}
	if got := series(t, reg, "sw4rm_rpc_timeout_total", map[string]string{"profile": "sleepy", "method": "RunJob"}); got != 1 {
		t.Errorf("sw4rm_rpc_timeout_total{profile=sleepy,method=RunJob} = %v, want 1", got)
	}
	if got := series(t, reg, "sw4rm_rpc_timeout_total", map[string]string{"profile": "tool_call", "method": "RunJob"}); got != 0 {
		t.Errorf("sw4rm_rpc_timeout_total{profile=tool_call,method=RunJob} = %v, want 0", got)
	}

	job, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 5000.0})})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: job.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = stream.Recv()
	}
	// The sleep agent reports progress every 100 ms: the total ends it.
	if te, ok := timeoutprofile.FromError(err); !ok || te.GetProfileName() != "sleepy" || te.GetLimit() != "total" || te.GetConfiguredTimeoutMs() != 400 {
		t.Errorf("WatchJob of a sleep job: %v (details %v); want sleepy's 400 ms total", err, te)
	}

	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValue(t, "hi")}); err != nil {
		t.Errorf("RunJob echo: %v", err)
	}
	r, err := timeoutprofilev1.NewTimeoutProfileServiceClient(h.conn).ResolveProfile(ctx, &timeoutprofilev1.ResolveProfileRequest{
		FullMethod: sessiongatev1.SessionGateway_RunJob_FullMethodName, SubKey: "echo"})
	if err != nil || r.GetProfile().GetProfileName() != "tool_call" {
		t.Errorf("ResolveProfile(RunJob, echo): %v, %v; want tool_call", r, err)
	}
}

// TestReadmeAgentProfiles runs README's per-agent example: the block loads
// as the gateway's configuration, code-review's RunJob gets 2 h and its
// WatchJob the streaming limits, echo's RunJob 5 s (and runs), and
// ListProfiles shows the mapping.
func TestReadmeAgentProfiles(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- agent-profiles:begin -->\n```json\n")
	block, _, ok2 := strings.Cut(rest, "```\n<!-- agent-profiles:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no agent-profiles block")
	}
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.TimeoutProfiles = profileFile(t, block) }})
	ctx := ctxT(t, 10*time.Second)
	svc := timeoutprofilev1.NewTimeoutProfileServiceClient(h.conn)
	for _, c := range []struct {
		method, agent, profile string
		defaultMS              uint32
		initialMS              uint32
	}{
		{sessiongatev1.SessionGateway_RunJob_FullMethodName, "code-review", "code_review", 7_200_000, 60_000},
		{sessiongatev1.SessionGateway_SubmitJob_FullMethodName, "code-review@1.4.0", "code_review", 7_200_000, 60_000},
		{sessiongatev1.SessionGateway_WatchJob_FullMethodName, "code-review", "code_review", 7_200_000, 60_000},
		{sessiongatev1.SessionGateway_RunJob_FullMethodName, "echo", "quick_tool", 5_000, 0},
		{sessiongatev1.SessionGateway_RunJob_FullMethodName, "sleep", "tool_call", 30_000, 0},
	} {
		r, err := svc.ResolveProfile(ctx, &timeoutprofilev1.ResolveProfileRequest{FullMethod: c.method, SubKey: c.agent})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetProfile().GetProfileName() != c.profile || r.GetProfile().GetDefaultTimeoutMs() != c.defaultMS || r.GetStreaming().GetInitialTimeoutMs() != c.initialMS {
			t.Errorf("%s %s: %v; want %s, default %d ms, initial %d ms", c.method, c.agent, r, c.profile, c.defaultMS, c.initialMS)
		}
	}
	l, err := svc.ListProfiles(ctx, &timeoutprofilev1.ListProfilesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range l.GetSubKeys() {
		got = append(got, m.GetPattern()+"="+m.GetProfileName())
	}
	if want := []string{"code-review=code_review", "echo=quick_tool"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListProfiles sub_keys %v, want %v", got, want)
	}
	id := h.open(t, ctx)
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValue(t, "hi")}); err != nil {
		t.Errorf("RunJob echo under quick_tool: %v", err)
	}
}

// TestAgentFromWire: the agent of a request that reaches the interceptors
// as bytes (cluster mode) is read from its fields.
func TestAgentFromWire(t *testing.T) {
	for _, req := range []interface {
		GetAgent() string
		GetAgentVersion() string
	}{
		&sessiongatev1.RunJobRequest{SessionId: "s", Agent: "code-review", AgentVersion: "2.0.0", Input: mustValue(t, map[string]any{"a": 1.0}), IdempotencyKey: "k"},
		&sessiongatev1.SubmitJobRequest{SessionId: "s", Agent: "echo@1.0.0"},
		&sessiongatev1.RunJobRequest{},
	} {
		b, err := protoMarshal(req)
		if err != nil {
			t.Fatal(err)
		}
		a, v := agentFromWire(b)
		if a != req.GetAgent() || v != req.GetAgentVersion() {
			t.Errorf("%v: read %q %q", req, a, v)
		}
	}
	if got := agentKeys("echo@1.0.0", ""); !reflect.DeepEqual(got, []string{"echo@1.0.0", "echo"}) {
		t.Errorf("agentKeys(echo@1.0.0) = %q", got)
	}
	if got := agentKeys("", "1"); got != nil {
		t.Errorf("agentKeys without a name = %q", got)
	}
}

func protoMarshal(m any) ([]byte, error) { return proto.Marshal(m.(proto.Message)) }
