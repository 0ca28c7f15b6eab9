package wirecodec

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// agreeWire checks appendValueWire against parseValue on raw: it answers
// exactly where parseValue does, its bytes decode to parseValue's Value,
// and it appends to what dst held (and leaves it as it came when it does
// not answer). It returns whether it answered.
func agreeWire(t *testing.T, raw []byte) bool {
	t.Helper()
	tail, handled := appendedTo(t, func() string { return fmt.Sprintf("appendValueWire(%q)", raw) },
		func(dst []byte) ([]byte, bool) { return appendValueWire(dst, raw) })
	want, wantHandled := parseValue(raw)
	if handled != wantHandled {
		t.Fatalf("appendValueWire(%q) handled %v, parseValue %v", raw, handled, wantHandled)
	}
	if !handled {
		return false
	}
	var got structpb.Value
	if err := proto.Unmarshal(tail, &got); err != nil {
		t.Fatalf("appendValueWire(%q): bytes that do not decode: %v", raw, err)
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("appendValueWire(%q) = %v, parseValue %v", raw, &got, want)
	}
	return true
}

// appendedTo runs an append-style writer on a dst that already holds bytes
// and checks that it kept them, and appended nothing when it refused. It
// returns what it appended and whether it answered; name (built only on a
// failure) names the call.
func appendedTo(t *testing.T, name func() string, write func(dst []byte) ([]byte, bool)) ([]byte, bool) {
	t.Helper()
	prefix := []byte("prefix")
	out, handled := write(bytes.Clone(prefix))
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("%s lost what dst held: %q", name(), out)
	}
	if !handled && len(out) != len(prefix) {
		t.Fatalf("%s refused but appended %q", name(), out[len(prefix):])
	}
	return out[len(prefix):], handled
}

// TestValueWire: the texts TestParseValue reads and refuses, and the
// shapes that exercise the writer's lengths and the duplicate check.
func TestValueWire(t *testing.T) {
	long := strings.Repeat("x", 200)
	many := func(n, dup int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":%d`, i, i)
		}
		if dup >= 0 {
			fmt.Fprintf(&b, `,"k%d":true`, dup)
		}
		return b.String() + "}"
	}
	for _, s := range []string{
		`null`, `true`, `false`, `0`, `-0`, `-0.5e-3`, `1E+2`, `123456789012345`, `-999999999999999`, `1234567890123456`,
		`123456789012345678901234567890`, `1e308`, `5e-324`, `1e-400`,
		`""`, `"plain"`, `"é ✓ 𝄞"`, `"\" \\ \/ \b \f \n \r \t \u0000 \u00e9 \ud834\udd1e \uD834\uDD1E"`,
		`[]`, ` [ 1 , "a" , null , [ true ] ] `, `{}`, `{"b":1,"a":{"z":["x"]},"":"empty key","k\"ey":null}`,
		"\t\r\n{\"a\" :\n1}\n",
		// Lengths of one, two and three varint bytes, nested.
		`"` + long + `"`, `{"a":"` + long + `"}`, `[[["` + strings.Repeat(long, 100) + `"]]]`,
		`{"k":{"k":{"k":[` + strings.Repeat(`"`+long+`",`, 90) + `1]}}}`,
		// Keys past the scan: distinct, and an escaped key equal to a plain one.
		many(maxKeyScan, -1), many(maxKeyScan+1, -1), many(100, -1), `{"a":1,"\u0062":2,"c":3}`,
		strings.Repeat("[", maxFastDepth) + strings.Repeat("]", maxFastDepth),
	} {
		if !agreeWire(t, []byte(s)) {
			t.Errorf("appendValueWire left %q to the Value path", s)
		}
	}
	for _, s := range []string{
		``, ` `, `nul`, `tru`, `True`, `01`, `-`, `+1`, `.5`, `1.`, `1e`, `1e+`, `0x10`, `Infinity`, `NaN`, `1e400`, `-1e400`,
		`"unterminated`, `"ctl` + "\x01" + `"`, "\"bad\xffutf8\"", `"\x"`, `"\u12"`, `"\ud834"`, `"\udd1e"`, `"\ud834\u0041"`,
		`[1,]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `[1] x`, `{"a":1}}`,
		many(maxKeyScan, 0), many(maxKeyScan+1, 3), many(100, 99), many(100, 50),
		strings.Repeat("[", maxFastDepth+2) + strings.Repeat("]", maxFastDepth+2),
	} {
		if agreeWire(t, []byte(s)) {
			t.Errorf("appendValueWire answered for %q", s)
		}
	}
	// Past maxWireJSON the Value path takes over, however plain the text.
	big := []byte(`"` + strings.Repeat("y", maxWireJSON) + `"`)
	if out, handled := appendValueWire(nil, big); handled || len(out) != 0 {
		t.Fatalf("appendValueWire answered for %d bytes of text (limit %d)", len(big), maxWireJSON)
	}
	if _, handled := parseValue(big); !handled {
		t.Fatal("parseValue refused the long string, so the limit test proves nothing")
	}
}

// TestValueWireAgrees runs agreeWire on random JSON texts (TestParseValue's
// generator), each also mutated by a byte inserted, dropped or changed.
// The seed is printed, and PARSE_SEED replays one.
func TestValueWireAgrees(t *testing.T) {
	rng := parseRand(t, 0x9e3779b97f4a7c15)
	handled := 0
	for range 3000 {
		raw := []byte(randomJSON(rng, 0))
		if agreeWire(t, raw) {
			handled++
		}
		for range 4 {
			agreeWire(t, mutate(rng, raw))
		}
	}
	if handled != 3000 {
		t.Fatalf("appendValueWire read %d of 3000 valid texts", handled)
	}
}

// FuzzValueWire: appendValueWire answers where parseValue does, with bytes
// that decode to its Value.
func FuzzValueWire(f *testing.F) {
	for _, s := range []string{`null`, `{"a":[1,2,{"b":"c"}]}`, `"\u0000\ud834\udd1e"`, `1e308`, `-0`, `[[[[]]]]`, `{"a":1,"a":2}`, `"\ud834"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { agreeWire(t, data) })
}

// TestRunJobWire: RunJob's wire answer decodes to the answer the Value path
// builds, for every combination of the optional fields, and an answer the
// transcoder leaves alone, or one protobuf would refuse to marshal, is
// refused rather than half written.
func TestRunJobWire(t *testing.T) {
	rng := parseRand(t, 7)
	leases := []*sessiongatev1.Lease{nil, {}, {Capabilities: map[string]*sessiongatev1.LeasePatterns{"fs.read": {Patterns: []string{"/tmp/**"}}}}}
	constraints := []*sessiongatev1.LeaseConstraints{nil, {ExpiresAt: timestamppb.New(time.Unix(1_900_000_000, 0))}}
	budgets := []map[string]float64{nil, {}, {"usd": 1.5}}
	exts := []map[string]*structpb.Value{nil, {"x-vendor.acme.k": structpb.NewStringValue("v")}}
	strs := []string{"", "job_1", "é ✓"}
	for i := range 600 {
		resp := &sessiongatev1.RunJobResponse{
			JobId: strs[rng.IntN(3)], Summary: strs[rng.IntN(3)], Agent: strs[rng.IntN(3)], TraceId: strs[rng.IntN(3)],
			ResultId: strs[rng.IntN(3)], ResultSize: []int64{0, 1, 1 << 40, -1}[rng.IntN(4)],
			Lease: leases[rng.IntN(3)], LeaseConstraints: constraints[rng.IntN(2)], Budget: budgets[rng.IntN(3)], Extensions: exts[rng.IntN(2)],
		}
		result := randomJSON(rng, 0)
		if i%50 == 0 {
			result = `{"big":"` + strings.Repeat("z", 2500*i/50) + `"}` // lengths up to three varint bytes
		}
		b, ok := AppendRunJobWire(resp, []byte(result))
		if !ok {
			t.Fatalf("AppendRunJobWire refused %v with %q", resp, clip(result))
		}
		var got sessiongatev1.RunJobResponse
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("result %q: %v", clip(result), err)
		}
		want := proto.Clone(resp).(*sessiongatev1.RunJobResponse)
		want.Result, want.RawResult = valueOrRaw([]byte(result))
		if !proto.Equal(&got, want) {
			t.Fatalf("answer %v with result %q: the wire answer decodes to %v", resp, clip(result), &got)
		}
		if (got.Lease != nil) != (resp.Lease != nil) {
			t.Fatalf("lease %v came back as %v", resp.Lease, got.Lease)
		}
	}
	base := &sessiongatev1.RunJobResponse{JobId: "job_1", Lease: &sessiongatev1.Lease{}}
	for _, result := range []string{`{"a":1,"a":2}`, "\"bad\xffutf8\"", `1e400`} {
		if b, ok := AppendRunJobWire(base, []byte(result)); ok {
			t.Errorf("AppendRunJobWire answered %x for %q, which has no Value of parseValue's", b, result)
		}
	}
	for _, bad := range []*sessiongatev1.RunJobResponse{
		{JobId: "\xff"}, {Summary: "a\xffb"}, {Agent: "\xc3"}, {TraceId: "\xed\xa0\x80"}, {ResultId: "\xff"},
		{Extensions: map[string]*structpb.Value{"x-vendor.k": structpb.NewStringValue("\xff")}},
	} {
		if b, ok := AppendRunJobWire(bad, []byte(`1`)); ok {
			t.Errorf("AppendRunJobWire answered %x for %v, which protobuf refuses to marshal", b, bad)
		}
		if _, err := proto.Marshal(bad); err == nil {
			t.Errorf("proto.Marshal accepts %v, so the case proves nothing", bad)
		}
	}
}

// TestRunJobFieldsKnown: appendRunJobFields writes every field of
// RunJobResponse but result; a new field must be added there first.
func TestRunJobFieldsKnown(t *testing.T) {
	var names []string
	fs := (&sessiongatev1.RunJobResponse{}).ProtoReflect().Descriptor().Fields()
	for i := range fs.Len() {
		names = append(names, string(fs.Get(i).Name()))
	}
	want := []string{"job_id", "result", "summary", "raw_result", "agent", "trace_id", "lease", "lease_constraints",
		"budget", "result_id", "result_size", "extensions"}
	if !slices.Equal(names, want) {
		t.Fatalf("RunJobResponse's fields are %q; appendRunJobFields writes %q", names, want)
	}
}

func BenchmarkAppendRunJobWire(b *testing.B) {
	resp := &sessiongatev1.RunJobResponse{JobId: "job_01JABCDEFGHJKMNPQRSTVWXYZ0", Agent: "echo@1.0.0",
		TraceId: "4bf92f3577b34da6a3ce929d0e0e4736", Lease: &sessiongatev1.Lease{}}
	result := []byte(`{"hello":"world"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := AppendRunJobWire(resp, result); !ok {
			b.Fatal("refused")
		}
	}
}
