//go:build linux

// Package all links every backend into the binary: import it for its
// side effect of registering them. The backends are Linux's (namespaces,
// KVM); elsewhere the package is empty (all_other.go), so a program that
// imports it still builds and finds no backend in hypervisor.List.
package all

import (
	_ "paddock.dev/paddock/hypervisor/procbox"
	_ "paddock.dev/paddock/hypervisor/qemu"
)
