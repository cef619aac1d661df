package speculate

// The changesets a speculation kept: list, read, decide and apply.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// maxListed bounds how many of a changeset's paths a conflict names.
const maxListed = 20

func (s *Service) load(ctx context.Context, target, cid string) (*Changeset, error) {
	if cid == "" || len(cid) > 64 {
		return nil, fmt.Errorf("%w: no changeset %s", session.ErrNotFound, session.ClipText(cid, 64))
	}
	row, err := s.st.GetChangeset(ctx, target, cid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s has no changeset %s", session.ErrNotFound, target, cid)
	}
	if err != nil {
		return nil, err
	}
	var cs Changeset
	if err := json.Unmarshal(row.Record, &cs); err != nil {
		return nil, fmt.Errorf("read changeset %s: %w", cid, err)
	}
	return &cs, nil
}

func (s *Service) save(ctx context.Context, cs *Changeset, from string) error {
	raw, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	err = s.st.UpdateChangeset(ctx, store.ChangesetRow{ID: cs.ID, Target: cs.Target, Status: cs.Status, CreatedAt: cs.CreatedAt, Record: raw}, from)
	if errors.Is(err, store.ErrRevision) {
		return coded(errdefs.CodeChangesetDecided, session.ErrConflict, "changeset %s changed meanwhile; read it again", cs.ID)
	}
	return err
}

// List returns target id's changesets, oldest first, without contents.
func (s *Service) List(ctx context.Context, tenant, id, kind string) (*apiv1.ChangesetList, error) {
	if _, err := s.target(ctx, tenant, id, kind); err != nil {
		return nil, err
	}
	rows, err := s.st.ListChangesets(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ChangesetList{Changesets: make([]Changeset, 0, len(rows))}
	for _, r := range rows {
		var cs Changeset
		if err := json.Unmarshal(r.Record, &cs); err != nil {
			continue
		}
		for i := range cs.Files {
			cs.Files[i].Content = nil
		}
		out.Changesets = append(out.Changesets, cs)
	}
	return out, nil
}

// Get returns changeset cid of target id, contents and all.
func (s *Service) Get(ctx context.Context, tenant, id, kind, cid string) (*Changeset, error) {
	if _, err := s.target(ctx, tenant, id, kind); err != nil {
		return nil, err
	}
	return s.load(ctx, id, cid)
}

// Decide approves or rejects pending changeset cid. Only the admin or a
// tenant decides (the route refuses session tokens; so does this): an
// agent never approves its own changeset.
func (s *Service) Decide(ctx context.Context, tenant, id, kind, cid string, d Decision) (*Changeset, error) {
	who, ok := auth.FromContext(ctx)
	if !ok || (who.Kind != auth.KindAdmin && who.Kind != auth.KindTenant) {
		return nil, fmt.Errorf("%w: only the admin or a tenant decides a changeset, never a session token", session.ErrForbidden)
	}
	var status string
	switch d.Decision {
	case "approve":
		status = apiv1.ChangesetApproved
	case "reject":
		status = apiv1.ChangesetRejected
	default:
		return nil, session.BadRequest("decision %q: use approve or reject", session.ClipText(d.Decision, 32))
	}
	if len(d.Reason) > MaxReasonBytes {
		return nil, session.BadRequest("reason is %d bytes, at most %d", len(d.Reason), MaxReasonBytes)
	}
	if _, err := s.target(ctx, tenant, id, kind); err != nil {
		return nil, err
	}
	defer s.lockTarget(id)()
	cs, err := s.load(ctx, id, cid)
	if err != nil {
		return nil, err
	}
	if cs.Status != apiv1.ChangesetPending {
		return nil, coded(errdefs.CodeChangesetDecided, session.ErrConflict, "changeset %s is %s already", cid, cs.Status)
	}
	now := s.m.Now().UTC()
	cs.Status, cs.DecidedAt, cs.DecidedBy, cs.Reason = status, &now, who.Actor(), d.Reason
	if err := s.save(ctx, cs, apiv1.ChangesetPending); err != nil {
		return nil, err
	}
	s.m.LedgerAppend(ctx, id, "changeset.decide", map[string]any{"changeset": cid, "decision": d.Decision, "reason": session.ClipText(d.Reason, 256)})
	return cs, nil
}

// Apply writes approved, complete changeset cid into target id, after
// checking every file against the base the speculation saw: when one
// changed since, nothing is written (409 changeset_conflict naming the
// paths). Writes and deletions go through the files routes' pipeline.
func (s *Service) Apply(ctx context.Context, tenant, id, kind, cid string) (*ApplyResult, error) {
	if _, err := s.target(ctx, tenant, id, kind); err != nil {
		return nil, err
	}
	defer s.lockTarget(id)()
	cs, err := s.load(ctx, id, cid)
	if err != nil {
		return nil, err
	}
	if cs.Status != apiv1.ChangesetApproved {
		return nil, coded(errdefs.CodeChangesetNotApproved, session.ErrConflict, "changeset %s is %s: only an approved changeset is applied, once", cid, cs.Status)
	}
	if !cs.Complete {
		return nil, coded(errdefs.CodeChangesetIncomplete, session.ErrConflict, "changeset %s is incomplete (a file without its content, or files past the limits): it cannot be applied", cid)
	}
	x, mc, err := s.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	c := session.Guest(mc)
	// The budget sees the whole changeset first, so a max_workspace_bytes
	// refusal comes before any write rather than halfway through (each
	// write is admitted again on its way).
	var total int64
	for _, f := range cs.Files {
		total += int64(len(f.Content))
	}
	if err := s.m.AdmitWrite(ctx, x, c, total, "changeset apply"); err != nil {
		return nil, err
	}
	var conflicts []string
	links := map[string]bool{} // directories of the target that are links
	for _, f := range cs.Files {
		ok, err := unchanged(ctx, c, f)
		if err != nil {
			return nil, err
		}
		if ok {
			// A directory on the way that became a link would take the
			// write somewhere the speculation never looked.
			if ok, err = noLinkOnTheWay(ctx, c, cs.Paths, f.Path, links); err != nil {
				return nil, err
			}
		}
		if !ok {
			conflicts = append(conflicts, f.Path)
		}
	}
	if len(conflicts) > 0 {
		named := conflicts
		if len(named) > maxListed {
			named = named[:maxListed]
		}
		more := ""
		if len(conflicts) > maxListed {
			more = fmt.Sprintf(" and %d more", len(conflicts)-maxListed)
		}
		s.m.LedgerAppend(ctx, id, "changeset.apply", map[string]any{"changeset": cid, "refused": "conflict", "conflicts": len(conflicts)})
		return nil, coded(errdefs.CodeChangesetConflict, session.ErrConflict,
			"changeset %s: these files changed since the speculation, so nothing was written: %s%s", cid, strings.Join(named, ", "), more)
	}
	res := &ApplyResult{Applied: []string{}}
	yes := true
	for _, f := range cs.Files {
		var err error
		if f.Op == apiv1.PromoteDeleted {
			err = s.files.DeleteFile(ctx, tenant, id, f.Path, false)
		} else {
			_, err = s.files.WriteFile(ctx, tenant, id, apiv1.FileWrite{Path: f.Path, ContentBase64: base64.StdEncoding.EncodeToString(f.Content), Mode: f.Mode, Parents: &yes})
		}
		if err != nil {
			s.m.LedgerAppend(context.WithoutCancel(ctx), id, "changeset.apply", map[string]any{"changeset": cid, "applied": len(res.Applied), "failed": f.Path, "error": session.ClipText(err.Error(), 300)})
			return nil, fmt.Errorf("changeset %s: %d of %d files applied, then %s: %w", cid, len(res.Applied), len(cs.Files), f.Path, err)
		}
		res.Applied = append(res.Applied, f.Path)
	}
	now := s.m.Now().UTC()
	cs.Status, cs.AppliedAt = apiv1.ChangesetApplied, &now
	if err := s.save(context.WithoutCancel(ctx), cs, apiv1.ChangesetApproved); err != nil {
		return nil, err
	}
	s.m.LedgerAppend(context.WithoutCancel(ctx), id, "changeset.apply", map[string]any{"changeset": cid, "applied": len(res.Applied)})
	for i := range cs.Files {
		cs.Files[i].Content = nil
	}
	res.Changeset = *cs
	return res, nil
}

// unchanged reports whether the target's file is still what the
// speculation started from: the same digest for a file modified or
// deleted, nothing at all for a file added.
func unchanged(ctx context.Context, c interface {
	List(context.Context, string) (*api.Listing, error)
	ReadRange(context.Context, string, int64, int64, bool) (*api.FileRange, error)
}, f File) (bool, error) {
	l, err := c.List(ctx, f.Path)
	if notFound(err) {
		return f.Op == apiv1.PromoteAdded, nil
	}
	if err != nil {
		return false, session.GuestError(err)
	}
	if f.Op == apiv1.PromoteAdded {
		return false, nil
	}
	self := l.Self
	if self == nil && l.Kind != "dir" && len(l.Entries) == 1 {
		self = &l.Entries[0]
	}
	if self == nil || self.Type != api.TypeFile {
		return false, nil
	}
	r, err := c.ReadRange(ctx, f.Path, 0, 1, true)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, session.GuestError(err)
	}
	return r.SHA256 != "" && r.SHA256 == f.BaseSHA256, nil
}

// noLinkOnTheWay reports whether no directory between the speculation's
// path that covers p (included) and p is a symbolic link in the target
// now (seen caches what was asked already).
func noLinkOnTheWay(ctx context.Context, c interface {
	List(context.Context, string) (*api.Listing, error)
}, roots []string, p string, seen map[string]bool) (bool, error) {
	root := ""
	for _, r := range roots {
		if r == p {
			return true, nil // a path named itself: no directory between
		}
		if strings.HasPrefix(p, r+"/") && len(r) > len(root) {
			root = r
		}
	}
	if root == "" {
		return false, nil // not under the paths: never apply it
	}
	for dir := path.Dir(p); ; dir = path.Dir(dir) {
		link, ok := seen[dir]
		if !ok {
			l, err := c.List(ctx, dir)
			switch {
			case notFound(err):
				link = false // made by the write, as a directory
			case err != nil:
				return false, session.GuestError(err)
			default:
				link = l.Self != nil && l.Self.Type == api.TypeSymlink
			}
			seen[dir] = link
		}
		if link {
			return false, nil
		}
		if dir == root || len(dir) <= len(root) {
			return true, nil
		}
	}
}
