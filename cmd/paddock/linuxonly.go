package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// linuxOnly is a command that refuses to run, whatever its arguments and
// flags: linuxonly_other.go registers the daemon's commands this way on
// other OSes.
func linuxOnly(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, _ []string) error {
			return fmt.Errorf("paddock %s is not available on %s: run it on Linux", use, runtime.GOOS)
		},
	}
}
