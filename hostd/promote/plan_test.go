package promote

import (
	"regexp"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
)

func file(p, sum string) api.ManifestEntry {
	return api.ManifestEntry{Path: p, Type: api.TypeFile, Mode: "0644", SHA256: sum, Size: int64(len(sum))}
}

func man(es ...api.ManifestEntry) *api.Manifest { return &api.Manifest{Entries: es} }

func (p *plan) summary() string {
	var out []string
	for _, c := range p.Apply {
		out = append(out, "apply "+c.Op+" "+c.Path)
	}
	for _, c := range p.AlreadyApplied {
		out = append(out, "have "+c.Op+" "+c.Path)
	}
	for _, c := range p.Conflicts {
		out = append(out, "conflict "+c.Op+" "+c.Path+": "+c.Reason)
	}
	for _, n := range p.notRegular {
		out = append(out, "left "+n.Path)
	}
	return strings.Join(out, "\n")
}

// TestMakePlan holds the three-way merge to its cases: what the child
// alone changed is applied, what the parent has already is not applied
// again, and whatever the parent changed too (content, a deletion, an
// addition of its own, a link in the way) is a conflict, never
// overwritten.
func TestMakePlan(t *testing.T) {
	exec := file("run.sh", "r1")
	execX := exec
	execX.Mode = "0755"
	unread := file("locked", "")
	never := file("never", "") // unreadable all along: still never taken as unchanged
	base := man(file("same", "s"), file("edit", "e1"), file("gone", "g"), file("both", "b1"), file("pgone", "p1"),
		file("have", "h1"), exec, api.ManifestEntry{Path: "ln", Type: api.TypeSymlink, Target: "same"},
		api.ManifestEntry{Path: "sub", Type: api.TypeSymlink, Target: "/tmp"}, api.ManifestEntry{Path: "dir", Type: api.TypeDir}, file("locked", "l1"), never)
	child := man(file("same", "s"), file("edit", "e2"), file("both", "b2"), file("pgone", "p2"), file("have", "h2"),
		execX, file("new", "n"), file("twin", "t1"), api.ManifestEntry{Path: "ln", Type: api.TypeSymlink, Target: "edit"},
		api.ManifestEntry{Path: "sub", Type: api.TypeDir}, file("sub/evil", "x"), api.ManifestEntry{Path: "dir", Type: api.TypeDir}, file("dir/f", "f"), unread, never)
	parent := man(file("same", "s"), file("edit", "e1"), file("gone", "g"), file("both", "b3"), file("have", "h2"),
		exec, file("twin", "t2"), api.ManifestEntry{Path: "ln", Type: api.TypeSymlink, Target: "same"},
		api.ManifestEntry{Path: "sub", Type: api.TypeSymlink, Target: "/tmp"}, file("locked", "l1"), never)
	pl := makePlan(base, child, parent, nil)
	want := strings.Join([]string{
		"apply added dir/f",
		"apply modified edit",
		"apply deleted gone",
		"apply added new",
		"apply modified run.sh",
		"have modified have",
		"conflict modified both: the parent changed it too since the fork",
		"conflict modified locked: the child's file could not be read",
		"conflict modified never: the child's file could not be read",
		"conflict modified pgone: the parent deleted it since the fork",
		"conflict added sub/evil: the parent has a symlink at sub, not a directory",
		"conflict added twin: the parent added it too",
		"left ln",
		"left sub",
	}, "\n")
	if got := pl.summary(); got != want {
		t.Errorf("plan:\n%s\nwant:\n%s", got, want)
	}
	if pl.Untouched != 1 || pl.Bytes != 1+2+1+2 {
		t.Errorf("untouched %d bytes %d", pl.Untouched, pl.Bytes)
	}
	// Limited to paths: only what lies under them.
	if got := makePlan(base, child, parent, scope{"dir", "edit"}).summary(); got != "apply added dir/f\napply modified edit" {
		t.Errorf("plan within dir and edit: %q", got)
	}

	// The id is stable, and any change on either side gives another.
	id := pl.id("c", "p", "/w")
	if again := makePlan(base, child, parent, nil).id("c", "p", "/w"); again != id || !planIDRE.MatchString(id) {
		t.Errorf("plan ids %s and %s", id, again)
	}
	parent.Entries[1] = file("edit", "e9") // a path to apply, changed on the parent
	if other := makePlan(base, child, parent, nil).id("c", "p", "/w"); other == id {
		t.Error("the plan id did not change when the parent changed a path to apply")
	}
	parent.Entries[1] = file("edit", "e1")
	parent.Entries[3] = file("both", "b2") // the conflict resolved by hand
	if other := makePlan(base, child, parent, nil).id("c", "p", "/w"); other == id {
		t.Error("the plan id did not change when a conflict became applied")
	}
	parent.Entries[3] = file("both", "b3")
	child.Entries[1] = file("edit", "e3")
	if other := makePlan(base, child, parent, nil).id("c", "p", "/w"); other == id {
		t.Error("the plan id did not change when the child's file did")
	}
}

// TestRelPaths: the request's paths are taken inside the workspace, and
// anything outside it or past the limits is refused.
func TestRelPaths(t *testing.T) {
	sc, err := relPaths("/workspace", []string{"/workspace", "/workspace/a/", "b/./c", "/workspace/../workspace/d"})
	if err != nil || strings.Join(sc, ",") != ".,a,b/c,d" {
		t.Fatalf("relPaths: %v %v", sc, err)
	}
	for _, bad := range [][]string{{"/etc"}, {"/workspaces"}, {"../x"}, {"a/../../x"}, {""}, {"a\x00b"}, {strings.Repeat("a", 4097)}, make([]string, apiv1.MaxPromotePaths+1)} {
		if _, err := relPaths("/workspace", bad); err == nil {
			t.Errorf("relPaths(%.40q) was taken", bad)
		}
	}
	if !(scope{"a"}).has("a/b") || (scope{"a"}).has("ab") || !(scope{"."}).has("x") || !(scope(nil)).has("x") {
		t.Error("scope.has")
	}
}

// TestCheckpointTag: the tag always fits a checkpoint tag, whatever the
// child's id.
func TestCheckpointTag(t *testing.T) {
	tagRE := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	for _, child := range []string{"ses-1", "ses-6f9789bd235754b5-fc3190b6c4f66", strings.Repeat("x", 80)} {
		for _, n := range []int{1, 2, 9} {
			tag := checkpointTag(child, "20261204T223259Z", n)
			if !tagRE.MatchString(tag) || !strings.HasPrefix(tag, "pre-promote-") {
				t.Errorf("checkpointTag(%s, %d) = %q", child, n, tag)
			}
		}
	}
	if got := checkpointTag("ses-6f9789bd235754b5-fc3190b6c4f66", "20261204T223259Z", 1); got != "pre-promote-ses-6f9789bd235754b5-fc3190b6c4f66-20261204T223259Z" {
		t.Errorf("a child id that fits was cut: %s", got)
	}
	if permBits("4755") != "0755" || permBits("0644") != "0644" || permBits("x") != "" {
		t.Error("permBits")
	}
}
