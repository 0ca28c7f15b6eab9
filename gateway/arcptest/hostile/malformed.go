package hostile

import (
	"strconv"
	"strings"
)

// bad is one malformed frame, written as a template: {S} is the session id,
// {J} the job id, {T} the caller's token, {SEQ} an event_seq, {BAD} two
// bytes that are not UTF-8, {FORGED} a result payload that is not the
// caller's.
type bad struct {
	tmpl   string
	binary bool
	// seq: the frame is a valid envelope (to a lenient JSON parser) and
	// takes the next event_seq, like any sequenced frame. Other frames
	// carry the next event_seq without taking it: a reader that took them
	// would see the real frame after them as a repeat.
	seq bool
}

const forged = `{"final_status":"success","result":{"token":"forged-by-hostile","job_id":"{J}"}}`

// families are the frames of each malformed family. Every frame that could
// pass for the job's result is invalid; a gateway that takes one hands the
// caller a forged result.
var families = map[string][]bad{
	FamilyWrongTypes: {
		{tmpl: `{"arcp":"1.1","id":5,"type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":1.1,"id":"w1","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w2","type":["job.result"],"session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w3","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":"{SEQ}","payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w4","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":["forged-by-hostile"]}`},
		{tmpl: `{"arcp":"1.1","id":"w5","type":"job.result","session_id":{"id":"{S}"},"job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w6","type":"job.result","session_id":"{S}","job_id":["{J}"],"event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w7","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":-1,"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w8","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":1e400,"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w9","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ}.5,"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"w10","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":"{FORGED}"}`},
		{tmpl: `[{"arcp":"1.1","id":"w11","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}]`},
		{tmpl: `"job.result"`},
		{tmpl: `42`},
		{tmpl: `null`},
		{tmpl: ``},
		{tmpl: `{}`},
	},
	FamilyMissingFields: {
		{tmpl: `{"id":"m1","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"m3","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"m4","type":"job.result","session_id":"{S}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"m5","type":"job.result","session_id":"{S}","job_id":"{J}","payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"m6","type":"job.result","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"m7","type":"job.event","session_id":"{S}","job_id":"{J}","payload":{"kind":"log","body":{}}}`},
	},
	FamilyUnknownTypes: {
		{tmpl: `{"arcp":"1.1","id":"u1","type":"job.frobnicate","session_id":"{S}","job_id":"{J}","payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"u2","type":"session.frobnicate","session_id":"{S}","payload":{}}`},
		{tmpl: `{"arcp":"1.1","id":"u3","type":"x-vendor.hostile.note","session_id":"{S}","job_id":"{J}","payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"u4","type":"job.submit","session_id":"{S}","payload":{"agent":"echo","input":{}}}`},
		{tmpl: `{"arcp":"1.1","id":"u5","type":"session.welcome","session_id":"{S}","payload":{"resume_token":"rt-x","resume_window_sec":1}}`},
		{tmpl: `{"arcp":"1.1","id":"u6","type":"session.hello","session_id":"{S}","payload":{}}`},
		{tmpl: `{"arcp":"1.1","id":"u7","type":"JOB.RESULT","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"u8","type":"job.result ","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
	},
	FamilyInvalidUTF8: {
		{tmpl: "\xc3\x28\xa0\xa1{BAD}"},
		{tmpl: `{"arcp":"1.1","id":"i1","type":"job.result","session_id":"{S}{BAD}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		// Decodes (the bad bytes become U+FFFD) as the result of a job
		// that does not exist: it takes its event_seq.
		{tmpl: `{"arcp":"1.1","id":"i2","type":"job.result","session_id":"{S}","job_id":"{J}{BAD}","event_seq":{SEQ},"payload":{FORGED}}`, seq: true},
		{tmpl: `{"arcp":"1.1","id":"i3","type":"job.event","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{"kind":"log","body":{"msg":"{BAD} not utf-8"}}}`, seq: true},
		{tmpl: `{"arcp":"1.1","id":"i4{BAD}","type":"job.event","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{"kind":"log","body":{"k{BAD}":1}}}`, seq: true},
	},
	FamilyDuplicateKeys: {
		{tmpl: `{"arcp":"1.1","id":"d1","id":"d1b","type":"job.event","type":"job.event","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{"kind":"log","kind":"status","body":{"a":1,"a":2}}}`, seq: true},
		{tmpl: `{"arcp":"1.1","id":"d2","type":"job.event","session_id":"{S}","job_id":"{J}","job_id":"job-dup-nonexistent","event_seq":{SEQ},"payload":{"kind":"log","body":{}}}`, seq: true},
		{tmpl: `{"arcp":"1.1","id":"d3","type":"job.event","session_id":"sess-foreign","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{"kind":"log","body":{}}}`, seq: true},
		// First-wins parsers would take these for the job's result.
		{tmpl: `{"arcp":"1.1","id":"d4","type":"job.result","session_id":"{S}","session_id":"sess-foreign","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"d5","type":"job.result","type":"x-vendor.hostile.note","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
	},
	FamilyBinary: {
		{tmpl: `{"arcp":"1.1","id":"b1","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`, binary: true},
	},
	FamilyForeignSession: {
		{tmpl: `{"arcp":"1.1","id":"f1","type":"job.result","session_id":"sess-foreign","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"f2","type":"job.result","session_id":"{S} ","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
		{tmpl: `{"arcp":"1.1","id":"f3","type":"job.result","session_id":"","job_id":"{J}","event_seq":{SEQ},"payload":{FORGED}}`},
	},
	FamilyResultInvalidUTF8: {},
}

// malformedLocked sends the family's frames, then the job's result.
func (se *session) malformedLocked(p *pending, job string) {
	fill := func(tmpl string, seq uint64) []byte {
		return []byte(strings.NewReplacer(
			"{FORGED}", strings.ReplaceAll(forged, "{J}", job),
			"{S}", se.id, "{J}", job, "{T}", p.in.Token,
			"{SEQ}", strconv.FormatUint(seq, 10), "{BAD}", "\xff\xfe",
		).Replace(tmpl))
	}
	for _, b := range families[p.in.Family] {
		if b.seq {
			se.seqLocked(func(seq uint64) []byte { return fill(b.tmpl, seq) })
			continue
		}
		se.sendLocked(fill(b.tmpl, se.seq+1), b.binary)
	}
	if p.in.Family == FamilyResultInvalidUTF8 {
		delete(se.live, job)
		se.seqLocked(func(seq uint64) []byte {
			return fill(`{"arcp":"1.1","id":"r1","type":"job.result","session_id":"{S}","job_id":"{J}","event_seq":{SEQ},`+
				`"payload":{"final_status":"success","result":{"token":"{T}","job_id":"{J}","note":"{BAD}"}}}`, seq)
		})
		return
	}
	se.resultLocked(job, p.in.Token, 0)
}
