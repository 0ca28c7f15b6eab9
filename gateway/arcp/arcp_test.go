package arcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeValidation(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name    string
		in      string
		opts    DecodeOptions
		reason  Reason // "" = valid
		wantTyp string
	}{
		{"minimal", `{"arcp":"1.1","id":"a","type":"session.hello","payload":{}}`, DecodeOptions{}, "", TypeHello},
		{"unknown fields ignored", `{"arcp":"1.1","id":"a","type":"session.ping","session_id":"s","zzz":[1,2],"payload":{"nonce":"n","extra":true}}`, DecodeOptions{RequireSession: true}, "", TypePing},
		{"unknown type decodes", `{"arcp":"1.1","id":"a","type":"x.custom","session_id":"s"}`, DecodeOptions{RequireSession: true}, "", "x.custom"},
		{"wrong version", `{"arcp":"1.0","id":"a","type":"session.hello"}`, DecodeOptions{}, ReasonVersion, ""},
		{"missing version", `{"id":"a","type":"session.hello"}`, DecodeOptions{}, ReasonVersion, ""},
		{"missing id", `{"arcp":"1.1","type":"session.hello"}`, DecodeOptions{}, ReasonMissingID, ""},
		{"missing type", `{"arcp":"1.1","id":"a"}`, DecodeOptions{}, ReasonMissingType, ""},
		{"session required", `{"arcp":"1.1","id":"a","type":"session.ping"}`, DecodeOptions{RequireSession: true}, ReasonSession, ""},
		{"good trace", `{"arcp":"1.1","id":"a","type":"session.ping","trace_id":"` + trace + `"}`, DecodeOptions{}, "", TypePing},
		{"upper-case trace", `{"arcp":"1.1","id":"a","type":"session.ping","trace_id":"` + strings.ToUpper(trace) + `"}`, DecodeOptions{}, ReasonTraceID, ""},
		{"short trace", `{"arcp":"1.1","id":"a","type":"session.ping","trace_id":"abc"}`, DecodeOptions{}, ReasonTraceID, ""},
		{"zero trace", `{"arcp":"1.1","id":"a","type":"session.ping","trace_id":"00000000000000000000000000000000"}`, DecodeOptions{}, ReasonTraceID, ""},
		{"event without seq", `{"arcp":"1.1","id":"a","type":"job.event","session_id":"s","job_id":"j","payload":{"kind":"log"}}`, DecodeOptions{}, ReasonEventSeq, ""},
		{"event without job", `{"arcp":"1.1","id":"a","type":"job.event","session_id":"s","event_seq":3,"payload":{"kind":"log"}}`, DecodeOptions{}, ReasonJobID, ""},
		{"cancelled names job in payload", `{"arcp":"1.1","id":"a","type":"job.cancelled","session_id":"s","payload":{"job_id":"j"}}`, DecodeOptions{}, "", TypeCancelled},
		{"not json", `hello`, DecodeOptions{}, ReasonMalformed, ""},
		{"array", `[1,2]`, DecodeOptions{}, ReasonMalformed, ""},
		{"truncated", `{"arcp":"1.1","id":"a"`, DecodeOptions{}, ReasonMalformed, ""},
		{"payload not object", `{"arcp":"1.1","id":"a","type":"session.ping","payload":[1]}`, DecodeOptions{}, ReasonMalformed, ""},
		{"wrong field type", `{"arcp":"1.1","id":7,"type":"session.ping"}`, DecodeOptions{}, ReasonMalformed, ""},
		{"negative seq", `{"arcp":"1.1","id":"a","type":"job.event","job_id":"j","event_seq":-1}`, DecodeOptions{}, ReasonMalformed, ""},
		{"too large", `{"arcp":"1.1","id":"a","type":"session.ping"}`, DecodeOptions{MaxBytes: 10}, ReasonTooLarge, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Decode([]byte(tt.in), tt.opts)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if env.Type != tt.wantTyp {
					t.Fatalf("type = %q, want %q", env.Type, tt.wantTyp)
				}
				return
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *DecodeError(%s)", err, tt.reason)
			}
			if de.Reason != tt.reason {
				t.Fatalf("reason = %s, want %s (%v)", de.Reason, tt.reason, err)
			}
			if de.Code() != CodeInvalidRequest {
				t.Fatalf("code = %s", de.Code())
			}
		})
	}
}

func TestResultAcceptsResultOrOutput(t *testing.T) {
	for _, in := range []string{
		`{"final_status":"success","result":{"x":1}}`,
		`{"final_status":"success","output":{"x":1}}`,
	} {
		env := &Envelope{Type: TypeResult, Payload: json.RawMessage(in)}
		r, err := DecodePayload[Result](env)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Result) != `{"x":1}` || r.FinalStatus != StatusSuccess {
			t.Fatalf("%s decoded to %+v", in, r)
		}
	}
	// "result" wins when both are present; re-encoding uses "result".
	r, err := DecodePayload[Result](&Envelope{Payload: json.RawMessage(`{"result":1,"output":2}`)})
	if err != nil || string(r.Result) != "1" {
		t.Fatalf("got %+v, %v", r, err)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"result":1`) || strings.Contains(string(b), "output") {
		t.Fatalf("encoded %s", b)
	}
}

func TestAgentsStringsOrObjects(t *testing.T) {
	raw := `{"capabilities":{"agents":["echo",{"name":"sleep","versions":["1.0.0","2.0.0"],"default":"2.0.0"}]}}`
	w, err := DecodePayload[Welcome](&Envelope{Payload: json.RawMessage(raw)})
	if err != nil {
		t.Fatal(err)
	}
	got := w.Capabilities.Agents
	if len(got) != 2 || got[0].Name != "echo" || len(got[0].Versions) != 0 ||
		got[1].Name != "sleep" || got[1].Default != "2.0.0" || len(got[1].Versions) != 2 {
		t.Fatalf("agents = %+v", got)
	}
	if _, err := DecodePayload[Welcome](&Envelope{Type: TypeWelcome, Payload: json.RawMessage(`{"capabilities":{"agents":[7]}}`)}); err == nil {
		t.Fatal("numeric agent accepted")
	}
}

func TestCloseDialects(t *testing.T) {
	for _, typ := range []string{TypeClose, TypeClosed, TypeBye} {
		if !IsClose(typ) {
			t.Errorf("IsClose(%q) = false", typ)
		}
	}
	if IsClose(TypeError) || IsClose("session.closing") {
		t.Error("IsClose accepts a non-close type")
	}
}

func TestVendorEventPassesThrough(t *testing.T) {
	in := `{"arcp":"1.1","id":"a","type":"job.event","session_id":"s","job_id":"j","event_seq":9,` +
		`"payload":{"kind":"x-vendor.acme.trace","ts":"2026-01-01T00:00:00Z","body":{"span":[1,{"k":"v"}]}}}`
	env, err := Decode([]byte(in), DecodeOptions{RequireSession: true})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := DecodePayload[Event](env)
	if err != nil {
		t.Fatal(err)
	}
	if !IsVendorKind(ev.Kind) || string(ev.Body) != `{"span":[1,{"k":"v"}]}` || env.EventSeq != 9 {
		t.Fatalf("event = %+v seq %d", ev, env.EventSeq)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	env, err := New(TypeSubmit, "sess", Submit{Agent: "echo", Input: json.RawMessage(`{"a":1}`), IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b, DecodeOptions{RequireSession: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodePayload[Submit](back)
	if err != nil || s.Agent != "echo" || string(s.Input) != `{"a":1}` || s.IdempotencyKey != "k" || back.ID != env.ID {
		t.Fatalf("round trip: %+v %+v %v", back, s, err)
	}
	if _, err := Encode(&Envelope{ARCP: "1.0", ID: "x", Type: "t"}); err == nil {
		t.Fatal("Encode accepted version 1.0")
	}
	if _, err := Encode(&Envelope{ARCP: Version, Type: "t"}); err == nil {
		t.Fatal("Encode accepted an empty id")
	}
}

func TestNewIDUniqueAndV7(t *testing.T) {
	seen := make(map[string]bool, 10000)
	for range 10000 {
		id := NewID()
		if len(id) != 36 || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("id %q is not a UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestIntersectAndCodes(t *testing.T) {
	got := Intersect([]string{"heartbeat", "ack", "subscribe", "ack"}, []string{"ack", "heartbeat"})
	if strings.Join(got, ",") != "heartbeat,ack" {
		t.Fatalf("Intersect = %v", got)
	}
	if NormalizeCode("LEASE_EXPIRED") != CodeLeaseExpired || NormalizeCode("WHATEVER") != CodeInternalError {
		t.Fatal("NormalizeCode")
	}
}

// FuzzDecode checks that no input panics, and that whatever decodes
// re-encodes and decodes again to the same envelope.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"arcp":"1.1","id":"a","type":"job.event","session_id":"s","job_id":"j","event_seq":1,"payload":{"kind":"log","body":{}}}`))
	f.Add([]byte(`{"arcp":"1.1","id":"a","type":"job.result","session_id":"s","job_id":"j","event_seq":2,"payload":{"output":[1]}}`))
	f.Add([]byte(`{"arcp":"1.1","id":"a","type":"session.welcome","session_id":"s","payload":{"capabilities":{"agents":["e",{"name":"x"}]}}}`))
	f.Add([]byte(`{"arcp":"1.1"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Decode(data, DecodeOptions{MaxBytes: 1 << 20})
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// Payload decoders must not panic either.
		_, _ = DecodePayload[Welcome](env)
		_, _ = DecodePayload[Result](env)
		_, _ = DecodePayload[Event](env)
		_, _ = DecodePayload[Error](env)
		b, err := Encode(env)
		if err != nil {
			t.Fatalf("re-encode of a decoded envelope: %v", err)
		}
		again, err := Decode(b, DecodeOptions{})
		if err != nil {
			t.Fatalf("decode of re-encoded envelope: %v\n%s", err, b)
		}
		if again.ID != env.ID || again.Type != env.Type || again.EventSeq != env.EventSeq || again.SessionID != env.SessionID {
			t.Fatalf("round trip changed the envelope: %+v vs %+v", env, again)
		}
	})
}
