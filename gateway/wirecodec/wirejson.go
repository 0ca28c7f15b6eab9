package wirecodec

import (
	"bytes"
	"math"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// appendWireJSON appends to dst the JSON text that AppendJSONMax writes for
// the google.protobuf.Value encoded in v, without decoding the Value: a
// RunJob's input travels from the caller's bytes to the runtime's JSON
// this way (see runJobHandler).
//
// It answers only for the plain encoding a protobuf library writes: each
// message's fields once and of their own wire types, no unknown fields,
// map entries with their key and value, distinct keys, valid UTF-8, finite
// numbers, null as 0 and bools as 0 or 1, nesting to maxFastDepth, and
// text of at most max bytes. For anything else handled is false and dst
// is returned as it came; the caller then decodes the Value, and
// AppendJSONMax gives the answer or the error. TestWireJSONAgrees and
// FuzzWireJSON hold it to AppendJSONMax's text wherever it answers.
func appendWireJSON(dst, v []byte, max int) (out []byte, handled bool) {
	w := jsonWriter{out: dst, max: len(dst) + max}
	if !w.value(v, 0) || len(w.out) > w.max {
		return dst, false
	}
	return w.out, true
}

type jsonWriter struct {
	out     []byte
	max     int         // the longest out may grow
	entries []wireEntry // the entries of the objects being written, innermost last
}

// wireEntry is one field of a Struct: its key and its Value's encoding.
type wireEntry struct{ key, val []byte }

// value writes the Value encoded in v.
func (w *jsonWriter) value(v []byte, depth int) bool {
	if depth > maxFastDepth || len(w.out) > w.max {
		return false
	}
	num, typ, n := protowire.ConsumeTag(v)
	if n < 0 {
		return false // no field: a Value of no kind, or not a message
	}
	v = v[n:]
	var m int
	switch {
	case num == valueNull && typ == protowire.VarintType:
		var x uint64
		if x, m = protowire.ConsumeVarint(v); m < 0 || x != 0 {
			return false
		}
		w.out = append(w.out, "null"...)
	case num == valueBool && typ == protowire.VarintType:
		var x uint64
		if x, m = protowire.ConsumeVarint(v); m < 0 || x > 1 {
			return false
		}
		if x == 1 {
			w.out = append(w.out, "true"...)
		} else {
			w.out = append(w.out, "false"...)
		}
	case num == valueNumber && typ == protowire.Fixed64Type:
		var x uint64
		if x, m = protowire.ConsumeFixed64(v); m < 0 {
			return false
		}
		f := math.Float64frombits(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		w.out = appendNumber(w.out, f)
	case num == valueString && typ == protowire.BytesType:
		var s []byte
		if s, m = protowire.ConsumeBytes(v); m < 0 || !utf8.Valid(s) {
			return false
		}
		w.out = appendValidString(w.out, s)
	case num == valueStruct && typ == protowire.BytesType:
		var s []byte
		if s, m = protowire.ConsumeBytes(v); m < 0 || !w.object(s, depth) {
			return false
		}
	case num == valueList && typ == protowire.BytesType:
		var l []byte
		if l, m = protowire.ConsumeBytes(v); m < 0 || !w.list(l, depth) {
			return false
		}
	default:
		return false
	}
	return m == len(v) // exactly one field
}

// object writes a Struct, its keys sorted as AppendJSONMax sorts them.
func (w *jsonWriter) object(s []byte, depth int) bool {
	base := len(w.entries)
	defer func() {
		clear(w.entries[base:])
		w.entries = w.entries[:base]
	}()
	for len(s) > 0 {
		e, rest, ok := consumeField(s, structFields)
		if !ok {
			return false
		}
		s = rest
		key, val, ok := mapEntry(e)
		if !ok || !utf8.Valid(key) {
			return false
		}
		w.entries = append(w.entries, wireEntry{key, val})
	}
	entries := w.entries[base:]
	slices.SortFunc(entries, func(a, b wireEntry) int { return bytes.Compare(a.key, b.key) })
	w.out = append(w.out, '{')
	for i, e := range entries {
		if i > 0 {
			if bytes.Equal(entries[i-1].key, e.key) {
				return false // a duplicate: the last one wins in the Value
			}
			w.out = append(w.out, ',')
		}
		w.out = appendValidString(w.out, e.key)
		w.out = append(w.out, ':')
		if !w.value(e.val, depth+1) {
			return false
		}
	}
	w.out = append(w.out, '}')
	return true
}

// mapEntry reads a map<string, Value> entry: a key and a value, each once.
func mapEntry(e []byte) (key, val []byte, ok bool) {
	var haveKey, haveVal bool
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 || typ != protowire.BytesType {
			return nil, nil, false
		}
		b, m := protowire.ConsumeBytes(e[n:])
		if m < 0 {
			return nil, nil, false
		}
		e = e[n+m:]
		switch {
		case num == 1 && !haveKey:
			key, haveKey = b, true
		case num == 2 && !haveVal:
			val, haveVal = b, true
		default:
			return nil, nil, false
		}
	}
	return key, val, haveKey && haveVal
}

func (w *jsonWriter) list(l []byte, depth int) bool {
	w.out = append(w.out, '[')
	for i := 0; len(l) > 0; i++ {
		v, rest, ok := consumeField(l, listValues)
		if !ok {
			return false
		}
		l = rest
		if i > 0 {
			w.out = append(w.out, ',')
		}
		if !w.value(v, depth+1) {
			return false
		}
	}
	w.out = append(w.out, ']')
	return true
}

// consumeField reads the length-delimited field num at the start of b:
// its bytes and what follows. ok is false for any other field or wire
// type, or bytes that are not well formed.
func consumeField(b []byte, num protowire.Number) (v, rest []byte, ok bool) {
	n, typ, tn := protowire.ConsumeTag(b)
	if tn < 0 || n != num || typ != protowire.BytesType {
		return nil, nil, false
	}
	v, vn := protowire.ConsumeBytes(b[tn:])
	if vn < 0 {
		return nil, nil, false
	}
	return v, b[tn+vn:], true
}

// appendValidString is appendString for text already known to be valid
// UTF-8, where that only escapes ASCII.
func appendValidString(b, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = appendEscape(append(b, s[start:i]...), c)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
