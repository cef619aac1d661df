// Package all links every backend into the binary: import it for its
// side effect of registering them.
package all

import (
	_ "paddock.dev/paddock/hypervisor/procbox"
	_ "paddock.dev/paddock/hypervisor/qemu"
)
