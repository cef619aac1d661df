package mcp

import "time"

// SetProgressEvery sets how often a running tool sends progress, for a
// test; the returned function puts it back.
func SetProgressEvery(d time.Duration) func() {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}
