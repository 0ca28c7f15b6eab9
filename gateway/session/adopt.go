package session

import (
	"errors"
	"time"
)

// ErrExists: Adopt found a session with that id in the table.
var ErrExists = errors.New("session already in the table")

// Adopt registers a session that another gateway instance opened, under its
// existing id: a cluster replica that took the upstream session over (or
// had it handed off) serves it from now on. The caps apply as for Open;
// once Drain has begun it returns ErrDraining. The caller keeps conn if
// Adopt fails.
func (t *Table[C]) Adopt(id, caller, runtime string, conn C) (*Session[C], error) {
	if _, ok := ParseID(id); !ok {
		return nil, errors.New("session: Adopt: malformed id")
	}
	if err := t.reserve(caller); err != nil {
		return nil, err
	}
	s := &Session[C]{ID: id, Caller: caller, Runtime: runtime, OpenedAt: time.Now(), Conn: conn, table: t}
	s.lastUsed.Store(t.now())
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		t.sessions.Release(caller, 1)
		return nil, ErrDraining
	}
	if old, ok := t.byID[id]; ok {
		if !old.Lost() {
			t.sessions.Release(caller, 1)
			return nil, ErrExists
		}
		t.removeLocked(old)
	}
	t.byID[id] = s
	set := t.byCaller[caller]
	if set == nil {
		set = make(map[*Session[C]]struct{})
		t.byCaller[caller] = set
	}
	set[s] = struct{}{}
	if t.cfg.IdleTimeout > 0 {
		s.idle = time.AfterFunc(t.cfg.IdleTimeout, s.idleCheck)
	}
	t.cfg.Logger.Info("session adopted", "session_id", id, "caller", caller, "runtime", runtime)
	return s, nil
}

// Snapshot returns every session in the table (for a cluster replica's
// directory loop and handoff), in no particular order.
func (t *Table[C]) Snapshot() []*Session[C] {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*Session[C], 0, len(t.byID))
	for _, s := range t.byID {
		out = append(out, s)
	}
	return out
}
