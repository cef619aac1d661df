//go:build linux && !cgo

package confine

import "errors"

// Without cgo there is no libseccomp: strict mode refuses, best-effort
// reports seccomp as missing.
type seccompFilter struct{}

func buildSeccomp() (*seccompFilter, error) {
	return nil, errors.New("this build has no libseccomp (built without cgo)")
}

func (*seccompFilter) load() error { return errors.New("no libseccomp") }
func (*seccompFilter) release()    {}
func seccompAvailable() bool       { return false }
