package arcpruntime

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

func TestEncodeSequencedDecodes(t *testing.T) {
	payload, _ := json.Marshal(arcp.Event{Kind: "log", Body: json.RawMessage(`{"m":"\u2028 \"q\""}`)})
	for _, trace := range []string{"", "4bf92f3577b34da6a3ce929d0e0e4736"} {
		data := encodeSequenced("rs_1", arcp.TypeEvent, "job_1", trace, 42, payload, []byte(`{"x-vendor.acme.k":1}`))
		env, err := arcp.Decode(data, arcp.DecodeOptions{RequireSession: true})
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if env.SessionID != "rs_1" || env.JobID != "job_1" || env.EventSeq != 42 || env.TraceID != trace || env.Type != arcp.TypeEvent || string(env.Extensions["x-vendor.acme.k"]) != "1" {
			t.Errorf("decoded %+v", env)
		}
		ev, err := arcp.DecodePayload[arcp.Event](env)
		if err != nil || ev.Kind != "log" {
			t.Errorf("payload %+v %v", ev, err)
		}
	}
}

func TestTraceIDPropagates(t *testing.T) {
	srv := NewTestServer(t, Options{})
	c := open(t, srv)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	env, _ := arcp.New(arcp.TypeSubmit, c.sid, arcp.Submit{Agent: "sleep", Input: json.RawMessage(`{"ms":0}`)})
	env.TraceID = trace
	data, _ := arcp.Encode(env)
	c.sendRaw(data)
	acc := c.expect(arcp.TypeAccepted)
	if a, _ := arcp.DecodePayload[arcp.Accepted](acc); a.TraceID != trace {
		t.Errorf("accepted trace_id %q", a.TraceID)
	}
	var seq uint64
	for _, e := range c.untilTerminal(acc.JobID, &seq) {
		if e.TraceID != trace {
			t.Errorf("%s without trace_id", e.Type)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {time.Millisecond, 1}, {200 * time.Millisecond, 1}, {time.Second, 1},
		{1500 * time.Millisecond, 2}, {30 * time.Second, 30}, {600 * time.Second, 600},
	} {
		if got := ceilSeconds(tc.d); got != tc.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestLookupAgent(t *testing.T) {
	for _, tc := range []struct{ spec, name, code string }{
		{"echo", "echo", ""},
		{"echo@1.0.0", "echo", ""},
		{"echo@", "", arcp.CodeAgentVersionNotAvailable},
		{"echo@1.0.1", "", arcp.CodeAgentVersionNotAvailable},
		{"Echo", "", arcp.CodeAgentNotAvailable},
		{"@1.0.0", "", arcp.CodeAgentNotAvailable},
		{"nope@1.0.0", "", arcp.CodeAgentNotAvailable},
	} {
		a, _, code := lookupAgent(defaultAgents, tc.spec)
		if code != tc.code || (a != nil) != (tc.name != "") || a != nil && a.name != tc.name {
			t.Errorf("lookupAgent(%q) = %v, %q", tc.spec, a, code)
		}
	}
}

// FuzzAgentInput checks that input validation never panics and that every
// accepted input runs to an outcome.
func FuzzAgentInput(f *testing.F) {
	for _, seed := range []string{`{"ms":0}`, `{"count":3,"interval_ms":0}`, `{"code":"TIMEOUT","message":"m"}`, `null`, `[]`, `{"ms":1e3}`, `{"count":-0}`} {
		for i := range defaultAgents {
			f.Add(i, []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which int, input []byte) {
		if which < 0 || !json.Valid(input) {
			return
		}
		a := defaultAgents[which%len(defaultAgents)]
		run, err := a.prepare(input, agentEnv{progress: true, resultChunk: true, dialect: &DialectReference})
		if err != nil {
			return
		}
		if a.name == "sleep" || a.name == "stream" || a.name == "chunked" {
			return // accepted, but may take long; validation is what is fuzzed
		}
		io := jobIO{emit: func(string, any) error { return nil }, pace: func(context.Context) error { return nil }, streamed: func(streamedResult) {}}
		if _, err := run(t.Context(), io); err != nil && a.name != "fail" {
			t.Errorf("%s(%s): %v", a.name, input, err)
		}
	})
}

func FuzzSniffID(f *testing.F) {
	for _, seed := range []string{`{"id":"x"}`, `{"id":7}`, `}{`, `{"arcp":1,"id":"y"}`, `"id"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if id := sniffID(data); len(id) > 256 {
			t.Errorf("sniffID returned %d bytes", len(id))
		}
	})
}

func TestInputDigest(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[2,{"c":null}]}`, "{ \"b\" : [2, {\"c\":null}],\n \"a\":1 }", true},
		{`"x"`, `"x"`, true},
		{`1`, `1.0`, false},
		{`[1,2]`, `[2,1]`, false},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`null`, `null`, true},
	} {
		if got := inputDigest(json.RawMessage(tc.a)) == inputDigest(json.RawMessage(tc.b)); got != tc.same {
			t.Errorf("%s vs %s: same = %v", tc.a, tc.b, got)
		}
	}
}
