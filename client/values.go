package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
)

// maxExact is the largest integer magnitude a float64 (a
// google.protobuf.Value number) holds exactly.
const maxExact = 1 << 53

// InputError is job input (or an extension value) that cannot be sent: an
// integer beyond ±2^53, a non-finite float, or a value encoding/json cannot
// marshal. Path names the value, e.g. `input.items[2].n` or
// `extensions["x-vendor.a"]`.
type InputError struct {
	Path string
	Err  error
}

// Error reads e.g. `sessiongate: input.items[2].n: integer … is beyond ±2^53 …`.
func (e *InputError) Error() string { return "sessiongate: " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(path, format string, args ...any) error {
	return &InputError{Path: path, Err: fmt.Errorf(format, args...)}
}

// toValue converts v, the value at path, to a google.protobuf.Value. Basic
// JSON shapes are converted directly; anything else goes through
// encoding/json first (so structs with json tags work). Integers beyond
// ±2^53 and non-finite floats are refused with an *InputError.
func toValue(v any, path string) (*structpb.Value, error) {
	switch v := v.(type) {
	case nil:
		return structpb.NewNullValue(), nil
	case *structpb.Value:
		return v, nil
	case bool:
		return structpb.NewBoolValue(v), nil
	case string:
		return structpb.NewStringValue(v), nil
	case int:
		return intValue(int64(v), path)
	case int8:
		return intValue(int64(v), path)
	case int16:
		return intValue(int64(v), path)
	case int32:
		return intValue(int64(v), path)
	case int64:
		return intValue(v, path)
	case uint:
		return uintValue(uint64(v), path)
	case uint8:
		return uintValue(uint64(v), path)
	case uint16:
		return uintValue(uint64(v), path)
	case uint32:
		return uintValue(uint64(v), path)
	case uint64:
		return uintValue(v, path)
	case float32:
		return floatValue(float64(v), path)
	case float64:
		return floatValue(v, path)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return intValue(i, path)
		}
		f, err := v.Float64()
		if err != nil {
			return nil, &InputError{Path: path, Err: fmt.Errorf("json.Number %q: %w", v, err)}
		}
		return floatValue(f, path)
	case map[string]any:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(v))}
		for k, x := range v {
			xv, err := toValue(x, path+"."+k)
			if err != nil {
				return nil, err
			}
			s.Fields[k] = xv
		}
		return structpb.NewStructValue(s), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(v))}
		for i, x := range v {
			xv, err := toValue(x, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			l.Values[i] = xv
		}
		return structpb.NewListValue(l), nil
	}
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.IsNil() {
		return structpb.NewNullValue(), nil
	}
	// Anything else: through encoding/json, keeping numbers as json.Number
	// so that integers are checked, not rounded.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &InputError{Path: path, Err: err}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var generic any
	if err := d.Decode(&generic); err != nil {
		return nil, &InputError{Path: path, Err: err}
	}
	return toValue(generic, path)
}

func intValue(i int64, path string) (*structpb.Value, error) {
	if i > maxExact || i < -maxExact {
		return nil, inputErr(path, "integer %d is beyond ±2^53 and would be rounded (google.protobuf.Value numbers are doubles)", i)
	}
	return structpb.NewNumberValue(float64(i)), nil
}

func uintValue(u uint64, path string) (*structpb.Value, error) {
	if u > maxExact {
		return nil, inputErr(path, "integer %d is beyond 2^53 and would be rounded (google.protobuf.Value numbers are doubles)", u)
	}
	return structpb.NewNumberValue(float64(u)), nil
}

func floatValue(f float64, path string) (*structpb.Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, inputErr(path, "%v is not a JSON number", f)
	}
	return structpb.NewNumberValue(f), nil
}

// decodeValue decodes v into out (a pointer) as encoding/json would decode
// its JSON form.
func decodeValue(v *structpb.Value, out any) error {
	if v == nil {
		v = structpb.NewNullValue()
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
