package vmkit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// ErrNoKernel: the guest kernel (or busybox for the initramfs) could not be
// fetched from Debian's package archive and none is cached.
var ErrNoKernel = errors.New("vmkit: no guest kernel")

// KernelPackages are the Debian metapackages whose dependency names the
// cloud kernel the VM image boots, the first the archive has: 6.12 (from
// bookworm's security archive) brings Landlock ABI 6, which the guest's
// confinement needs; bookworm's own 6.1 has ABI 2.
var KernelPackages = []string{"linux-image-6.12-cloud-amd64", "linux-image-cloud-amd64"}

// BusyboxPackage supplies the initramfs's static /init helper (mount,
// insmod, switch_root): the smallest working thing, one 2 MB static binary.
const BusyboxPackage = "busybox-static"

// bootModules are the modules the initramfs loads (with their dependencies,
// ordered by each .ko's modinfo "depends"; a name the kernel has no module
// for is taken as built in). Machines put their devices on microvm's PCIe
// bus, whose virtio_pci transport the 6.12 cloud kernel builds in, as it
// does virtio_console; kits made before that loaded virtio_mmio too.
var bootModules = []string{"virtio_pci", "virtio_blk", "virtio_console"}

// moduleGroup is a set of modules the initramfs carries but does not load:
// it leaves them (with <name>.order, their load order) in the guest's
// /.paddock/modules, and the guest's PID 1 loads a group when the machine
// needs it, so a VM that does not pays nothing at boot.
type moduleGroup struct {
	name    string
	modules []string
}

// lazyModules: "netfilter" is what transparent egress's nftables rules
// (guest/egressfwd) need, since the guest has no modprobe to load them on
// demand: nf_tables (with nfnetlink, libcrc32c), the inet NAT chain type
// and the redir expression (nf_nat, and nf_conntrack, which also answers
// the redirect listener's SO_ORIGINAL_DST, with nf_defrag_ipv4/6), and the
// inet reject expression (nft_reject, nf_reject_ipv4/6); the 6.12 cloud
// kernel builds all of them as modules (NF_TABLES_INET and CRYPTO_CRC32C
// are built in). "vsock" is the agent channel's transport on hosts with
// /dev/vhost-vsock. "overlay" is overlayfs, for workspace overlays.
var lazyModules = []moduleGroup{
	{"netfilter", []string{"nf_tables", "nft_chain_nat", "nft_redir", "nf_conntrack", "nft_reject_inet"}},
	{"vsock", []string{"vsock", "vmw_vsock_virtio_transport"}},
	{"overlay", []string{"overlay"}},
}

// modulesKey names the module lists in the kernel cache, so a cache made
// for other lists is not used.
func modulesKey() string {
	h := sha256.New()
	// layout 2: the directory also holds the kernel's modules.builtin.
	fmt.Fprintf(h, "layout:2\nboot:%s\n", strings.Join(bootModules, " "))
	for _, g := range lazyModules {
		fmt.Fprintf(h, "%s:%s\n", g.name, strings.Join(g.modules, " "))
	}
	return "m" + hex.EncodeToString(h.Sum(nil)[:4])
}

// Kit is what a VM boots from: a kernel, an initramfs and a read-only base
// root disk (raw ext4) to put qcow2 overlays over.
type Kit struct {
	Kernel        string // vmlinuz
	KernelVersion string // "6.1.0-57-cloud-amd64 (6.1.192-3)"
	Initrd        string // cpio newc, uncompressed
	RootDisk      string // raw ext4, never written to
	Build         string // the image build the disk was made from
	RootFree      int64  // bytes free in the root disk's filesystem
}

// ext4Free is what dumpe2fs says is free in an ext4 image (0 if unsure).
func ext4Free(ctx context.Context, disk string) int64 {
	b, err := exec.CommandContext(ctx, "dumpe2fs", "-h", disk).Output()
	if err != nil {
		return 0
	}
	var free, bsize int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Free blocks:"); ok {
			fmt.Sscan(strings.TrimSpace(v), &free)
		}
		if v, ok := strings.CutPrefix(l, "Block size:"); ok {
			fmt.Sscan(strings.TrimSpace(v), &bsize)
		}
	}
	return free * bsize
}

// KitOptions say where the kit's parts are cached.
type KitOptions struct {
	// CacheDir holds kernels, busybox and initramfs images, keyed by
	// version (<state>/vm); required.
	CacheDir string
	// Progress, when set, is told each slow step.
	Progress func(step string)
	// GuestBinary, when set, is the static paddock-guest put in the
	// initramfs; the VM then runs it as PID 1 (vm-init) from a tmpfs at
	// /.paddock. Without it the root disk's shell idles after the marker.
	GuestBinary string
}

// BuildKit makes (or finds cached) the boot kit for the image build whose
// root filesystem is rootfs (image.Store.Rootfs). The kernel and busybox
// come from Debian's archive through apt-get download and are cached by
// version; the root disk is cached next to the build as vm-root.ext4, so it
// goes when the build is pruned.
func BuildKit(ctx context.Context, rootfs string, opts KitOptions) (Kit, error) {
	if opts.CacheDir == "" {
		return Kit{}, errors.New("vmkit: BuildKit needs a cache dir")
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if _, err := os.Stat(rootfs); err != nil {
		return Kit{}, fmt.Errorf("vmkit: image rootfs: %w", err)
	}
	kdir, kver, err := fetchKernel(ctx, opts.CacheDir, progress)
	if err != nil {
		return Kit{}, err
	}
	bb, err := FetchBusybox(ctx, opts.CacheDir, progress)
	if err != nil {
		return Kit{}, err
	}
	initrd, err := buildInitramfs(opts.CacheDir, kdir, bb, opts.GuestBinary, progress)
	if err != nil {
		return Kit{}, err
	}
	build := filepath.Base(filepath.Dir(rootfs))
	disk, err := buildRootDisk(ctx, rootfs, build, progress)
	if err != nil {
		return Kit{}, err
	}
	return Kit{Kernel: filepath.Join(kdir, "vmlinuz"), KernelVersion: kver, Initrd: initrd, RootDisk: disk, Build: build,
		RootFree: ext4Free(ctx, disk)}, nil
}

// aptShow returns the candidate's Version and Depends of a Debian package
// from the local apt lists (no network).
func aptShow(ctx context.Context, pkg string) (version, depends string, err error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "show", "--no-all-versions", pkg).Output()
	if err != nil {
		return "", "", fmt.Errorf("apt-cache show %s: %w", pkg, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Version: "); ok && version == "" {
			version = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Depends: "); ok && depends == "" {
			depends = strings.TrimSpace(v)
		}
	}
	if version == "" {
		return "", "", fmt.Errorf("apt-cache show %s: no version", pkg)
	}
	return version, depends, nil
}

// aptFetch downloads pkg (its candidate) with apt-get download into a
// fresh temporary dir under parent and extracts it with dpkg-deb -x; it
// returns the extracted tree, which the caller removes with its parent.
func aptFetch(ctx context.Context, parent, pkg string) (string, error) {
	dl := filepath.Join(parent, "deb")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return "", err
	}
	os.Chmod(dl, 0o777) // apt's _apt user may write here; if it cannot reach it, apt warns and downloads as root
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", pkg)
	cmd.Dir = dl
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w: %s", pkg, err, strings.TrimSpace(string(out)))
	}
	debs, _ := filepath.Glob(filepath.Join(dl, "*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s: %d .deb files", pkg, len(debs))
	}
	tree := filepath.Join(parent, "tree")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], tree).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x %s: %w: %s", debs[0], err, out)
	}
	return tree, nil
}

// cached picks the newest complete entry under dir (one holding want) when
// the archive cannot be asked.
func cached(dir, want string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "*", want))
	if len(m) == 0 {
		return ""
	}
	sort.Strings(m)
	return filepath.Dir(m[len(m)-1])
}

// fetchKernel returns <cache>/kernel/<package>_<version>_<modulesKey>,
// holding vmlinuz, modules/ (the boot and lazy modules with their
// dependencies, uncompressed), modules.builtin (the kernel's own list of
// what it builds in, when it ships one), modules.order (the boot modules' load
// order, one file name a line) and <group>.order for each lazy group.
func fetchKernel(ctx context.Context, cache string, progress func(string)) (string, string, error) {
	root := filepath.Join(cache, "kernel")
	key := modulesKey()
	var depends string
	var err error
	for _, meta := range KernelPackages {
		if _, depends, err = aptShow(ctx, meta); err == nil {
			break
		}
	}
	var pkg, ver string
	if err == nil {
		// "linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-3)"
		f := strings.Fields(strings.Split(depends, ",")[0])
		if len(f) == 3 && strings.HasPrefix(f[0], "linux-image-") {
			pkg, ver = f[0], strings.TrimSuffix(f[2], ")")
		} else {
			err = fmt.Errorf("kernel metapackage: unexpected Depends %q", depends)
		}
	}
	if err != nil {
		// Offline: the newest cached kernel made for this module list
		// (package names and Debian versions have no '_').
		m, _ := filepath.Glob(filepath.Join(root, "*_*_"+key, "modules.order"))
		if len(m) > 0 {
			sort.Strings(m)
			d := filepath.Dir(m[len(m)-1])
			if f := strings.Split(filepath.Base(d), "_"); len(f) == 3 {
				return d, strings.TrimPrefix(f[0], "linux-image-") + " (" + f[1] + ")", nil
			}
		}
		return "", "", fmt.Errorf("%w: %w", ErrNoKernel, err)
	}
	kver := strings.TrimPrefix(pkg, "linux-image-") + " (" + ver + ")"
	dir := filepath.Join(root, pkg+"_"+ver+"_"+key)
	if _, err := os.Stat(filepath.Join(dir, "modules.order")); err == nil {
		return dir, kver, nil
	}
	progress("fetching kernel " + pkg + " " + ver)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", "", err
	}
	tmp, err := os.MkdirTemp(root, ".fetch-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	tree, err := aptFetch(ctx, tmp, pkg)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoKernel, err)
	}
	out := filepath.Join(tmp, "out")
	if err := os.MkdirAll(filepath.Join(out, "modules"), 0o755); err != nil {
		return "", "", err
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(tree, "boot", "vmlinuz-*"))
	if len(vmlinuz) != 1 {
		return "", "", fmt.Errorf("%w: %s has %d vmlinuz", ErrNoKernel, pkg, len(vmlinuz))
	}
	if err := copyFile(vmlinuz[0], filepath.Join(out, "vmlinuz"), 0o644); err != nil {
		return "", "", err
	}
	mods, _ := filepath.Glob(filepath.Join(tree, "lib", "modules", "*", "kernel"))
	if len(mods) != 1 {
		return "", "", fmt.Errorf("%w: %s: no module tree", ErrNoKernel, pkg)
	}
	// The kernel's list of built-in modules goes with the chosen ones, so
	// what the cache holds can be checked against the kernel it came from.
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(mods[0]), "modules.builtin")); err == nil {
		if err := os.WriteFile(filepath.Join(out, "modules.builtin"), b, 0o644); err != nil {
			return "", "", err
		}
	}
	order, err := moduleOrder(ctx, mods[0], bootModules, filepath.Join(out, "modules"))
	if err != nil {
		return "", "", err
	}
	for _, g := range lazyModules {
		gorder, err := moduleOrder(ctx, mods[0], g.modules, filepath.Join(out, "modules"))
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(out, g.name+".order"), []byte(strings.Join(gorder, "\n")+"\n"), 0o644); err != nil {
			return "", "", err
		}
	}
	// modules.order last: it says the directory is complete.
	if err := os.WriteFile(filepath.Join(out, "modules.order"), []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		return "", "", err
	}
	if err := os.Rename(out, dir); err != nil && !exists(filepath.Join(dir, "modules.order")) {
		return "", "", err
	}
	return dir, kver, nil
}

// modName normalizes a module's name as the kernel does ('-' is '_').
func modName(file string) string {
	n := filepath.Base(file)
	for _, ext := range []string{".ko.xz", ".ko.zst", ".ko.gz", ".ko"} {
		n = strings.TrimSuffix(n, ext)
	}
	return strings.ReplaceAll(n, "-", "_")
}

// moduleOrder finds wanted (and what they depend on, by modinfo
// "depends=") in the module tree, writes each uncompressed into dst as
// <name>.ko and returns the file names in a load order where every module
// comes after its dependencies.
//
// A module that is not in the tree must be built into the kernel: when the
// tree's modules.builtin (beside tree, as Debian ships it) is there, a name
// in neither is an error, since the guest could not load it.
func moduleOrder(ctx context.Context, tree string, wanted []string, dst string) ([]string, error) {
	index := map[string]string{}
	filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".ko") {
			index[modName(p)] = p
		}
		return nil
	})
	builtin, err := readBuiltin(filepath.Join(filepath.Dir(tree), "modules.builtin"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", name)
		case 2:
			return nil
		}
		state[name] = 1
		src, ok := index[name]
		if !ok {
			// Built into this kernel (6.12 builds in virtio_pci, for
			// one): nothing to load.
			if builtin != nil && !builtin[name] {
				return fmt.Errorf("module %s: the kernel neither has it as a module nor builds it in", name)
			}
			state[name] = 2
			return nil
		}
		data, err := readModule(ctx, src)
		if err != nil {
			return err
		}
		deps, err := modDepends(data)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dst, name+".ko"), data, 0o644); err != nil {
			return err
		}
		state[name] = 2
		order = append(order, name+".ko")
		return nil
	}
	for _, w := range wanted {
		if err := visit(w); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// readBuiltin reads a kernel's modules.builtin ("kernel/drivers/virtio/
// virtio_ring.ko" a line) as a set of module names.
func readBuiltin(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			set[modName(line)] = true
		}
	}
	return set, nil
}

// readModule returns a module's ELF bytes, decompressing .ko.xz/.zst/.gz
// with the host's tools (busybox insmod in the guest wants plain ELF).
func readModule(ctx context.Context, path string) ([]byte, error) {
	var tool string
	switch {
	case strings.HasSuffix(path, ".ko"):
		return os.ReadFile(path)
	case strings.HasSuffix(path, ".xz"):
		tool = "xz"
	case strings.HasSuffix(path, ".zst"):
		tool = "zstd"
	case strings.HasSuffix(path, ".gz"):
		tool = "gzip"
	default:
		return nil, fmt.Errorf("%s: unknown module compression", path)
	}
	out, err := exec.CommandContext(ctx, tool, "-dc", path).Output()
	if err != nil {
		return nil, fmt.Errorf("%s -dc %s: %w", tool, path, err)
	}
	return out, nil
}

// modDepends reads the "depends=" entry of a module's .modinfo section.
func modDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, errors.New("no .modinfo section")
	}
	b, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d = strings.TrimSpace(d); d != "" {
					deps = append(deps, strings.ReplaceAll(d, "-", "_"))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// FetchBusybox returns the path of a static busybox, fetched with apt-get
// download into <cache>/busybox/<version> on first use.
func FetchBusybox(ctx context.Context, cache string, progress func(string)) (string, error) {
	root := filepath.Join(cache, "busybox")
	ver, _, err := aptShow(ctx, BusyboxPackage)
	if err != nil {
		if d := cached(root, "busybox"); d != "" {
			return filepath.Join(d, "busybox"), nil
		}
		return "", fmt.Errorf("%w: %w", ErrNoKernel, err)
	}
	dir := filepath.Join(root, strings.ReplaceAll(ver, ":", "_"))
	bin := filepath.Join(dir, "busybox")
	if exists(bin) {
		return bin, nil
	}
	progress("fetching " + BusyboxPackage + " " + ver)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	tree, err := aptFetch(ctx, tmp, BusyboxPackage)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoKernel, err)
	}
	out := filepath.Join(tmp, "out")
	os.MkdirAll(out, 0o755)
	if err := copyFile(filepath.Join(tree, "bin", "busybox"), filepath.Join(out, "busybox"), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(out, dir); err != nil && !exists(bin) {
		return "", err
	}
	return bin, nil
}

// RootUpMarker is what the guest prints on the console once it runs from
// the root disk, followed by " build=<image build>".
const RootUpMarker = "paddock-vm: root up"

// initScript is the /init of a kit without a guest binary, run by
// busybox's sh (a kit with one has paddock-guest as /init: see
// buildInitramfs). It loads the modules in order, mounts the root disk
// (/dev/vda, ext4) and switches to it; there the disk's own /bin/sh prints
// RootUpMarker with the build id written into the disk, then execs
// paddock.init= from the kernel command line, else idles.
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
for m in $(/bin/busybox cat /lib/modules/modules.order); do
  /bin/busybox insmod /lib/modules/$m || echo "paddock-initramfs: insmod $m failed"
done
next=
for a in $(/bin/busybox cat /proc/cmdline); do
  case "$a" in paddock.init=*) next="${a#paddock.init=}" ;; esac
done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 500 ]; do /bin/busybox usleep 10000; i=$((i+1)); done
if ! /bin/busybox mount -t ext4 -o nosuid,nodev /dev/vda /newroot; then
  echo "paddock-initramfs: cannot mount /dev/vda"; /bin/busybox ls /dev; /bin/busybox poweroff -f
fi
/bin/busybox umount /proc /sys
/bin/busybox mount --move /dev /newroot/dev 2>/dev/null || /bin/busybox umount /dev
exec /bin/busybox switch_root /newroot /bin/sh -c '
echo "` + RootUpMarker + ` build=$(cat /etc/paddock-vm-build)"
[ -n "$1" ] && exec "$1"
while :; do sleep 3600; done' sh "$next"
`

// Layout of a guest kit's initramfs: paddock-guest runs as /init (see
// guest/vminit.Initramfs; these must match its constants).
const (
	initramfsDir  = "paddock" // vminit.InitramfsDir without the slash
	initramfsKind = "guest-init-v1"
)

// buildInitramfs writes (or finds cached) the initramfs for a kernel dir
// and busybox: <cache>/initramfs/<hash>.cpio (uncompressed). With a guest
// binary it holds /paddock/paddock-guest (linked as /init), the modules
// under /paddock/modules and an empty /paddock/dev: paddock-guest does
// the initramfs's work itself, and /paddock becomes the guest's /.paddock.
// Without one it is busybox and initScript.
func buildInitramfs(cache, kdir, busybox, guest string, progress func(string)) (string, error) {
	order, err := os.ReadFile(filepath.Join(kdir, "modules.order"))
	if err != nil {
		return "", err
	}
	var guestBin []byte
	if guest != "" {
		if guestBin, err = os.ReadFile(guest); err != nil {
			return "", fmt.Errorf("vmkit: guest binary: %w", err)
		}
	}
	groups := map[string][]byte{}
	for _, g := range lazyModules {
		b, err := os.ReadFile(filepath.Join(kdir, g.name+".order"))
		if err != nil {
			return "", fmt.Errorf("vmkit: kernel cache %s: %w", kdir, err)
		}
		groups[g.name] = b
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", kdir, order, initramfsKind)
	if guestBin == nil {
		fmt.Fprintf(h, "%s\x00%s\x00", busybox, initScript)
	}
	for _, g := range lazyModules {
		fmt.Fprintf(h, "%s\x00%s\x00", g.name, groups[g.name])
	}
	h.Write(guestBin)
	out := filepath.Join(cache, "initramfs", hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if exists(out) {
		return out, nil
	}
	progress("writing initramfs")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".initramfs-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	// Not compressed: under TCG the kernel's inflate of ~5 MB took
	// 0.75 s of every boot, copying the 13 MB in about 0.3 s (QEMU maps
	// the file; the host's page cache serves it).
	bw := bufio.NewWriter(tmp)
	w := NewCPIOWriter(bw)
	for _, d := range []string{"dev", "proc", "sys", "newroot"} {
		w.Entry(d, 0o040755, 0, 0, nil)
	}
	w.Entry("dev/console", 0o020600, 5, 1, nil)
	w.Entry("dev/null", 0o020666, 1, 3, nil)
	modDir := "lib/modules"
	if guestBin != nil {
		modDir = initramfsDir + "/modules"
		w.Entry(initramfsDir, 0o040755, 0, 0, nil)
		w.Entry(initramfsDir+"/dev", 0o040700, 0, 0, nil)
		w.Entry(initramfsDir+"/paddock-guest", 0o100755, 0, 0, guestBin)
		w.Entry("init", 0o120777, 0, 0, []byte("/"+initramfsDir+"/paddock-guest"))
	} else {
		bb, err := os.ReadFile(busybox)
		if err != nil {
			return "", err
		}
		w.Entry("bin", 0o040755, 0, 0, nil)
		w.Entry("lib", 0o040755, 0, 0, nil)
		w.Entry("bin/busybox", 0o100755, 0, 0, bb)
		w.Entry("init", 0o100755, 0, 0, []byte(initScript))
	}
	w.Entry(modDir, 0o040755, 0, 0, nil)
	w.Entry(modDir+"/modules.order", 0o100644, 0, 0, order)
	files := strings.Fields(string(order))
	for _, g := range lazyModules {
		w.Entry(modDir+"/"+g.name+".order", 0o100644, 0, 0, groups[g.name])
		files = append(files, strings.Fields(string(groups[g.name]))...)
	}
	seen := map[string]bool{}
	for _, m := range files {
		if seen[m] {
			continue
		}
		seen[m] = true
		b, err := os.ReadFile(filepath.Join(kdir, "modules", m))
		if err != nil {
			return "", err
		}
		w.Entry(modDir+"/"+m, 0o100644, 0, 0, b)
	}
	w.Entry("TRAILER!!!", 0, 0, 0, nil)
	if err := w.Err(); err != nil {
		return "", err
	}
	if err := bw.Flush(); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	os.Chmod(out, 0o644)
	return out, nil
}

// RootDiskName is the base root disk's file name, next to the image
// build's rootfs.
const RootDiskName = "vm-root.v2.ext4"

// buildRootDisk makes (or finds) <build>/vm-root.ext4 from rootfs with
// mkfs.ext4 -d, sized to the tree plus room, holding /etc/paddock-vm-build.
func buildRootDisk(ctx context.Context, rootfs, build string, progress func(string)) (string, error) {
	out := filepath.Join(filepath.Dir(rootfs), RootDiskName)
	if exists(out) {
		return out, nil
	}
	progress("making the ext4 root disk")
	var size int64
	files := 0
	filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		files++
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			size += (info.Size() + 4095) &^ 4095
		} else {
			size += 4096
		}
		return nil
	})
	size = size + size/4 + 64<<20 // journal, metadata and some free room
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	f, err := os.CreateTemp(filepath.Dir(out), "."+RootDiskName+"-")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return "", err
	}
	inodes := files*2 + 4096
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "paddock-root", "-m", "0",
		"-N", fmt.Sprint(inodes), "-d", rootfs, tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mkfs.ext4 -d %s: %w: %s", rootfs, err, b)
	}
	// Shrunk to its contents: a machine's disk is this plus its own
	// disk_mb, which the guest grows the filesystem into at boot.
	if b, err := exec.CommandContext(ctx, "e2fsck", "-fy", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("e2fsck %s: %w: %s", tmp, err, b)
	}
	if b, err := exec.CommandContext(ctx, "resize2fs", "-M", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("resize2fs -M %s: %w: %s", tmp, err, b)
	}
	marker, err := os.CreateTemp("", "paddock-vm-build-")
	if err != nil {
		return "", err
	}
	defer os.Remove(marker.Name())
	marker.WriteString(build + "\n")
	marker.Close()
	os.Chmod(marker.Name(), 0o644)
	b, err := exec.CommandContext(ctx, "debugfs", "-w", "-R", "write "+marker.Name()+" /etc/paddock-vm-build", tmp).CombinedOutput()
	if err != nil || bytes.Contains(b, []byte("rror")) {
		return "", fmt.Errorf("debugfs write /etc/paddock-vm-build: %v: %s", err, b)
	}
	// resize2fs shrank the filesystem, not the file.
	if b, err := exec.CommandContext(ctx, "dumpe2fs", "-h", tmp).Output(); err == nil {
		var count, bsize int64
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Block count:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &count)
			}
			if v, ok := strings.CutPrefix(l, "Block size:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &bsize)
			}
		}
		if count > 0 && bsize > 0 {
			os.Truncate(tmp, count*bsize)
		}
	}
	os.Chmod(tmp, 0o444)
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
