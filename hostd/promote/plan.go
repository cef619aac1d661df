package promote

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
)

// maxNotRegular bounds the entries of not_carried that name one path each
// (links and other non-regular files the child changed); the rest are
// counted in one more entry.
const maxNotRegular = 100

// plan is the three-way comparison and what it leaves out.
type plan struct {
	apiv1.PromotePlan
	notRegular []apiv1.NotCarried
}

// scope says whether a workspace-relative path is inside the request's
// paths (nil: every path).
type scope []string

func (s scope) has(p string) bool {
	if len(s) == 0 {
		return true
	}
	for _, d := range s {
		if d == "." || p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// relPaths turns the request's paths into workspace-relative, clean
// paths: absolute ones must be the workspace or lie under it, relative
// ones are taken from it, and none may climb out of it.
func relPaths(ws string, in []string) (scope, error) {
	if len(in) > apiv1.MaxPromotePaths {
		return nil, fmt.Errorf("%d paths: at most %d in one promotion", len(in), apiv1.MaxPromotePaths)
	}
	out := make(scope, 0, len(in))
	for _, p := range in {
		if p == "" || len(p) > 4096 || strings.ContainsAny(p, "\x00\n") {
			return nil, fmt.Errorf("path %q must be 1 to 4096 bytes without NUL or newline", clip(p))
		}
		rel := p
		if strings.HasPrefix(p, "/") {
			c := path.Clean(p)
			switch {
			case c == ws:
				rel = "."
			case strings.HasPrefix(c, ws+"/"):
				rel = strings.TrimPrefix(c, ws+"/")
			default:
				return nil, fmt.Errorf("path %q is outside the workspace %s", clip(p), ws)
			}
		}
		rel = path.Clean(rel)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("path %q climbs out of the workspace %s", clip(p), ws)
		}
		out = append(out, rel)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// entries indexes a manifest's entries by path, leaving directories out:
// a promotion moves files, and a directory follows from the files in it.
func entries(m *api.Manifest) map[string]api.ManifestEntry {
	out := make(map[string]api.ManifestEntry, len(m.Entries))
	for _, e := range m.Entries {
		if e.Type != api.TypeDir {
			out[e.Path] = e
		}
	}
	return out
}

// same reports whether two sides hold the same thing at a path (both
// absent counts as the same).
func same(a api.ManifestEntry, aok bool, b api.ManifestEntry, bok bool) bool {
	if !aok || !bok {
		return aok == bok
	}
	if a.Type != b.Type || a.Mode != b.Mode {
		return false
	}
	switch a.Type {
	case api.TypeFile:
		// A file that could not be hashed is never the same as anything.
		return a.SHA256 != "" && a.SHA256 == b.SHA256
	case api.TypeSymlink:
		return a.Target == b.Target
	}
	return true
}

// makePlan compares base (the parent's workspace at the fork), child and
// parent (both now), within sc.
func makePlan(base, child, parent *api.Manifest, sc scope) *plan {
	b, c, q := entries(base), entries(child), entries(parent)
	paths := map[string]bool{}
	for _, m := range []map[string]api.ManifestEntry{b, c, q} {
		for p := range m {
			paths[p] = true
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		if sc.has(p) {
			sorted = append(sorted, p)
		}
	}
	sort.Strings(sorted)
	pl := &plan{PromotePlan: apiv1.PromotePlan{Apply: []apiv1.PromoteChange{}, AlreadyApplied: []apiv1.PromoteChange{}, Conflicts: []apiv1.PromoteConflict{}}}
	notRegular := 0
	for _, p := range sorted {
		be, bok := b[p]
		ce, cok := c[p]
		qe, qok := q[p]
		if same(be, bok, ce, cok) {
			if cok && ce.Type == api.TypeFile {
				pl.Untouched++
			}
			continue
		}
		// The child changed p. Only regular files move.
		if (cok && ce.Type != api.TypeFile) || (!cok && bok && be.Type != api.TypeFile) {
			if notRegular++; notRegular <= maxNotRegular {
				note := fmt.Sprintf("the child made this a %s, which is not moved: only regular files are", ce.Type)
				if !cok {
					note = fmt.Sprintf("the child deleted this %s, which is not moved: only regular files are", be.Type)
				}
				pl.notRegular = append(pl.notRegular, apiv1.NotCarried{What: "not_regular_file", Path: p, Note: note})
			}
			continue
		}
		ch := apiv1.PromoteChange{Path: p}
		if dir, e, ok := nonDirAbove(q, p); ok {
			// Written there, the file would land where the parent's
			// link leads, maybe outside the workspace.
			pl.Conflicts = append(pl.Conflicts, apiv1.PromoteConflict{Path: p, Op: opOf(be, bok, cok),
				Reason: fmt.Sprintf("the parent has a %s at %s, not a directory", e.Type, dir)})
			continue
		}
		ch.Op = opOf(be, bok, cok)
		if cok {
			ch.Size, ch.Mode, ch.SHA256 = ce.Size, ce.Mode, ce.SHA256
		}
		switch {
		case cok && ce.SHA256 == "":
			pl.Conflicts = append(pl.Conflicts, apiv1.PromoteConflict{Path: p, Op: ch.Op, Reason: "the child's file could not be read"})
		case same(qe, qok, ce, cok):
			pl.AlreadyApplied = append(pl.AlreadyApplied, ch)
		case same(qe, qok, be, bok):
			pl.Apply = append(pl.Apply, ch)
			pl.Bytes += ch.Size
		default:
			pl.Conflicts = append(pl.Conflicts, apiv1.PromoteConflict{Path: p, Op: ch.Op, Reason: parentDid(be, bok, qe, qok)})
		}
	}
	if notRegular > maxNotRegular {
		pl.notRegular = append(pl.notRegular, apiv1.NotCarried{What: "not_regular_file",
			Note: fmt.Sprintf("%d more changes to links or other non-regular files are not moved", notRegular-maxNotRegular)})
	}
	return pl
}

// opOf is what the child did to a path it changed.
func opOf(b api.ManifestEntry, bok, cok bool) string {
	switch {
	case !cok:
		return apiv1.PromoteDeleted
	case !bok || b.Type != api.TypeFile:
		return apiv1.PromoteAdded
	}
	return apiv1.PromoteModified
}

// nonDirAbove finds an entry of m (which holds no directories) at one of
// p's parent directories: a link or a file where p needs a directory.
func nonDirAbove(m map[string]api.ManifestEntry, p string) (string, api.ManifestEntry, bool) {
	for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if e, ok := m[dir]; ok {
			return dir, e, true
		}
	}
	return "", api.ManifestEntry{}, false
}

// parentDid says what the parent did to a path since the fork.
func parentDid(b api.ManifestEntry, bok bool, q api.ManifestEntry, qok bool) string {
	switch {
	case !qok:
		return "the parent deleted it since the fork"
	case !bok:
		return "the parent added it too"
	case q.Type != api.TypeFile:
		return "the parent has a " + q.Type + " there now"
	case q.SHA256 == "":
		return "the parent's file could not be read"
	}
	return "the parent changed it too since the fork"
}

// changes is how many paths the plan lists.
func (p *plan) changes() int { return len(p.Apply) + len(p.AlreadyApplied) + len(p.Conflicts) }

// id is the plan's digest: any difference in what it would do, or in what
// it leaves, gives another id.
func (p *plan) id(child, parent, ws string) string {
	raw, _ := json.Marshal(struct {
		Child, Parent, Workspace string
		Plan                     apiv1.PromotePlan
	}{child, parent, ws, p.PromotePlan})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}
