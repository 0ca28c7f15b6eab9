package timeoutprofile

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Kinds of warning besides the override rules (which use their Rule value).
const (
	warnTimeout   = 100 + iota // a call's budget ran out
	warnBadOption              // a method option names an unknown profile
)

// maxWarnKeys bounds the warner's memory; past it the table starts afresh.
const maxWarnKeys = 4096

type warnKey struct {
	method string
	kind   uint8
}

type warnState struct {
	at         time.Time
	suppressed int
}

// warner logs warnings at most once per interval per (method, kind), and
// counts the ones it held back so a misbehaving caller cannot flood the log.
// Safe for concurrent use.
type warner struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time // time.Now; tests replace it

	mu   sync.Mutex
	last map[warnKey]warnState // guarded by mu
}

func newWarner(log *slog.Logger, interval time.Duration) *warner {
	return &warner{log: log, interval: interval, now: time.Now, last: make(map[warnKey]warnState)}
}

// allow reports whether a warning for key may be logged now and, if so, how
// many warnings for key were suppressed since the last one logged.
func (w *warner) allow(ctx context.Context, key warnKey) (suppressed int, ok bool) {
	if !w.log.Enabled(ctx, slog.LevelWarn) {
		return 0, false
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	st, seen := w.last[key]
	if seen && now.Sub(st.at) < w.interval {
		st.suppressed++
		w.last[key] = st
		return 0, false
	}
	if !seen && len(w.last) >= maxWarnKeys {
		clear(w.last)
	}
	w.last[key] = warnState{at: now}
	return st.suppressed, true
}
