package main

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestFailReason: a failed call is named by its code and the gateway's
// ErrorInfo reason, by "no connection" when grpc-go failed it before any
// gateway answered, and by "other" otherwise.
func TestFailReason(t *testing.T) {
	withInfo := func(c codes.Code, reason string) error {
		st, err := status.New(c, "gateway is shutting down").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "sessiongate"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{withInfo(codes.Unavailable, "DRAINING"), "Unavailable DRAINING"},
		{withInfo(codes.Unavailable, "SESSION_HANDED_OFF"), "Unavailable SESSION_HANDED_OFF"},
		{status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), "Unavailable no connection"},
		{status.Error(codes.Unavailable, "the directory is unreachable"), "Unavailable other"},
		{status.Error(codes.NotFound, "no such session"), "NotFound other"},
		{errors.New("not a status"), "Unknown other"},
	} {
		if got := failReason(c.err); got != c.want {
			t.Errorf("failReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestCountsText(t *testing.T) {
	if got := countsText(nil); got != "none" {
		t.Errorf("countsText(nil) = %q, want none", got)
	}
	if got, want := countsText(map[string]int64{"Unavailable no connection": 12, "Unavailable DRAINING": 3}), "Unavailable DRAINING 3, Unavailable no connection 12"; got != want {
		t.Errorf("countsText = %q, want %q (keys sorted)", got, want)
	}
}
