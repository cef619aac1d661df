//go:build !linux

package sandboxinit

import (
	"fmt"
	"os"
)

// Main refuses: namespace sandboxes exist only on Linux.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "sandbox-init: namespace sandboxes need Linux")
	return 125
}
