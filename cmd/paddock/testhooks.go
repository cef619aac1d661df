//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"paddock.dev/paddock/hostd/session"
)

// Test hooks slow the daemon's lifecycle operations down so end-to-end
// tests can act mid-way (kill the daemon in the middle of a fork). They
// are for Paddock's own tests only: PADDOCK_TEST_HOOKS is refused unless
// PADDOCK_TEST_MODE=1 is set too, and no API route can set them.
const (
	envTestHooks = "PADDOCK_TEST_HOOKS" // e.g. fork-pause:5s,checkpoint-pause:2s
	envTestMode  = "PADDOCK_TEST_MODE"
)

// testHooks reads the hooks PADDOCK_TEST_HOOKS names (nil: none),
// refusing them outside test mode.
func testHooks(log *slog.Logger) (*session.TestHooks, error) {
	spec := os.Getenv(envTestHooks)
	if spec == "" {
		return nil, nil
	}
	if os.Getenv(envTestMode) != "1" {
		return nil, usageError{errors.New(envTestHooks + " is only for Paddock's own tests (it slows lifecycle operations down on purpose); unset it, or set " + envTestMode + "=1 in a test")}
	}
	hooks, err := session.ParseTestHooks(spec)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", envTestHooks, err)}
	}
	log.Warn("test hooks are on: lifecycle operations are slowed down on purpose", "hooks", spec)
	return &hooks, nil
}
