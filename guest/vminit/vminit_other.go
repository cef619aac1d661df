//go:build !linux

package vminit

import (
	"fmt"
	"os"
)

// Init refuses: the guest side of a VM is Linux.
func Init(args []string) int {
	fmt.Fprintln(os.Stderr, "vm-init: needs Linux")
	return 125
}

// Serve refuses: the guest side of a VM is Linux.
func Serve(args []string) int { return Init(args) }

// IsInitramfs is false off Linux.
func IsInitramfs() bool { return false }

// Initramfs refuses: the guest side of a VM is Linux.
func Initramfs() int { return Init(nil) }
