package main

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/spf13/cobra"
)

// TestLinuxOnly runs a stub as another OS's CLI would: whatever flags and
// arguments come with it, the answer says where the command runs.
func TestLinuxOnly(t *testing.T) {
	root := &cobra.Command{Use: "paddock", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(linuxOnly("serve", "Run the daemon (Linux only)"))
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:7788", "--tenants", "x.json", "extra"})
	err := root.Execute()
	want := "paddock serve is not available on " + runtime.GOOS + ": run it on Linux"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
