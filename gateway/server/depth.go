package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/wirecodec"
)

// MaxValueDepth bounds how deeply a job's input, result, event body or
// error details may nest arrays and objects (a scalar is depth 0, [1] and
// {"a":1} depth 1): the deepest JSON every client can decode as a
// google.protobuf.Value in the gateway's answers. Measured on the generated
// messages, by nesting one container per level until decoding fails:
//
//	                              RunJobResponse    WatchJobResponse
//	                              arrays  objects   arrays  objects
//	Python (grpcio 1.51, protobuf 4.21 cpp)   49      33        49      32
//	TypeScript (protobuf-es 2.17)             49      49        48      48
//	Go (protobuf-go 1.36)                    >120    >120      >120    >120
//
// Python's C++ parser stops at 100 message levels and counts a map entry
// as one (an object costs three levels, an array two); protobuf-es stops
// at 100 without counting map entries; protobuf-go's limit is 10 000. So 32.
//
// An input deeper than this is INVALID_ARGUMENT (reason VALUE_TOO_DEEP,
// naming the path) before anything is submitted; a runtime's result, event
// body or error details deeper than this reach the caller as JSON text in
// the raw_* field instead of a Value; an extension value deeper than this
// is left out, like one with no Value form. A request too deep for
// protobuf-go to decode at all (about 5 000 levels) is INVALID_ARGUMENT too
// (tooDeepRequests), never INTERNAL.
const MaxValueDepth = 32

// jsonTooDeep reports whether the JSON text raw nests arrays and objects
// deeper than max, and then the path of the first container past it, e.g.
// ".a[0].b". It reads the text once without decoding it; malformed text is
// reported as not too deep (its own parser reports it).
func jsonTooDeep(raw []byte, max int) (path string, deep bool) {
	type frame struct {
		array bool
		index int
		key   string
	}
	var stack []frame
	expectKey := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			j := i + 1
			for j < len(raw) && raw[j] != '"' {
				if raw[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(raw) {
				return "", false
			}
			if expectKey && len(stack) > 0 && !stack[len(stack)-1].array {
				stack[len(stack)-1].key = string(raw[i+1 : j])
				expectKey = false
			}
			i = j
		case '{', '[':
			if len(stack) == max {
				return depthPath(len(stack), func(k int) (bool, int, string) {
					return stack[k].array, stack[k].index, stack[k].key
				}), true
			}
			stack = append(stack, frame{array: c == '['})
			expectKey = c == '{'
		case '}', ']':
			if len(stack) == 0 {
				return "", false
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) > 0 {
				if top := &stack[len(stack)-1]; top.array {
					top.index++
				} else {
					expectKey = true
				}
			}
		}
	}
	return "", false
}

// depthPath renders the path of the n frames at(0..n-1) give.
func depthPath(n int, at func(k int) (array bool, index int, key string)) string {
	var b strings.Builder
	for k := range n {
		array, index, key := at(k)
		if array {
			b.WriteString("[" + strconv.Itoa(index) + "]")
		} else {
			b.WriteString("." + key)
		}
	}
	return b.String()
}

// tooDeepInput is the status of an input nested deeper than MaxValueDepth.
func tooDeepInput(path string) error {
	field := "input" + path
	return gatewayStatus(codes.InvalidArgument, "VALUE_TOO_DEEP",
		fmt.Sprintf("%s: nested deeper than %d arrays and objects, the deepest every client can decode", field, MaxValueDepth),
		map[string]string{"field": field, "max_depth": strconv.Itoa(MaxValueDepth)})
}

// valueDepthOK reports whether a runtime's JSON may travel as a Value.
func valueDepthOK(raw []byte) bool {
	_, deep := jsonTooDeep(raw, MaxValueDepth)
	return !deep
}

// tooDeepRequests wraps a unary method handler so that a request protobuf
// cannot decode for its nesting (protobuf-go's recursion limit) is
// INVALID_ARGUMENT naming the limit, not grpc-go's INTERNAL: it is the
// caller's input, and the session is untouched.
func tooDeepRequests(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		// grpc-go writes the status of a request its codec cannot decode
		// at once, so the bytes are received as they came and decoded
		// here, where the error can still be mapped.
		rawDec := func(v any) error {
			if _, ok := v.(*wirecodec.RawMessage); ok {
				return dec(v)
			}
			raw := &wirecodec.RawMessage{}
			if err := dec(raw); err != nil {
				return err
			}
			return wirecodec.DecodeRequest(raw, v)
		}
		resp, err := h(srv, ctx, rawDec, ic)
		if err != nil && isRecursionError(err) {
			return nil, gatewayStatus(codes.InvalidArgument, "VALUE_TOO_DEEP",
				fmt.Sprintf("the request nests too deeply to decode; inputs may nest at most %d arrays and objects", MaxValueDepth),
				map[string]string{"field": "input", "max_depth": strconv.Itoa(MaxValueDepth)})
		}
		return resp, err
	}
}

// isRecursionError reports whether err is protobuf-go's refusal of a
// message nested past its recursion limit, as the codec or a handler
// decoding bytes itself returned it (not an answer the gateway built).
func isRecursionError(err error) bool {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Internal && st.Code() != codes.Unknown {
		return false
	}
	return strings.Contains(err.Error(), "exceeded maximum recursion depth")
}
