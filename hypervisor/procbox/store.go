package procbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor"
)

// A layerStore holds machines' writable layers and snapshot layers.
//
// The btrfs store makes checkpoints O(1): a machine's writable layer is a
// btrfs subvolume, a checkpoint is a read-only snapshot of it (copy on
// write, whatever the size), and the disk limit is the subvolume's qgroup
// limit. The tmpfs store is the fallback where btrfs is unavailable: each
// writable layer is a size-limited tmpfs and a checkpoint copies it.
type layerStore interface {
	kind() string
	// newWritable makes a machine's writable layer holding empty upper/,
	// work/ and identity/ directories, and returns its path.
	newWritable(id string, diskMB int64) (string, error)
	removeWritable(id string) error
	// snapshot turns the machine's current upper directory into an
	// immutable layer for snapshot snap and returns the layer's path and
	// the bytes the layer can hold on the store at most: what it copied,
	// or what a btrfs snapshot refers to (-1 when that cannot be read).
	snapshot(ctx context.Context, id, snap string) (layer string, bytes int64, err error)
	removeSnapshot(snap string) error
	// overlayLayer is where snapshot layer layer keeps the upper
	// directory of the machine's overlay n (see MachineSpec.Overlays).
	overlayLayer(layer string, n int) string
	// capacity is the bytes the store can hold in all, and what that
	// measures, in words.
	capacity() (int64, string, error)
	// close lets go of the store; keepMounted leaves a btrfs store mounted
	// for machines that outlive this process (see Backend.Detach).
	close(keepMounted bool) error
}

// Store kinds, for Capabilities and the ARCHITECTURE doc.
const (
	StoreBtrfs = "btrfs"
	StoreTmpfs = "tmpfs"
)

// ---- tmpfs store ---------------------------------------------------------

type tmpfsStore struct{ dir string }

func (s *tmpfsStore) kind() string { return StoreTmpfs }

func (s *tmpfsStore) writablePath(id string) string {
	return filepath.Join(s.dir, "machines", id, "rw")
}

func (s *tmpfsStore) newWritable(id string, diskMB int64) (string, error) {
	rw := s.writablePath(id)
	if err := os.MkdirAll(rw, 0o700); err != nil {
		return "", err
	}
	// A sandbox that fills its disk gets ENOSPC; the host's disk is untouched.
	if err := unix.Mount("tmpfs", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%dm,mode=0700", diskMB)); err != nil {
		return "", fmt.Errorf("mount the writable layer: %w", err)
	}
	return rw, makeLayerDirs(rw)
}

func (s *tmpfsStore) removeWritable(id string) error {
	rw := s.writablePath(id)
	if err := unix.Unmount(rw, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		if err2 := unix.Unmount(rw, unix.MNT_DETACH); err2 != nil {
			return fmt.Errorf("unmount writable layer: %w", err)
		}
	}
	return os.RemoveAll(rw)
}

func (s *tmpfsStore) snapshot(ctx context.Context, id, snap string) (string, int64, error) {
	layer := filepath.Join(s.dir, "layers", snap)
	if err := os.MkdirAll(filepath.Dir(layer), 0o700); err != nil {
		return "", 0, err
	}
	n, err := copyTree(ctx, filepath.Join(s.writablePath(id), "upper"), layer)
	if err != nil {
		os.RemoveAll(layer)
		return "", 0, err
	}
	// Overlay uppers, beside the layer (see overlayLayer).
	ovs, _ := filepath.Glob(filepath.Join(s.writablePath(id), overlaysDir, "*", "upper"))
	for _, up := range ovs {
		k := filepath.Base(filepath.Dir(up))
		if err := os.MkdirAll(filepath.Join(layer+".ov", k), 0o700); err != nil {
			os.RemoveAll(layer)
			return "", 0, err
		}
		m, err := copyTree(ctx, up, filepath.Join(layer+".ov", k, "upper"))
		if err != nil {
			os.RemoveAll(layer)
			os.RemoveAll(layer + ".ov")
			return "", 0, err
		}
		n += m
	}
	return layer, n, nil
}

func (s *tmpfsStore) removeSnapshot(snap string) error {
	layer := filepath.Join(s.dir, "layers", snap)
	return errors.Join(os.RemoveAll(layer+".ov"), os.RemoveAll(layer))
}

func (s *tmpfsStore) overlayLayer(layer string, n int) string {
	return filepath.Join(layer+".ov", strconv.Itoa(n), "upper")
}

// overlaysDir holds, in a writable layer, one <n>/upper and <n>/work per
// overlay of the machine.
const overlaysDir = "overlays"

func (s *tmpfsStore) close(bool) error { return nil }

// capacity: the writable layers are tmpfs, so what they can hold in all is
// the host's memory (each one's pages also count against its sandbox's
// memory limit). Checkpoint copies go to the state directory's disk.
func (s *tmpfsStore) capacity() (int64, string, error) {
	mb, err := hypervisor.HostMemoryMB()
	if err != nil {
		return 0, "", err
	}
	return mb << 20, "the tmpfs layer store (the host's memory, MemTotal " + hypervisor.FormatBytes(mb<<20) + ")", nil
}

func makeLayerDirs(rw string) error {
	for _, d := range []string{"upper", "work", "identity"} {
		if err := os.Mkdir(filepath.Join(rw, d), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// ---- btrfs store ---------------------------------------------------------

type btrfsStore struct {
	root  string   // where the image is mounted
	image string   // the loop image
	lock  *os.File // shared flock on store.lock while open

	mu    sync.Mutex
	stale []uint64 // qgroups of deleted subvolumes, destroyed once the kernel lets go
}

// destroyStale retries destroying the qgroups of deleted subvolumes; the
// list lives in store/stale-qgroups so another process can finish the job.
func (s *btrfsStore) destroyStale(add ...uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.root, "stale-qgroups")
	ids := map[uint64]bool{}
	if raw, err := os.ReadFile(path); err == nil {
		for _, f := range strings.Fields(string(raw)) {
			if n, err := strconv.ParseUint(f, 10, 64); err == nil {
				ids[n] = true
			}
		}
	}
	for _, id := range add {
		ids[id] = true
	}
	var left []string
	for id := range ids {
		if err := btrfsQgroupDestroy(s.root, id); err == nil || errors.Is(err, unix.ENOENT) {
			continue
		}
		left = append(left, strconv.FormatUint(id, 10))
	}
	sort.Strings(left)
	os.WriteFile(path, []byte(strings.Join(left, "\n")), 0o600)
}

func (s *btrfsStore) kind() string { return StoreBtrfs }

func (s *btrfsStore) machinesDir() string  { return filepath.Join(s.root, "machines") }
func (s *btrfsStore) snapshotsDir() string { return filepath.Join(s.root, "snapshots") }

func (s *btrfsStore) newWritable(id string, diskMB int64) (string, error) {
	s.destroyStale()
	path := filepath.Join(s.machinesDir(), id)
	if err := btrfsSubvolCreate(s.machinesDir(), id); err != nil {
		return "", fmt.Errorf("create the writable subvolume: %w", err)
	}
	if err := btrfsLimit(path, uint64(diskMB)<<20); err != nil {
		btrfsSubvolDelete(s.machinesDir(), id)
		return "", fmt.Errorf("limit the writable subvolume: %w", err)
	}
	err := os.Chmod(path, 0o700)
	if err == nil {
		err = makeLayerDirs(path)
	}
	if err != nil {
		btrfsSubvolDelete(s.machinesDir(), id)
		return "", err
	}
	return path, nil
}

func (s *btrfsStore) removeWritable(id string) error {
	if !isBtrfs(s.machinesDir()) {
		return fmt.Errorf("the btrfs store at %s is not mounted", s.root)
	}
	qid, idErr := btrfsSubvolID(filepath.Join(s.machinesDir(), id))
	err := btrfsSubvolDelete(s.machinesDir(), id)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err == nil && idErr == nil {
		// Its qgroup (and limit) would stay behind: destroy it now or,
		// once the kernel has cleaned the subvolume, on a later call.
		s.destroyStale(qid)
	}
	return err
}

func (s *btrfsStore) snapshot(_ context.Context, id, snap string) (string, int64, error) {
	if err := btrfsSnapshot(filepath.Join(s.machinesDir(), id), s.snapshotsDir(), snap, true); err != nil {
		return "", 0, fmt.Errorf("btrfs snapshot: %w", err)
	}
	// The snapshot shares its data with the machine until the machine
	// writes over it; from then on the snapshot alone keeps the old data.
	// What it refers to now is the most it can come to hold.
	n, err := btrfsReferenced(filepath.Join(s.snapshotsDir(), snap))
	if err != nil {
		n = -1
	}
	return filepath.Join(s.snapshotsDir(), snap, "upper"), n, nil
}

// capacity: the image's size, or less when the host's file system no
// longer has the room to back the part of the (sparse) image not written
// yet: a loop image that cannot grow turns writes into I/O errors.
func (s *btrfsStore) capacity() (int64, string, error) {
	var st unix.Stat_t
	if err := unix.Stat(s.image, &st); err != nil {
		return 0, "", fmt.Errorf("the layer store image: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(s.image), &fs); err != nil {
		return 0, "", fmt.Errorf("the file system of the layer store image: %w", err)
	}
	size, backed := st.Size, st.Blocks*512+int64(fs.Bavail)*int64(fs.Bsize)
	what := "the btrfs layer store " + s.image + " (" + hypervisor.FormatBytes(size) + ")"
	if backed < size {
		what = "the btrfs layer store " + s.image + " (" + hypervisor.FormatBytes(size) + ", of which the host's file system can back only " + hypervisor.FormatBytes(backed) + ")"
		size = backed
	}
	return size, what, nil
}

// overlayLayer: a btrfs snapshot is the whole writable subvolume, so the
// overlay's upper sits beside the layer's upper.
func (s *btrfsStore) overlayLayer(layer string, n int) string {
	return filepath.Join(filepath.Dir(layer), overlaysDir, strconv.Itoa(n), "upper")
}

func (s *btrfsStore) removeSnapshot(snap string) error {
	err := btrfsSubvolDelete(s.snapshotsDir(), snap)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

func (s *btrfsStore) close(keepMounted bool) error {
	defer s.lock.Close() // releases the shared lock
	if keepMounted {
		return nil
	}
	// Unmount only when no other process holds the store: the shared lock
	// every open backend keeps turns into an exclusive one only then.
	if err := unix.Flock(int(s.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil
	}
	if !mountedAt(s.root) {
		return nil
	}
	// Anything still running keeps its own references to the file system;
	// a lazy unmount lets it finish.
	return unix.Unmount(s.root, unix.MNT_DETACH)
}

// openStore picks the store for a state directory: btrfs when a btrfs loop
// image can be made and mounted, tmpfs otherwise (the reason is returned).
// kindWanted forces one ("" is automatic). Once a state directory has a
// btrfs image it never falls back to tmpfs: its snapshots live in there.
func openStore(dir, kindWanted string, imageBytes int64) (layerStore, string, error) {
	if kindWanted == StoreTmpfs {
		return &tmpfsStore{dir: dir}, "tmpfs store chosen by configuration", nil
	}
	bs, err := openBtrfs(dir, imageBytes)
	if err == nil {
		return bs, "", nil
	}
	if _, statErr := os.Stat(filepath.Join(dir, "store.img")); kindWanted == StoreBtrfs || statErr == nil {
		return nil, "", err
	}
	return &tmpfsStore{dir: dir}, "btrfs store unavailable (" + err.Error() + "): checkpoints copy the writable layer", nil
}

// openBtrfs makes (once) and mounts the state directory's btrfs image. The
// file <dir>/store.lock serializes this between processes, and each open
// store keeps a shared lock on it so the last one out unmounts.
func openBtrfs(dir string, imageBytes int64) (*btrfsStore, error) {
	root := filepath.Join(dir, "store")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "store.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	s := &btrfsStore{root: root, image: filepath.Join(dir, "store.img"), lock: lock}
	fail := func(err error) (*btrfsStore, error) {
		lock.Close()
		return nil, err
	}
	// Every open store holds the lock shared for its lifetime; mounting
	// (or making) the image needs it exclusive, which is only ever tried
	// without waiting: a process that waited for it would wait for every
	// other open store (a running daemon) to close.
	for deadline := time.Now().Add(time.Minute); ; {
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
			return fail(err)
		}
		if mountedAt(root) {
			break
		}
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			if !mountedAt(root) {
				if err := mountImage(s.image, root, imageBytes); err != nil {
					return fail(err)
				}
			}
			// Downgrade: other processes may use the store now.
			if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
				return fail(err)
			}
			break
		}
		// Another process is mounting it, or holds it open while it
		// is being unmounted: let go and look again.
		unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the layer store at %s is neither mounted nor mountable: another process holds %s", root, lock.Name()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !isBtrfs(root) {
		return fail(fmt.Errorf("%s is mounted but is not btrfs", root))
	}
	for _, d := range []string{s.machinesDir(), s.snapshotsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fail(err)
		}
	}
	if err := btrfsQuotaEnable(root); err != nil {
		return fail(fmt.Errorf("enable btrfs quotas (needed for disk limits): %w", err))
	}
	return s, nil
}

// mountedAt reports whether something is mounted exactly at dir.
func mountedAt(dir string) bool {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func isBtrfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.BTRFS_SUPER_MAGIC
}

// mountImage formats image (once) as btrfs and mounts it at root.
func mountImage(image, root string, size int64) error {
	if _, err := os.Stat(image); errors.Is(err, os.ErrNotExist) {
		mkfs, err := exec.LookPath("mkfs.btrfs")
		if err != nil {
			return errors.New("mkfs.btrfs is not installed (apt-get install btrfs-progs)")
		}
		f, err := os.CreateTemp(filepath.Dir(image), ".store.img.")
		if err != nil {
			return err
		}
		tmp := f.Name()
		err = f.Truncate(size) // sparse: takes no space until written
		f.Close()
		if err != nil {
			os.Remove(tmp)
			return err
		}
		// Metadata single, not DUP: on a loop file both copies sit on
		// the same disk anyway, and DUP would make a sandbox's small
		// files (kept inline in metadata) take twice what its quota
		// counts.
		if out, err := exec.Command(mkfs, "-q", "-f", "-m", "single", "-d", "single", tmp).CombinedOutput(); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("mkfs.btrfs: %v: %s", err, strings.TrimSpace(string(out)))
		}
		if err := os.Rename(tmp, image); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	out, err := exec.Command("mount", "-o", "loop,noatime,discard,commit=5", image, root).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount %s: %v: %s", image, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Bounds of a store image size set by configuration (Options["store_size"]).
const (
	minStoreBytes = 256 << 20
	maxStoreBytes = 64 << 40
)

// storeImageSize is the sparse size of a new store image: half the free
// space of the state directory's file system, between 2 GiB and 1 TiB.
func storeImageSize(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 16 << 30
	}
	free := int64(st.Bavail) * int64(st.Bsize) / 2
	return min(max(free, 2<<30), 1<<40)
}

// ---- btrfs ioctls (linux/btrfs.h) ----------------------------------------

const (
	btrfsIocSubvolCreate   = 0x5000940e // _IOW(0x94, 14, btrfs_ioctl_vol_args)
	btrfsIocSnapDestroy    = 0x5000940f // _IOW(0x94, 15, btrfs_ioctl_vol_args)
	btrfsIocSnapCreateV2   = 0x50009417 // _IOW(0x94, 23, btrfs_ioctl_vol_args_v2)
	btrfsIocQuotaCtl       = 0xc0109428 // _IOWR(0x94, 40, btrfs_ioctl_quota_ctl_args)
	btrfsIocQgroupLimit    = 0x8030942b // _IOR(0x94, 43, btrfs_ioctl_qgroup_limit_args)
	btrfsIocQgroupCreate   = 0x4010942a // _IOW(0x94, 42, btrfs_ioctl_qgroup_create_args)
	btrfsIocInoLookup      = 0xd0009412 // _IOWR(0x94, 18, btrfs_ioctl_ino_lookup_args)
	btrfsIocFsInfo         = 0x8400941f // _IOR(0x94, 31, btrfs_ioctl_fs_info_args)
	btrfsFirstFreeObjectID = 256
	btrfsSubvolRdonly      = 1 << 1
	btrfsQuotaCtlEnable    = 1
	btrfsQgroupLimitRfer   = 1 << 0
	btrfsPathNameMax       = 4087
	btrfsSubvolNameMax     = 4039
)

type btrfsVolArgs struct {
	fd   int64
	name [btrfsPathNameMax + 1]byte
}

type btrfsVolArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [btrfsSubvolNameMax + 1]byte
}

type btrfsQgroupCreateArgs struct {
	create   uint64
	qgroupid uint64
}

type btrfsInoLookupArgs struct {
	treeid   uint64
	objectid uint64
	name     [4080]byte
}

// btrfsSubvolID returns the id of the subvolume at path (its qgroup is
// 0/<id>).
func btrfsSubvolID(path string) (uint64, error) {
	a := btrfsInoLookupArgs{objectid: btrfsFirstFreeObjectID}
	if err := btrfsIoctl(path, btrfsIocInoLookup, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	return a.treeid, nil
}

// btrfsFsInfoArgs is struct btrfs_ioctl_fs_info_args (1024 bytes); only
// the fsid is read.
type btrfsFsInfoArgs struct {
	maxID      uint64
	numDevices uint64
	fsid       [16]byte
	rest       [1024 - 32]byte
}

// btrfsReferenced is the bytes the subvolume at path refers to, as its
// qgroup (0/<id>) counts them: /sys/fs/btrfs/<fsid>/qgroups/0_<id>/referenced,
// brought up to date at every transaction commit (taking a snapshot is
// one).
func btrfsReferenced(path string) (int64, error) { return btrfsQgroupBytes(path, "referenced") }

// btrfsQgroupBytes reads one counter ("referenced", "exclusive") of the
// qgroup of the subvolume at path.
func btrfsQgroupBytes(path, counter string) (int64, error) {
	id, err := btrfsSubvolID(path)
	if err != nil {
		return 0, err
	}
	var a btrfsFsInfoArgs
	if err := btrfsIoctl(path, btrfsIocFsInfo, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	f := a.fsid
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", f[0:4], f[4:6], f[6:8], f[8:10], f[10:16])
	raw, err := os.ReadFile(fmt.Sprintf("/sys/fs/btrfs/%s/qgroups/0_%d/%s", uuid, id, counter))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}

// btrfsQgroupDestroy removes qgroup 0/id. The kernel answers EBUSY until a
// deleted subvolume has been cleaned up in the background.
func btrfsQgroupDestroy(root string, id uint64) error {
	a := btrfsQgroupCreateArgs{create: 0, qgroupid: id}
	return btrfsIoctl(root, btrfsIocQgroupCreate, unsafe.Pointer(&a))
}

type btrfsQuotaCtlArgs struct {
	cmd    uint64
	status uint64
}

type btrfsQgroupLimitArgs struct {
	qgroupid uint64
	flags    uint64
	maxRfer  uint64
	maxExcl  uint64
	rsvRfer  uint64
	rsvExcl  uint64
}

func btrfsIoctl(dir string, req uintptr, arg unsafe.Pointer) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

func validSubvolName(name string) error {
	if name == "" || len(name) > btrfsSubvolNameMax || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("invalid subvolume name %q", name)
	}
	return nil
}

func btrfsSubvolCreate(parent, name string) error {
	if err := validSubvolName(name); err != nil {
		return err
	}
	var a btrfsVolArgs
	copy(a.name[:], name)
	return btrfsIoctl(parent, btrfsIocSubvolCreate, unsafe.Pointer(&a))
}

func btrfsSubvolDelete(parent, name string) error {
	if err := validSubvolName(name); err != nil {
		return err
	}
	var a btrfsVolArgs
	copy(a.name[:], name)
	return btrfsIoctl(parent, btrfsIocSnapDestroy, unsafe.Pointer(&a))
}

func btrfsSnapshot(src, dstParent, name string, readOnly bool) error {
	if err := validSubvolName(name); err != nil {
		return err
	}
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	var a btrfsVolArgsV2
	a.fd = int64(sfd)
	if readOnly {
		a.flags = btrfsSubvolRdonly
	}
	copy(a.name[:], name)
	return btrfsIoctl(dstParent, btrfsIocSnapCreateV2, unsafe.Pointer(&a))
}

func btrfsQuotaEnable(root string) error {
	a := btrfsQuotaCtlArgs{cmd: btrfsQuotaCtlEnable}
	err := btrfsIoctl(root, btrfsIocQuotaCtl, unsafe.Pointer(&a))
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

// btrfsLimit caps the bytes a subvolume refers to (qgroup 0 = its own).
func btrfsLimit(subvol string, bytes uint64) error {
	a := btrfsQgroupLimitArgs{flags: btrfsQgroupLimitRfer, maxRfer: bytes}
	return btrfsIoctl(subvol, btrfsIocQgroupLimit, unsafe.Pointer(&a))
}
