package server

import (
	"context"
	"testing"

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

func TestLoggedCalls(t *testing.T) {
	for _, tc := range []struct {
		service, method string
		want            bool
	}{
		{"sessiongate.v1.SessionGateway", "RunJob", true},
		{"sessiongate.v1.SessionGateway", "OpenSession", true},
		{"sessiongate.v1.SessionGateway", "GetSessionStatus", false},
		{"grpc.health.v1.Health", "Check", false},
		{"timeoutprofile.v1.TimeoutProfileService", "ListProfiles", true},
	} {
		got := logged(context.Background(), interceptors.CallMeta{Service: tc.service, Method: tc.method})
		if got != tc.want {
			t.Errorf("logged(%s/%s) = %v, want %v", tc.service, tc.method, got, tc.want)
		}
	}
}
