//go:build linux

package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"paddock.dev/paddock/guest/api"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name    string
		in      api.Confinement
		want    normalized
		wantErr bool
	}{
		{
			name: "defaults are strict with seccomp",
			in:   api.Confinement{ReadWrite: []string{"/tmp/**", "/tmp", "/work/./ws/"}},
			want: normalized{strict: true, seccomp: true, readOnly: []string{}, readWrite: []string{"/tmp", "/work/ws"}, exec: []string{}},
		},
		{
			name: "root glob, rlimits sorted",
			in:   api.Confinement{Enforcement: BestEffort, ReadOnly: []string{"/**"}, Rlimits: map[string]uint64{"nofile": 8, "cpu": 2}},
			want: normalized{seccomp: true, readOnly: []string{"/"}, readWrite: []string{}, exec: []string{}, rlimits: []rlimit{{"cpu", 2}, {"nofile", 8}}},
		},
		{name: "relative path", in: api.Confinement{ReadOnly: []string{"etc"}}, wantErr: true},
		{name: "relative glob", in: api.Confinement{ReadWrite: []string{"ws/**"}}, wantErr: true},
		{name: "empty path", in: api.Confinement{Exec: []string{""}}, wantErr: true},
		{name: "inner pattern", in: api.Confinement{ReadOnly: []string{"/home/*/src"}}, wantErr: true},
		{name: "unknown mode", in: api.Confinement{Enforcement: "lenient"}, wantErr: true},
		{name: "unknown rlimit", in: api.Confinement{Rlimits: map[string]uint64{"rss": 1}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalize(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrBadPolicy) {
					t.Fatalf("err = %v, want ErrBadPolicy", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(normalized{}, rlimit{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanLandlock(t *testing.T) {
	rw := api.Confinement{ReadOnly: []string{"/etc"}, ReadWrite: []string{"/tmp"}}
	ro := api.Confinement{ReadOnly: []string{"/etc"}}
	nested := api.Confinement{ReadOnly: []string{"/tmp/keep"}, ReadWrite: []string{"/tmp"}}
	execOnly := api.Confinement{Exec: []string{"/usr/bin/id"}}
	tests := []struct {
		name        string
		policy      api.Confinement
		abi         int
		wantMissing []string // first word of each entry
		wantHandled landlock.AccessFSSet
	}{
		{"ABI 7 has it all", rw, 7, nil, landlock.V7.HandledAccessFS},
		{"ABI 5 has it all", rw, 5, nil, landlock.V5.HandledAccessFS},
		{"ABI 4 lacks ioctl_dev", rw, 4, []string{"ioctl_dev"}, landlock.V4.HandledAccessFS},
		{"ABI 2 lacks truncate and ioctl_dev", rw, 2, []string{"truncate", "ioctl_dev"}, landlock.V2.HandledAccessFS},
		{"ABI 1 lacks refer too", rw, 1, []string{"refer", "truncate", "ioctl_dev"}, landlock.V1.HandledAccessFS},
		{"read-only needs no refer", ro, 2, []string{"truncate"}, landlock.V2.HandledAccessFS},
		{"no landlock", rw, 0, []string{"landlock"}, 0},
		{"read_only under read_write", nested, 7, []string{"read_only"}, landlock.V7.HandledAccessFS},
		{"exec list alone handles execute only", execOnly, 1, nil, ll.AccessFSExecute},
	}
	for _, tt := range tests {
		for _, mode := range []string{Strict, BestEffort} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				p := tt.policy
				p.Enforcement = mode
				n, err := normalize(p)
				if err != nil {
					t.Fatal(err)
				}
				plan, err := planLandlock(n, tt.abi)
				if mode == Strict && len(tt.wantMissing) > 0 {
					if !errors.Is(err, ErrNotEnforceable) {
						t.Fatalf("strict: err = %v, want ErrNotEnforceable", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var missing []string
				for _, m := range plan.missing {
					missing = append(missing, strings.Fields(m)[0])
				}
				if diff := cmp.Diff(tt.wantMissing, missing); diff != "" {
					t.Errorf("missing (-want +got):\n%s", diff)
				}
				if plan.handled != tt.wantHandled {
					t.Errorf("handled = %v, want %v", plan.handled, tt.wantHandled)
				}
				for _, r := range plan.rules {
					if r.access&^plan.handled != 0 {
						t.Errorf("rule %s grants %v, outside handled %v", r.path, r.access, plan.handled)
					}
				}
			})
		}
	}
}

// TestPlanExecRights checks where the execute right goes with and
// without an allow-list.
func TestPlanExecRights(t *testing.T) {
	rules := func(p api.Confinement) map[string]landlock.AccessFSSet {
		n, err := normalize(p)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := planLandlock(n, 7)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]landlock.AccessFSSet{}
		for _, r := range plan.rules {
			m[r.path] = r.access
		}
		return m
	}
	open := rules(api.Confinement{ReadWrite: []string{"/tmp"}})
	if open["/usr"]&rightExec == 0 || open["/tmp"]&rightExec == 0 {
		t.Errorf("without a list /usr and /tmp must be executable: %v %v", open["/usr"], open["/tmp"])
	}
	listed := rules(api.Confinement{ReadWrite: []string{"/tmp"}, Exec: []string{"/usr/bin/id"}})
	for path, access := range listed {
		isExec := access&rightExec != 0
		allowed := path == "/usr/bin/id" || strings.Contains(path, "/ld-") ||
			strings.HasSuffix(path, "sh") || strings.HasSuffix(path, "bash") || strings.HasSuffix(path, "true") || strings.HasSuffix(path, "dash")
		if isExec && !allowed {
			t.Errorf("%s is executable under the allow-list (%v)", path, access)
		}
	}
	if listed["/usr/bin/id"]&rightExec == 0 {
		t.Error("/usr/bin/id is not executable under the allow-list")
	}
	if interp := elfInterpreter("/usr/bin/id"); interp != "" {
		found := false
		for path, access := range listed {
			if strings.Contains(path, "ld-linux") && access&rightExec != 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no executable loader rule for %s in %v", interp, listed)
		}
	}
	for _, dev := range []string{"/dev/null", "/dev/tty"} {
		if a, ok := listed[dev]; ok && a&^rightsFile != 0 {
			t.Errorf("%s is a file but its rule has directory rights %v", dev, a)
		}
	}
	if listed["/tmp"]&(ll.AccessFSMakeChar|ll.AccessFSMakeBlock) != 0 {
		t.Error("read_write grants making device nodes")
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{`{"read_write":["/tmp"],"seccomp":false,"rlimits":{"nofile":16}}`, true},
		{`{}`, true},
		{`{"network":{"allow":["x"]}}`, false}, // unknown: refuse, never drop
		{`{"read_only":["/a"]} {"read_only":["/b"]}`, false},
		{`[`, false},
	} {
		_, err := ParsePolicy([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("ParsePolicy(%s) err = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadPolicy) {
			t.Errorf("ParsePolicy(%s) err = %v, not ErrBadPolicy", tt.in, err)
		}
	}
}

// FuzzPolicy checks that any policy that parses and validates has only
// clean absolute paths. The seeds run as part of go test.
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{
		`{"read_write":["/tmp/**","/work/../x/"]}`,
		`{"read_only":["/**","//a//b/**"]}`,
		`{"exec":["/usr/bin/git"],"enforcement":"best-effort"}`,
		`{"read_only":["/**/**"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			return
		}
		n, err := normalize(p)
		if err != nil {
			return
		}
		for _, list := range [][]string{n.readOnly, n.readWrite, n.exec} {
			for _, path := range list {
				if !strings.HasPrefix(path, "/") || path != cleanOrRoot(path) || strings.ContainsRune(path, 0) {
					t.Errorf("path %q from %s is not clean and absolute", path, data)
				}
			}
		}
	})
}

func cleanOrRoot(p string) string {
	if out, err := cleanPaths("x", []string{p}); err == nil && len(out) == 1 {
		return out[0]
	}
	return ""
}

// TestPlanLinkedReadOnly: a read-only path that is a symbolic link into a
// read-write directory is as writable as that directory (rules follow
// links), so the plan reports it missing and strict mode refuses it; a
// link into a read-only place is fine.
func TestPlanLinkedReadOnly(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"rw/ws", "ro/ws"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"into-rw": "rw/ws", "into-ro": "ro/ws", "rw-link": "rw"} {
		if err := os.Symlink(filepath.Join(dir, to), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		ro, rw   string
		conflict bool
	}{
		{"a link into the writable directory", "into-rw", "rw", true},
		{"a link into it, the writable one named by a link", "into-rw", "rw-link", true},
		{"the real path under a writable link", "rw/ws", "rw-link", true},
		{"a link elsewhere", "into-ro", "rw", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := api.Confinement{ReadOnly: []string{filepath.Join(dir, tc.ro)}, ReadWrite: []string{filepath.Join(dir, tc.rw)}, Enforcement: BestEffort}
			n, err := normalize(p)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := planLandlock(n, 7)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.ContainsFunc(plan.missing, func(m string) bool { return strings.HasPrefix(m, "read_only ") })
			if got != tc.conflict {
				t.Errorf("missing %q: a read_only conflict is %v, want %v", plan.missing, got, tc.conflict)
			}
			n.strict = true
			if _, err := planLandlock(n, 7); (err != nil) != tc.conflict || (err != nil && !errors.Is(err, ErrNotEnforceable)) {
				t.Errorf("strict: %v, want a refusal %v", err, tc.conflict)
			}
		})
	}
}
