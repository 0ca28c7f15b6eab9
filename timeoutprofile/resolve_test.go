package timeoutprofile_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/emptypb" // google/protobuf/empty.proto for testFiles

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

const (
	srcConfig   = timeoutprofilev1.ProfileSource_PROFILE_SOURCE_CONFIG
	srcOption   = timeoutprofilev1.ProfileSource_PROFILE_SOURCE_METHOD_OPTION
	srcGuidance = timeoutprofilev1.ProfileSource_PROFILE_SOURCE_GUIDANCE
	srcFallback = timeoutprofilev1.ProfileSource_PROFILE_SOURCE_FALLBACK
)

func mustNew(t testing.TB, opts ...timeoutprofile.Option) *timeoutprofile.Enforcer {
	t.Helper()
	e, err := timeoutprofile.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSelection(t *testing.T) {
	_ = sessiongatev1.SessionGateway_ServiceDesc // its descriptors are registered in GlobalFiles
	runJob := sessiongatev1.SessionGateway_RunJob_FullMethodName
	cases := []struct {
		name    string
		opts    []timeoutprofile.Option
		method  string
		profile string
		source  timeoutprofilev1.ProfileSource
		reason  string
	}{
		{"method option", nil, runJob, "tool_call", srcOption, `method option (timeoutprofile.v1.profile) = "tool_call" on /sessiongate.v1.SessionGateway/RunJob`},
		{"heartbeat option", nil, sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName, "heartbeat", srcOption, "method option"},
		{"config method beats option",
			[]timeoutprofile.Option{timeoutprofile.WithMethodProfile(runJob, "heartbeat")},
			runJob, "heartbeat", srcConfig, `configuration maps /sessiongate.v1.SessionGateway/RunJob to "heartbeat"`},
		{"config service beats option",
			[]timeoutprofile.Option{timeoutprofile.WithMethodProfile("/sessiongate.v1.SessionGateway/*", "handoff")},
			runJob, "handoff", srcConfig, `configuration maps /sessiongate.v1.SessionGateway/* to "handoff"`},
		{"config method beats config service",
			[]timeoutprofile.Option{timeoutprofile.WithMethodProfile("/sessiongate.v1.SessionGateway/*", "handoff"), timeoutprofile.WithMethodProfile(runJob, "heartbeat")},
			runJob, "heartbeat", srcConfig, "configuration maps"},
		{"config beats guidance",
			[]timeoutprofile.Option{timeoutprofile.WithMethodProfile("/sw4rm.registry.v1.RegistryService/Heartbeat", "registration")},
			"/sw4rm.registry.v1.RegistryService/Heartbeat", "registration", srcConfig, "configuration maps"},
		{"guidance, package and Service suffix", nil, "/sw4rm.registry.v1.RegistryService/Heartbeat", "heartbeat", srcGuidance, `SW4-002 §3 guidance: Registry.Heartbeat → "heartbeat"`},
		{"guidance, bare name", nil, "/Registry/RegisterAgent", "registration", srcGuidance, "guidance"},
		{"guidance, other package", nil, "/acme.x.Registry/DeregisterAgent", "registration", srcGuidance, "guidance"},
		{"guidance is case-sensitive", nil, "/acme.registryService/Heartbeat", "default", srcFallback, "fallback"},
		{"guidance needs the method", nil, "/sw4rm.registry.v1.RegistryService/Other", "default", srcFallback, `no mapping, method option or guidance entry for /sw4rm.registry.v1.RegistryService/Other: fallback profile "default"`},
		{"fallback", nil, "/acme.v1.Thing/Do", "default", srcFallback, "fallback"},
		{"configured fallback", []timeoutprofile.Option{timeoutprofile.WithFallback("task_submit")}, "/acme.v1.Thing/Do", "task_submit", srcFallback, `fallback profile "task_submit"`},
		{"option beats guidance order: own service", nil, "/timeoutprofile.v1.TimeoutProfileService/ListProfiles", "workflow_status", srcOption, "method option"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := mustNew(t, tc.opts...)
			r, err := e.Resolve(tc.method, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Profile.Name != tc.profile || r.Source != tc.source || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("got %q %v %q; want %q %v reason containing %q", r.Profile.Name, r.Source, r.Reason, tc.profile, tc.source, tc.reason)
			}
		})
	}
}

func TestGuidanceTable(t *testing.T) {
	want := map[string]string{
		"Registry/RegisterAgent":          "registration",
		"Registry/Heartbeat":              "heartbeat",
		"Registry/DeregisterAgent":        "registration",
		"Scheduler/SubmitTask":            "task_submit",
		"Scheduler/CancelTask":            "task_submit",
		"Scheduler/GetTaskStatus":         "workflow_status",
		"Scheduler/RequestPreemption":     "task_submit",
		"NegotiationRoom/SubmitProposal":  "negotiation_open",
		"NegotiationRoom/SubmitVote":      "negotiation_vote",
		"NegotiationRoom/GetDecision":     "negotiation_decision",
		"NegotiationRoom/WaitForDecision": "negotiation_vote",
		"NegotiationRoom/GetVotes":        "negotiation_decision",
		"Handoff/RequestHandoff":          "handoff",
		"Handoff/AcceptHandoff":           "handoff",
		"Handoff/RejectHandoff":           "message_route",
		"Handoff/CompleteHandoff":         "handoff",
		"Handoff/GetPendingHandoffs":      "workflow_status",
		"Tool/InvokeTool":                 "tool_call",
		"Tool/DescribeTool":               "message_route",
		"Tool/Call":                       "tool_call",
		"Tool/CallStream":                 "tool_call",
		"Tool/Cancel":                     "task_submit",
	}
	e := mustNew(t)
	for key, profile := range want {
		svc, meth, _ := strings.Cut(key, "/")
		for _, full := range []string{
			"/" + svc + "/" + meth,
			"/sw4rm." + strings.ToLower(svc) + ".v1." + svc + "Service/" + meth,
		} {
			r, err := e.Resolve(full, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Profile.Name != profile || r.Source != srcGuidance {
				t.Errorf("%s: %q (%v), want %q", full, r.Profile.Name, r.Source, profile)
			}
		}
	}
}

func TestResolveStreamingPolicy(t *testing.T) {
	watch := sessiongatev1.SessionGateway_WatchJob_FullMethodName
	r, err := mustNew(t).Resolve(watch, "")
	if err != nil {
		t.Fatal(err)
	}
	want := timeoutprofile.StreamingPolicy{Initial: 30 * time.Second, Gap: 60 * time.Second}
	if r.Profile.Name != "tool_call" || r.Streaming == nil || *r.Streaming != want {
		t.Errorf("WatchJob: %q %+v, want tool_call %+v (its proto option)", r.Profile.Name, r.Streaming, want)
	}
	override := timeoutprofile.StreamingPolicy{Gap: time.Second}
	r, _ = mustNew(t, timeoutprofile.WithStreamingPolicy(watch, override)).Resolve(watch, "")
	if r.Streaming == nil || *r.Streaming != override {
		t.Errorf("configured policy: %+v, want %+v", r.Streaming, override)
	}
	r, _ = mustNew(t, timeoutprofile.WithStreamingPolicy("/sessiongate.v1.SessionGateway/*", override)).Resolve(watch, "")
	if r.Streaming == nil || *r.Streaming != override {
		t.Errorf("service policy: %+v, want %+v", r.Streaming, override)
	}
	r, _ = mustNew(t, timeoutprofile.WithStreamingPolicy(watch, timeoutprofile.StreamingPolicy{})).Resolve(watch, "")
	if r.Streaming != nil {
		t.Errorf("all-zero policy: %+v, want none", r.Streaming)
	}
	r, _ = mustNew(t).Resolve(sessiongatev1.SessionGateway_RunJob_FullMethodName, "")
	if r.Streaming != nil {
		t.Errorf("RunJob streaming = %+v", r.Streaming)
	}
}

// testFiles registers a service whose methods carry the given profile
// options, without generated code.
func testFiles(t testing.TB, options map[string]string) *protoregistry.Files {
	t.Helper()
	svc := &descriptorpb.ServiceDescriptorProto{Name: proto.String("Svc")}
	for m, profile := range options {
		opts := &descriptorpb.MethodOptions{}
		proto.SetExtension(opts, timeoutprofilev1.E_Profile, profile)
		svc.Method = append(svc.Method, &descriptorpb.MethodDescriptorProto{
			Name: proto.String(m), InputType: proto.String(".google.protobuf.Empty"),
			OutputType: proto.String(".google.protobuf.Empty"), Options: opts,
		})
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("test/svc.proto"), Package: proto.String("test.v1"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/empty.proto"},
		Service:    []*descriptorpb.ServiceDescriptorProto{svc},
	}, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	return files
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestUnknownProfileInOption(t *testing.T) {
	var logs syncBuffer
	files := testFiles(t, map[string]string{"Known": "heartbeat", "Unknown": "nope", "Heartbeat": "nope"})
	e := mustNew(t, timeoutprofile.WithFiles(files), timeoutprofile.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	r, _ := e.Resolve("/test.v1.Svc/Known", "")
	if r.Profile.Name != "heartbeat" || r.Source != srcOption {
		t.Errorf("Known: %q %v", r.Profile.Name, r.Source)
	}
	r, _ = e.Resolve("/test.v1.Svc/Unknown", "")
	if r.Profile.Name != "default" || r.Source != srcFallback || !strings.Contains(r.Reason, `names unknown profile "nope"`) {
		t.Errorf("Unknown: %q %v %q", r.Profile.Name, r.Source, r.Reason)
	}
	if !strings.Contains(logs.String(), "unknown profile") {
		t.Errorf("no warning logged: %q", logs.String())
	}
	// Not found in these files: GlobalFiles is not consulted.
	r, _ = e.Resolve(sessiongatev1.SessionGateway_RunJob_FullMethodName, "")
	if r.Source != srcFallback {
		t.Errorf("RunJob with other files: %v", r.Source)
	}
}

func TestResolveCaller(t *testing.T) {
	cfg, err := timeoutprofile.ParseConfig([]byte(`{"callers": {"batch": {"tool_call": {"default_timeout_ms": 600000}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := mustNew(t, timeoutprofile.WithConfig(cfg),
		timeoutprofile.WithCallerProfile("interactive", timeoutprofile.Profile{Name: "tool_call", Default: 5 * time.Second, Min: time.Second, Max: 10 * time.Second}))
	runJob := sessiongatev1.SessionGateway_RunJob_FullMethodName
	for caller, want := range map[string]time.Duration{"": 30 * time.Second, "other": 30 * time.Second, "batch": 10 * time.Minute, "interactive": 5 * time.Second} {
		r, _ := e.Resolve(runJob, caller)
		if r.Profile.Default != want {
			t.Errorf("caller %q: default %v, want %v", caller, r.Profile.Default, want)
		}
	}
}

func TestResolveInvalid(t *testing.T) {
	e := mustNew(t)
	for _, m := range []string{"", "/", "//", "/a.B", "a.B/C", "/a.B/C/D", "/a..B/C", "/a.B/C-D", "/a.B/ C"} {
		if _, err := e.Resolve(m, ""); err == nil {
			t.Errorf("Resolve(%q): no error", m)
		}
	}
}

func TestNewErrors(t *testing.T) {
	ok := timeoutprofile.Profile{Name: "batch", Default: time.Second, Min: time.Millisecond, Max: time.Minute}
	cases := []struct {
		name string
		opts []timeoutprofile.Option
		want string
	}{
		{"duplicate profile", []timeoutprofile.Option{timeoutprofile.WithProfile(ok), timeoutprofile.WithProfile(ok)}, `WithProfile("batch"): duplicate definition`},
		{"invalid profile", []timeoutprofile.Option{timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "x", Default: time.Second, Min: 2 * time.Second, Max: time.Minute})}, `WithProfile("x"): Min (2000 ms) is greater than WithProfile("x"): Default (1000 ms)`},
		{"unknown fallback", []timeoutprofile.Option{timeoutprofile.WithFallback("nope")}, `WithFallback: unknown profile "nope"`},
		{"two fallbacks", []timeoutprofile.Option{timeoutprofile.WithFallback("default"), timeoutprofile.WithFallback("default")}, "WithFallback: duplicate definition"},
		{"fallback to a new profile", []timeoutprofile.Option{timeoutprofile.WithProfile(ok), timeoutprofile.WithFallback("batch")}, ""},
		{"bad pattern", []timeoutprofile.Option{timeoutprofile.WithMethodProfile("Svc/M", "heartbeat")}, `WithMethodProfile("Svc/M"): want`},
		{"unknown mapped profile", []timeoutprofile.Option{timeoutprofile.WithMethodProfile("/a.B/C", "nope")}, `WithMethodProfile("/a.B/C"): unknown profile "nope"`},
		{"duplicate mapping", []timeoutprofile.Option{timeoutprofile.WithMethodProfile("/a.B/C", "heartbeat"), timeoutprofile.WithMethodProfile("/a.B/C", "heartbeat")}, "duplicate definition"},
		{"bad policy", []timeoutprofile.Option{timeoutprofile.WithStreamingPolicy("/a.B/C", timeoutprofile.StreamingPolicy{Gap: -time.Second})}, `WithStreamingPolicy("/a.B/C"): Gap must not be negative`},
		{"duplicate policy", []timeoutprofile.Option{timeoutprofile.WithStreamingPolicy("/a.B/C", timeoutprofile.StreamingPolicy{}), timeoutprofile.WithStreamingPolicy("/a.B/C", timeoutprofile.StreamingPolicy{})}, "duplicate definition"},
		{"unknown caller profile", []timeoutprofile.Option{timeoutprofile.WithCallerProfile("x", ok)}, `WithCallerProfile("x", "batch"): unknown profile "batch"`},
		{"duplicate caller profile", []timeoutprofile.Option{timeoutprofile.WithProfile(ok), timeoutprofile.WithCallerProfile("x", ok), timeoutprofile.WithCallerProfile("x", ok)}, "duplicate definition"},
		{"empty caller", []timeoutprofile.Option{timeoutprofile.WithProfile(ok), timeoutprofile.WithCallerProfile("", ok)}, `caller identity ""`},
		{"nil logger", []timeoutprofile.Option{timeoutprofile.WithLogger(nil)}, "WithLogger: nil logger"},
		{"nil observer", []timeoutprofile.Option{timeoutprofile.WithObserver(nil)}, "WithObserver: nil Observer"},
		{"nil caller fn", []timeoutprofile.Option{timeoutprofile.WithCallerIdentity(nil)}, "WithCallerIdentity: nil function"},
		{"nil config", []timeoutprofile.Option{timeoutprofile.WithConfig(nil)}, "WithConfig: nil Config"},
		{"zero config", []timeoutprofile.Option{timeoutprofile.WithConfig(&timeoutprofile.Config{})}, "WithConfig: a Config must come from ParseConfig or LoadGlobal"},
		{"nil files", []timeoutprofile.Option{timeoutprofile.WithFiles(nil)}, "WithFiles: nil registry"},
		{"bad interval", []timeoutprofile.Option{timeoutprofile.WithLogInterval(0)}, "WithLogInterval: must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := timeoutprofile.New(tc.opts...)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCallerOverrideOverClientProfile(t *testing.T) {
	// A file's per-caller patch applies over the client-level profile.
	cfg, err := timeoutprofile.ParseConfig([]byte(`{"callers": {"batch": {"tool_call": {"default_timeout_ms": 600000}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := mustNew(t, timeoutprofile.WithConfig(cfg),
		timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "tool_call", Default: time.Minute, Min: time.Second, Max: 2 * time.Hour}))
	r, _ := e.Resolve(sessiongatev1.SessionGateway_RunJob_FullMethodName, "batch")
	if r.Profile.Default != 10*time.Minute || r.Profile.Max != 2*time.Hour || r.Profile.AllowInfinite {
		t.Errorf("batch tool_call = %+v", r.Profile)
	}
	// And is validated against it.
	_, err = timeoutprofile.New(timeoutprofile.WithConfig(cfg),
		timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "tool_call", Default: time.Minute, Min: time.Second, Max: 5 * time.Minute}))
	if err == nil || !strings.Contains(err.Error(), `callers.batch.tool_call: profile "tool_call": callers.batch.tool_call.default_timeout_ms (600000 ms) is greater than WithProfile("tool_call").Max (300000 ms)`) {
		t.Errorf("err = %v", err)
	}
}
