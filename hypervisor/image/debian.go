package image

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// DebianOptions configure BuildDebian.
type DebianOptions struct {
	Suite   string   // default bookworm
	Mirror  string   // default http://deb.debian.org/debian
	Include []string // packages beyond the default set
	// Log receives debootstrap's output lines (nil: dropped).
	Log io.Writer
}

// DebianPackages are installed in every debian image.
var DebianPackages = []string{"git", "curl", "python3", "ca-certificates", "coreutils", "procps"}

var (
	reRetrieving  = regexp.MustCompile(`^I: Retrieving (\S+)`)
	reValidating  = regexp.MustCompile(`^I: Validating (\S+)`)
	reUnpacking   = regexp.MustCompile(`^I: Unpacking (\S+)`)
	reConfiguring = regexp.MustCompile(`^I: Configuring (\S+)`)
	reFound       = regexp.MustCompile(`^I: Found additional (required|base) dependencies: (.*)`)
	reBase        = regexp.MustCompile(`^I: Checking component main on`)
)

// BuildDebian builds a Debian root filesystem with debootstrap.
func (s Store) BuildDebian(ctx context.Context, name string, opt DebianOptions, progress Progress) (Meta, error) {
	if err := ValidName(name); err != nil {
		return Meta{}, err
	}
	if progress == nil {
		progress = func(string, int, int) {}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return Meta{}, fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", err)
	}
	if opt.Suite == "" {
		opt.Suite = "bookworm"
	}
	if opt.Mirror == "" {
		opt.Mirror = "http://deb.debian.org/debian"
	}
	pkgs := append(append([]string{}, DebianPackages...), opt.Include...)
	for _, p := range pkgs {
		if !regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*$`).MatchString(p) {
			return Meta{}, fmt.Errorf("invalid package name %q", p)
		}
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return Meta{}, err
	}
	tmp, err := os.MkdirTemp(s.Dir, "."+name+".build-")
	if err != nil {
		return Meta{}, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "rootfs")
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase",
		"--include="+strings.Join(pkgs, ","), opt.Suite, root, opt.Mirror)
	// debootstrap runs dpkg and friends, and mounts /proc and /sys in the
	// new root: on cancel, kill the whole group and unmount what it left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	defer unmountUnder(root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Meta{}, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return Meta{}, err
	}
	// debootstrap prints one line per package per phase; count them
	// against the package total it announces.
	total := 0
	counts := map[string]int{}
	sc := bufio.NewScanner(out)
	var tail []string
	for sc.Scan() {
		line := sc.Text()
		if opt.Log != nil {
			fmt.Fprintln(opt.Log, line)
		}
		tail = append(tail, line)
		if len(tail) > 20 {
			tail = tail[1:]
		}
		switch {
		case reBase.MatchString(line):
			progress("resolving", 0, 0)
		case reFound.MatchString(line):
			total += len(strings.Fields(reFound.FindStringSubmatch(line)[2]))
		case reRetrieving.MatchString(line):
			counts["downloading"]++
			progress("downloading", counts["downloading"], total)
		case reValidating.MatchString(line):
		case reUnpacking.MatchString(line):
			counts["unpacking"]++
			progress("unpacking", counts["unpacking"], total)
		case reConfiguring.MatchString(line):
			counts["configuring"]++
			progress("configuring", counts["configuring"], total)
		}
	}
	if err := cmd.Wait(); err != nil {
		return Meta{}, fmt.Errorf("debootstrap failed: %w; last output:\n%s", err, strings.Join(tail, "\n"))
	}
	// No daemons start in the image, and apt caches are not kept.
	os.RemoveAll(filepath.Join(root, "var/cache/apt/archives"))
	os.MkdirAll(filepath.Join(root, "var/cache/apt/archives/partial"), 0o755)
	if err := finishTree(root); err != nil {
		return Meta{}, err
	}
	progress("done", 1, 1)
	return s.commit(name, "debian", tmp, fmt.Sprintf("debootstrap %s with %s", opt.Suite, strings.Join(pkgs, " ")))
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		syscall.Unmount(p, syscall.MNT_DETACH)
	}
}
