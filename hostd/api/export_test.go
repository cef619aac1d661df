package api

import "time"

// SetIdempotencyWait sets how long a retry waits for the first request
// with its Idempotency-Key (idemWait), for a test; the func puts it back.
func SetIdempotencyWait(d time.Duration) (restore func()) {
	old := idemWait
	idemWait = d
	return func() { idemWait = old }
}

// MaxIdemWaitersPerCaller is how many retries of one caller may wait for
// their first requests at once.
const MaxIdemWaitersPerCaller = maxIdemWaitersPerCaller

// SetReadFold sets the mcp.read folding bounds (toolaudit.go) for a
// test; the func puts them back.
func SetReadFold(window time.Duration, keysPerWindow, windows int) (restore func()) {
	ow, ok, on := readWindow, maxReadKeysPerWindow, maxReadWindows
	readWindow, maxReadKeysPerWindow, maxReadWindows = window, keysPerWindow, windows
	return func() { readWindow, maxReadKeysPerWindow, maxReadWindows = ow, ok, on }
}

// CloseReadWindows closes every open mcp.read window of s now and writes
// its counts, as the end of the window would.
func CloseReadWindows(s *Server) {
	s.reads.mu.Lock()
	open := s.reads.windows
	s.reads.windows = nil
	s.reads.mu.Unlock()
	for id, w := range open {
		w.timer.Stop()
		s.reads.write(s, id, w)
	}
}
