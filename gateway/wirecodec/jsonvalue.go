package wirecodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

var errNotJSON = errors.New("NaN and infinite numbers have no JSON form")

// ValueError says which part of a Value cannot be encoded. Path is relative
// to the Value AppendJSON was called with, in protobuf field notation
// (`.struct_value.fields["a"].list_value.values[2]`); it is built only on
// the error path, as the error returns through the recursion.
type ValueError struct {
	Path   string
	NoKind bool // the Value has no kind set (nil, or a plain object sent by Node's proto-loader)
	Err    error
}

func (e *ValueError) Error() string {
	if e.NoKind {
		return e.Path + ": google.protobuf.Value has no kind set"
	}
	return e.Path + ": " + e.Err.Error()
}

// at prefixes err's path with seg.
func at(seg string, err error) error {
	var ve *ValueError
	if errors.As(err, &ve) {
		ve.Path = seg + ve.Path
		return ve
	}
	return &ValueError{Path: seg, Err: err}
}

// AppendJSON appends the JSON text of v: what protojson produces for a Value,
// without its per-call reflection, which dominated RunJob's own CPU time.
// Object keys are sorted, so equal values encode equally. A Value with no
// kind set (or a nil one inside a list or struct) is an error: it is what a
// caller sends when it built the message wrongly (Node's proto-loader turns
// a plain JS object into one), and taking it as null would run the job on
// input the caller never meant.
func AppendJSON(b []byte, v *structpb.Value) ([]byte, error) {
	return AppendJSONMax(b, v, math.MaxInt)
}

// ErrTooLong is AppendJSONMax's error for text longer than its max.
var ErrTooLong = errors.New("JSON text too long")

// AppendJSONMax is AppendJSON that gives up with ErrTooLong once the text
// passes max bytes (it may have gone past by one string's length by then):
// a caller with a cap learns it before the whole text is made.
func AppendJSONMax(b []byte, v *structpb.Value, max int) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case nil:
		return nil, &ValueError{NoKind: true}
	case *structpb.Value_NullValue:
		return append(b, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		f := k.NumberValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &ValueError{Err: errNotJSON}
		}
		return appendNumber(b, f), nil
	case *structpb.Value_StringValue:
		if b = appendString(b, k.StringValue); len(b) > max {
			return nil, ErrTooLong
		}
		return b, nil
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = AppendJSONMax(b, e, max); err != nil {
				if err == ErrTooLong {
					return nil, err
				}
				return nil, at(".list_value.values["+strconv.Itoa(i)+"]", err)
			}
			if len(b) > max {
				return nil, ErrTooLong
			}
		}
		return append(b, ']'), nil
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		keys := make([]string, 0, len(fields))
		for key := range fields {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, key := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, key)
			b = append(b, ':')
			var err error
			if b, err = AppendJSONMax(b, fields[key], max); err != nil {
				if err == ErrTooLong {
					return nil, err
				}
				return nil, at(".struct_value.fields["+strconv.Quote(key)+"]", err)
			}
			if len(b) > max {
				return nil, ErrTooLong
			}
		}
		return append(b, '}'), nil
	}
	return nil, errors.New("unknown Value kind")
}

// appendNumber formats f as encoding/json does: shortest representation,
// plain notation for ordinary magnitudes, exponent otherwise.
func appendNumber(b []byte, f float64) []byte {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json and protojson do.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = appendEscape(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscape appends the escape of c, an ASCII byte that a JSON string
// cannot hold as it is (a control character, '"' or '\\').
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// JSONValue converts JSON text from a runtime to a Value. ok is false when
// the text has no Value form — invalid UTF-8, a number beyond float64, not
// JSON at all — and the caller then passes the text on raw (the raw_* fields
// of the API), so that one odd event never ends a stream. Empty input is a
// nil Value.
//
// parseValue reads the common text directly; then the strict protojson
// reader is tried; what it rejects only for
// being unusual (duplicate object keys) is read leniently with
// encoding/json's rules: the last of duplicate keys wins, as in JavaScript,
// Python and Go.
func JSONValue(raw []byte) (v *structpb.Value, ok bool) {
	if len(raw) == 0 {
		return nil, true
	}
	if v, ok := parseValue(raw); ok {
		return v, true
	}
	return jsonValueSlow(raw)
}

// jsonValueSlow is JSONValue without its fast path (parseValue).
func jsonValueSlow(raw []byte) (v *structpb.Value, ok bool) {
	v = &structpb.Value{}
	if protojson.Unmarshal(raw, v) == nil {
		return v, true
	}
	if !utf8.Valid(raw) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	v, err := valueOf(x)
	if err != nil {
		return nil, false
	}
	return v, true
}

// valueOf converts a value decoded by encoding/json with UseNumber.
func valueOf(x any) (*structpb.Value, error) {
	switch x := x.(type) {
	case nil:
		return structpb.NewNullValue(), nil
	case bool:
		return structpb.NewBoolValue(x), nil
	case string:
		return structpb.NewStringValue(x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %.32s is beyond float64", x)
		}
		return structpb.NewNumberValue(f), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			v, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			l.Values[i] = v
		}
		return structpb.NewListValue(l), nil
	case map[string]any:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(x))}
		for k, e := range x {
			v, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			s.Fields[k] = v
		}
		return structpb.NewStructValue(s), nil
	}
	return nil, fmt.Errorf("unexpected %T", x)
}
