package wirecodec

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// checkEquivalent asserts that AppendJSON's text decodes (with protojson)
// to the same Value, and is valid JSON.
func checkEquivalent(t *testing.T, v *structpb.Value) {
	t.Helper()
	got, err := AppendJSON(nil, v)
	if err != nil {
		t.Fatalf("AppendJSON(%v): %v", v, err)
	}
	if !json.Valid(got) {
		t.Fatalf("AppendJSON(%v) = %s: not valid JSON", v, got)
	}
	back := &structpb.Value{}
	if err := protojson.Unmarshal(got, back); err != nil {
		t.Fatalf("protojson cannot read %s: %v", got, err)
	}
	if !proto.Equal(back, v) {
		t.Fatalf("round trip changed the value: %v → %s → %v", v, got, back)
	}
}

func TestAppendJSON(t *testing.T) {
	for _, in := range []any{
		nil, true, false, 0.0, -0.5, 3.0, 1e21, 1e-7, 123456789012345.0, math.MaxFloat64, math.SmallestNonzeroFloat64,
		"", "plain", "quote\" backslash\\ nl\n cr\r tab\t bell\a nul\x00 del\x7f", "é ✓ 𝄞", "<script>&",
		[]any{}, []any{1.0, "a", nil, []any{true}},
		map[string]any{}, map[string]any{"b": 1.0, "a": map[string]any{"z": []any{"x"}}, "": "empty key", "k\"ey": nil},
	} {
		v, err := structpb.NewValue(in)
		if err != nil {
			t.Fatal(err)
		}
		checkEquivalent(t, v)
	}
	// No kind set: an error naming where, never null.
	for _, tc := range []struct {
		v    *structpb.Value
		path string
	}{
		{&structpb.Value{}, ""},
		{structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": {}}}), `.struct_value.fields["a"]`},
		{structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNullValue(), nil}}), `.list_value.values[1]`},
		{structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"x": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{{}}})}}), `.struct_value.fields["x"].list_value.values[0]`},
	} {
		_, err := AppendJSON(nil, tc.v)
		var ve *ValueError
		if !errors.As(err, &ve) || !ve.NoKind || ve.Path != tc.path {
			t.Errorf("AppendJSON(%v) = %v, want no-kind error at %q", tc.v, err, tc.path)
		}
	}
	if got, _ := AppendJSON(nil, structpb.NewStringValue("bad\xffutf8")); string(got) != "\"bad\ufffdutf8\"" {
		t.Fatalf("invalid UTF-8 encoded as %q", got)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := AppendJSON(nil, structpb.NewNumberValue(bad)); err == nil {
			t.Errorf("%v encoded without error", bad)
		}
	}
	// Keys are sorted: equal values encode equally.
	a, _ := AppendJSON(nil, mustNew(t, map[string]any{"x": 1.0, "y": 2.0, "a": 3.0}))
	if string(a) != `{"a":3,"x":1,"y":2}` {
		t.Fatalf("got %s", a)
	}
}

func mustNew(t *testing.T, v any) *structpb.Value {
	t.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// FuzzAppendJSON: any JSON value protojson accepts encodes back to an
// equivalent value.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`null`, `{"a":[1,2,{"b":"c"}]}`, `"\u0000\ud834\udd1e"`, `1e308`, `-0`, `[[[[]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := &structpb.Value{}
		if err := protojson.Unmarshal(data, v); err != nil {
			return
		}
		checkEquivalent(t, v)
	})
}

func BenchmarkInputJSON(b *testing.B) {
	v, _ := structpb.NewValue(map[string]any{"hello": "world", "n": 3.0, "list": []any{1.0, "two", true}})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := protojson.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendJSON(nil, v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAppendJSONMax: the cap is on the JSON text, exact at its boundary,
// and reported as ErrTooLong from any depth, before the rest is made.
func TestAppendJSONMax(t *testing.T) {
	for _, in := range []any{
		"a string of some length",
		[]any{1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0},
		map[string]any{"a": []any{map[string]any{"b": "deep down"}}, "c": 1.0},
	} {
		v := mustNew(t, in)
		full, err := AppendJSON(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := AppendJSONMax(nil, v, len(full)); err != nil || string(got) != string(full) {
			t.Fatalf("%s at a cap of its own length: %q %v", full, got, err)
		}
		// Containers and strings are checked as they are made; a cap one
		// short of the text is refused at the latest at its end.
		if got, err := AppendJSONMax(nil, v, len(full)-1); err != ErrTooLong && len(got) <= len(full)-1 {
			t.Fatalf("%s at a cap one short: %q %v", full, got, err)
		}
		if _, err := AppendJSONMax(nil, v, 3); err != ErrTooLong {
			t.Fatalf("%s at a cap of 3: %v, want ErrTooLong", full, err)
		}
	}
	// A value with no kind deep inside still names its path.
	bad := structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNullValue(), {}}})
	var ve *ValueError
	if _, err := AppendJSONMax(nil, bad, 1<<20); !errors.As(err, &ve) || ve.Path != ".list_value.values[1]" {
		t.Fatalf("no-kind error under a cap: %v", err)
	}
}
