package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"

	"google.golang.org/protobuf/types/known/structpb"
)

// maxExact is the largest integer magnitude a float64 (a
// google.protobuf.Value number) holds exactly.
const maxExact = 1 << 53

// toValue converts v to a google.protobuf.Value. Basic JSON shapes are
// converted directly; anything else goes through encoding/json first (so
// structs with json tags work). Integers beyond ±2^53 and non-finite floats
// are refused.
func toValue(v any) (*structpb.Value, error) {
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
		return intValue(int64(v))
	case int8:
		return intValue(int64(v))
	case int16:
		return intValue(int64(v))
	case int32:
		return intValue(int64(v))
	case int64:
		return intValue(v)
	case uint:
		return uintValue(uint64(v))
	case uint8:
		return uintValue(uint64(v))
	case uint16:
		return uintValue(uint64(v))
	case uint32:
		return uintValue(uint64(v))
	case uint64:
		return uintValue(v)
	case float32:
		return floatValue(float64(v))
	case float64:
		return floatValue(v)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return intValue(i)
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("sessiongate: json.Number %q: %w", v, err)
		}
		return floatValue(f)
	case map[string]any:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(v))}
		for k, x := range v {
			xv, err := toValue(x)
			if err != nil {
				return nil, err
			}
			s.Fields[k] = xv
		}
		return structpb.NewStructValue(s), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(v))}
		for i, x := range v {
			xv, err := toValue(x)
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
		return nil, fmt.Errorf("sessiongate: job input: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var generic any
	if err := d.Decode(&generic); err != nil {
		return nil, fmt.Errorf("sessiongate: job input: %w", err)
	}
	return toValue(generic)
}

func intValue(i int64) (*structpb.Value, error) {
	if i > maxExact || i < -maxExact {
		return nil, fmt.Errorf("sessiongate: integer %d is beyond ±2^53 and would be rounded (google.protobuf.Value numbers are doubles)", i)
	}
	return structpb.NewNumberValue(float64(i)), nil
}

func uintValue(u uint64) (*structpb.Value, error) {
	if u > maxExact {
		return nil, fmt.Errorf("sessiongate: integer %d is beyond 2^53 and would be rounded (google.protobuf.Value numbers are doubles)", u)
	}
	return structpb.NewNumberValue(float64(u)), nil
}

func floatValue(f float64) (*structpb.Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("sessiongate: %v is not a JSON number", f)
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
