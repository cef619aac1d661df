//go:build linux

package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestLinuxSignals holds the CLI's own table to the kernel's numbers, as
// golang.org/x/sys knows them on Linux.
func TestLinuxSignals(t *testing.T) {
	for name, n := range linuxSignals {
		if want := int(unix.SignalNum(name)); want != n {
			t.Errorf("%s = %d, Linux says %d", name, n, want)
		}
	}
	for sig := 1; sig <= 31; sig++ {
		name := unix.SignalName(unix.Signal(sig))
		if name == "" {
			continue
		}
		if got := linuxSignalNum(name); got != sig {
			t.Errorf("linuxSignalNum(%q) = %d, want %d", name, got, sig)
		}
	}
	if linuxSignalNum("TERM") != 15 || linuxSignalNum("NOPE") != 0 || sigKill != int(unix.SIGKILL) {
		t.Error("name forms or SIGKILL are wrong")
	}
}
