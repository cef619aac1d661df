package console_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// xtermDir is where scripts/vendor-xterm.sh puts xterm.js.
const xtermDir = "static/vendor/xterm"

// readSums parses a sha256sum listing: file name to hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || name == "" || strings.ContainsAny(name, "/\\") {
			t.Fatalf("%s:%d: not a sha256sum line: %q", path, n, sc.Text())
		}
		if _, dup := sums[name]; dup {
			t.Fatalf("%s:%d: %s listed twice", path, n, name)
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestVendoredXtermChecksums: every file vendored from npm is the one
// scripts/vendor-xterm.sh fetched: its SHA-256 is the one SHA256SUMS
// records, and no file sits in the folder without being listed (an edit
// by hand, or a file copied in some other way, fails here).
func TestVendoredXtermChecksums(t *testing.T) {
	sums := readSums(t, filepath.Join(xtermDir, "SHA256SUMS"))
	for _, want := range []string{"xterm.esm.js", "xterm.css", "addon-fit.esm.js", "LICENSE.xterm", "LICENSE.addon-fit", "VERSIONS"} {
		if _, ok := sums[want]; !ok {
			t.Errorf("SHA256SUMS does not list %s", want)
		}
	}
	entries, err := os.ReadDir(xtermDir)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range entries {
		if e.Name() == "SHA256SUMS" {
			continue
		}
		onDisk = append(onDisk, e.Name())
		if !e.Type().IsRegular() {
			t.Errorf("%s/%s is not a regular file", xtermDir, e.Name())
			continue
		}
		want, ok := sums[e.Name()]
		if !ok {
			t.Errorf("%s/%s is not in SHA256SUMS: vendor with scripts/vendor-xterm.sh", xtermDir, e.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(xtermDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Errorf("%s/%s: sha256 %x, SHA256SUMS says %s: the file changed since scripts/vendor-xterm.sh wrote it", xtermDir, e.Name(), got, want)
		}
	}
	for name := range sums {
		if !slices.Contains(onDisk, name) {
			t.Errorf("SHA256SUMS lists %s, which is not in %s", name, xtermDir)
		}
	}
}
