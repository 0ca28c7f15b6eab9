package wirecodec

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// valueOrRaw is the server's conversion of a runtime's JSON result: a
// Value, or the text raw when it has no Value form.
func valueOrRaw(raw []byte) (*structpb.Value, []byte) {
	if v, ok := JSONValue(raw); ok {
		return v, nil
	}
	return nil, slices.Clone(raw)
}

// clip shortens s for a failure message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func mustValueTB(tb testing.TB, v any) *structpb.Value {
	tb.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		tb.Fatal(err)
	}
	return pv
}
