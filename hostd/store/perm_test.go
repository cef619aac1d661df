package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDatabaseFilesPrivate stats the database file and its -wal and -shm
// files: 0600 for a new database even under umask 0 (SQLite alone made
// them 0666 less the umask, 0644 under the usual one), and 0600 again for
// files an older version left 0644, once Open has run.
func TestDatabaseFilesPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "paddock.db")
	files := []string{path, path + "-wal", path + "-shm"}
	check := func(when string) {
		t.Helper()
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatalf("%s: %v (the check needs every file to exist)", when, err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s: %s is %04o, want 0600", when, filepath.Base(f), got)
			}
		}
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCreate(t, s, session("ses-perm-1", "", time.Now()))
	check("a new database")

	// Files left readable by an older version, while a process has the
	// database open (so the -wal and -shm exist): the next Open takes
	// group and other rights off all three.
	for _, f := range files {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	mustCreate(t, s2, session("ses-perm-2", "", time.Now()))
	check("an old database opened again")

	// A database path that is not a regular file is refused.
	if _, err := Open(t.TempDir()); err == nil {
		t.Error("Open of a directory: no error")
	}
}
