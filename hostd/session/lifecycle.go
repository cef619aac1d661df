package session

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
)

var tagRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// The public wire types (package api), kept under these names here.
type (
	CheckpointRequest = apiv1.CheckpointRequest
	RestoreRequest    = apiv1.RestoreRequest
	ForkRequest       = apiv1.ForkRequest
	Artifacts         = apiv1.Artifacts
)

func (m *Manager) snapshots(ctx context.Context, id string) (map[string]hypervisor.Snapshot, error) {
	row, err := m.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	var st stored
	if err := json.Unmarshal(row.Record, &st); err != nil {
		return nil, err
	}
	return st.Snapshots, nil
}

type snapshotDeleter interface {
	DeleteSnapshot(hypervisor.Snapshot) error
}

func (m *Manager) deleteSnapshot(s hypervisor.Snapshot) {
	if d, ok := m.backendOf(s.Backend).(snapshotDeleter); ok {
		if err := d.DeleteSnapshot(s); err != nil {
			m.log.Warn("delete snapshot", "snapshot", s.ID, "err", err)
		}
	}
}

// Checkpoint records the sandbox's state under a tag.
func (m *Manager) Checkpoint(ctx context.Context, tenant, id string, rev int64, req CheckpointRequest) (*Checkpoint, error) {
	if req.Tag == "" {
		req.Tag = fmt.Sprintf("ckpt-%d", m.now().Unix())
	}
	if !tagRE.MatchString(req.Tag) {
		return nil, bad("tag %q: use letters, digits, '.', '_' and '-', at most %d", req.Tag, MaxTagLen)
	}
	s, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if rev >= 0 && rev != s.Revision {
		return nil, fmt.Errorf("%w: session %s is at revision %d, not %d", ErrRevision, id, s.Revision, rev)
	}
	for _, c := range s.Checkpoints {
		if c.Tag == req.Tag {
			return nil, fmt.Errorf("%w: session %s already has a checkpoint tagged %q", ErrConflict, id, req.Tag)
		}
	}
	memory := s.Capabilities.MemoryCheckpoint
	if req.Memory != nil {
		memory = *req.Memory
	}
	if memory && !s.Capabilities.MemoryCheckpoint {
		return nil, fmt.Errorf("%w: memory checkpoints are not available: %s (ask for memory: false)", ErrConflict, s.Capabilities.MemoryCheckpointReason)
	}
	leave, err := m.beginOp(ctx, id, "checkpoint", rev, nil)
	if err != nil {
		return nil, err
	}
	defer leave()
	return m.checkpointIn(ctx, s, rev, mc, req.Tag, memory)
}

// checkpointIn takes, records and ledgers the checkpoint tagged tag of
// session s's machine mc; the caller holds the session's slot.
func (m *Manager) checkpointIn(ctx context.Context, s *Session, rev int64, mc hypervisor.Machine, tag string, memory bool) (*Checkpoint, error) {
	id, req := s.ID, CheckpointRequest{Tag: tag}
	snap, err := mc.Checkpoint(ctx, req.Tag, memory)
	if err != nil {
		return nil, err
	}
	// What the checkpoint may come to hold on the backend's disk counts
	// like a machine's disk: kept only if it fits.
	if err := m.admitCheckpoint(s, snap); err != nil {
		m.deleteSnapshot(snap)
		return nil, err
	}
	c := Checkpoint{Tag: req.Tag, Snapshot: snap.ID, Memory: snap.Memory, CreatedAt: snap.CreatedAt}
	_, err = m.updateStored(ctx, id, rev, func(st *stored) error {
		st.Session.Checkpoints = append(st.Session.Checkpoints, c)
		if st.Snapshots == nil {
			st.Snapshots = map[string]hypervisor.Snapshot{}
		}
		st.Snapshots[req.Tag] = snap
		return nil
	})
	if err != nil {
		m.dropSnapshotHeld(id, snap.ID)
		m.deleteSnapshot(snap)
		return nil, err
	}
	m.ledgerAppend(ctx, id, "checkpoint", map[string]any{"tag": req.Tag, "memory": snap.Memory, "snapshot_id": snap.ID})
	m.vmEvent(id, apiv1.VMEventCheckpoint, map[string]any{"tag": req.Tag, "memory": snap.Memory, "snapshot_id": snap.ID, "bytes": snap.Bytes})
	return &c, nil
}

// Restore puts the sandbox back to one of this session's checkpoints.
func (m *Manager) Restore(ctx context.Context, tenant, id string, rev int64, req RestoreRequest) (*Session, error) {
	if !tagRE.MatchString(req.Tag) {
		return nil, bad("tag %q: name one of this session's checkpoints (letters, digits, '.', '_' and '-', at most %d)", req.Tag, MaxTagLen)
	}
	s, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if rev >= 0 && rev != s.Revision {
		return nil, fmt.Errorf("%w: session %s is at revision %d, not %d", ErrRevision, id, s.Revision, rev)
	}
	snaps, err := m.snapshots(ctx, id)
	if err != nil {
		return nil, err
	}
	snap, ok := snaps[req.Tag]
	if !ok {
		return nil, fmt.Errorf("%w: session %s has no checkpoint tagged %q", ErrNotFound, id, req.Tag)
	}
	leave, err := m.beginOp(ctx, id, "restore", rev, mc)
	if err != nil {
		return nil, err
	}
	defer leave()
	// A restore boots the machine again: it must still fit (the tenant's
	// limits or the backend's disk may have shrunk since), counted once.
	if b := m.backendOf(s.Backend); b != nil {
		if _, err := m.admitMachines(b, s.Tenant, m.runtimeHeld(s), 1, id); err != nil {
			return nil, err
		}
	}
	if err := mc.Restore(ctx, snap); err != nil {
		return nil, err
	}
	out, err := m.updateStored(ctx, id, -1, func(*stored) error { return nil })
	if err != nil {
		return nil, err
	}
	m.ledgerAppend(ctx, id, "restore", map[string]any{"tag": req.Tag, "snapshot_id": snap.ID})
	m.vmEvent(id, apiv1.VMEventRestore, map[string]any{"tag": req.Tag, "snapshot_id": snap.ID, "memory": snap.Memory})
	m.vmEvent(id, apiv1.VMEventBoot, map[string]any{"sandbox_id": mc.ID(), "from_snapshot": snap.ID})
	return out, nil
}

// Fork starts count child sessions from the session's current state (or
// the checkpoint req.From names); ForkDetail says more about them.
func (m *Manager) Fork(ctx context.Context, tenant, id string, rev int64, req ForkRequest) ([]*Session, error) {
	r, err := m.ForkDetail(ctx, tenant, id, rev, req)
	if err != nil {
		return nil, err
	}
	return r.Children, nil
}

// ForkDetail is Fork with the whole answer: the children, whether they
// started from memory, the parent's jobs they do not carry and the
// identity each got. The parent is not replaced, so running commands do
// not stop a fork: they go on in the parent, and in the children too
// when the fork is from memory.
func (m *Manager) ForkDetail(ctx context.Context, tenant, id string, rev int64, req ForkRequest) (*ForkResult, error) {
	if req.Count < 1 || req.Count > hypervisor.MaxForkChildren {
		return nil, bad("count %d must be from 1 to %d", req.Count, hypervisor.MaxForkChildren)
	}
	mode, err := ForkIdentityMode(req.Identity)
	if err != nil {
		return nil, err
	}
	if req.From != "" && !tagRE.MatchString(req.From) {
		return nil, bad("from %q: name one of this session's checkpoints (letters, digits, '.', '_' and '-', at most %d)", req.From, MaxTagLen)
	}
	return m.forkFrom(ctx, tenant, id, rev, req.Count, mode, forkSource{checkpoint: req.From})
}

// forkSource is where a fork's children start: the state now (the zero
// value), a checkpoint of the session (checkpoint), or a rewind point's
// snapshot (point, tagged pointTag) for a rewind branch.
type forkSource struct {
	checkpoint string
	point      *hypervisor.Snapshot
	pointTag   string
}

// branch says the children are a rewind branch's.
func (f forkSource) branch() bool { return f.point != nil }

// from is the tag the answer and the ledger name.
func (f forkSource) from() string {
	if f.branch() {
		return f.pointTag
	}
	return f.checkpoint
}

// forkFrom starts count children of session id from src with identity
// mode; the caller checked count and mode. A fork child's baseline is
// the parent's workspace at the fork; a branch child has none (the
// parent's files now are not where it starts), so promote refuses it.
func (m *Manager) forkFrom(ctx context.Context, tenant, id string, rev int64, count int, mode string, src forkSource) (*ForkResult, error) {
	req := ForkRequest{Count: count, Identity: mode, From: src.from()}
	s, base, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !s.Capabilities.Fork {
		return nil, fmt.Errorf("%w: the %s backend cannot fork", ErrConflict, s.Backend)
	}
	if rev >= 0 && rev != s.Revision {
		return nil, fmt.Errorf("%w: session %s is at revision %d, not %d", ErrRevision, id, s.Revision, rev)
	}
	from := src.point
	if src.checkpoint != "" {
		snaps, err := m.snapshots(ctx, id)
		if err != nil {
			return nil, err
		}
		snap, ok := snaps[src.checkpoint]
		if !ok {
			return nil, fmt.Errorf("%w: session %s has no checkpoint tagged %q", ErrNotFound, id, src.checkpoint)
		}
		from = &snap
	}
	leave, err := m.beginOp(ctx, id, "fork", rev, nil)
	if err != nil {
		return nil, err
	}
	defer leave()
	// The children are taken from the budget now and given back if the
	// fork makes fewer (or none); each child starts with what is left.
	giveBack, err := m.takeChildren(ctx, s, req.Count)
	if err != nil {
		return nil, err
	}
	made := 0
	defer func() { giveBack(req.Count - made) }()
	// The children must fit the host, the tenant's limits and the
	// backend's disk, like as many creates.
	backend := m.backendOf(s.Backend)
	if backend == nil {
		return nil, fmt.Errorf("%w: the %s backend is not enabled on this daemon", ErrConflict, s.Backend)
	}
	rt := m.runtimeHeld(s)
	adm, err := m.admitMachines(backend, s.Tenant, rt, req.Count, "")
	if err != nil {
		return nil, err
	}
	defer adm.release()
	kidBudget := childBudget(s.Budget, m.usage(ctx, id))
	// Children get the parent's policy, each on its own sockets.
	var polIn *rules.PolicyInput
	var pol *rules.Compiled
	if row, err := m.st.GetSession(ctx, id); err == nil {
		var st stored
		if json.Unmarshal(row.Record, &st) == nil {
			polIn = st.PolicyInput
		}
	}
	if pol, err = m.compilePolicy(polIn); err != nil {
		return nil, err
	}
	// What runs in the parent now: a disk fork leaves it behind.
	running, err := m.refreshJobs(ctx, id, clientFor(mc))
	if err != nil {
		m.log.Warn("list jobs before a fork", "session", id, "err", err)
	}
	parentID, err := readIdentity(ctx, mc)
	if err != nil && mode == apiv1.IdentityPreserve {
		return nil, fmt.Errorf("%w: cannot read the parent's identity to preserve it: %v", ErrConflict, err)
	}
	var snap hypervisor.Snapshot
	if from != nil {
		snap = *from // the checkpoint (or point) stays the session's
	} else {
		// From memory where the backend keeps memory, so what runs goes on
		// in the children; from the disk otherwise.
		snap, err = mc.Checkpoint(ctx, "fork", s.Capabilities.MemoryCheckpoint)
		if err != nil {
			return nil, err
		}
		// The children's layers keep the snapshot alive; the record goes.
		defer m.deleteSnapshot(snap)
		// What it holds is counted with the first child (docs/tenants.md).
		if err := adm.grow(s.Backend, s.Tenant, snapshotMB(snap)); err != nil {
			return nil, err
		}
	}
	kids, err := forkMachines(ctx, mc, snap, req.Count, mode, parentID)
	if err != nil {
		return nil, err
	}
	res := &ForkResult{Identity: mode, From: req.From, Memory: snap.Memory, NotCarried: []NotCarried{}}
	res.Identities, res.IdentityNote = checkIdentities(ctx, parentID, kids)
	if mode == apiv1.IdentityUnique && res.IdentityNote != "" {
		for _, k := range kids {
			k.Stop(context.Background())
		}
		return nil, errdefs.WithCode(errdefs.CodeForkIdentityNotUnique,
			fmt.Errorf("%w: identity unique: %s; no child was kept", ErrConflict, res.IdentityNote))
	}
	if mode == apiv1.IdentityPreserve {
		res.IdentityNote = "" // alike on purpose
	}
	if !snap.Memory || src.branch() {
		cmds := map[string]string{}
		if rows, err := m.st.ListJobs(ctx, id); err == nil {
			for _, r := range rows {
				cmds[r.JobID] = r.Command
			}
		}
		why := "a disk fork starts the children from the files alone; the job keeps running in the parent"
		if src.branch() {
			why = "a branch starts the children from a past rewind point, without the parent's job records; the job keeps running in the parent"
		}
		res.NotCarried = notCarried(running, cmds, why)
	}
	// Each child's baseline is the parent's workspace at the fork; a
	// branch child has none.
	var parentNow *api.Manifest
	if !src.branch() {
		parentNow, err = clientFor(mc).Manifest(ctx, api.ManifestRequest{Path: s.Workspace.Path})
		if err != nil {
			parentNow = base
		}
	}
	baselineFiles := 0
	if parentNow != nil {
		baselineFiles = len(parentNow.Entries)
	}
	childKind, parentKind := "session.fork_child", "fork"
	if src.branch() {
		childKind, parentKind = "session.branch_child", "rewind.branch"
	}
	out := make([]*Session, 0, len(kids))
	ids := make([]ChildIdentity, 0, len(kids))
	for i, k := range kids {
		now := m.now().UTC()
		child := &Session{
			ID: k.ID(), Agent: s.Agent, Tenant: s.Tenant, State: StateRunning, Backend: s.Backend,
			SandboxID: k.ID(), Capabilities: s.Capabilities, Runtime: s.Runtime,
			Workspace:   Workspace{Path: s.Workspace.Path, Mode: s.Workspace.Mode, Git: s.Workspace.Git, Lower: s.Workspace.Lower, BaselineFiles: baselineFiles},
			Checkpoints: []Checkpoint{}, Children: []string{}, Parent: id,
			CreatedAt: now, ExpiresAt: s.ExpiresAt,
		}
		child.Policy = s.Policy
		child.Budget = cloneBudget(kidBudget)
		held := effective(rt, adm.cap)
		if err := m.saveHeld(ctx, child, parentNow, polIn, &held); err != nil {
			k.Stop(context.Background())
			continue
		}
		if err := m.openEgress(child.ID, pol); err != nil {
			m.log.Warn("serve a fork child's egress", "session", child.ID, "err", err)
		}
		if snap.Memory && !src.branch() {
			// A branch's point is older than the parent's job records.
			m.handOnJobs(ctx, id, child.ID)
		}
		m.track(child.ID, k)
		m.ledgerAppend(ctx, child.ID, childKind, map[string]any{"parent": id, "from": req.From, "memory": snap.Memory, "identity": mode})
		m.vmEvent(child.ID, apiv1.VMEventBoot, map[string]any{"sandbox_id": k.ID(), "from_snapshot": snap.ID, "fork_of": id, "memory": snap.Memory})
		out = append(out, child)
		ids = append(ids, res.Identities[i])
	}
	res.Children, res.Identities = out, ids
	made = len(out)
	kidIDs := make([]string, len(out))
	for i, c := range out {
		kidIDs[i] = c.ID
	}
	adm.commit(kidIDs, effective(rt, adm.cap))
	m.updateStored(ctx, id, -1, func(st *stored) error {
		st.Session.Children = append(st.Session.Children, kidIDs...)
		return nil
	})
	nc := make([]string, len(res.NotCarried))
	for i, j := range res.NotCarried {
		nc[i] = j.Job
	}
	m.ledgerAppend(ctx, id, parentKind, map[string]any{"count": req.Count, "children": kidIDs, "from": req.From,
		"memory": snap.Memory, "identity": mode, "not_carried": nc})
	m.vmEvent(id, apiv1.VMEventFork, map[string]any{"children": kidIDs, "snapshot_id": snap.ID, "memory": snap.Memory, "from": req.From})
	return res, nil
}

// Artifacts diffs the workspace against the session's baseline.
func (m *Manager) Artifacts(ctx context.Context, tenant, id string) (*Artifacts, error) {
	s, base, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	now, err := clientFor(mc).Manifest(ctx, api.ManifestRequest{Path: s.Workspace.Path})
	if err != nil {
		return nil, fmt.Errorf("read the workspace: %w", err)
	}
	a := &Artifacts{Workspace: s.Workspace.Path, Added: []string{}, Modified: []string{}, Deleted: []string{},
		Checkpoints: s.Checkpoints, Children: s.Children, Usage: s.Usage}
	was := map[string]api.ManifestEntry{}
	if base != nil {
		for _, e := range base.Entries {
			was[e.Path] = e
		}
	}
	for _, e := range now.Entries {
		old, ok := was[e.Path]
		delete(was, e.Path)
		switch {
		case !ok:
			a.Added = append(a.Added, e.Path)
		case old.Type != e.Type || old.SHA256 != e.SHA256 || old.Mode != e.Mode || old.Target != e.Target:
			a.Modified = append(a.Modified, e.Path)
		}
	}
	for p := range was {
		a.Deleted = append(a.Deleted, p)
	}
	sort.Strings(a.Deleted)
	return a, nil
}

// updateStored is update with the whole stored record.
func (m *Manager) updateStored(ctx context.Context, id string, rev int64, fn func(*stored) error) (*Session, error) {
	var out *Session
	row, err := m.st.UpdateSession(ctx, id, rev, func(r *storeRow) error {
		var st stored
		if err := json.Unmarshal(r.Record, &st); err != nil || st.Session == nil {
			return fmt.Errorf("corrupt record: %v", err)
		}
		if err := fn(&st); err != nil {
			return err
		}
		r.State = st.Session.State
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		r.Record = raw
		out = st.Session
		return nil
	})
	if err != nil {
		return nil, revisionErr(err, id, rev)
	}
	out.Revision = row.Revision
	return out, nil
}
