package main

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnifiedDiff: a small change gives the hunk diff -u gives, and for
// random pairs of texts, patch(1) applied to the first with the diff gives
// the second.
func TestUnifiedDiff(t *testing.T) {
	var b strings.Builder
	unifiedDiff(&b, "a/f", "b/f", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n")
	want := "--- a/f\n+++ b/f\n@@ -2,8 +2,9 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n+10\n"
	if b.String() != want {
		t.Errorf("diff:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	unifiedDiff(&b, "a", "b", "same\n", "same\n")
	if b.String() != "" {
		t.Errorf("equal texts: %q", b.String())
	}
	if err := unifiedDiff(&b, "a", "b", strings.Repeat("x\n", 3000), strings.Repeat("y\n", 3000)); err == nil {
		t.Errorf("3000 by 3000 lines compared, past the bound")
	}

	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("no patch(1)")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		var s strings.Builder
		for range r.IntN(40) {
			s.WriteString([]string{"a", "b", "c", "d", ""}[r.IntN(5)] + "\n")
		}
		return s.String()
	}
	for n := range 200 {
		a, bb := text(), text()
		var d strings.Builder
		if err := unifiedDiff(&d, "f", "f", a, bb); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(a), 0o644)
		cmd := exec.Command("patch", "-s", "--no-backup-if-mismatch", f)
		cmd.Stdin = strings.NewReader(d.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("case %d: patch: %v %s\n%q -> %q\n%s", n, err, out, a, bb, d.String())
		}
		if got, _ := os.ReadFile(f); string(got) != bb {
			t.Fatalf("case %d: patched %q, want %q\n%s", n, got, bb, d.String())
		}
	}
}
