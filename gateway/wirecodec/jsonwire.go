package wirecodec

import (
	"bytes"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// appendValueWire appends to dst the protobuf encoding of the
// google.protobuf.Value that parseValue reads from raw, without building
// the Value: RunJob's answer carries a runtime's result to the caller as
// these bytes, where building the Value and marshalling it through
// reflection cost about 10 µs of a call for a small object.
//
// handled is false, and dst is returned as it came, exactly where
// parseValue's is (the same grammar, the same refusals, the same depth
// limit) and for text longer than maxWireJSON; the caller then takes the
// Value path. TestValueWireAgrees and FuzzValueWire hold it to that, and
// to bytes that decode to parseValue's Value.
//
// Nested messages get their length after their content: a byte is
// reserved for it and the content moved right when the length needs more.
// Each level moves its content at most once, so the work is bounded by the
// text's length times its depth; maxWireJSON keeps that small.
func appendValueWire(dst, raw []byte) (out []byte, handled bool) {
	if len(raw) > maxWireJSON {
		return dst, false
	}
	var keys [maxKeyScan][]byte
	w := wireWriter{jsonReader: jsonReader{b: raw}, out: dst, keys: keys[:0]}
	w.space()
	if !w.value(0) {
		return dst, false
	}
	w.space()
	if w.i != len(w.b) {
		return dst, false // trailing data
	}
	return w.out, true
}

// maxWireJSON is the longest text appendValueWire transcodes; a longer one
// takes the Value path, whose cost is linear in its length.
const maxWireJSON = 64 << 10

// google.protobuf.Value, Struct and ListValue field numbers.
const (
	valueNull   protowire.Number = 1
	valueNumber protowire.Number = 2
	valueString protowire.Number = 3
	valueBool   protowire.Number = 4
	valueStruct protowire.Number = 5
	valueList   protowire.Number = 6

	structFields protowire.Number = 1 // map<string, Value>: entries {key = 1, value = 2}
	listValues   protowire.Number = 1
)

type wireWriter struct {
	jsonReader
	out  []byte
	keys [][]byte // the keys of the objects being read, innermost last, for the duplicate check
}

// open starts a length-delimited field: its tag and a reserved length
// byte. close writes the length.
func (w *wireWriter) open(num protowire.Number) int {
	w.out = protowire.AppendTag(w.out, num, protowire.BytesType)
	w.out = append(w.out, 0)
	return len(w.out) - 1
}

func (w *wireWriter) close(at int) { w.out = closeLength(w.out, at) }

// closeLength writes at b[at], a byte reserved for it, the length of what
// follows it in b, moving that right when the length needs more bytes.
func closeLength(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	end := len(b)
	b = append(b, make([]byte, size-1)...)
	copy(b[at+size:], b[at+1:end])
	protowire.AppendVarint(b[:at], uint64(n))
	return b
}

// nested writes the object or list at w.i as the Value field num
// (valueStruct or valueList), the field's length after its contents.
func (w *wireWriter) nested(num protowire.Number, depth int) bool {
	at := w.open(num)
	var ok bool
	if num == valueStruct {
		ok = w.object(depth)
	} else {
		ok = w.list(depth)
	}
	if ok {
		w.close(at)
	}
	return ok
}

func (w *wireWriter) value(depth int) bool {
	if w.i >= len(w.b) || depth > maxFastDepth {
		return false
	}
	switch c := w.b[w.i]; {
	case c == '{':
		return w.nested(valueStruct, depth)
	case c == '[':
		return w.nested(valueList, depth)
	case c == '"':
		s, ok := w.strBytes()
		if !ok {
			return false
		}
		w.out = protowire.AppendTag(w.out, valueString, protowire.BytesType)
		w.out = protowire.AppendBytes(w.out, s)
		return true
	case c == 't':
		return w.boolean("true", 1)
	case c == 'f':
		return w.boolean("false", 0)
	case c == 'n':
		if !w.skipLiteral("null") {
			return false
		}
		w.out = protowire.AppendTag(w.out, valueNull, protowire.VarintType)
		w.out = append(w.out, 0)
		return true
	case c == '-' || c >= '0' && c <= '9':
		f, ok := w.float()
		if !ok {
			return false
		}
		w.out = protowire.AppendTag(w.out, valueNumber, protowire.Fixed64Type)
		w.out = protowire.AppendFixed64(w.out, math.Float64bits(f))
		return true
	}
	return false
}

func (w *wireWriter) boolean(lit string, v byte) bool {
	if !w.skipLiteral(lit) {
		return false
	}
	w.out = protowire.AppendTag(w.out, valueBool, protowire.VarintType)
	w.out = append(w.out, v)
	return true
}

func (w *wireWriter) object(depth int) bool {
	base := len(w.keys)
	ok := w.members(depth, base)
	clear(w.keys[base:])
	w.keys = w.keys[:base]
	return ok
}

// maxKeyScan is the most keys of one object checked for a duplicate by
// comparing them all; beyond it a set is built.
const maxKeyScan = 16

func (w *wireWriter) members(depth, base int) bool {
	w.i++ // {
	var set map[string]struct{}
	w.space()
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return true
	}
	for {
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return false
		}
		k, ok := w.strBytes()
		if !ok {
			return false
		}
		// A duplicate key: as parseValue, leave it to JSONValue's lenient
		// reader.
		switch n := len(w.keys) - base; {
		case set != nil:
			if _, dup := set[string(k)]; dup {
				return false
			}
			set[string(k)] = struct{}{}
		case n < maxKeyScan:
			for _, seen := range w.keys[base:] {
				if bytes.Equal(seen, k) {
					return false
				}
			}
			w.keys = append(w.keys, k)
		default:
			set = make(map[string]struct{}, 2*n)
			for _, seen := range w.keys[base:] {
				set[string(seen)] = struct{}{}
			}
			if _, dup := set[string(k)]; dup {
				return false
			}
			set[string(k)] = struct{}{}
		}
		w.space()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		w.space()
		entry := w.open(structFields)
		w.out = protowire.AppendTag(w.out, 1, protowire.BytesType)
		w.out = protowire.AppendBytes(w.out, k)
		val := w.open(2)
		if !w.value(depth + 1) {
			return false
		}
		w.close(val)
		w.close(entry)
		done, ok := w.after('}')
		if !ok {
			return false
		}
		if done {
			return true
		}
	}
}

func (w *wireWriter) list(depth int) bool {
	w.i++ // [
	w.space()
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return true
	}
	for {
		at := w.open(listValues)
		if !w.value(depth + 1) {
			return false
		}
		w.close(at)
		done, ok := w.after(']')
		if !ok {
			return false
		}
		if done {
			return true
		}
	}
}

// strBytes reads a string as jsonReader.str does and returns its decoded
// bytes: the text's own when it has no escape (no copy), else a new slice.
func (w *wireWriter) strBytes() ([]byte, bool) {
	plain, start, esc, ok := w.scanStr()
	switch {
	case !ok:
		return nil, false
	case esc >= 0:
		s, ok := w.escaped(start, esc)
		return []byte(s), ok
	}
	return plain, true
}
