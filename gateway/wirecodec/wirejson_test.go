package wirecodec

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// agreeWireJSON checks appendWireJSON against decoding the Value and
// AppendJSONMax on b: where it answers, the Value decodes and
// AppendJSONMax writes the same text; where it does not, dst comes back as
// it came. It returns whether it answered.
func agreeWireJSON(t *testing.T, b []byte, max int) bool {
	t.Helper()
	got, handled := appendedTo(t, func() string { return fmt.Sprintf("appendWireJSON(%x)", b) },
		func(dst []byte) ([]byte, bool) { return appendWireJSON(dst, b, max) })
	if !handled {
		return false
	}
	var v structpb.Value
	if err := proto.Unmarshal(b, &v); err != nil {
		t.Fatalf("appendWireJSON(%x) answered %q for bytes that do not decode: %v", b, got, err)
	}
	want, err := AppendJSONMax(nil, &v, max)
	if err != nil {
		t.Fatalf("appendWireJSON(%x) answered %q where AppendJSONMax fails: %v", b, got, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendWireJSON(%x) = %q, AppendJSONMax %q", b, got, want)
	}
	return true
}

// TestWireJSON: plain encodings are answered; each odd one is left to the
// Value path.
func TestWireJSON(t *testing.T) {
	enc := func(v *structpb.Value) []byte {
		b, err := proto.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	val := func(x any) *structpb.Value {
		v, err := structpb.NewValue(x)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, x := range []any{
		nil, true, false, 0.0, math.Copysign(0, -1), 1.5, 1e21, 1e-7, 123456789.0, "", "plain", "é ✓ 𝄞 \" \\ \n \r \t \x00 \x1f <>&\u2028",
		[]any{}, []any{1.0, "a", nil, []any{true}}, map[string]any{},
		map[string]any{"b": 1.0, "a": map[string]any{"z": []any{"x"}}, "": "empty key", "k\"ey": nil, "é": 2.0, "E": 3.0},
		strings.Repeat("long ", 5000),
	} {
		if !agreeWireJSON(t, enc(val(x)), 1<<20) {
			t.Errorf("appendWireJSON left %v to the Value path", x)
		}
	}
	deep := structpb.NewNullValue()
	for range maxFastDepth {
		deep = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{deep}})
	}
	if !agreeWireJSON(t, enc(deep), 1<<20) {
		t.Error("appendWireJSON left the deepest nesting it reads to the Value path")
	}

	tag := protowire.AppendTag
	field := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(tag(nil, num, protowire.BytesType), b)
	}
	str := func(s string) []byte { return field(valueString, []byte(s)) }
	entry := func(parts ...[]byte) []byte { return field(structFields, bytes.Join(parts, nil)) }
	obj := func(entries ...[]byte) []byte { return field(valueStruct, bytes.Join(entries, nil)) }
	varint := func(num protowire.Number, x uint64) []byte {
		return protowire.AppendVarint(tag(nil, num, protowire.VarintType), x)
	}
	number := func(f float64) []byte {
		return protowire.AppendFixed64(tag(nil, valueNumber, protowire.Fixed64Type), math.Float64bits(f))
	}
	// Accepted: map entry fields in either order.
	if !agreeWireJSON(t, obj(entry(field(2, str("v")), field(1, []byte("k")))), 1<<20) {
		t.Error("an entry with its value before its key was left to the Value path")
	}
	for name, b := range map[string][]byte{
		"no kind":             nil,
		"two kinds":           append(str("a"), varint(valueBool, 1)...),
		"a kind twice":        append(str("a"), str("b")...),
		"unknown field":       append(str("a"), varint(9, 1)...),
		"wrong wire type":     varint(valueString, 3),
		"null 1":              varint(valueNull, 1),
		"bool 2":              varint(valueBool, 2),
		"NaN":                 number(math.NaN()),
		"+Inf":                number(math.Inf(1)),
		"invalid UTF-8":       field(valueString, []byte("a\xffb")),
		"invalid UTF-8 key":   obj(entry(field(1, []byte("\xff")), field(2, str("v")))),
		"duplicate key":       obj(entry(field(1, []byte("k")), field(2, str("1"))), entry(field(1, []byte("k")), field(2, str("2")))),
		"entry without key":   obj(entry(field(2, str("v")))),
		"entry without value": obj(entry(field(1, []byte("k")))),
		"entry key twice":     obj(entry(field(1, []byte("k")), field(1, []byte("j")), field(2, str("v")))),
		"empty nested value":  obj(entry(field(1, []byte("k")), field(2, nil))),
		"list of non-values":  field(valueList, varint(1, 1)),
		"truncated":           str("abc")[:3],
		"too deep":            enc(structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{deep}})),
	} {
		if agreeWireJSON(t, b, 1<<20) {
			t.Errorf("appendWireJSON answered for %s (%x)", name, b)
		}
	}
	// The cap: a text of exactly max bytes is answered, one more is not.
	b := enc(val("0123456789"))
	if !agreeWireJSON(t, b, 12) || agreeWireJSON(t, b, 11) {
		t.Error("appendWireJSON does not hold its text to max")
	}
}

// TestWireJSONAgrees runs agreeWireJSON on the encodings of random Values
// (TestParseValue's generator), each also mutated by a byte inserted,
// dropped or changed, and under a random cap. The seed is printed, and
// PARSE_SEED replays one.
func TestWireJSONAgrees(t *testing.T) {
	rng := parseRand(t, 0x2545f4914f6cdd1d)
	handled := 0
	for range 3000 {
		v, ok := parseValue([]byte(randomJSON(rng, 0)))
		if !ok {
			t.Fatal("the generator wrote a text parseValue refuses")
		}
		b, err := proto.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if agreeWireJSON(t, b, 1<<20) {
			handled++
		}
		agreeWireJSON(t, b, rng.IntN(64))
		for range 4 {
			agreeWireJSON(t, mutate(rng, b), 1<<20)
		}
	}
	if handled != 3000 {
		t.Fatalf("appendWireJSON read %d of 3000 plain encodings", handled)
	}
}

// FuzzWireJSON: wherever appendWireJSON answers, the bytes decode to a
// Value that AppendJSONMax writes as the same text.
func FuzzWireJSON(f *testing.F) {
	for _, s := range []string{`null`, `{"a":[1,2,{"b":"c"}]}`, `"\u0000\ud834\udd1e"`, `1e308`, `-0`, `[[[[]]]]`} {
		v, _ := parseValue([]byte(s))
		b, _ := proto.Marshal(v)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { agreeWireJSON(t, data, 1<<20) })
}

// TestDecodeRunJob: a request's plain input comes out as AppendJSONMax's
// text and the rest of the request as proto.Unmarshal decodes it; a
// request whose input is odd, repeated or absent is decoded whole, and
// bytes that are not a request get grpc-go's error.
func TestDecodeRunJob(t *testing.T) {
	rng := parseRand(t, 11)
	const max = 1 << 20
	for i := range 1000 {
		in, _ := parseValue([]byte(randomJSON(rng, 0)))
		req := &sessiongatev1.RunJobRequest{
			SessionId: "sess_" + strconv.Itoa(i), Agent: "echo", Input: in, IdempotencyKey: "k", MaxRuntimeSec: uint32(i),
			AgentVersion: "1.0.0", Extensions: map[string]*structpb.Value{"x-vendor.acme.n": structpb.NewNumberValue(float64(i))},
		}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, input, err := DecodeRunJob(b, max)
		if err != nil {
			t.Fatal(err)
		}
		want, err := AppendJSONMax(nil, in, max)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(input, want) {
			t.Fatalf("input %v: DecodeRunJob gave %q, AppendJSONMax %q", in, input, want)
		}
		rest := proto.Clone(req).(*sessiongatev1.RunJobRequest)
		rest.Input = nil
		if !proto.Equal(got, rest) {
			t.Fatalf("DecodeRunJob's request %v, want %v", got, rest)
		}
	}

	whole := func(name string, b []byte) {
		t.Helper()
		got, input, err := DecodeRunJob(b, max)
		var want sessiongatev1.RunJobRequest
		if uerr := proto.Unmarshal(b, &want); uerr != nil {
			if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "error unmarshalling request") {
				t.Errorf("%s: DecodeRunJob's error %v for bytes proto refuses (%v)", name, err, uerr)
			}
			return
		}
		if err != nil || input != nil || !proto.Equal(got, &want) {
			t.Errorf("%s: DecodeRunJob = %v, %q, %v; want the request decoded whole: %v", name, got, input, err, &want)
		}
	}
	base, _ := proto.Marshal(&sessiongatev1.RunJobRequest{SessionId: "s", Agent: "echo"})
	inputField := func(v *structpb.Value) []byte {
		vb, _ := proto.Marshal(v)
		return protowire.AppendBytes(protowire.AppendTag(nil, runJobInputField, protowire.BytesType), vb)
	}
	a, _ := structpb.NewValue(map[string]any{"a": 1.0})
	c, _ := structpb.NewValue(map[string]any{"c": 2.0})
	whole("no input", base)
	whole("input twice (merged)", slices.Concat(base, inputField(a), inputField(c)))
	whole("input NaN", slices.Concat(base, inputField(structpb.NewNumberValue(math.NaN()))))
	whole("input of no kind", slices.Concat(base, inputField(&structpb.Value{})))
	whole("input past the cap", slices.Concat(base, inputField(structpb.NewStringValue(strings.Repeat("x", max)))))
	whole("input as a varint", slices.Concat(base, protowire.AppendVarint(protowire.AppendTag(nil, runJobInputField, protowire.VarintType), 1)))
	whole("truncated", slices.Concat(base, inputField(a))[:len(base)+3])
	whole("invalid UTF-8 after the input", slices.Concat(base, inputField(a), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("\xff"))))
}
