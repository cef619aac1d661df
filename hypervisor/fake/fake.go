// Package fake is a hypervisor.Backend for tests that need a sandbox's
// API but not its walls: tests of access rules, identity, idempotency and
// the shape of the OpenAPI document. Its machines run the real guest agent
// (guest/agent) in the test's own process, served on a unix socket, so
// exec, jobs, files, uploads, terminals, probe and manifest all go through
// the agent's real code. There are no namespaces and no root: commands run
// as the test's user on the host, and the machine's "root" is a directory
// the files routes are confined to; a command starts in the machine's
// copy of the directory it asks for (agent.Config.CwdInRoot), but its
// paths are the host's. Checkpoint, restore and fork copy that directory.
//
// It is never for production: hypervisor/all does not register it and
// `paddock serve` cannot select it. A test builds one with New (or
// registers Constructor under its own name) and hands it to what it tests.
// Capabilities says honestly what it lacks: isolation, memory
// checkpoints, confinement, CPU metering and any network mode but
// "offline" (which it cannot enforce either).
//
// Run by root, the agent keeps root's identity for commands (as the
// agent's own tests do with no guest user); run by anyone else, the agent
// gets agent.Config.Unprivileged and never tries to switch users.
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
)

// Name is the backend's name. hypervisor/all never registers it.
const Name = "fake"

var (
	_ hypervisor.Backend = (*Backend)(nil)
	_ hypervisor.Machine = (*Machine)(nil)
)

// limits are checked on every spec so tests see the same refusals as
// with a real backend; none of them is enforced on the commands.
var limits = hypervisor.Limits{
	Backend:  Name,
	IDPrefix: "fk-",
	CPUs:     1, MaxCPUs: 64,
	MemoryMB: 512, MinMemoryMB: 16, MaxMemoryMB: 1 << 20,
	DiskMB: 1024, MaxDiskMB: 1 << 20,
	PIDs: 256, MaxPIDs: 1 << 16,
	GuestUser: "1000:1000",
	Networks:  []string{hypervisor.NetworkOffline},
}

// Backend keeps its machines and snapshots under one directory.
type Backend struct {
	dir       string
	log       *slog.Logger
	guestExec string // ConfineBinary for the agents; see New

	mu       sync.Mutex
	sockDir  string // short directory for the agents' sockets, made on first use
	seq      int
	machines map[string]*Machine
	closed   bool
}

// New returns a backend that keeps everything under dir (made if
// missing when the first machine is created). It starts nothing.
func New(dir string) *Backend {
	return &Backend{dir: dir, log: slog.New(slog.DiscardHandler), machines: map[string]*Machine{}}
}

// Constructor builds a backend under cfg.StateDir/fake, for a test that
// registers it with hypervisor.Register. cfg.GuestBinary, when set, is
// what a confined command would run; the backend still does not claim
// confinement.
func Constructor(cfg hypervisor.Config) (hypervisor.Backend, error) {
	cfg, err := cfg.Check(Name)
	if err != nil {
		return nil, err
	}
	b := New(filepath.Join(cfg.StateDir, Name))
	b.log = cfg.Logger
	b.guestExec = cfg.GuestBinary
	return b, nil
}

// Name implements hypervisor.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements hypervisor.Backend.
func (b *Backend) Capabilities() hypervisor.Capabilities {
	return hypervisor.Capabilities{
		Isolation:              "none",
		Snapshot:               true,
		MemoryCheckpoint:       false,
		MemoryCheckpointReason: "the fake backend copies a machine's directory; it has no memory or processes to keep",
		Fork:                   true,
		PTY:                    true,
		Available:              true,
	}
}

// Create implements hypervisor.Backend.
func (b *Backend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	spec, err := hypervisor.Normalize(spec, limits)
	if err != nil {
		return nil, err
	}
	var from string
	if spec.From != nil {
		if from, err = b.snapshotRoot(*spec.From); err != nil {
			return nil, err
		}
		if spec.Image == "" {
			spec.Image = spec.From.Image
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("fake: the backend is closed")
	}
	if _, dup := b.machines[spec.ID]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: machine %s exists", hypervisor.ErrInvalidSpec, spec.ID)
	}
	if b.sockDir == "" {
		// Unix socket paths hold at most 107 bytes: a test's temporary
		// directory can be longer than that.
		d, err := os.MkdirTemp("", "pfake")
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		b.sockDir = d
	}
	b.seq++
	m := &Machine{
		b:    b,
		id:   spec.ID,
		spec: spec,
		dir:  filepath.Join(b.dir, "machines", spec.ID),
		sock: filepath.Join(b.sockDir, strconv.Itoa(b.seq)),
		done: make(chan struct{}),
	}
	b.machines[spec.ID] = m
	b.mu.Unlock()

	if err := m.build(ctx, from); err != nil {
		m.Stop(context.Background())
		return nil, err
	}
	if err := m.start(); err != nil {
		m.Stop(context.Background())
		return nil, err
	}
	return m, nil
}

// Close stops every machine and removes the sockets' directory; the
// snapshots stay under the backend's directory. Idempotent.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	ms := make([]*Machine, 0, len(b.machines))
	for _, m := range b.machines {
		ms = append(ms, m)
	}
	b.mu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Stop(context.Background()))
	}
	b.mu.Lock()
	if b.sockDir != "" {
		errs = append(errs, os.RemoveAll(b.sockDir))
		b.sockDir = ""
	}
	b.mu.Unlock()
	return errors.Join(errs...)
}

// snapshotRoot is the directory holding s's copy of a machine's root,
// found from its id alone (never from paths in the snapshot record).
func (b *Backend) snapshotRoot(s hypervisor.Snapshot) (string, error) {
	if s.Backend != Name || !hypervisor.IDPattern.MatchString(s.ID) {
		return "", fmt.Errorf("%w: snapshot %q of backend %q", hypervisor.ErrNotFound, s.ID, s.Backend)
	}
	d := filepath.Join(b.dir, "snapshots", s.ID)
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: snapshot %s", hypervisor.ErrNotFound, s.ID)
	}
	return d, nil
}

// Machine is one fake sandbox: a directory and an agent serving it.
type Machine struct {
	b    *Backend
	id   string
	spec hypervisor.MachineSpec
	dir  string // root, spool and uploads live here
	sock string

	// life serialises Checkpoint, Restore and Stop, which replace or
	// remove the directory and the agent.
	life    sync.Mutex
	mu      sync.Mutex
	cancel  context.CancelFunc
	served  chan error
	stopped bool
	done    chan struct{}
}

// ID implements hypervisor.Machine.
func (m *Machine) ID() string { return m.id }

// Root is the directory the machine's files routes are confined to: what
// "/" is for them.
func (m *Machine) Root() string { return filepath.Join(m.dir, "root") }

// Dial implements hypervisor.Machine.
func (m *Machine) Dial(ctx context.Context) (net.Conn, error) {
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return nil, hypervisor.ErrStopped
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", m.sock)
}

// build makes the machine's directory: a copy of the snapshot root from,
// or a fresh tree with the directories sandboxes have.
func (m *Machine) build(ctx context.Context, from string) error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	root := m.Root()
	if from != "" {
		if _, err := copyTree(ctx, from, root); err != nil {
			return fmt.Errorf("fake: copy snapshot: %w", err)
		}
		return nil
	}
	for _, d := range []string{"workspace", "tmp", "home/agent", filepath.Dir(api.TrustExtra)} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if len(m.spec.TrustPEM) > 0 {
		// Where a real sandbox keeps them, for the files routes to show;
		// commands use the host's CA bundle.
		if err := os.WriteFile(filepath.Join(root, api.TrustExtra), m.spec.TrustPEM, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// start serves a new agent for the machine's directory on its socket.
func (m *Machine) start() error {
	root := m.Root()
	cfg := agent.Config{
		Root: root,
		// Commands are not chrooted: HOME and their default directory
		// are host paths inside the machine's root.
		Home:          filepath.Join(root, "home", "agent"),
		Env:           m.spec.Env,
		CwdInRoot:     true, // a session's "/workspace" is the machine's
		SpoolDir:      filepath.Join(m.dir, "spool"),
		UploadDir:     filepath.Join(m.dir, "uploads"),
		ConfineBinary: m.b.guestExec,
		Logger:        m.b.log.With("machine", m.id),
	}
	if cfg.ConfineBinary == "" {
		// No paddock-guest to confine with: a confined command fails to
		// start instead of running this process's binary.
		cfg.ConfineBinary = filepath.Join(m.dir, "no-confine-binary")
	}
	if os.Geteuid() != 0 {
		cfg.Unprivileged = true
		cfg.GuestUser = m.spec.GuestUser
	}
	srv, err := agent.New(cfg)
	if err != nil {
		return fmt.Errorf("fake: agent: %w", err)
	}
	_ = os.Remove(m.sock)
	ln, err := net.Listen("unix", m.sock)
	if err != nil {
		return fmt.Errorf("fake: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	m.mu.Lock()
	m.cancel, m.served = cancel, served
	m.mu.Unlock()
	return nil
}

// halt stops the agent (its jobs are killed) and waits for it.
func (m *Machine) halt() error {
	m.mu.Lock()
	cancel, served := m.cancel, m.served
	m.cancel, m.served = nil, nil
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	return <-served
}

// Checkpoint implements hypervisor.Machine: a copy of the machine's root.
func (m *Machine) Checkpoint(ctx context.Context, tag string, memory bool) (hypervisor.Snapshot, error) {
	if memory {
		return hypervisor.Snapshot{}, fmt.Errorf("%w: %s", hypervisor.ErrNotSupported, m.b.Capabilities().MemoryCheckpointReason)
	}
	m.life.Lock()
	defer m.life.Unlock()
	if m.isStopped() {
		return hypervisor.Snapshot{}, hypervisor.ErrStopped
	}
	s := hypervisor.Snapshot{
		ID: randomID("fs-"), Tag: tag, Machine: m.id, Backend: Name,
		Image: m.spec.Image, CreatedAt: time.Now().UTC(),
	}
	dst := filepath.Join(m.b.dir, "snapshots", s.ID)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return hypervisor.Snapshot{}, err
	}
	n, err := copyTree(ctx, m.Root(), dst)
	if err != nil {
		os.RemoveAll(dst)
		return hypervisor.Snapshot{}, fmt.Errorf("fake: checkpoint: %w", err)
	}
	s.Bytes = n
	return s, nil
}

// Restore implements hypervisor.Machine: the agent stops (its commands
// end), the root is replaced by the snapshot's copy, a new agent starts.
func (m *Machine) Restore(ctx context.Context, s hypervisor.Snapshot) error {
	from, err := m.b.snapshotRoot(s)
	if err != nil {
		return err
	}
	m.life.Lock()
	defer m.life.Unlock()
	if m.isStopped() {
		return hypervisor.ErrStopped
	}
	if err := m.halt(); err != nil {
		return fmt.Errorf("fake: stop agent: %w", err)
	}
	if err := os.RemoveAll(m.Root()); err != nil {
		return err
	}
	if _, err := copyTree(ctx, from, m.Root()); err != nil {
		return fmt.Errorf("fake: restore: %w", err)
	}
	return m.start()
}

// Fork implements hypervisor.Machine: n new machines from s.
func (m *Machine) Fork(ctx context.Context, s hypervisor.Snapshot, n int) ([]hypervisor.Machine, error) {
	if n < 1 || n > hypervisor.MaxForkChildren {
		return nil, fmt.Errorf("%w: fork count %d: must be between 1 and %d", hypervisor.ErrInvalidSpec, n, hypervisor.MaxForkChildren)
	}
	var kids []hypervisor.Machine
	for range n {
		spec := m.spec
		spec.ID, spec.Hostname, spec.From = "", "", &s
		k, err := m.b.Create(ctx, spec)
		if err != nil {
			for _, k := range kids {
				k.Stop(context.Background())
			}
			return nil, err
		}
		kids = append(kids, k)
	}
	return kids, nil
}

// DeleteSnapshot implements hypervisor.Machine.
func (m *Machine) DeleteSnapshot(ctx context.Context, s hypervisor.Snapshot) error {
	d, err := m.b.snapshotRoot(s)
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}

// Stop implements hypervisor.Machine. Idempotent.
func (m *Machine) Stop(ctx context.Context) error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil
	}
	m.stopped = true
	m.mu.Unlock()
	err := m.halt()
	err = errors.Join(err, os.RemoveAll(m.dir))
	if rmErr := os.Remove(m.sock); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	m.b.mu.Lock()
	delete(m.b.machines, m.id)
	m.b.mu.Unlock()
	close(m.done)
	return err
}

// Wait implements hypervisor.Machine.
func (m *Machine) Wait(ctx context.Context) error {
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Machine) isStopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

func randomID(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// copyTree copies directories, regular files (with their modes) and
// symbolic links from src to a new dst; anything else (sockets, fifos) is
// left out. It returns the bytes of file data copied.
func copyTree(ctx context.Context, src, dst string) (int64, error) {
	var total int64
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			// Writable by the owner while copying; the mode is set once
			// its contents are in (see below).
			return os.Mkdir(target, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case fi.Mode().IsRegular():
			n, err := copyFile(path, target, fi.Mode().Perm())
			total += n
			return err
		}
		return nil
	})
	if err != nil {
		return total, err
	}
	// Directory modes last, deepest first, so a read-only directory
	// does not stop its own copy.
	var dirs []string
	filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		fi, err := os.Lstat(dirs[i])
		if err != nil {
			return total, err
		}
		rel, _ := filepath.Rel(src, dirs[i])
		if err := os.Chmod(filepath.Join(dst, rel), fi.Mode().Perm()); err != nil {
			return total, err
		}
	}
	return total, nil
}

func copyFile(src, dst string, mode fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
