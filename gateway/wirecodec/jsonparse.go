package wirecodec

import (
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// parseValue is JSONValue's fast path: a strict reader of JSON text that
// builds the Value directly, where protojson reads it through reflection
// (3.8 µs of a RunJob's CPU for a two-field result).
//
// It answers only where its answer is protojson's: handled is false for
// anything it leaves to the readers after it — not JSON, invalid UTF-8, a
// lone surrogate escape, duplicate object keys, a number ParseFloat
// refuses, nesting deeper than maxFastDepth. TestParseValueAgrees and
// FuzzParseValue hold it to that.
func parseValue(raw []byte) (v *structpb.Value, handled bool) {
	r := jsonReader{b: raw}
	r.space()
	v, ok := r.value(0)
	if !ok {
		return nil, false
	}
	r.space()
	if r.i != len(r.b) {
		return nil, false // trailing data
	}
	return v, true
}

// IsEmptyObject says whether raw is the JSON text {}, with or without
// JSON's white space around it and inside it.
func IsEmptyObject(raw []byte) bool {
	r := jsonReader{b: raw}
	for _, c := range []byte("{}") {
		if r.space(); r.i >= len(r.b) || r.b[r.i] != c {
			return false
		}
		r.i++
	}
	r.space()
	return r.i == len(r.b)
}

// maxFastDepth is the deepest nesting parseValue reads; deeper text goes
// to protojson (whose own limit is 10,000).
const maxFastDepth = 128

type jsonReader struct {
	b []byte
	i int
}

func (r *jsonReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *jsonReader) value(depth int) (*structpb.Value, bool) {
	if r.i >= len(r.b) || depth > maxFastDepth {
		return nil, false
	}
	switch c := r.b[r.i]; {
	case c == '{':
		return r.object(depth)
	case c == '[':
		return r.list(depth)
	case c == '"':
		s, ok := r.str()
		if !ok {
			return nil, false
		}
		return &structpb.Value{Kind: &structpb.Value_StringValue{StringValue: s}}, true
	case c == 't':
		return r.literal("true", &structpb.Value{Kind: &structpb.Value_BoolValue{BoolValue: true}})
	case c == 'f':
		return r.literal("false", &structpb.Value{Kind: &structpb.Value_BoolValue{BoolValue: false}})
	case c == 'n':
		return r.literal("null", &structpb.Value{Kind: &structpb.Value_NullValue{}})
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	}
	return nil, false
}

func (r *jsonReader) literal(lit string, v *structpb.Value) (*structpb.Value, bool) {
	if !r.skipLiteral(lit) {
		return nil, false
	}
	return v, true
}

// skipLiteral reads lit (true, false or null) at r.i.
func (r *jsonReader) skipLiteral(lit string) bool {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		return false
	}
	r.i += len(lit)
	return true
}

func (r *jsonReader) object(depth int) (*structpb.Value, bool) {
	r.i++ // {
	fields := map[string]*structpb.Value{}
	r.space()
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return structpb.NewStructValue(&structpb.Struct{Fields: fields}), true
	}
	for {
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			return nil, false
		}
		k, ok := r.str()
		if !ok {
			return nil, false
		}
		if _, dup := fields[k]; dup {
			return nil, false // protojson refuses it; JSONValue's lenient reader decides
		}
		r.space()
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return nil, false
		}
		r.i++
		r.space()
		v, ok := r.value(depth + 1)
		if !ok {
			return nil, false
		}
		fields[k] = v
		done, ok := r.after('}')
		if !ok {
			return nil, false
		}
		if done {
			return structpb.NewStructValue(&structpb.Struct{Fields: fields}), true
		}
	}
}

func (r *jsonReader) list(depth int) (*structpb.Value, bool) {
	r.i++ // [
	var vals []*structpb.Value
	r.space()
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return structpb.NewListValue(&structpb.ListValue{Values: vals}), true
	}
	for {
		v, ok := r.value(depth + 1)
		if !ok {
			return nil, false
		}
		vals = append(vals, v)
		done, ok := r.after(']')
		if !ok {
			return nil, false
		}
		if done {
			return structpb.NewListValue(&structpb.ListValue{Values: vals}), true
		}
	}
}

// after reads what follows a member of an object or list: a comma (and
// the space after it) before the next member, or end, which closes it
// (done). Anything else is not JSON.
func (r *jsonReader) after(end byte) (done, ok bool) {
	r.space()
	if r.i >= len(r.b) {
		return false, false
	}
	switch r.b[r.i] {
	case ',':
		r.i++
		r.space()
		return false, true
	case end:
		r.i++
		return true, true
	}
	return false, false
}

// str reads a string at r.i (an opening quote): the plain bytes are
// copied once; escapes are decoded, except a surrogate escape that is not
// a high-low pair.
func (r *jsonReader) str() (string, bool) {
	plain, start, esc, ok := r.scanStr()
	switch {
	case !ok:
		return "", false
	case esc >= 0:
		return r.escaped(start, esc)
	}
	return string(plain), true
}

// scanStr reads a string at r.i up to its closing quote, or up to its
// first escape (esc, else -1), which escaped then finishes from start. A
// string with no escape is plain, the text's own bytes, and r.i is past it.
func (r *jsonReader) scanStr() (plain []byte, start, esc int, ok bool) {
	start = r.i + 1
	i := start
	for i < len(r.b) {
		c := r.b[i]
		switch {
		case c == '"':
			r.i = i + 1
			return r.b[start:i], start, -1, true
		case c == '\\':
			return nil, start, i, true
		case c < 0x20:
			return nil, start, -1, false
		case c < utf8.RuneSelf:
			i++
		default:
			ru, size := utf8.DecodeRune(r.b[i:])
			if ru == utf8.RuneError && size == 1 {
				return nil, start, -1, false
			}
			i += size
		}
	}
	return nil, start, -1, false
}

// escaped finishes a string whose first escape is at i.
func (r *jsonReader) escaped(start, i int) (string, bool) {
	out := make([]byte, 0, i-start+16)
	out = append(out, r.b[start:i]...)
	for i < len(r.b) {
		c := r.b[i]
		switch {
		case c == '"':
			r.i = i + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if i+1 >= len(r.b) {
				return "", false
			}
			e := r.b[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				ru, ok := hex4(r.b, i)
				if !ok {
					return "", false
				}
				i += 4
				if ru >= 0xd800 && ru < 0xe000 {
					// Only a high surrogate followed by an escaped low one.
					if ru >= 0xdc00 || i+6 > len(r.b) || r.b[i] != '\\' || r.b[i+1] != 'u' {
						return "", false
					}
					lo, ok := hex4(r.b, i+2)
					if !ok || lo < 0xdc00 || lo >= 0xe000 {
						return "", false
					}
					i += 6
					ru = 0x10000 + (ru-0xd800)<<10 + (lo - 0xdc00)
				}
				out = utf8.AppendRune(out, ru)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			ru, size := utf8.DecodeRune(r.b[i:])
			if ru == utf8.RuneError && size == 1 {
				return "", false
			}
			out = append(out, r.b[i:i+size]...)
			i += size
		}
	}
	return "", false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var v rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// number reads a number in JSON's grammar (RFC 8259 §6), which is
// narrower than ParseFloat's.
func (r *jsonReader) number() (*structpb.Value, bool) {
	f, ok := r.float()
	if !ok {
		return nil, false
	}
	return &structpb.Value{Kind: &structpb.Value_NumberValue{NumberValue: f}}, true
}

// float reads a number at r.i as number does. An integer of at most 15
// digits is exact in a float64 and is converted without ParseFloat.
func (r *jsonReader) float() (float64, bool) {
	b, start, i := r.b, r.i, r.i
	digits := func() bool {
		n := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > n
	}
	neg := b[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return 0, false
	}
	intEnd := i
	plain := true
	if i < len(b) && b[i] == '.' {
		plain = false
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		plain = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	if plain && intEnd-intStart <= 15 {
		var n int64
		for _, c := range b[intStart:intEnd] {
			n = n*10 + int64(c-'0')
		}
		f := float64(n)
		if neg {
			f = -f
		}
		r.i = i
		return f, true
	}
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil {
		return 0, false
	}
	r.i = i
	return f, true
}
