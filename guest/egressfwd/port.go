package egressfwd

import "unsafe"

// unsafePortPtr views a sockaddr's port field (network byte order) as
// bytes.
func unsafePortPtr(p *uint16) unsafe.Pointer { return unsafe.Pointer(p) }
