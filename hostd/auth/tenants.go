package auth

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// MaxTenants is the most tenants a tenants file may name.
const MaxTenants = 1000

// maxTenantsFileBytes bounds the file (1000 tenants take about 130 KB).
const maxTenantsFileBytes = 1 << 20

var tenantNameRE = regexp.MustCompile(`^[a-z0-9-]{1,63}$`)

// ValidTenantName reports whether name can name a tenant: 1 to 63 of
// a-z, 0-9 and '-'.
func ValidTenantName(name string) bool { return tenantNameRE.MatchString(name) }

// TenantEntry is one tenant in the tenants file: its name, the hex
// SHA-256 of its token (never the token), and what its live sandboxes may
// hold together.
type TenantEntry struct {
	Name        string  `json:"name"`
	TokenSHA256 string  `json:"token_sha256"`
	Limits      *Limits `json:"limits,omitempty"`
}

// TenantsFile is the tenants file, `paddock serve --tenants FILE`:
//
//	{"default_limits": {"disk_mb": 20480, "memory_mb": 16384, "cpus": 8},
//	 "tenants": [{"name": "acme", "token_sha256": "<64 hex>",
//	              "limits": {"disk_mb": 40960}}]}
//
// default_limits and limits are optional (docs/tenants.md).
type TenantsFile struct {
	DefaultLimits *Limits       `json:"default_limits,omitempty"`
	Tenants       []TenantEntry `json:"tenants"`
}

// Limits bound the sums over one tenant's live sessions and sandboxes
// (fork children included) of what they were given: disk_mb (and the
// checkpoints they hold), memory_mb and cpus. A field left out (0) takes
// the value of default_limits, and one left out there the built-in
// default (hostd/session: half of the backend's disk, the host's memory,
// four times the host's CPUs).
type Limits struct {
	DiskMB   int64   `json:"disk_mb,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
}

// Bounds of a limit in the tenants file.
const (
	MaxLimitMB   = 1 << 30 // 1 PiB, in MiB
	MaxLimitCPUs = 1 << 16
)

// check refuses negative or absurd limits; field names what it is.
func (l *Limits) check(field string) error {
	if l == nil {
		return nil
	}
	if l.DiskMB < 0 || l.DiskMB > MaxLimitMB {
		return fmt.Errorf("%s.disk_mb %d: from 1 to %d (or leave it out for the default)", field, l.DiskMB, MaxLimitMB)
	}
	if l.MemoryMB < 0 || l.MemoryMB > MaxLimitMB {
		return fmt.Errorf("%s.memory_mb %d: from 1 to %d (or leave it out for the default)", field, l.MemoryMB, MaxLimitMB)
	}
	if !(l.CPUs >= 0 && l.CPUs <= MaxLimitCPUs) { // NaN too
		return fmt.Errorf("%s.cpus %v: from 0.01 to %d (or leave it out for the default)", field, l.CPUs, MaxLimitCPUs)
	}
	if l.CPUs > 0 && l.CPUs < 0.01 {
		return fmt.Errorf("%s.cpus %v: at least 0.01", field, l.CPUs)
	}
	return nil
}

// over fills the fields l leaves at zero from d.
func (l Limits) over(d Limits) Limits {
	if l.DiskMB == 0 {
		l.DiskMB = d.DiskMB
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = d.MemoryMB
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	return l
}

// Tenants is a checked tenants file, ready for verifying tokens.
type Tenants struct {
	names  []string
	hashes [][32]byte
	limits []Limits // by tenant, default_limits filled in
}

// LimitsOf is what tenant's live sandboxes may hold together, as the file
// sets it: its own limits over default_limits. A field still 0 is for the
// caller's built-in default. A tenant not in the file (or a nil set) has
// only the built-in defaults.
func (t *Tenants) LimitsOf(name string) Limits {
	if t == nil {
		return Limits{}
	}
	if i := slices.Index(t.names, name); i >= 0 {
		return t.limits[i]
	}
	return Limits{}
}

// Names lists the tenants in file order.
func (t *Tenants) Names() []string {
	if t == nil {
		return nil
	}
	return slices.Clone(t.names)
}

// has reports whether name is one of the tenants (a nil set has none).
func (t *Tenants) has(name string) bool {
	return t != nil && slices.Contains(t.names, name)
}

// Len is how many tenants there are.
func (t *Tenants) Len() int {
	if t == nil {
		return 0
	}
	return len(t.names)
}

// Check validates the file's contents: at most MaxTenants, valid unique
// names, unique well-formed hashes, and limits in bounds. The error names
// the entry.
func (f TenantsFile) Check() (*Tenants, error) {
	if len(f.Tenants) > MaxTenants {
		return nil, fmt.Errorf("%d tenants, at most %d", len(f.Tenants), MaxTenants)
	}
	if err := f.DefaultLimits.check("default_limits"); err != nil {
		return nil, err
	}
	var def Limits
	if f.DefaultLimits != nil {
		def = *f.DefaultLimits
	}
	t := &Tenants{}
	for i, e := range f.Tenants {
		if !ValidTenantName(e.Name) {
			return nil, fmt.Errorf("tenants[%d]: name %q: use a-z, 0-9 and '-', 1 to 63 characters", i, e.Name)
		}
		if slices.Contains(t.names, e.Name) {
			return nil, fmt.Errorf("tenants[%d]: name %q appears twice", i, e.Name)
		}
		raw, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(raw) != 32 || e.TokenSHA256 != strings.ToLower(e.TokenSHA256) {
			return nil, fmt.Errorf("tenants[%d] (%s): token_sha256 must be 64 lowercase hex digits, the SHA-256 of the token", i, e.Name)
		}
		h := [32]byte(raw)
		if j := slices.Index(t.hashes, h); j >= 0 {
			return nil, fmt.Errorf("tenants[%d] (%s): the same token_sha256 as %s; every tenant needs its own token", i, e.Name, t.names[j])
		}
		if err := e.Limits.check(fmt.Sprintf("tenants[%d] (%s).limits", i, e.Name)); err != nil {
			return nil, err
		}
		var own Limits
		if e.Limits != nil {
			own = *e.Limits
		}
		t.names = append(t.names, e.Name)
		t.hashes = append(t.hashes, h)
		t.limits = append(t.limits, own.over(def))
	}
	return t, nil
}

// ParseTenantsFile decodes a tenants file strictly (unknown fields and
// trailing data are refused).
func ParseTenantsFile(data []byte) (TenantsFile, error) {
	var f TenantsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("not valid JSON of the form {\"default_limits\": {...}, \"tenants\": [{\"name\": ..., \"token_sha256\": ..., \"limits\": {...}}]}: %v", err)
	}
	if dec.More() {
		return f, errors.New("trailing data after the JSON object")
	}
	return f, nil
}

// ReadTenantsFile reads and parses the file at path, refusing one that is
// not a regular file or that the group or others may write (anyone who
// can write it can make themselves a tenant). It does not Check.
func ReadTenantsFile(path string) (TenantsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return TenantsFile{}, fmt.Errorf("tenants file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return TenantsFile{}, fmt.Errorf("tenants file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return TenantsFile{}, fmt.Errorf("tenants file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return TenantsFile{}, fmt.Errorf("tenants file %s is writable by its group or others (mode %04o): chmod 600 it", path, perm)
	}
	if fi.Size() > maxTenantsFileBytes {
		return TenantsFile{}, fmt.Errorf("tenants file %s is %d bytes, at most %d", path, fi.Size(), maxTenantsFileBytes)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && fi.Size() > 0 {
		return TenantsFile{}, fmt.Errorf("tenants file: %w", err)
	}
	tf, err := ParseTenantsFile(data)
	if err != nil {
		return TenantsFile{}, fmt.Errorf("tenants file %s: %w", path, err)
	}
	return tf, nil
}

// LoadTenants reads, parses and checks the tenants file at path.
func LoadTenants(path string) (*Tenants, error) {
	tf, err := ReadTenantsFile(path)
	if err != nil {
		return nil, err
	}
	t, err := tf.Check()
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", path, err)
	}
	return t, nil
}

// WriteTenantsFile checks tf and replaces the file at path with it, mode
// 0600, through a temporary file and a rename (a reader never sees half
// a file).
func WriteTenantsFile(path string, tf TenantsFile) error {
	if _, err := tf.Check(); err != nil {
		return fmt.Errorf("tenants file %s: %w", path, err)
	}
	if tf.Tenants == nil {
		tf.Tenants = []TenantEntry{}
	}
	data, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("tenants file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("tenants file: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("tenants file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("tenants file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tenants file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("tenants file: %w", err)
	}
	return nil
}
