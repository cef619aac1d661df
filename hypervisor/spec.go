package hypervisor

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// IDPattern is what a machine or snapshot id may look like.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
var machineIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
var hostRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
var userRE = regexp.MustCompile(`^[0-9]{1,9}:[0-9]{1,9}$`)

// overlayPathRE is what an overlay path may hold: the mount options use
// ':' and ',' as separators, and nothing odd belongs in a path we mount.
var overlayPathRE = regexp.MustCompile(`^(/[A-Za-z0-9._@+-]+)+$`)

// CheckOverlays checks overlay paths: absolute, clean, plain characters,
// not under /proc, /sys, /dev or /run, not nested in one another.
func CheckOverlays(ovs []Overlay) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(f, a...))
	}
	if len(ovs) > MaxOverlays {
		return bad("at most %d overlays", MaxOverlays)
	}
	within := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	var targets []string
	for _, o := range ovs {
		for _, p := range []string{o.Lower, o.Target} {
			if len(p) > 256 || !overlayPathRE.MatchString(p) || filepath.Clean(p) != p || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "/./") || strings.HasSuffix(p, "/.") {
				return bad("overlay path %q: absolute and clean, at most 256 characters of letters, digits and ._@+-", p)
			}
			for _, sys := range []string{"/proc", "/sys", "/dev", "/run"} {
				if within(p, sys) {
					return bad("overlay path %q is under %s", p, sys)
				}
			}
		}
		if within(o.Lower, o.Target) || within(o.Target, o.Lower) {
			return bad("overlay lower %q and target %q must not contain each other", o.Lower, o.Target)
		}
		for _, t := range targets {
			if within(o.Target, t) || within(t, o.Target) {
				return bad("overlay targets %q and %q overlap", t, o.Target)
			}
		}
		targets = append(targets, o.Target)
	}
	return nil
}

// Limits are a backend's defaults and bounds for a MachineSpec.
type Limits struct {
	Backend                            string // for messages
	IDPrefix                           string // of generated ids
	CPUs, MaxCPUs                      float64
	MemoryMB, MinMemoryMB, MaxMemoryMB int64
	DiskMB, MaxDiskMB                  int64
	PIDs, MaxPIDs                      int64
	GuestUser                          string   // default uid:gid
	Networks                           []string // the network modes it offers
	Overlays                           bool     // it can mount MachineSpec.Overlays
}

// Normalize fills a spec's defaults from l and checks it; a refusal wraps
// ErrInvalidSpec (or ErrNotSupported for what the backend lacks).
func Normalize(spec MachineSpec, l Limits) (MachineSpec, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(f, a...))
	}
	if spec.ID == "" {
		spec.ID = randomID(l.IDPrefix)
	}
	if !IDPattern.MatchString(spec.ID) {
		return spec, bad("id %q: use letters, digits, '-' and '_', at most 64", spec.ID)
	}
	if spec.Hostname == "" {
		spec.Hostname = spec.ID
		if len(spec.Hostname) > 63 {
			spec.Hostname = spec.Hostname[:63]
		}
		spec.Hostname = strings.ReplaceAll(spec.Hostname, "_", "-")
	}
	if !hostRE.MatchString(spec.Hostname) {
		return spec, bad("hostname %q is not a valid host name", spec.Hostname)
	}
	if spec.MachineID != "" && !machineIDRE.MatchString(spec.MachineID) {
		return spec, bad("machine id %q: 32 lowercase hex digits", spec.MachineID)
	}
	if spec.Image == "" && spec.From == nil {
		return spec, bad("an image is required")
	}
	if spec.CPUs == 0 {
		spec.CPUs = l.CPUs
	}
	if spec.CPUs < 0.01 || spec.CPUs > l.MaxCPUs {
		return spec, bad("cpus %v: must be between 0.01 and %v", spec.CPUs, l.MaxCPUs)
	}
	if spec.MemoryMB == 0 {
		spec.MemoryMB = l.MemoryMB
	}
	if spec.MemoryMB < l.MinMemoryMB || spec.MemoryMB > l.MaxMemoryMB {
		return spec, bad("memory_mb %d: must be between %d and %d", spec.MemoryMB, l.MinMemoryMB, l.MaxMemoryMB)
	}
	if spec.DiskMB == 0 {
		spec.DiskMB = l.DiskMB
	}
	if spec.DiskMB < 1 || spec.DiskMB > l.MaxDiskMB {
		return spec, bad("disk_mb %d: must be between 1 and %d", spec.DiskMB, l.MaxDiskMB)
	}
	if spec.PIDs == 0 {
		spec.PIDs = l.PIDs
	}
	if spec.PIDs < 8 || spec.PIDs > l.MaxPIDs {
		return spec, bad("pids %d: must be between 8 and %d", spec.PIDs, l.MaxPIDs)
	}
	switch spec.Network {
	case "", NetworkOffline:
		spec.Network = NetworkOffline
		if spec.EgressDir != "" {
			return spec, bad("an egress directory needs network %q or %q", NetworkProxy, NetworkTransparent)
		}
	case NetworkProxy, NetworkTransparent:
		d := spec.EgressDir
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsAny(d, ",:\x00\n") {
			return spec, bad("network %q needs an absolute, clean egress directory (got %q)", spec.Network, d)
		}
		if fi, err := os.Lstat(filepath.Dir(d)); err != nil || !fi.IsDir() {
			return spec, bad("the parent of egress directory %q is not a directory", d)
		}
	default:
		return spec, fmt.Errorf("%w: network %q (%s offers %s)", ErrNotSupported, spec.Network, l.Backend, strings.Join(l.Networks, ", "))
	}
	if !slices.Contains(l.Networks, spec.Network) {
		return spec, fmt.Errorf("%w: network %q (%s offers %s)", ErrNotSupported, spec.Network, l.Backend, strings.Join(l.Networks, ", "))
	}
	if spec.GuestUser == "" {
		spec.GuestUser = l.GuestUser
	}
	if !userRE.MatchString(spec.GuestUser) {
		return spec, bad("guest user %q: want uid:gid", spec.GuestUser)
	}
	if strings.HasPrefix(spec.GuestUser, "0:") || strings.HasSuffix(spec.GuestUser, ":0") {
		// Without a user namespace, uid 0 in a sandbox is uid 0 on the
		// host: commands never run as root.
		return spec, bad("guest user %q: commands cannot run as root (uid or gid 0)", spec.GuestUser)
	}
	if len(spec.TrustPEM) > MaxTrustPEM {
		return spec, bad("trusted certificates: %d bytes, at most %d", len(spec.TrustPEM), MaxTrustPEM)
	}
	if len(spec.Overlays) > 0 && !l.Overlays {
		return spec, fmt.Errorf("%w: the %s backend cannot mount directory overlays", ErrNotSupported, l.Backend)
	}
	if err := CheckOverlays(spec.Overlays); err != nil {
		return spec, err
	}
	if len(spec.Env) > 256 {
		return spec, bad("at most 256 environment entries")
	}
	for _, e := range spec.Env {
		if !strings.Contains(e, "=") || strings.ContainsAny(e, "\x00\n") || len(e) > 4096 {
			return spec, bad("environment entry %q: want KEY=VALUE without NUL or newline", e)
		}
	}
	return spec, nil
}

func randomID(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
