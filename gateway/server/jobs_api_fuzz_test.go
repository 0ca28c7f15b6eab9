package server

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Native fuzz tests for the parsers of the ARCP job surface: the ListJobs
// filter, the page tokens and the caller's traceparent. Seeds live in
// testdata/fuzz/<FuzzName>; run one with
//
//	go test -run '^$' -fuzz FuzzParseJobFilter -fuzztime 60s ./gateway/server/

// formatJobFilter renders f in the canonical form of the filter grammar.
func formatJobFilter(f jobFilter) string {
	var terms []string
	if f.states != "" {
		var names []string
		for _, st := range strings.Split(f.states, ",") {
			for name, arcpName := range stateNames {
				if arcpName == st {
					names = append(names, "state = "+name)
				}
			}
		}
		if len(names) == 1 {
			terms = append(terms, names[0])
		} else {
			terms = append(terms, "("+strings.Join(names, " OR ")+")")
		}
	}
	if f.agent != "" {
		terms = append(terms, `agent = "`+f.agent+`"`)
	}
	if f.createdAfter != "" {
		terms = append(terms, `create_time > "`+f.createdAfter+`"`)
	}
	return strings.Join(terms, " AND ")
}

// FuzzParseJobFilter: the parser never panics; an accepted filter names only
// known ARCP statuses, an agent without quotes and an RFC 3339 UTC time;
// its canonical rendering parses back to the same filter, and is itself a
// fixed point.
func FuzzParseJobFilter(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseJobFilter(s)
		if err != nil {
			return
		}
		if got.states != "" {
			for _, st := range strings.Split(got.states, ",") {
				known := false
				for _, v := range stateNames {
					known = known || v == st
				}
				if !known {
					t.Fatalf("filter %q: status %q is not an ARCP status", s, st)
				}
			}
		}
		if strings.Contains(got.agent, `"`) {
			t.Fatalf("filter %q: agent %q keeps a quote", s, got.agent)
		}
		if got.createdAfter != "" {
			ts, err := time.Parse(time.RFC3339Nano, got.createdAfter)
			if err != nil {
				t.Fatalf("filter %q: created_after %q sent upstream is not RFC 3339: %v", s, got.createdAfter, err)
			}
			if ts.Location() != time.UTC || ts.UTC().Format(time.RFC3339Nano) != got.createdAfter {
				t.Fatalf("filter %q: created_after %q is not canonical UTC", s, got.createdAfter)
			}
		}
		canon := formatJobFilter(got)
		again, err := parseJobFilter(canon)
		if err != nil {
			t.Fatalf("filter %q parsed as %+v, whose canonical form %q is refused: %v", s, got, canon, err)
		}
		if again != got {
			t.Fatalf("filter %q parsed as %+v; its canonical form %q parses as %+v", s, got, canon, again)
		}
		if c2 := formatJobFilter(again); c2 != canon {
			t.Fatalf("canonical form not a fixed point: %q then %q", canon, c2)
		}
	})
}

// FuzzPageToken: opening never panics; a token opens for the caller,
// session and filter it was sealed with and returns its cursor; for any
// other caller, session or filter it is refused; and any string that opens
// is exactly what the encoder produces for that caller, session, filter and
// cursor (no other spelling of a token is accepted). The fuzzer edits a
// freshly sealed token at pos with op (0 insert, 1 replace, 2 delete,
// 3 xor) and byte b, and also tries raw as a token.
func FuzzPageToken(f *testing.F) {
	f.Fuzz(func(t *testing.T, caller, session, filter, cursor string, pos uint16, op, b byte, raw string) {
		// Opening arbitrary text never panics, and what opens is canonical.
		if c, err := openPageToken(raw, caller, session, filter); err == nil {
			if want := sealPageToken(caller, session, filter, c); raw != want {
				t.Fatalf("token %q opened (cursor %q) but the encoder spells it %q", raw, c, want)
			}
		}
		tok := sealPageToken(caller, session, filter, cursor)
		c, err := openPageToken(tok, caller, session, filter)
		if err != nil || c != cursor {
			t.Fatalf("sealed token for (%q, %q, %q, %q) opens as %q, %v", caller, session, filter, cursor, c, err)
		}
		if _, err := openPageToken(tok, caller+"x", session, filter); err == nil {
			t.Fatal("token opened for another caller")
		}
		if _, err := openPageToken(tok, caller, session+"x", filter); err == nil {
			t.Fatal("token opened for another session")
		}
		if _, err := openPageToken(tok, caller, session, filter+" "); err == nil {
			t.Fatal("token opened with another filter")
		}
		// An edited token either is refused or is the same token.
		bs := []byte(tok)
		i := int(pos) % (len(bs) + 1)
		switch op % 4 {
		case 0:
			bs = slices.Insert(bs, i, b)
		case 1:
			if i < len(bs) {
				bs[i] = b
			}
		case 2:
			if i < len(bs) {
				bs = slices.Delete(bs, i, i+1)
			}
		case 3:
			if i < len(bs) {
				bs[i] ^= b
			}
		}
		if c, err := openPageToken(string(bs), caller, session, filter); err == nil && !bytes.Equal(bs, []byte(tok)) {
			t.Fatalf("edited token %q (from %q) opened, cursor %q", bs, tok, c)
		}
	})
}

// traceparentRE is W3C Trace Context's traceparent, read independently of
// parseTraceparent: version, trace id, parent id, flags, and for versions
// after 00 optional further fields after a '-'.
var traceparentRE = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$`)

func refTraceparent(h string) (string, bool) {
	m := traceparentRE.FindStringSubmatch(strings.Trim(h, " \t"))
	if m == nil || m[1] == "ff" || (m[1] == "00" && m[5] != "") ||
		m[2] == strings.Repeat("0", 32) || m[3] == strings.Repeat("0", 16) {
		return "", false
	}
	return m[2], true
}

// FuzzParseTraceparent: never panics; an accepted header's trace id is 32
// lowercase hex characters, not all zero, and the second field of the
// header; the parser agrees with the reference reading above on every
// header made of printable ASCII (what gRPC metadata values may hold).
func FuzzParseTraceparent(f *testing.F) {
	f.Fuzz(func(t *testing.T, h string) {
		id, ok := parseTraceparent(h)
		if ok {
			if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || strings.Trim(id, "0") == "" {
				t.Fatalf("traceparent %q accepted with trace id %q", h, id)
			}
			if !strings.Contains(h, "-"+id+"-") {
				t.Fatalf("traceparent %q: trace id %q is not its second field", h, id)
			}
		} else if id != "" {
			t.Fatalf("traceparent %q refused but returned %q", h, id)
		}
		if !printableASCII(h) {
			return
		}
		want, wantOK := refTraceparent(h)
		if ok != wantOK || id != want {
			t.Fatalf("traceparent %q: parser says (%q, %v), W3C reading (%q, %v)", h, id, ok, want, wantOK)
		}
	})
}

func printableASCII(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 && s[i] != '\t' || s[i] > 0x7e {
			return false
		}
	}
	return true
}
