package timeoutprofile

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MetadataKey is the request metadata key of an explicit per-call timeout:
// decimal milliseconds, digits only, at most 10 of them, at most
// 4294967295. "0" asks for no timeout, which profiles with allow_infinite
// grant and others answer with their default. Anything else is rejected
// with INVALID_ARGUMENT.
const MetadataKey = "x-timeout-ms"

// maxMSDigits is the length of math.MaxUint32 in decimal.
const maxMSDigits = 10

var errTimeoutSyntax = errors.New("want decimal milliseconds: digits only, at most 10, at most 4294967295")

// parseTimeoutMS parses an x-timeout-ms value strictly: ASCII digits only
// (no sign, space, fraction or unit), 1 to 10 of them, within uint32.
func parseTimeoutMS(s string) (uint32, error) {
	if len(s) == 0 || len(s) > maxMSDigits {
		return 0, errTimeoutSyntax
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errTimeoutSyntax
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32 {
		return 0, errTimeoutSyntax
	}
	return uint32(v), nil
}

// overrideFromIncoming returns the caller's explicit timeout from the
// incoming metadata of ctx, if it sent one.
func overrideFromIncoming(ctx context.Context) (time.Duration, bool, error) {
	vals := metadata.ValueFromIncomingContext(ctx, MetadataKey)
	switch len(vals) {
	case 0:
		return 0, false, nil
	case 1:
	default:
		return 0, false, invalidOverride(fmt.Sprintf("%s metadata given %d times; send it once", MetadataKey, len(vals)))
	}
	v, err := parseTimeoutMS(vals[0])
	if err != nil {
		shown := vals[0]
		if len(shown) > 32 {
			shown = shown[:32] + "…"
		}
		return 0, false, invalidOverride(fmt.Sprintf("invalid %s metadata %q: %v", MetadataKey, shown, err))
	}
	return ms(v), true, nil
}

// invalidOverride is the INVALID_ARGUMENT status of a malformed x-timeout-ms.
func invalidOverride(msg string) error {
	st := status.New(codes.InvalidArgument, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   "INVALID_TIMEOUT_OVERRIDE",
		Domain:   ErrorDomain,
		Metadata: map[string]string{"metadata_key": MetadataKey},
	}); err == nil {
		st = d
	}
	return st.Err()
}
