package mcp

import "time"

// SetProgressEvery sets how often a running tool sends progress, for a
// test; the returned function puts it back.
func SetProgressEvery(d time.Duration) func() {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}

// SetHTTPTokenCaps sets the handler's bounds on tokens held (in all, per
// owner) and how often tokens with sessions are asked about again, for a
// test; the returned function puts them back.
func SetHTTPTokenCaps(all, perOwner int, recheck time.Duration) func() {
	oa, oo, or := maxHTTPTokens, maxHTTPTokensPerOwner, recheckEvery
	maxHTTPTokens, maxHTTPTokensPerOwner, recheckEvery = all, perOwner, recheck
	return func() { maxHTTPTokens, maxHTTPTokensPerOwner, recheckEvery = oa, oo, or }
}

// PublicBaseHeader is the header ServeHTTP hands the tools the caller's
// address in.
const PublicBaseHeader = publicBaseHeader
