//go:build !windows

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize delivers a signal on ch whenever the terminal changes size.
func notifyResize(ch chan<- os.Signal) { signal.Notify(ch, syscall.SIGWINCH) }
