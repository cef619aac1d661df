//go:build linux

package confine

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Why go-landlock's process-wide enforcement and not landlock_restrict_self
// on one locked OS thread followed by exec from that thread: the
// one-thread variant would be enough for Main, because execve keeps only
// the calling thread and its credentials (the Landlock domain lives in
// them), and the other Go threads run nothing but this program until
// then. But Apply is exported, and a caller that does not exec (or execs
// from another goroutine) would be left with unconfined threads. The
// process-wide path is correct for every caller: on ABI 8+ the kernel
// syncs the domain to all threads (TSYNC); below that psx runs the
// syscall on each thread. psx v1.2.78 needs no linker flags (it no longer
// wraps pthread_create; it walks /proc/self/task, and go-landlock grants
// that directory for the purpose), so the static guest build needs none.

// abiConfigs[v] is go-landlock's configuration for Landlock ABI v; its
// HandledAccessFS is every filesystem right that ABI can restrict.
var abiConfigs = []landlock.Config{
	{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// Filesystem rights, in groups.
const (
	rightExec  = landlock.AccessFSSet(ll.AccessFSExecute)
	rightsRead = landlock.AccessFSSet(ll.AccessFSReadFile | ll.AccessFSReadDir)
	// rightsWrite is what read_write adds. make_char and make_block are
	// left out on purpose: a device node made in a writable directory
	// would open a raw device past every other rule.
	rightsWrite = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSRemoveDir |
		ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSMakeReg |
		ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym |
		ll.AccessFSRefer | ll.AccessFSTruncate | ll.AccessFSIoctlDev |
		ll.AccessFSResolveUnix)
	// rightsFile are the rights the kernel accepts on a rule for a
	// file that is not a directory.
	rightsFile = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSWriteFile |
		ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev)
	// rightsDevice is what the standard device files get.
	rightsDevice = landlock.AccessFSSet(ll.AccessFSReadFile | ll.AccessFSWriteFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev)
)

// rightABI names the rights that later ABIs added and that a policy may
// need, with the ABI that brought each.
var rightABI = []struct {
	right landlock.AccessFSSet
	name  string
	abi   int
}{
	{ll.AccessFSRefer, "refer", 2},
	{ll.AccessFSTruncate, "truncate", 3},
	{ll.AccessFSIoctlDev, "ioctl_dev", 5},
}

// System paths every confined command may read (and execute, unless an
// exec allow-list is given).
var (
	systemExecDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/opt"}
	systemReadDirs = []string{"/proc", "/sys", "/run", "/dev/fd"}
	systemDevices  = []string{"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty", "/dev/ptmx"}
	systemRWDirs   = []string{"/dev/pts", "/dev/shm"}
)

// Files always executable under an exec allow-list: the shell (commands
// arrive as sh -c) and true.
var alwaysExec = []string{
	"/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/bash", "/bin/dash", "/usr/bin/dash",
	"/bin/true", "/usr/bin/true",
}

// Dynamic loaders. The kernel opens a binary's ELF interpreter as an
// executable, so it needs the execute right; shared libraries are only
// mmap'ed, which Landlock's execute right does not cover, so library
// directories stay readable and not executable.
var loaderGlobs = []string{
	"/lib64/ld-linux*.so*", "/lib/ld-linux*.so*", "/lib/ld-musl-*.so*",
	"/lib/*-linux-gnu*/ld-linux*.so*", "/usr/lib64/ld-linux*.so*", "/usr/lib/*-linux-gnu*/ld-linux*.so*",
}

type pathRule struct {
	path   string
	access landlock.AccessFSSet
}

// landlockPlan is the ruleset Apply will enforce, worked out in advance.
type landlockPlan struct {
	abi      int
	handled  landlock.AccessFSSet // 0: no ruleset
	rules    []pathRule
	execList bool
	strict   bool
	missing  []string
}

func (lp *landlockPlan) enabled() bool { return lp.handled != 0 }

// planLandlock decides what to restrict on a kernel with the given ABI.
// Read and write paths turn on the filesystem ruleset, which handles
// every right the ABI knows; an exec list alone handles only execute,
// so reads and writes stay as they were.
func planLandlock(n normalized, abi int) (*landlockPlan, error) {
	lp := &landlockPlan{abi: abi, strict: n.strict, execList: len(n.exec) > 0}
	fsRules := len(n.readOnly) > 0 || len(n.readWrite) > 0
	if !fsRules && !lp.execList {
		return lp, nil
	}

	// The exec allow-list has no best-effort mode: a list that is not
	// enforced would be a list in name only.
	if lp.execList && abi < 1 {
		return nil, fmt.Errorf("%w: the executable allow-list needs Landlock, which this kernel does not offer", ErrNotEnforceable)
	}

	var needed, kernel landlock.AccessFSSet
	if fsRules {
		kernel = abiConfigs[abi].HandledAccessFS
		// Truncate is always needed, or a read-only file could still be
		// emptied; refer and ioctl_dev are what read_write grants.
		needed = abiConfigs[1].HandledAccessFS | ll.AccessFSTruncate
		if len(n.readWrite) > 0 {
			needed |= ll.AccessFSRefer | ll.AccessFSIoctlDev
		}
	} else {
		kernel = abiConfigs[abi].HandledAccessFS & rightExec
		needed = rightExec
	}
	if abi < 1 {
		lp.missing = append(lp.missing, "landlock (the kernel has no Landlock)")
	} else {
		for _, r := range rightABI {
			if needed&r.right != 0 && kernel&r.right == 0 {
				lp.missing = append(lp.missing, fmt.Sprintf("%s (needs Landlock ABI %d, kernel has %d)", r.name, r.abi, abi))
			}
		}
	}
	// A rule cannot take away what a rule on a parent directory grants.
	// Rules follow symbolic links to the directory they reach, so where
	// the paths lead is compared too: a read-only path that leads into a
	// writable directory (a /workspace linked to /tmp/ws) is writable.
	for _, ro := range n.readOnly {
		for _, rw := range n.readWrite {
			if within(ro, rw) {
				lp.missing = append(lp.missing, fmt.Sprintf("read_only %s (it lies under read_write %s)", ro, rw))
			}
		}
		to := leadsTo(ro)
		for _, rw := range slices.Concat(n.readWrite, systemRWDirs) {
			if rwTo := leadsTo(rw); !within(ro, rw) && within(to, rwTo) {
				lp.missing = append(lp.missing, fmt.Sprintf("read_only %s (it leads to %s, under read_write %s)", ro, to, rwTo))
			}
		}
	}
	if n.strict && len(lp.missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s (set enforcement to %q to run anyway)", ErrNotEnforceable, strings.Join(lp.missing, "; "), BestEffort)
	}
	if abi < 1 {
		return lp, nil
	}
	lp.handled = kernel

	var execRight landlock.AccessFSSet
	if !lp.execList {
		execRight = rightExec
	}
	add := func(access landlock.AccessFSSet, paths ...string) {
		for _, p := range paths {
			lp.addRule(p, access)
		}
	}
	add(rightsRead|execRight, systemExecDirs...)
	add(rightsRead, systemReadDirs...)
	add(rightsDevice, systemDevices...)
	add(rightsRead|rightsWrite, systemRWDirs...)
	add(rightsRead|execRight, n.readOnly...)
	add(rightsRead|rightsWrite|execRight, n.readWrite...)
	if lp.execList {
		files := slices.Concat(n.exec, alwaysExec, loaders(n.exec))
		add(rightExec|ll.AccessFSReadFile, files...)
	}
	return lp, nil
}

// leadsTo is where path leads once its symbolic links are followed; path
// itself when it does not exist (a missing path gets no rule).
func leadsTo(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// addRule adds a rule for path when it exists, narrowed to what the
// kernel handles and to file rights when path is not a directory.
// Missing paths are skipped: a rule can only loosen, so leaving one out
// never grants more.
func (lp *landlockPlan) addRule(path string, access landlock.AccessFSSet) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	if !fi.IsDir() {
		access &= rightsFile
	}
	access &= lp.handled
	if access == 0 {
		return
	}
	for i, r := range lp.rules {
		if r.path == path {
			lp.rules[i].access |= access
			return
		}
	}
	lp.rules = append(lp.rules, pathRule{path, access})
}

// restrict enforces the plan on every thread of the process.
func (lp *landlockPlan) restrict() error {
	if !lp.enabled() {
		return nil
	}
	rules := make([]landlock.Rule, 0, len(lp.rules))
	for _, r := range lp.rules {
		rules = append(rules, landlock.PathAccess(r.access, r.path))
	}
	cfg := landlock.Config{HandledAccessFS: lp.handled}
	if !lp.strict {
		cfg = cfg.BestEffort()
	}
	return cfg.RestrictPaths(rules...)
}

// loaders lists the dynamic loaders on this system and the ELF
// interpreters the given executables name, with symlinks resolved.
func loaders(execs []string) []string {
	var out []string
	addResolved := func(p string) {
		if r, err := filepath.EvalSymlinks(p); err == nil && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, g := range loaderGlobs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			addResolved(m)
		}
	}
	for _, e := range slices.Concat(execs, alwaysExec) {
		if interp := elfInterpreter(e); interp != "" {
			addResolved(interp)
		}
	}
	return out
}

// elfInterpreter returns the PT_INTERP of an ELF file, or "".
func elfInterpreter(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, min(p.Filesz, 4096))
		if _, err := p.ReadAt(buf, 0); err != nil {
			return ""
		}
		if i := slices.Index(buf, 0); i >= 0 {
			buf = buf[:i]
		}
		return string(buf)
	}
	return ""
}
