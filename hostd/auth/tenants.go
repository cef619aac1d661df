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

// TenantEntry is one tenant in the tenants file: its name and the hex
// SHA-256 of its token (never the token).
type TenantEntry struct {
	Name        string `json:"name"`
	TokenSHA256 string `json:"token_sha256"`
}

// TenantsFile is the tenants file, `paddock serve --tenants FILE`:
//
//	{"tenants": [{"name": "acme", "token_sha256": "<64 hex>"}]}
type TenantsFile struct {
	Tenants []TenantEntry `json:"tenants"`
}

// Tenants is a checked tenants file, ready for verifying tokens.
type Tenants struct {
	names  []string
	hashes [][32]byte
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
// names, and unique well-formed hashes. The error names the entry.
func (f TenantsFile) Check() (*Tenants, error) {
	if len(f.Tenants) > MaxTenants {
		return nil, fmt.Errorf("%d tenants, at most %d", len(f.Tenants), MaxTenants)
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
		t.names = append(t.names, e.Name)
		t.hashes = append(t.hashes, h)
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
		return f, fmt.Errorf("not valid JSON of the form {\"tenants\": [{\"name\": ..., \"token_sha256\": ...}]}: %v", err)
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
