package correlate

// Rejoin keeps exactly-once, in-order delivery for an observed job (one
// attached with job.subscribe{history, from_event_seq: F}) across its
// re-attachment after a resume. The runtime renumbers an observed job's
// envelopes in this session's event_seq, so the cursor of a re-attachment
// can only be F, the caller's, in the submitting session's numbering: the
// runtime then replays every envelope of the job after F, the ones already
// delivered first. Rejoin drops those. Sans-IO: the connection feeds it the
// job's sequenced envelopes in order, each with its envelope id, and
// delivers what it lets through, in the order given. T is the connection's
// envelope. The rules are in doc.go ("Re-attaching an observed job").
type Rejoin[T any] struct {
	n      uint64 // envelopes delivered since the subscription
	skip   uint64 // envelopes of the re-attachment's replay still to drop
	active bool   // re-attached at least once: duplicates by id are dropped
	open   bool   // a re-attachment's job.subscribed has not arrived yet
	decide bool   // answered (replayed), envelopes held: the next one tells what they are
	held   []heldEnv[T]

	ids   map[string]struct{}
	order []string
	max   int

	broken string // disables one rule; only tests set it
}

type heldEnv[T any] struct {
	id string
	v  T
}

// NewRejoin returns a Rejoin remembering the ids of the latest maxIDs
// envelopes delivered (1024 when zero or less).
func NewRejoin[T any](maxIDs int) *Rejoin[T] {
	if maxIDs <= 0 {
		maxIDs = 1024
	}
	return &Rejoin[T]{max: maxIDs}
}

// Delivered returns the envelopes delivered since the subscription.
func (f *Rejoin[T]) Delivered() uint64 { return f.n }

// Held returns the envelopes held until the re-attachment's answer.
func (f *Rejoin[T]) Held() int { return len(f.held) }

// Reattaching records that job.subscribe{history, from_event_seq: F} was
// sent again: the first Delivered envelopes of the job that follow are a
// replay of what was delivered. Until job.subscribed answers it, the job's
// envelopes are held: which of them are replay depends on the answer.
func (f *Rejoin[T]) Reattaching() {
	f.active, f.open = true, true
	f.skip = f.n
	if f.broken == "rejoin-no-skip" {
		f.skip = 0
	}
}

// Subscribed records the runtime's job.subscribed for the re-attachment
// and returns the held envelopes to deliver now. replayed false says that
// no history was or will be sent (a runtime whose subscription survived
// the resume answers so: the reference's): the held envelopes are all new.
// Otherwise the held envelopes are either the replay (the TS SDK replays
// before it answers) or live ones of a subscription that survived (the Go
// SDK replays after it answers, under the envelopes' own ids). The next
// envelope tells: one already delivered (by id) is the Go SDK's replay
// beginning, so the held ones were live; anything else, or Flush, means
// they were the replay.
func (f *Rejoin[T]) Subscribed(replayed bool) []T {
	if !f.open {
		return nil
	}
	f.open = false
	if !replayed {
		f.skip = 0
	}
	if len(f.held) > 0 && f.skip > 0 && f.broken != "rejoin-held-are-replay" {
		f.decide = true
		return nil
	}
	return f.release(false)
}

// Flush ends a wait for the envelope after job.subscribed (Subscribed):
// the held envelopes were the replay. It returns those to deliver.
func (f *Rejoin[T]) Flush() []T {
	if !f.decide {
		return nil
	}
	f.decide = false
	return f.release(false)
}

// Pending reports whether Flush has something to decide.
func (f *Rejoin[T]) Pending() bool { return f.decide }

// release delivers the held envelopes, as live ones when live (none of
// them is replay), else through the replay's count.
func (f *Rejoin[T]) release(live bool) []T {
	hs := f.held
	f.held = nil
	var out []T
	for _, h := range hs {
		if live {
			f.record(h.id)
			out = append(out, h.v)
			continue
		}
		if f.admit(h.id) {
			out = append(out, h.v)
		}
	}
	return out
}

// Dropped records that the transport dropped and reports whether the seam
// is still known. It is not while a re-attachment is unfinished (its
// job.subscribed not received, or its replay not consumed): whether the
// rest of that replay comes with the resume depends on the runtime (the
// TS SDK and the reference put it in the session's stream, the Go SDK
// does not), so what follows can no longer be told apart from what was
// delivered. The connection then ends the job for its callers with a
// definite error rather than deliver twice or lose envelopes.
func (f *Rejoin[T]) Dropped() bool {
	if f.broken == "rejoin-trusts-drop" {
		f.open, f.held = false, nil
		return true
	}
	return !f.open && !f.decide && f.skip == 0
}

// Admit takes the job's next envelope, of envelope id id, and returns the
// envelopes to deliver now, in order.
func (f *Rejoin[T]) Admit(id string, v T) []T {
	if f.open && f.broken != "rejoin-no-hold" {
		f.held = append(f.held, heldEnv[T]{id, v})
		return nil
	}
	var out []T
	if f.decide {
		f.decide = false
		_, known := f.ids[id]
		out = f.release(known && id != "")
	}
	if f.admit(id) {
		out = append(out, v)
	}
	return out
}

// admit decides for one envelope:
//
//   - an id already delivered (after a re-attachment) is a duplicate: the
//     Go SDK's replay keeps envelope ids, and a second subscription there
//     sends every live envelope twice under one id. It counts against the
//     replay still to drop;
//   - otherwise, while the replay still has envelopes to drop, it is one
//     of them (the TS SDK's replay gives new ids);
//   - otherwise it is new.
func (f *Rejoin[T]) admit(id string) bool {
	if f.active && id != "" && f.broken != "rejoin-no-ids" {
		if _, dup := f.ids[id]; dup {
			if f.skip > 0 {
				f.skip--
			}
			return false
		}
	}
	if f.skip > 0 {
		f.skip--
		return false
	}
	f.record(id)
	return true
}

func (f *Rejoin[T]) record(id string) {
	f.n++
	if id != "" {
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
}
