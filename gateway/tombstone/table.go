package tombstone

// table is an open-addressing hash table from a 64-bit key hash to an expiry
// tick, with linear probing and backward-shift deletion (no deletion markers).
//
// A slot's home is the top bits of the hash, so the table is ordered by hash
// prefix: doubling it maps old slot i to new slots 2i and 2i+1, and growth is
// a streaming copy rather than a random scatter. Lookups cost one cache miss
// in the common case (16-byte slots, short probe runs at load ≤ 3/4).
//
// Hash 0 marks an empty slot; fixHash maps a real hash of 0 to 1.
type table struct {
	slots []slot
	shift uint // 64 - log2(len(slots))
	n     int
}

type slot struct {
	h   uint64
	exp int64
}

const minTableLog = 4

func fixHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

func newTable(log uint) table {
	return table{slots: make([]slot, 1<<log), shift: 64 - log}
}

func (t *table) mask() uint64 { return uint64(len(t.slots) - 1) }

func (t *table) home(h uint64) uint64 { return h >> t.shift }

// get returns the expiry of h.
func (t *table) get(h uint64) (int64, bool) {
	if t.slots == nil {
		return 0, false
	}
	m := t.mask()
	for i := t.home(h); ; i = (i + 1) & m {
		s := &t.slots[i]
		if s.h == h {
			return s.exp, true
		}
		if s.h == 0 {
			return 0, false
		}
	}
}

// slotOf returns h's slot, or nil.
func (t *table) slotOf(h uint64) *slot {
	if t.slots == nil {
		return nil
	}
	m := t.mask()
	for i := t.home(h); ; i = (i + 1) & m {
		s := &t.slots[i]
		if s.h == h {
			return s
		}
		if s.h == 0 {
			return nil
		}
	}
}

// insertMax stores h → exp in one probe when h is absent (inserted), or
// raises h's expiry to exp when exp is later (extended).
func (t *table) insertMax(h uint64, exp int64) (inserted, extended bool) {
	if t.slots == nil {
		*t = newTable(minTableLog)
	}
	m := t.mask()
	for i := t.home(h); ; i = (i + 1) & m {
		s := &t.slots[i]
		if s.h == h {
			if exp > s.exp {
				s.exp = exp
				return false, true
			}
			return false, false
		}
		if s.h == 0 {
			s.h, s.exp = h, exp
			t.n++
			if t.n*4 > len(t.slots)*3 {
				t.grow()
			}
			return true, false
		}
	}
}

// del removes h and reports whether it was present.
func (t *table) del(h uint64) bool {
	if t.slots == nil {
		return false
	}
	m := t.mask()
	i := t.home(h)
	for {
		s := &t.slots[i]
		if s.h == h {
			break
		}
		if s.h == 0 {
			return false
		}
		i = (i + 1) & m
	}
	// Backward-shift: move later entries of the run into the hole when their
	// home does not lie cyclically in (hole, position].
	for j := (i + 1) & m; ; j = (j + 1) & m {
		sj := t.slots[j]
		if sj.h == 0 {
			break
		}
		k := t.home(sj.h)
		var stays bool
		if i <= j {
			stays = i < k && k <= j
		} else {
			stays = i < k || k <= j
		}
		if stays {
			continue
		}
		t.slots[i] = sj
		i = j
	}
	t.slots[i] = slot{}
	t.n--
	return true
}

func (t *table) grow() {
	old := t.slots
	log := 64 - t.shift + 1
	*t = newTable(log)
	m := t.mask()
	for _, s := range old {
		if s.h == 0 {
			continue
		}
		for i := t.home(s.h); ; i = (i + 1) & m {
			if t.slots[i].h == 0 {
				t.slots[i] = s
				break
			}
		}
		t.n++
	}
}
