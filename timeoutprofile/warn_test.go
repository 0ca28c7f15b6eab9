package timeoutprofile

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

func TestWarnerRateLimit(t *testing.T) {
	var buf bytes.Buffer
	w := newWarner(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	now := time.Unix(0, 0)
	w.now = func() time.Time { return now }
	ctx := context.Background()
	k1 := warnKey{"/a.B/C", uint8(RuleBelowMin)}
	k2 := warnKey{"/a.B/C", uint8(RuleAboveMax)}

	steps := []struct {
		at      time.Duration
		key     warnKey
		wantOK  bool
		wantSup int
	}{
		{0, k1, true, 0},
		{time.Second, k1, false, 0},
		{2 * time.Second, k1, false, 0},
		{3 * time.Second, k2, true, 0}, // another rule has its own budget
		{9 * time.Second, k1, false, 0},
		{10 * time.Second, k1, true, 3}, // three held back
		{11 * time.Second, k1, false, 0},
		{30 * time.Second, k1, true, 1},
		{30 * time.Second, k2, true, 0},
	}
	for i, s := range steps {
		now = time.Unix(0, 0).Add(s.at)
		sup, ok := w.allow(ctx, s.key)
		if ok != s.wantOK || sup != s.wantSup {
			t.Errorf("step %d: allow = %d, %v; want %d, %v", i, sup, ok, s.wantSup, s.wantOK)
		}
	}
}

func TestWarnerDisabledLevel(t *testing.T) {
	w := newWarner(slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError})), time.Second)
	if _, ok := w.allow(context.Background(), warnKey{"m", 1}); ok {
		t.Error("allowed a warning the logger discards")
	}
}

func TestWarnerBounded(t *testing.T) {
	w := newWarner(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), time.Hour)
	for i := range maxWarnKeys + 10 {
		w.allow(context.Background(), warnKey{string(rune(i)), 1})
	}
	if len(w.last) > maxWarnKeys {
		t.Errorf("%d keys kept, bound %d", len(w.last), maxWarnKeys)
	}
}
