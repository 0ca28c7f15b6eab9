package server

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
)

func TestProfiledCalls(t *testing.T) {
	for _, tc := range []struct {
		service, method string
		want            bool
	}{
		{"sessiongate.v1.SessionGateway", "RunJob", true},
		{"sessiongate.v1.SessionGateway", "WatchJob", true},
		{"timeoutprofile.v1.TimeoutProfileService", "ListProfiles", true},
		{"grpc.health.v1.Health", "Check", true},
		{"grpc.health.v1.Health", "Watch", false},
		{"grpc.reflection.v1.ServerReflection", "ServerReflectionInfo", false},
		{"grpc.reflection.v1alpha.ServerReflection", "ServerReflectionInfo", false},
	} {
		got := profiled(context.Background(), interceptors.CallMeta{Service: tc.service, Method: tc.method})
		if got != tc.want {
			t.Errorf("profiled(%s/%s) = %v, want %v", tc.service, tc.method, got, tc.want)
		}
	}
}

// TestAccessLog: a finished call is logged at its code's level with the
// field names log queries use; skipped methods and disabled levels log
// nothing.
func TestAccessLog(t *testing.T) {
	rec := &recordingHandler{}
	a := &accessLog{log: slog.New(rec), skip: map[string]bool{"/sessiongate.v1.SessionGateway/GetSessionStatus": true}}
	call := func(method string, err error) {
		_, _ = a.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) { return nil, err })
	}
	call("/sessiongate.v1.SessionGateway/RunJob", nil)                                            // DEBUG
	call("/sessiongate.v1.SessionGateway/GetSessionStatus", status.Error(codes.Internal, "boom")) // skipped
	call("/sessiongate.v1.SessionGateway/RunJob", status.Error(codes.InvalidArgument, "bad"))     // WARN
	call("/sessiongate.v1.SessionGateway/RunJob", status.Error(codes.Internal, "broken"))         // ERROR
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.recs) != 3 {
		t.Fatalf("%d records, want 3 (the probe is never logged)", len(rec.recs))
	}
	for i, want := range []struct {
		lvl  slog.Level
		code string
	}{{slog.LevelDebug, "OK"}, {slog.LevelWarn, "InvalidArgument"}, {slog.LevelError, "Internal"}} {
		r := rec.recs[i]
		got := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		if r.Level != want.lvl || r.Message != "finished call" || got["grpc.code"] != want.code ||
			got["grpc.service"] != "sessiongate.v1.SessionGateway" || got["grpc.method"] != "RunJob" ||
			got["grpc.method_type"] != "unary" || got["protocol"] != "grpc" || got["grpc.start_time"] == "" {
			t.Errorf("record %d: %v %q %v", i, r.Level, r.Message, got)
		}
		if ms, err := strconv.ParseFloat(got["grpc.time_ms"], 64); err != nil || ms < 0 {
			t.Errorf("record %d: grpc.time_ms %q", i, got["grpc.time_ms"])
		}
		if (want.code == "OK") != (got["grpc.error"] == "") {
			t.Errorf("record %d: grpc.error %q", i, got["grpc.error"])
		}
	}

	// At INFO (the default) an OK call builds nothing and logs nothing.
	quiet := &accessLog{log: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	info := &grpc.UnaryServerInfo{FullMethod: "/sessiongate.v1.SessionGateway/RunJob"}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	if n := testing.AllocsPerRun(100, func() { _, _ = quiet.unary(context.Background(), nil, info, ok) }); n != 0 {
		t.Errorf("an OK call that is not logged allocates %v times", n)
	}
}
