package timeoutprofile_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// TestResolveProfileOwnViewOnly: ResolveProfile shows a caller, as the
// Enforcer's identity function names it, its own overrides only; naming
// another caller is PERMISSION_DENIED and reveals nothing of it.
func TestResolveProfileOwnViewOnly(t *testing.T) {
	batch := timeoutprofile.Profile{Name: "tool_call", Default: 200 * time.Millisecond, Min: 10 * time.Millisecond, Max: 2 * time.Second}
	interactive := timeoutprofile.Profile{Name: "tool_call", Default: 150 * time.Millisecond, Min: 10 * time.Millisecond, Max: time.Second}
	withID := mustNew(t, timeoutprofile.WithProfile(shortToolCall), timeoutprofile.WithCallerIdentity(callerFromMD),
		timeoutprofile.WithCallerProfile("batch", batch), timeoutprofile.WithCallerProfile("interactive", interactive))
	withoutID := mustNew(t, timeoutprofile.WithProfile(shortToolCall),
		timeoutprofile.WithCallerProfile("batch", batch), timeoutprofile.WithCallerProfile("interactive", interactive))
	const denied = 0
	for _, tc := range []struct {
		name      string
		e         *timeoutprofile.Enforcer
		as, asked string
		want      uint32 // tool_call's default_timeout_ms; denied: PERMISSION_DENIED
	}{
		{"own view, caller left empty", withID, "batch", "", 200},
		{"own view, caller named", withID, "batch", "batch", 200},
		{"another caller's view", withID, "batch", "interactive", denied},
		{"caller without overrides", withID, "other", "", 100},
		{"caller without overrides asks for another's", withID, "other", "interactive", denied},
		{"no identity asks for a caller's", withID, "", "batch", denied},
		{"no identity", withID, "", "", 100},
		{"no identity function: the table", withoutID, "batch", "", 100},
		{"no identity function: no caller's view", withoutID, "batch", "batch", denied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := serve(t, tc.e, &gateway{})
			ctx := testCtx(t)
			if tc.as != "" {
				ctx = withMD(ctx, "x-caller", tc.as)
			}
			r, err := timeoutprofilev1.NewTimeoutProfileServiceClient(conn).ResolveProfile(ctx,
				&timeoutprofilev1.ResolveProfileRequest{FullMethod: runJob, Caller: tc.asked})
			if tc.want == denied {
				st := status.Convert(err)
				if st.Code() != codes.PermissionDenied || r != nil {
					t.Fatalf("got %v, %v; want PERMISSION_DENIED", r, err)
				}
				for _, leak := range []string{"batch", "interactive", "150", "200"} {
					if strings.Contains(st.Message(), leak) {
						t.Errorf("message %q reveals %q", st.Message(), leak)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.GetProfile().GetDefaultTimeoutMs(); got != tc.want || r.GetProfile().GetProfileName() != "tool_call" {
				t.Errorf("ResolveProfile = %v; want tool_call with default %d ms", r, tc.want)
			}
		})
	}
}
