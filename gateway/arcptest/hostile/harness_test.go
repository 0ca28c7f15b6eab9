package hostile_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/arcptest/hostile"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

var (
	longRun  = flag.Bool("hostile.long", os.Getenv("HOSTILE_LONG") != "", "run the long schedules (10,000 rounds each; env HOSTILE_LONG)")
	seedFlag = flag.Uint64("hostile.seed", 0, "seed of the random schedules; 0 picks one from the clock (printed)")
)

// The gateway's settings under test: short enough that every bounded
// failure ends well inside a test's budget.
const (
	frameCap    = 1 << 20
	initTimeout = 3 * time.Second
	backoffMax  = 2 * time.Second
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && theSuite != nil && theSuite.gw != nil {
		if err := theSuite.checkDrained(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			code = 1
		}
	}
	stopSuite()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// suite is what every test shares: the hostile runtime, the reference
// runtime (the well-behaved one), one gateway process with a runtime per
// hostile mode plus "good", and a gRPC client. A session on "good" is opened
// before any attack and must keep working after each.
type suite struct {
	hs      *hostile.Server
	good    *arcpruntime.Server
	gw      *gateway
	conn    *grpc.ClientConn
	cli     sessiongatev1.SessionGatewayClient
	goodSID string

	baseGoroutines float64 // the gateway's, with only the good session open
}

var (
	suiteOnce sync.Once
	theSuite  *suite
	suiteErr  error
)

func getSuite(t *testing.T) *suite {
	t.Helper()
	suiteOnce.Do(func() { theSuite, suiteErr = startSuite() })
	if suiteErr != nil {
		t.Fatal(suiteErr)
	}
	return theSuite
}

func stopSuite() {
	s := theSuite
	if s == nil {
		return
	}
	if s.conn != nil {
		s.conn.Close()
	}
	if s.gw != nil {
		s.gw.stop()
	}
	if s.hs != nil {
		s.hs.Close()
	}
	if s.good != nil {
		s.good.Close()
	}
}

func startSuite() (s *suite, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s = &suite{}
	theSuite = s // stopSuite cleans up whatever started
	if s.hs, err = hostile.Listen(hostile.Options{MaxFrameBytes: frameCap}); err != nil {
		return nil, err
	}
	if s.good, err = arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{}); err != nil {
		return nil, err
	}
	args := []string{
		"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json",
		"--init-timeout", initTimeout.String(), "--backoff-max", backoffMax.String(),
		"--max-frame-bytes", fmt.Sprint(frameCap), "--shutdown-timeout", "5s",
		"--runtime", "good=" + s.good.URL(),
	}
	for _, m := range hostile.Modes {
		args = append(args, "--runtime", string(m)+"="+s.hs.URL(m))
	}
	if s.gw, err = startGateway(ctx, args); err != nil {
		return nil, err
	}
	if s.conn, err = grpc.NewClient(s.gw.addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	s.cli = sessiongatev1.NewSessionGatewayClient(s.conn)
	resp, err := s.cli.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Runtime: "good", ClientName: "hostile-suite"})
	if err != nil {
		return nil, fmt.Errorf("open the good session: %w\n%s", err, s.gw.tail())
	}
	s.goodSID = resp.GetSessionId()
	if s.baseGoroutines, err = s.gw.gauge(ctx, "go_goroutines"); err != nil {
		return nil, err
	}
	return s, nil
}

// gateway is the gateway binary running in a child process.
type gateway struct {
	addr  string
	admin string // the admin HTTP address (/metrics)
	cmd   *exec.Cmd
	dir   string
	done  chan struct{} // closed when its log is read to the end

	mu     sync.Mutex
	log    []string // the last lines of its log
	errors []string // its ERROR-level lines (the first 1,000)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// gatewayBinary builds cmd/gateway once per test binary (or uses
// $SESSIONGATE_GATEWAY_BIN).
func gatewayBinary(ctx context.Context) (string, error) {
	buildOnce.Do(func() {
		if bin := os.Getenv("SESSIONGATE_GATEWAY_BIN"); bin != "" {
			builtBin = bin
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "hostile-gw-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "gateway")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", builtBin, "github.com/sessiongate/sessiongate/cmd/gateway").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build gateway: %v\n%s", err, out)
		}
	})
	return builtBin, buildErr
}

func startGateway(ctx context.Context, args []string) (*gateway, error) {
	bin, err := gatewayBinary(ctx)
	if err != nil {
		return nil, err
	}
	g := &gateway{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan [2]string, 1)
	go func() {
		defer close(g.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			if strings.Contains(line, `"level":"ERROR"`) && len(g.errors) < 1000 {
				g.errors = append(g.errors, line)
			}
			g.log = append(g.log, line)
			if len(g.log) > 400 {
				g.log = g.log[len(g.log)-200:]
			}
			g.mu.Unlock()
			var rec struct{ Msg, GRPC, Admin string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "sessiongate serving" {
				select {
				case ready <- [2]string{rec.GRPC, rec.Admin}:
				default:
				}
			}
		}
	}()
	select {
	case a := <-ready:
		g.addr, g.admin = a[0], a[1]
		return g, nil
	case <-g.done:
		g.stop()
		return nil, fmt.Errorf("gateway exited early:\n%s", g.tail())
	case <-ctx.Done():
		g.stop()
		return nil, fmt.Errorf("gateway did not start: %w\n%s", ctx.Err(), g.tail())
	}
}

func (g *gateway) tail() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := max(len(g.log)-15, 0)
	return strings.Join(g.log[n:], "\n")
}

// errorsMentioning returns the gateway's ERROR-level log lines that
// contain sub.
func (g *gateway) errorsMentioning(sub string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, l := range g.errors {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// alive reports whether the process is still running.
func (g *gateway) alive() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

func (g *gateway) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	kill := time.AfterFunc(15*time.Second, func() { _ = g.cmd.Process.Kill() })
	<-g.done
	_ = g.cmd.Wait()
	kill.Stop()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// --- calls ---

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newToken(tag string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return tag + "-" + hex.EncodeToString(b[:])
}

func inputValue(in hostile.Input) *structpb.Value {
	raw, _ := json.Marshal(in)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	v, err := structpb.NewValue(m)
	if err != nil {
		panic(err)
	}
	return v
}

// open opens a session on mode's runtime.
func (s *suite) open(t testing.TB, ctx context.Context, m hostile.Mode) string {
	t.Helper()
	resp, err := s.cli.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Runtime: string(m), ClientName: "hostile-" + string(m)})
	if err != nil {
		t.Fatalf("OpenSession(%s): %v\ngateway log:\n%s", m, err, s.gw.tail())
	}
	sid := resp.GetSessionId()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = s.cli.CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: sid})
	})
	return sid
}

func (s *suite) run(ctx context.Context, sid string, in hostile.Input) (*sessiongatev1.RunJobResponse, error) {
	return s.cli.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: inputValue(in)})
}

// own checks that resp is the caller's own job: the result echoes the
// caller's token and names the job the caller was handed, and the runtime
// ran that job for that token.
func (s *suite) own(resp *sessiongatev1.RunJobResponse, token string) error {
	var res hostile.Result
	if raw := resp.GetRawResult(); len(raw) > 0 {
		if !strings.Contains(string(raw), `"token":"`+token+`"`) {
			return fmt.Errorf("MISDELIVERY: raw_result %.200q does not carry token %s", raw, token)
		}
		return s.ownJob(resp.GetJobId(), token)
	}
	f := resp.GetResult().GetStructValue().GetFields()
	res.Token, res.JobID = f["token"].GetStringValue(), f["job_id"].GetStringValue()
	if res.Token != token {
		return fmt.Errorf("MISDELIVERY: caller %s got job %s with result token %q (job %s)", token, resp.GetJobId(), res.Token, res.JobID)
	}
	if res.JobID != resp.GetJobId() {
		return fmt.Errorf("MISDELIVERY: caller %s got job id %s but the result of job %s", token, resp.GetJobId(), res.JobID)
	}
	return s.ownJob(resp.GetJobId(), token)
}

func (s *suite) ownJob(job, token string) error {
	if got, ok := s.hs.JobToken(job); !ok || got != token {
		return fmt.Errorf("MISDELIVERY: caller %s was handed job %s, which the runtime ran for %q", token, job, got)
	}
	return nil
}

// checkGood: the session opened on the well-behaved runtime before any
// attack still runs jobs, and a new one opens and runs jobs.
func (s *suite) checkGood(t *testing.T) {
	t.Helper()
	if !s.gw.alive() {
		t.Fatalf("the gateway process died:\n%s", s.gw.tail())
	}
	ctx := testCtx(t, 20*time.Second)
	for _, sid := range []string{s.goodSID, ""} {
		if sid == "" {
			resp, err := s.cli.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Runtime: "good", ClientName: "hostile-check"})
			if err != nil {
				t.Fatalf("after the attack, OpenSession on the good runtime: %v", err)
			}
			sid = resp.GetSessionId()
			defer s.cli.CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: sid})
		}
		tok := newToken("good")
		in, _ := structpb.NewValue(map[string]any{"token": tok})
		resp, err := s.cli.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: in})
		if err != nil {
			t.Fatalf("after the attack, RunJob on the good runtime's session %s: %v", sid, err)
		}
		if got := resp.GetResult().GetStructValue().GetFields()["token"].GetStringValue(); got != tok {
			t.Fatalf("after the attack, the good runtime's echo returned token %q, want %q", got, tok)
		}
	}
}

// callErr is what a caller can read from a failed call.
type callErr struct {
	code   codes.Code
	msg    string
	reason string
	domain string
	md     map[string]string
}

func describe(err error) callErr {
	st, _ := status.FromError(err)
	ce := callErr{code: st.Code(), msg: st.Message()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			ce.reason, ce.domain, ce.md = info.GetReason(), info.GetDomain(), info.GetMetadata()
		}
	}
	return ce
}

func (ce callErr) String() string {
	return fmt.Sprintf("%s %q ErrorInfo{reason=%s domain=%s md=%v}", ce.code, ce.msg, ce.reason, ce.domain, ce.md)
}

// mentions reports whether s appears in the status message or ErrorInfo.
func (ce callErr) mentions(s string) bool {
	if strings.Contains(ce.msg, s) || ce.reason == s {
		return true
	}
	for _, v := range ce.md {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// seed returns the schedule seed and logs it so a failure can be replayed.
func seed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./gateway/arcptest/hostile -run '%s$' -hostile.seed %d)", s, t.Name(), s)
	return s
}

func rounds(short, long int) int {
	if *longRun {
		return long
	}
	return short
}

// gauge reads an unlabelled metric from the gateway's /metrics.
func (g *gateway) gauge(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("/metrics has no %s", name)
}

// checkDrained: after every attack, once the tests closed their sessions,
// the gateway's goroutines come back to near what they were with only the
// good session open: no attack leaked goroutines. It also prints the
// process's resident memory.
func (s *suite) checkDrained() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slack = 40 // stream workers and idle connections that come and go
	var now float64
	for {
		var err error
		if now, err = s.gw.gauge(ctx, "go_goroutines"); err != nil {
			return err
		}
		if now <= s.baseGoroutines+slack {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the gateway has %v goroutines after the attacks, %v before: a leak", now, s.baseGoroutines)
		case <-time.After(100 * time.Millisecond):
		}
	}
	rss, _ := s.gw.gauge(ctx, "process_resident_memory_bytes")
	fmt.Fprintf(os.Stderr, "hostile: gateway goroutines %v before the attacks, %v after; resident memory %.0f MiB\n",
		s.baseGoroutines, now, rss/(1<<20))
	return nil
}

// counter reads sessiongate_upstream_<name>_total{runtime="<mode>"} from
// the gateway's /metrics.
func (s *suite) counter(t *testing.T, name string, m hostile.Mode) float64 {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.gw.admin+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "sessiongate_upstream_" + name + "_total{"
	want := `runtime="` + string(m) + `"`
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, want) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			return v
		}
	}
	t.Errorf("/metrics has no %s%s}", prefix, want)
	return 0
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
