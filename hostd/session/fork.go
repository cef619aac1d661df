package session

// What a fork adds around the children's machines: the identity mode and
// the check of what each child got, the jobs a disk fork leaves behind,
// and the job records a memory fork hands on.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
)

// The public wire types of a fork's answer.
type (
	ForkResult    = apiv1.ForkResult
	NotCarried    = apiv1.ForkNotCarried
	ChildIdentity = apiv1.ChildIdentity
)

// ForkIdentityMode checks a fork's identity field: "" is best-effort; a
// name that is none of the three is 400 fork_identity_unknown.
func ForkIdentityMode(v string) (string, error) {
	switch v {
	case "", apiv1.IdentityBestEffort:
		return apiv1.IdentityBestEffort, nil
	case apiv1.IdentityUnique, apiv1.IdentityPreserve:
		return v, nil
	}
	return "", errdefs.WithCode(errdefs.CodeForkIdentityUnknown,
		bad("identity %q: use %s (the default), %s or %s", ClipText(v, 64), apiv1.IdentityBestEffort, apiv1.IdentityUnique, apiv1.IdentityPreserve))
}

// readIdentity reads a machine's host name and machine id from inside it.
func readIdentity(ctx context.Context, mc hypervisor.Machine) (ChildIdentity, error) {
	c := clientFor(mc)
	h, err := c.ReadFile(ctx, "/proc/sys/kernel/hostname")
	if err != nil {
		return ChildIdentity{}, fmt.Errorf("read the host name: %w", err)
	}
	id := ChildIdentity{Hostname: strings.TrimSpace(string(h.Content))}
	if f, err := c.ReadFile(ctx, "/etc/machine-id"); err == nil {
		id.MachineID = strings.TrimSpace(string(f.Content))
	}
	return id, nil
}

// checkIdentities reads each child's identity and says, in note, how they
// fall short of each having its own (none of them the parent's or
// another's); note is empty when they do not.
func checkIdentities(ctx context.Context, parent ChildIdentity, kids []hypervisor.Machine) (ids []ChildIdentity, note string) {
	var short []string
	seenHost := map[string]string{parent.Hostname: "the parent"}
	seenMID := map[string]string{}
	if parent.MachineID != "" {
		seenMID[parent.MachineID] = "the parent"
	}
	for _, k := range kids {
		id, err := readIdentity(ctx, k)
		id.Session = k.ID()
		ids = append(ids, id)
		if err != nil {
			short = append(short, fmt.Sprintf("%s: %v", k.ID(), err))
			continue
		}
		if who, dup := seenHost[id.Hostname]; dup {
			short = append(short, fmt.Sprintf("%s has the host name of %s (%s)", k.ID(), who, id.Hostname))
		}
		if id.MachineID == "" {
			short = append(short, fmt.Sprintf("%s has no machine id", k.ID()))
		} else if who, dup := seenMID[id.MachineID]; dup {
			short = append(short, fmt.Sprintf("%s has the machine id of %s", k.ID(), who))
		}
		seenHost[id.Hostname], seenMID[id.MachineID] = k.ID(), k.ID()
	}
	return ids, strings.Join(short, "; ")
}

// forkMachines starts the children with the identity mode's wish: under
// preserve they take the parent's identity, which only a backend that is
// a hypervisor.IdentityForker can give.
func forkMachines(ctx context.Context, mc hypervisor.Machine, snap hypervisor.Snapshot, n int, mode string, parent ChildIdentity) ([]hypervisor.Machine, error) {
	if mode != apiv1.IdentityPreserve {
		return mc.Fork(ctx, snap, n)
	}
	f, ok := mc.(hypervisor.IdentityForker)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot give fork children their parent's identity (identity: preserve)", ErrConflict)
	}
	return f.ForkAs(ctx, snap, n, hypervisor.ForkIdentity{Hostname: parent.Hostname, MachineID: parent.MachineID})
}

// notCarried lists the running jobs a disk fork leaves in the parent,
// each with the command the host recorded for it (cmds), or the guest's.
func notCarried(running []api.Job, cmds map[string]string, reason string) []NotCarried {
	out := make([]NotCarried, 0, len(running))
	for _, j := range running {
		c := cmds[j.ID]
		if c == "" {
			c = jobCommand(j)
		}
		out = append(out, NotCarried{Job: j.ID, Command: ClipText(c, 256), Reason: reason})
	}
	return out
}

// jobCommand is the command a job runs, as the guest tells it.
func jobCommand(j api.Job) string {
	if j.Shell != "" {
		return j.Shell
	}
	return strings.Join(j.Argv, " ")
}

// handOnJobs gives a memory fork's child the parent's job records, so the
// jobs it carries are the child's to read, feed and kill, and are counted
// in its usage from the fork on (the parent's time stays the parent's).
func (m *Manager) handOnJobs(ctx context.Context, parent, child string) {
	rows, err := m.st.ListJobs(ctx, parent)
	if err != nil {
		m.log.Warn("read the parent's jobs for a fork child", "session", parent, "err", err)
		return
	}
	now := m.now()
	for _, r := range rows {
		var jr jobRow
		json.Unmarshal(r.Record, &jr)
		jr.StartedAt, jr.HandedOn = now, true
		raw, _ := json.Marshal(jr)
		if err := m.st.PutJob(ctx, store.JobRow{SessionID: child, JobID: r.JobID, Command: r.Command, Record: raw}); err != nil {
			m.log.Warn("hand a job record to a fork child", "session", child, "job", r.JobID, "err", err)
		}
	}
}
