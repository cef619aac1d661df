package session

import (
	"fmt"
	"sort"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hypervisor"
)

// maxBackendName bounds runtime.backend before it is echoed in an error.
const maxBackendName = 64

// backendFor returns the enabled backend called name ("" is the default).
// An unknown or disabled name is a 400 that lists what this daemon has;
// a backend that cannot run on this host is a 409 with its reason.
func (m *Manager) backendFor(name string) (hypervisor.Backend, error) {
	if name == "" {
		if m.backend == nil {
			return nil, fmt.Errorf("%w: this daemon has no default backend", ErrConflict)
		}
		return m.backend, nil
	}
	if len(name) > maxBackendName {
		return nil, bad("runtime.backend: at most %d characters", maxBackendName)
	}
	b, ok := m.backends[name]
	if !ok {
		return nil, bad("runtime.backend %q is not enabled on this daemon (enabled: %s)", name, strings.Join(m.BackendNames(), ", "))
	}
	if c := b.Capabilities(); !c.Available {
		return nil, fmt.Errorf("%w: backend %s cannot run on this host: %s", ErrConflict, name, c.Reason)
	}
	return b, nil
}

// BackendNames lists the enabled backends, sorted.
func (m *Manager) BackendNames() []string {
	names := make([]string, 0, len(m.backends))
	for n := range m.backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// backendOf is the backend a record names, nil when it is not enabled.
func (m *Manager) backendOf(name string) hypervisor.Backend {
	if name == "" && m.backend != nil {
		return m.backend
	}
	return m.backends[name]
}

// The public wire types (package api), kept under these names here.
type (
	BackendInfo = apiv1.BackendInfo
	BackendList = apiv1.BackendList
)

// Backends describes the enabled backends, default first, then by name:
// what a create may put in runtime.backend and what each can do here.
func (m *Manager) Backends() []BackendInfo {
	out := []BackendInfo{}
	for _, n := range m.BackendNames() {
		b := m.backends[n]
		info := BackendInfo{Name: n, Default: b == m.backend, Capabilities: b.Capabilities()}
		if info.Default {
			out = append([]BackendInfo{info}, out...)
		} else {
			out = append(out, info)
		}
	}
	return out
}
