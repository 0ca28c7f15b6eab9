package correlate

// Rejoin keeps exactly-once, in-order delivery for an observed job (one
// attached with job.subscribe{history, from_event_seq: F}) across its
// re-attachment after a resume. The runtime renumbers an observed job's
// envelopes in this session's event_seq, so the cursor of a re-attachment
// can only be F, the caller's, in the submitting session's numbering: the
// runtime then replays the job's envelopes after F that its buffer still
// holds (all of them, or only a tail when acknowledgements let it trim),
// the ones already delivered first. Rejoin finds where that replay starts
// among the envelopes delivered, by content, and drops it up to the last
// one delivered. Sans-IO: the connection feeds it the job's sequenced
// envelopes in order, each with its envelope id and a digest of its type
// and payload, and delivers those Admit lets through. The rules are in
// doc.go ("Re-attaching an observed job").
type Rejoin struct {
	active bool // re-attached at least once: duplicates by id are dropped

	// What was delivered: the latest max envelopes' digests (sums) and
	// ids; n is how many were delivered in all.
	n     uint64
	sums  []uint64
	ids   map[string]struct{}
	order []string
	max   int

	// The alignment of a replay in progress: the positions (absolute
	// indexes) among the delivered envelopes that the replay may be at.
	aligning bool
	cands    []uint64

	ctr RejoinCounters

	broken string // disables one rule; only tests set it
}

// RejoinCounters count what Rejoin did.
type RejoinCounters struct {
	Replayed uint64 // envelopes dropped as a replay of delivered ones (by content)
	DupIDs   uint64 // envelopes dropped as delivered under the same id
	Diverged uint64 // replays that stopped matching what was delivered before reaching its end
}

// NewRejoin returns a Rejoin remembering at least the latest maxKept
// envelopes delivered (1024 when zero or less); a replay that starts before
// them is aligned from its first envelope that is kept.
func NewRejoin(maxKept int) *Rejoin {
	if maxKept <= 0 {
		maxKept = 1024
	}
	return &Rejoin{max: maxKept}
}

// Delivered returns the envelopes delivered since the subscription.
func (f *Rejoin) Delivered() uint64 { return f.n }

// Counters returns the counts so far.
func (f *Rejoin) Counters() RejoinCounters { return f.ctr }

// Reattaching records that job.subscribe{history, from_event_seq: F} was
// sent again: the envelopes of the job that follow may begin with a replay
// of delivered ones.
func (f *Rejoin) Reattaching() {
	f.active = true
	if f.n > 0 && f.broken != "rejoin-no-align" {
		f.aligning, f.cands = true, nil
	}
}

// Subscribed records the runtime's job.subscribed for the re-attachment:
// replayed false says that no history was or will be sent (a runtime whose
// subscription survived the resume answers so: the reference's), so
// nothing that follows is a replay. A replay sent before the answer (the
// TS SDK's) was aligned already.
func (f *Rejoin) Subscribed(replayed bool) {
	if !replayed && f.broken != "rejoin-ignores-replayed" {
		f.aligning, f.cands = false, nil
	}
}

// Admit reports whether the job's next envelope, of envelope id id and
// digest sum, is delivered:
//
//   - an id already delivered (after a re-attachment) is a duplicate: the
//     Go SDK's replay keeps envelope ids, and a second subscription there
//     sends every live envelope twice under one id;
//   - while a replay is being aligned: the first envelope's digest is
//     looked up among the delivered ones (every position it matches is a
//     candidate start); each next envelope keeps the candidates it
//     continues. While a candidate lives, the envelope was delivered
//     before and is dropped. Once no candidate lives, the envelope is new
//     (a candidate reached the last delivered envelope: the replay caught
//     up; none did: the replay diverged, counted, and delivery goes on);
//   - otherwise it is new.
func (f *Rejoin) Admit(id string, sum uint64) bool {
	if f.active && id != "" && f.broken != "rejoin-no-ids" {
		if _, dup := f.ids[id]; dup {
			f.ctr.DupIDs++
			return false
		}
	}
	if f.aligning {
		if f.align(sum) {
			f.ctr.Replayed++
			return false
		}
	}
	f.record(id, sum)
	return true
}

// align advances the alignment by one envelope of digest sum and reports
// whether it belongs to the replay.
func (f *Rejoin) align(sum uint64) bool {
	first := f.n - uint64(len(f.sums)) // absolute index of sums[0]
	if f.cands == nil {
		for i, s := range f.sums {
			if s == sum {
				f.cands = append(f.cands, first+uint64(i))
			}
		}
		if len(f.cands) > 0 {
			return true
		}
		f.aligning = false // not a replay of anything kept: new
		return false
	}
	live, caughtUp := f.cands[:0], false
	for _, c := range f.cands {
		next := c + 1
		if next >= f.n {
			caughtUp = true
			continue
		}
		if next >= first && f.sums[next-first] == sum {
			live = append(live, next)
		}
	}
	f.cands = live
	if len(live) > 0 {
		return true
	}
	if !caughtUp {
		f.ctr.Diverged++
	}
	f.aligning = false
	return false
}

func (f *Rejoin) record(id string, sum uint64) {
	f.n++
	f.sums = append(f.sums, sum)
	if len(f.sums) > 2*f.max {
		f.sums = append(f.sums[:0], f.sums[len(f.sums)-f.max:]...)
	}
	if id == "" {
		return
	}
	if f.ids == nil {
		f.ids = make(map[string]struct{})
	}
	f.ids[id] = struct{}{}
	f.order = append(f.order, id)
	if len(f.order) > f.max {
		delete(f.ids, f.order[0])
		f.order[0] = ""
		f.order = f.order[1:]
	}
}
