package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/guest/vmchan"
	"paddock.dev/paddock/hypervisor"
)

var _ hypervisor.OOMCounter = (*Machine)(nil)

// oomReadTimeout bounds one read of the guest's OOM count.
const oomReadTimeout = 5 * time.Second

// errAgentDown is a read of the OOM count while the agent channel is
// being set up again (a boot, a restore): the caller tries later.
var errAgentDown = errors.New("qemu: agent channel is down")

// OOMKills implements hypervisor.OOMCounter: how many processes the
// guest's kernel killed for want of memory since the machine last booted
// or was restored. The host cannot see inside the guest, so the agent
// reports the kernel's count (the oom_kill line of /proc/vmstat) in its
// health answer. A machine loaded from a memory snapshot comes back with
// the count the snapshot held; that count is its starting point, so a
// restore starts from zero here as a reboot would.
func (m *Machine) OOMKills() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), oomReadTimeout)
	defer cancel()
	m.mu.Lock()
	gen := m.bootGen
	m.mu.Unlock()
	n, err := m.guestOOMKills(ctx)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bootGen != gen {
		// The machine booted again during the read: the number is the
		// old guest's.
		return 0, errAgentDown
	}
	if m.oomRebase {
		m.oomBase, m.oomRebase = n, false
	}
	if n < m.oomBase {
		return 0, nil
	}
	return n - m.oomBase, nil
}

// startOOMCount sets the count a boot starts from: zero for a fresh
// boot, the guest's own count for one loaded from memory (read now; when
// that fails, at the next OOMKills).
func (m *Machine) startOOMCount(ctx context.Context, fromMemory bool) {
	m.mu.Lock()
	m.bootGen++
	m.oomBase, m.oomRebase = 0, fromMemory
	gen := m.bootGen
	m.mu.Unlock()
	if !fromMemory {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, oomReadTimeout)
	defer cancel()
	n, err := m.guestOOMKills(rctx)
	if err != nil {
		return
	}
	m.mu.Lock()
	if m.bootGen == gen && m.oomRebase {
		m.oomBase, m.oomRebase = n, false
	}
	m.mu.Unlock()
}

// guestOOMKills asks the agent for its kernel's OOM count over the
// channel that is up now. Unlike Dial it never sets up the channel
// again, so a poll cannot race a boot's own handshake.
func (m *Machine) guestOOMKills(ctx context.Context) (int64, error) {
	m.mu.Lock()
	s, stopped := m.sess, m.stopped
	m.mu.Unlock()
	if stopped {
		return 0, hypervisor.ErrStopped
	}
	if s == nil || s.IsClosed() {
		return 0, errAgentDown
	}
	c := client.New(func(context.Context) (net.Conn, error) {
		st, err := s.OpenStream()
		if err != nil {
			return nil, err
		}
		return vmchan.Stream{Stream: st}, nil
	})
	h, err := c.Health(ctx)
	if err != nil {
		return 0, fmt.Errorf("qemu: read the guest's OOM count: %w", err)
	}
	if h.Version < api.VersionOOMKills || h.OOMKills == nil {
		return 0, fmt.Errorf("qemu: the guest (agent protocol %d) does not report its OOM count", h.Version)
	}
	return *h.OOMKills, nil
}
