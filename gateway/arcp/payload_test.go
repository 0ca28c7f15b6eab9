package arcp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJobInfoLastEventSeqPresence: a listing entry without last_event_seq
// decodes to nil, never to 0 ("no events"): the takeover's refinement of an
// adopted job's history (upstream refineLocked) trusts only a value the
// runtime gave; a zero it gave is kept.
func TestJobInfoLastEventSeqPresence(t *testing.T) {
	var absent, zero, some JobInfo
	for _, c := range []struct {
		in  string
		out *JobInfo
	}{{`{"job_id":"j"}`, &absent}, {`{"job_id":"j","last_event_seq":0}`, &zero}, {`{"job_id":"j","last_event_seq":42}`, &some}} {
		if err := json.Unmarshal([]byte(c.in), c.out); err != nil {
			t.Fatal(err)
		}
	}
	if absent.LastEventSeq != nil {
		t.Fatalf("absent last_event_seq decoded to %d", *absent.LastEventSeq)
	}
	if zero.LastEventSeq == nil || *zero.LastEventSeq != 0 {
		t.Fatalf("last_event_seq 0 decoded to %v", zero.LastEventSeq)
	}
	if some.LastEventSeq == nil || *some.LastEventSeq != 42 {
		t.Fatalf("last_event_seq 42 decoded to %v", some.LastEventSeq)
	}
	v := uint64(0)
	b, _ := json.Marshal(JobInfo{JobID: "j", LastEventSeq: &v})
	if !strings.Contains(string(b), `"last_event_seq":0`) {
		t.Fatalf("a runtime's zero last_event_seq is not sent: %s", b)
	}
}
