package timeoutprofile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

func TestRetryServiceConfig(t *testing.T) {
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"methodConfig":[{"name":[{}],"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.1s","maxBackoff":"5s","backoffMultiplier":2,"retryableStatusCodes":["DEADLINE_EXCEEDED","UNAVAILABLE"]}}],"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`
	if sc != want {
		t.Errorf("got  %s\nwant %s", sc, want)
	}
	sc2, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{Services: []string{"sessiongate.v1.SessionGateway"}, MaxAttempts: 5, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil || !strings.Contains(sc2, `"name":[{"service":"sessiongate.v1.SessionGateway"}]`) || !strings.Contains(sc2, `"initialBackoff":"0.01s"`) {
		t.Errorf("%s, %v", sc2, err)
	}
	for _, bad := range []timeoutprofile.RetryPolicy{
		{MaxAttempts: 1}, {MaxAttempts: 6}, {InitialBackoff: -time.Second},
		{InitialBackoff: time.Second, MaxBackoff: time.Millisecond}, {BackoffMultiplier: -1},
		{MaxTokens: 1001}, {TokenRatio: -1}, {Services: []string{"not a service"}},
	} {
		if _, err := timeoutprofile.RetryServiceConfig(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestRetryServiceConfigRetries: grpc-go accepts the config and retries an
// UNAVAILABLE, but never a DEADLINE_EXCEEDED whose profile budget was
// spent: that answer carries grpc-retry-pushback-ms: -1, so the work runs
// once and the details reach the caller.
func TestRetryServiceConfigRetries(t *testing.T) {
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan string, 10)
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall))
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, req *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		attempts <- req.GetAgent()
		if req.GetAgent() == "flaky" && len(attempts) == 1 {
			return nil, status.Error(codes.Unavailable, "try again")
		}
		if req.GetAgent() == "flaky" {
			return &sessiongatev1.RunJobResponse{JobId: "j"}, nil
		}
		return nil, waitForBudget(ctx)
	}}, grpc.WithDefaultServiceConfig(sc))
	client := sessiongatev1.NewSessionGatewayClient(conn)
	var trailer metadata.MD
	_, err = client.RunJob(withMD(testCtx(t), "x-timeout-ms", "20"), &sessiongatev1.RunJobRequest{Agent: "slow"}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
	if n := len(attempts); n != 1 {
		t.Errorf("%d attempts of a call whose budget was spent, want 1", n)
	}
	if got := trailer.Get(timeoutprofile.PushbackKey); len(got) != 1 || got[0] != "-1" {
		t.Errorf("trailer %s = %q, want [-1]", timeoutprofile.PushbackKey, got)
	}
	if te, ok := timeoutprofile.FromError(err); !ok || te.Limit != timeoutprofile.LimitUnary {
		t.Errorf("details %v, %v; want limit unary", te, ok)
	}
	for len(attempts) > 0 {
		<-attempts
	}
	resp, err := client.RunJob(testCtx(t), &sessiongatev1.RunJobRequest{Agent: "flaky"})
	if err != nil || resp.GetJobId() != "j" || len(attempts) != 2 {
		t.Errorf("UNAVAILABLE then OK: %v, %v after %d attempts; want the answer after 2", resp, err, len(attempts))
	}
}

func TestRetryServiceConfigParses(t *testing.T) {
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///localhost:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := grpc.NewClient("passthrough:///localhost:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(`{"methodConfig": 5}`)); err == nil {
		t.Error("grpc accepts any service config; this test proves nothing")
	}
}
