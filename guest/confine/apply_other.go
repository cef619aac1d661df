//go:build !linux

package confine

import (
	"fmt"
	"runtime"

	"paddock.dev/paddock/guest/api"
)

// Apply refuses any confinement: Landlock and seccomp are Linux only.
func Apply(p api.Confinement) (api.ConfineReport, error) {
	if !p.Enabled() {
		return api.ConfineReport{}, nil
	}
	if _, err := normalize(p); err != nil {
		return api.ConfineReport{}, err
	}
	return api.ConfineReport{}, fmt.Errorf("%w (%s)", ErrUnsupported, runtime.GOOS)
}

// Support reports that nothing can be enforced here.
func Support() api.ConfineSupport { return api.ConfineSupport{} }

func execCheck(string) error { return nil }
