//go:build !windows

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on an open directory until unlock.
func lockDir(dir *os.File) (unlock func(), err error) {
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX); err != nil {
		return nil, err
	}
	return func() { unix.Flock(int(dir.Fd()), unix.LOCK_UN) }, nil
}
