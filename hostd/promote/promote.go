// Package promote carries a fork child's workspace changes back to its
// parent (POST /v1/agents/sessions/{child}/promote), as a three-way merge
// of the child's baseline (the parent's workspace manifest at the fork),
// the child now and the parent now. It is a sibling of the session core
// (hostd/session): it works through the core's surface for siblings
// (core.go, hold.go, walk.go), and the core never imports it.
//
// Both sessions are held for the promotion (Manager.Hold: refused while
// commands run on either side, and nothing else starts on them until it
// ends). Files are read through the child's guest agent and written on
// the parent in one walk of the command pipeline: the read-only
// workspace's refusal, the budget's admission of the bytes, the command
// hooks, and the write guard the agent checks each write and delete
// against, as the files routes have them. Before the first write the
// parent gets a disk checkpoint, so a promotion is undone by restoring
// it.
package promote

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/session"
)

// op names the hold a promotion takes on both sessions: others are told
// "promote is in progress".
const op = "promote"

// chunk is how much of a large file moves at a time (one ranged read,
// one upload part).
const chunk = api.MaxRangeBytes

var planIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Service promotes the fork children of one Manager.
type Service struct {
	m *session.Manager
}

// New makes the promotion service of m. It has no side effects;
// hostd/daemon hands it to the API.
func New(m *session.Manager) *Service { return &Service{m: m} }

func coded(code string, kind error, f string, a ...any) error {
	return errdefs.WithCode(code, fmt.Errorf("%w: %s", kind, fmt.Sprintf(f, a...)))
}

// Promote plans, and unless req.DryRun applies, the promotion of fork
// child childID (as the caller with tenant sees it) into its parent.
func (s *Service) Promote(ctx context.Context, tenant, childID string, req apiv1.PromoteRequest) (*apiv1.PromoteResult, error) {
	if req.PlanID != "" && !planIDRE.MatchString(req.PlanID) {
		return nil, session.BadRequest("plan_id %q: give the plan_id of a dry run (32 hexadecimal digits)", clip(req.PlanID))
	}
	child, err := s.m.LoadSession(ctx, tenant, childID)
	if err != nil {
		return nil, err
	}
	if child.Parent == "" {
		return nil, coded(errdefs.CodeNotForkChild, errdefs.ErrConflict, "session %s is not a fork child: only a child promotes into its parent", childID)
	}
	sc, err := relPaths(child.Workspace.Path, req.Paths)
	if err != nil {
		return nil, session.BadRequest("%v", err)
	}
	child, cmc, err := s.m.Running(ctx, tenant, childID)
	if err != nil {
		return nil, err
	}
	parent, pmc, err := s.m.Running(ctx, tenant, child.Parent)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("%w: the parent %s of %s is gone", errdefs.ErrConflict, child.Parent, childID)
		}
		return nil, fmt.Errorf("the parent %s: %w", child.Parent, err)
	}
	ws := child.Workspace.Path
	if parent.Workspace.Path != ws {
		return nil, fmt.Errorf("%w: the child's workspace %s is not its parent's %s", errdefs.ErrConflict, ws, parent.Workspace.Path)
	}
	base, err := s.m.Baseline(ctx, tenant, childID)
	if err != nil {
		return nil, err
	}
	if base == nil {
		return nil, coded(errdefs.CodeNoBaseline, errdefs.ErrConflict, "session %s has no baseline from its fork, so what it changed is unknown", childID)
	}
	if base.Truncated {
		return nil, coded(errdefs.CodePromoteTooLarge, errdefs.ErrConflict, "the workspace had more than %d entries at the fork: too many to compare", api.MaxManifestFiles)
	}

	// Hold both: no command may change either workspace under the plan.
	endChild, err := s.m.Hold(ctx, child, op)
	if err != nil {
		return nil, err
	}
	defer endChild()
	endParent, err := s.m.Hold(ctx, parent, op)
	if err != nil {
		return nil, fmt.Errorf("the parent %s: %w", parent.ID, err)
	}
	defer endParent()

	cc, pc := session.Guest(cmc), session.Guest(pmc)
	cm, err := manifest(ctx, cc, ws, "the child")
	if err != nil {
		return nil, err
	}
	pm, err := manifest(ctx, pc, ws, "the parent")
	if err != nil {
		return nil, err
	}
	pl := makePlan(base, cm, pm, sc)
	out := &apiv1.PromoteResult{Child: childID, Parent: parent.ID, Workspace: ws, DryRun: req.DryRun,
		PlanID: pl.id(childID, parent.ID, ws), Plan: pl.PromotePlan, Applied: []string{}, Skipped: []string{},
		NotCarried: notCarried(ws, pl)}
	if n := pl.changes(); n > apiv1.MaxPromoteChanges {
		return nil, coded(errdefs.CodePromoteTooLarge, errdefs.ErrConflict,
			"the child changed %d paths (%d to apply); at most %d move at once: promote part of them with paths", n, len(pl.Apply), apiv1.MaxPromoteChanges)
	}
	if pl.Bytes > apiv1.MaxPromoteBytes {
		return nil, coded(errdefs.CodePromoteTooLarge, errdefs.ErrConflict,
			"the plan copies %d bytes; at most %d move at once: promote part of them with paths", pl.Bytes, apiv1.MaxPromoteBytes)
	}
	if req.PlanID != "" && req.PlanID != out.PlanID {
		return nil, coded(errdefs.CodePlanChanged, errdefs.ErrConflict,
			"the plan is %s now, not %s: one of the sessions changed since; review it again with a dry run", out.PlanID, req.PlanID)
	}
	if req.DryRun {
		return out, nil
	}
	if len(pl.Conflicts) > 0 {
		if !req.SkipConflicts {
			names := make([]string, 0, 5)
			for i, c := range pl.Conflicts {
				if i == 5 {
					names = append(names, "…")
					break
				}
				names = append(names, c.Path)
			}
			return nil, coded(errdefs.CodePromoteConflicts, errdefs.ErrConflict,
				"%d paths are in conflict (%s; a dry run says why), so nothing was applied: skip_conflicts applies the rest", len(pl.Conflicts), strings.Join(names, ", "))
		}
		for _, c := range pl.Conflicts {
			out.Skipped = append(out.Skipped, c.Path)
		}
	}
	err = s.apply(ctx, tenant, child, parent, cc, pl, out)
	entry := map[string]any{"parent": parent.ID, "plan_id": out.PlanID, "applied": len(out.Applied), "checkpoint": out.Checkpoint}
	if err != nil {
		entry["error"] = session.ClipText(err.Error(), 512)
	}
	s.m.LedgerAppend(context.WithoutCancel(ctx), childID, "promote.out", entry)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// apply writes the plan's changes on the parent in one walk of the
// pipeline, after the checkpoint that undoes them.
func (s *Service) apply(ctx context.Context, tenant string, child, parent *session.Session, cc *client.Client, pl *plan, out *apiv1.PromoteResult) error {
	ws := parent.Workspace.Path
	return s.m.WalkVerb(ctx, session.CommandFile, tenant, parent.ID, "promote", ws,
		session.LoadRunningStep(),
		session.NewStep(session.StepGate, func(ctx context.Context, p session.Pipe) error {
			// The hold is this walk's gate: no other command runs now.
			if !s.m.Holds(parent.ID, op) {
				return fmt.Errorf("%w: session %s is not held for the promotion", errdefs.ErrConflict, parent.ID)
			}
			return session.RefuseReadOnly(ctx, p.Guest(), p.Session(), ws)
		}),
		session.AdmitWriteStep(func() int64 { return pl.Bytes }, "promotion"),
		session.HooksStep("file"),
		session.NewStep(session.StepRun, func(ctx context.Context, p session.Pipe) error {
			if len(pl.Apply) == 0 {
				return nil
			}
			ck, err := s.checkpoint(ctx, tenant, parent.ID, child.ID)
			if err != nil {
				return fmt.Errorf("the checkpoint before the promotion (nothing was applied): %w", err)
			}
			out.Checkpoint = ck
			p.Started()
			deny, exec := session.WriteGuard(p.Session())
			for i, ch := range pl.Apply {
				if err := transfer(ctx, cc, p.Guest(), path.Join(ws, ch.Path), ch, deny, exec); err != nil {
					return coded(errdefs.CodePromoteIncomplete, errdefs.ErrBadGateway,
						"the promotion stopped at %s after %d of %d paths were applied: %v; restore checkpoint %s of %s to undo them",
						ch.Path, i, len(pl.Apply), err, ck, parent.ID)
				}
				out.Applied = append(out.Applied, ch.Path)
			}
			return nil
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p session.Pipe) error {
			entry := map[string]any{"child": child.ID, "plan_id": out.PlanID, "applied": len(out.Applied),
				"skipped": len(out.Skipped), "checkpoint": out.Checkpoint, "paths": firstPaths(out.Applied, 50)}
			if err := p.Err(); err != nil {
				entry["error"] = session.ClipText(err.Error(), 512)
			}
			s.m.LedgerAppend(ctx, parent.ID, "promote", p.WithNotes(entry))
			return nil
		}),
	)
}

// checkpoint takes the parent's disk checkpoint pre-promote-<child>-<time>
// (with a suffix when that tag exists already) under the hold.
func (s *Service) checkpoint(ctx context.Context, tenant, parent, child string) (string, error) {
	stamp := s.m.Now().UTC().Format("20060102T150405Z")
	for i := 1; ; i++ {
		tag := checkpointTag(child, stamp, i)
		ck, err := s.m.CheckpointHeld(ctx, tenant, parent, op, tag, false)
		if err == nil {
			return ck.Tag, nil
		}
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "already has a checkpoint") || i >= 9 {
			return "", err
		}
	}
}

// checkpointTag is pre-promote-<child>-<stamp>, and -<n> after it from the
// second on, with the child's id cut to keep the tag within a tag's 64
// characters.
func checkpointTag(child, stamp string, n int) string {
	suffix := ""
	if n > 1 {
		suffix = fmt.Sprintf("-%d", n)
	}
	if max := apiv1.MaxTagLen - len("pre-promote--") - len(stamp) - len(suffix); len(child) > max {
		child = child[:max]
	}
	return "pre-promote-" + child + "-" + stamp + suffix
}

// transfer makes the parent's file at abs what the child's is (ch), or
// removes it, checking what it copies against the plan's digest.
func transfer(ctx context.Context, from, to *client.Client, abs string, ch apiv1.PromoteChange, deny, exec []string) error {
	if ch.Op == apiv1.PromoteDeleted {
		if err := to.DeleteFileGuarded(ctx, abs, false, deny, exec); err != nil {
			return session.GuestError(err)
		}
		return nil
	}
	mode := permBits(ch.Mode)
	yes := true
	if ch.Size <= api.MaxFileReadBytes && ch.Size <= api.MaxFileWriteBytes {
		f, err := from.ReadFile(ctx, abs)
		if err != nil {
			return fmt.Errorf("read the child's file: %w", session.GuestError(err))
		}
		if sum := sha256.Sum256(f.Content); hex.EncodeToString(sum[:]) != ch.SHA256 {
			return fmt.Errorf("%w: the child's file changed since the plan was made", errdefs.ErrConflict)
		}
		if _, err := to.WriteFile(ctx, api.FileContent{Path: abs, Content: f.Content, Mode: mode, Parents: &yes, Deny: deny, Exec: exec}); err != nil {
			return session.GuestError(err)
		}
		return nil
	}
	// A large file moves in ranges, as an upload the parent's agent
	// assembles and checks against the plan's digest before it renames
	// it into place.
	var b [8]byte
	rand.Read(b[:])
	up := "promote-" + hex.EncodeToString(b[:])
	ok := false
	defer func() {
		if !ok {
			to.AbortUpload(context.WithoutCancel(ctx), up)
		}
	}()
	for off := int64(0); off < ch.Size; {
		r, err := from.ReadRange(ctx, abs, off, chunk, false)
		if err != nil {
			return fmt.Errorf("read the child's file: %w", session.GuestError(err))
		}
		if len(r.Data) == 0 {
			return fmt.Errorf("%w: the child's file is shorter than the plan says", errdefs.ErrConflict)
		}
		if off+int64(len(r.Data)) > ch.Size {
			return fmt.Errorf("%w: the child's file is longer than the plan says", errdefs.ErrConflict)
		}
		if _, err := to.UploadPart(ctx, up, off, r.Data); err != nil {
			return session.GuestError(err)
		}
		off += int64(len(r.Data))
	}
	if _, err := to.CompleteUpload(ctx, up, api.UploadComplete{Path: abs, Size: ch.Size, SHA256: ch.SHA256, Mode: mode, Parents: &yes, Deny: deny, Exec: exec}); err != nil {
		return session.GuestError(err)
	}
	ok = true
	return nil
}

// permBits is a manifest's mode with the permission bits alone: a
// promoted file never gains set-id or sticky bits.
func permBits(mode string) string {
	var n uint32
	if _, err := fmt.Sscanf(mode, "%o", &n); err != nil {
		return ""
	}
	return fmt.Sprintf("%04o", n&0o777)
}

// manifest reads one side's workspace.
func manifest(ctx context.Context, c *client.Client, ws, side string) (*api.Manifest, error) {
	m, err := c.Manifest(ctx, api.ManifestRequest{Path: ws})
	if err != nil {
		return nil, fmt.Errorf("read %s's workspace: %w", side, session.GuestError(err))
	}
	if m.Truncated {
		return nil, coded(errdefs.CodePromoteTooLarge, errdefs.ErrConflict, "%s's workspace has more than %d entries: too many to compare", side, api.MaxManifestFiles)
	}
	return m, nil
}

// notCarried is what a promotion never moves, and the child's changes to
// non-regular files it leaves.
func notCarried(ws string, pl *plan) []apiv1.NotCarried {
	out := []apiv1.NotCarried{
		{What: "memory", Note: "the child's memory is not merged: the parent keeps its own"},
		{What: "processes", Note: "the child's processes and jobs stay in the child; none start in the parent"},
		{What: "outside_workspace", Path: ws, Note: "only regular files under the workspace are compared and moved; files elsewhere, ownership and empty directories are not"},
	}
	return append(out, pl.notRegular...)
}

func firstPaths(ps []string, n int) []string {
	if len(ps) > n {
		return append(ps[:n:n], "…")
	}
	return ps
}
