package dns

import (
	"sync"
	"time"
)

// bucket is a token bucket: rate tokens a second, at most burst saved up.
// One per Server, so one per sandbox.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time

	lastEvent time.Time // when a "rate limited" event was last recorded
}

func newBucket(rate, burst int) *bucket {
	return &bucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst)}
}

// take spends a token if there is one. When there is none it also reports
// whether the refusal should be recorded: at most once a second, so a
// flood costs the ledger one event a second.
func (b *bucket) take(now time.Time) (ok, record bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		if d := now.Sub(b.last); d > 0 {
			b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		}
	}
	if now.After(b.last) {
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, false
	}
	if b.lastEvent.IsZero() || now.Sub(b.lastEvent) >= time.Second {
		b.lastEvent = now
		return false, true
	}
	return false, false
}
