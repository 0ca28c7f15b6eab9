package wirecodec

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// agree checks parseValue against jsonValueSlow on raw: where the fast path
// answers, the slow one accepts the same text and gives the same Value.
// It returns whether the fast path answered.
func agree(t *testing.T, raw []byte) bool {
	t.Helper()
	fast, handled := parseValue(raw)
	if !handled {
		return false
	}
	slow, ok := jsonValueSlow(raw)
	if !ok {
		t.Fatalf("parseValue read %q, which JSONValue's other readers refuse", raw)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("parseValue(%q) = %v, the other readers %v", raw, fast, slow)
	}
	return true
}

// TestParseValue: the fast path reads what runtimes send, and leaves the
// unusual to the readers after it.
func TestParseValue(t *testing.T) {
	for _, s := range []string{
		`null`, `true`, `false`, `0`, `-0`, `-0.5e-3`, `1E+2`, `123456789012345678901234567890`, `1e308`, `5e-324`, `1e-400`,
		`""`, `"plain"`, `"é ✓ 𝄞"`, `"\" \\ \/ \b \f \n \r \t \u0000 \u00e9 \ud834\udd1e \uD834\uDD1E"`,
		`[]`, ` [ 1 , "a" , null , [ true ] ] `, `{}`, `{"b":1,"a":{"z":["x"]},"":"empty key","k\"ey":null}`,
		"\t\r\n{\"a\" :\n1}\n",
	} {
		if !agree(t, []byte(s)) {
			t.Errorf("parseValue left %q to the slow readers", s)
		}
	}
	// Each of these is refused or unusual: the fast path never answers.
	for _, s := range []string{
		``, ` `, `nul`, `tru`, `True`, `01`, `-`, `+1`, `.5`, `1.`, `1e`, `1e+`, `0x10`, `Infinity`, `NaN`, `1e400`, `-1e400`,
		`"unterminated`, `"ctl` + "\x01" + `"`, "\"bad\xffutf8\"", `"\x"`, `"\u12"`, `"\ud834"`, `"\udd1e"`, `"\ud834\u0041"`,
		`[1,]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1,"a":2}`, `[1] x`, `{"a":1}}`,
		strings.Repeat("[", maxFastDepth+2) + strings.Repeat("]", maxFastDepth+2),
	} {
		if _, handled := parseValue([]byte(s)); handled {
			t.Errorf("parseValue answered for %q", s)
		}
	}
	// Duplicate keys still come out as before: the last one wins.
	v, ok := JSONValue([]byte(`{"a":1,"a":2}`))
	if !ok || v.GetStructValue().GetFields()["a"].GetNumberValue() != 2 {
		t.Fatalf("duplicate keys read as %v %v", v, ok)
	}
}

// TestParseValueAgrees runs agree on random JSON texts, each also mutated
// by a byte inserted, dropped or changed. The seed is printed, and
// PARSE_SEED replays one.
func TestParseValueAgrees(t *testing.T) {
	rng := parseRand(t, 0x9e3779b97f4a7c15)
	handled, valid := 0, 0
	for range 3000 {
		doc := randomJSON(rng, 0)
		raw := []byte(doc)
		if json.Valid(raw) {
			valid++
		}
		if agree(t, raw) {
			handled++
		}
		for range 4 {
			agree(t, mutate(rng, raw))
		}
	}
	// The generator's texts are valid JSON with distinct keys, and its
	// surrogates come in pairs: the fast path must answer for them all.
	if valid != 3000 || handled != valid {
		t.Fatalf("%d of 3000 texts valid, %d read by the fast path", valid, handled)
	}
}

// parseRand is the random source of the payload tests: seeded at random,
// the seed printed, and PARSE_SEED replays one. stream tells the tests'
// sequences apart under one seed.
func parseRand(t *testing.T, stream uint64) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("PARSE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PARSE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("PARSE_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed^stream))
}

func randomJSON(rng *rand.Rand, depth int) string {
	k := rng.IntN(8)
	if depth >= 5 {
		k = rng.IntN(5)
	}
	ws := func() string { return []string{"", "", " ", "\n\t", "\r "}[rng.IntN(5)] }
	switch k {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[rng.IntN(2)]
	case 2, 3:
		return randomNumber(rng)
	case 4:
		return randomString(rng)
	case 5:
		n := rng.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = ws() + randomJSON(rng, depth+1) + ws()
		}
		return "[" + ws() + strings.Join(parts, ",") + "]"
	default:
		n := rng.IntN(5)
		seen := map[string]bool{}
		var parts []string
		for range n {
			key := randomString(rng)
			var s string
			if json.Unmarshal([]byte(key), &s) != nil || seen[s] {
				continue
			}
			seen[s] = true
			parts = append(parts, ws()+key+ws()+":"+ws()+randomJSON(rng, depth+1)+ws())
		}
		return "{" + ws() + strings.Join(parts, ",") + "}"
	}
}

func randomNumber(rng *rand.Rand) string {
	switch rng.IntN(5) {
	case 0:
		return strconv.Itoa(rng.IntN(2000) - 1000)
	case 1:
		return strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64)
	case 2:
		return strconv.FormatFloat(rng.Float64(), 'e', rng.IntN(17), 64)
	case 3:
		return fmt.Sprintf("%d.%de%+d", rng.IntN(100), rng.IntN(1000), rng.IntN(600)-300)
	default:
		return fmt.Sprintf("-0.%03dE%d", rng.IntN(1000), rng.IntN(30))
	}
}

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('"')
	for range rng.IntN(12) {
		switch rng.IntN(10) {
		case 0:
			b.WriteString([]string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`}[rng.IntN(8)])
		case 1:
			fmt.Fprintf(&b, `\u%04x`, rng.IntN(0xd800))
		case 2:
			fmt.Fprintf(&b, `\u%04X\u%04x`, 0xd800+rng.IntN(0x400), 0xdc00+rng.IntN(0x400))
		case 3:
			b.WriteString([]string{"é", "✓", "𝄞", "日本"}[rng.IntN(4)])
		default:
			c := byte('!' + rng.IntN(90)) // printable ASCII
			if c == '"' || c == '\\' {
				c = 'x'
			}
			b.WriteByte(c)
		}
	}
	return b.String() + `"`
}

// mutate returns raw with one byte inserted, dropped or replaced.
func mutate(rng *rand.Rand, raw []byte) []byte {
	out := append([]byte(nil), raw...)
	i := rng.IntN(len(out) + 1)
	pick := []byte(`{}[],:"\ 0123456789-+.eEtrufalsn` + "\x00\x1f\x7f\xc3\xff\xed\xa0")
	c := pick[rng.IntN(len(pick))]
	switch {
	case rng.IntN(3) == 0 || i == len(out):
		out = append(out[:i], append([]byte{c}, out[i:]...)...)
	case rng.IntN(2) == 0:
		out = append(out[:i], out[i+1:]...)
	default:
		out[i] = c
	}
	return out
}

// FuzzParseValue: wherever the fast path answers, the other readers accept
// the text and agree.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{`null`, `{"a":[1,2,{"b":"c"}]}`, `"\u0000\ud834\udd1e"`, `1e308`, `-0`, `[[[[]]]]`, `{"a":1,"a":2}`, `"\ud834"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { agree(t, data) })
}

func BenchmarkResultValue(b *testing.B) {
	raw := []byte(`{"hello":"world","n":3,"list":[1,"two",true]}`)
	b.Run("parseValue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseValue(raw); !ok {
				b.Fatal("not read")
			}
		}
	})
	// What RunJob's answer needs from the text: its protobuf bytes, by
	// way of the Value (the path before appendValueWire) or directly.
	b.Run("parseValue+Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, ok := parseValue(raw)
			if !ok {
				b.Fatal("not read")
			}
			if _, err := proto.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			if _, ok := appendValueWire(buf[:0], raw); !ok {
				b.Fatal("not read")
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := jsonValueSlow(raw); !ok {
				b.Fatal("not read")
			}
		}
	})
}
