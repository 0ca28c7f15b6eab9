package client

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// MaxInputDepth is how deeply a job's input may nest arrays and objects:
// the gateway's MaxValueDepth (32), the deepest JSON every client can decode
// as a google.protobuf.Value. A deeper input is refused before it is sent,
// with the *Error the gateway would give (INVALID_ARGUMENT,
// VALUE_TOO_DEEP, the path in Metadata["field"]). Results deeper than this
// arrive as raw JSON and decode as any other.
const MaxInputDepth = 32

// checkInputDepth returns the error for an input v nested deeper than
// MaxInputDepth, nil otherwise.
func checkInputDepth(v *structpb.Value) error {
	var path []string
	var walk func(v *structpb.Value, depth int) bool
	walk = func(v *structpb.Value, depth int) bool {
		var kids func(yield func(seg string, c *structpb.Value) bool) bool
		switch k := v.GetKind().(type) {
		case *structpb.Value_ListValue:
			kids = func(yield func(string, *structpb.Value) bool) bool {
				for i, c := range k.ListValue.GetValues() {
					if !yield("["+strconv.Itoa(i)+"]", c) {
						return false
					}
				}
				return true
			}
		case *structpb.Value_StructValue:
			kids = func(yield func(string, *structpb.Value) bool) bool {
				for key, c := range k.StructValue.GetFields() {
					if !yield("."+key, c) {
						return false
					}
				}
				return true
			}
		default:
			return true
		}
		if depth == MaxInputDepth {
			return false // this container is one too deep
		}
		return kids(func(seg string, c *structpb.Value) bool {
			path = append(path, seg)
			if !walk(c, depth+1) {
				return false
			}
			path = path[:len(path)-1]
			return true
		})
	}
	if v == nil || walk(v, 0) {
		return nil
	}
	field := "input" + strings.Join(path, "")
	msg := fmt.Sprintf("%s: nested deeper than %d arrays and objects, the deepest every client can decode", field, MaxInputDepth)
	return &Error{Code: codes.InvalidArgument, Message: msg, Reason: "VALUE_TOO_DEEP", Domain: "sessiongate",
		Metadata: map[string]string{"field": field, "max_depth": strconv.Itoa(MaxInputDepth)},
		status:   status.New(codes.InvalidArgument, msg)}
}
